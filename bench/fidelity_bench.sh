#!/usr/bin/env bash
# Model fidelity (issue 3 §7): the measured iteration time of planned 2-, 3-
# and 4-stage pipelines against the planner's prediction (its R, docs/plan.md).
#
# Each run is `hydrozoa train` with the strategy pinned (1 replica, B stages,
# 8 microbatches of 32): the coordinator measures the profile in a worker
# process on this machine (one thread, pinned to a core, median of at least
# five interleaved runs and one second per profile), measures the network
# between two local workers (bandwidth, latency, allreduce alpha and beta over
# c10d Gloo), plans the split with them, and trains 60 steps; the median
# measured step is compared with the plan's prediction.
#
# The planner assumes a core per busy worker. Models: the zoo's CNN (the main
# job: two heavy stages at most) and an MLP of four 1024-wide layers (every
# stage busy: with more stages than cores, the premise fails).
#
#   bench/fidelity_bench.sh [steps=60]
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-60}"
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HYDROZOA_CACHE_DIR="$work/cache"   # profile afresh

job() {
  cat <<YAML
name: fidelity
model: $1
data: {dataset: fashion_mnist}
training: {epochs: 1, global_batch: 256, eval: false}
cluster: {workers: 4}
output: {checkpoint_every_epochs: 0, trace_steps: 0}
YAML
}

printf 'Pipelines of 1 replica x B stages, 8 microbatches of 32, on this machine (%s cores)\n\n' "$(nproc)"
printf '  %-28s %6s %12s %12s %8s %18s\n' model B measured predicted error "bubble meas/pred"
for spec in "cnn|{name: cnn}" "mlp 4x1024|{name: mlp, options: {hidden: 1024, depth: 4}}"; do
  name="${spec%%|*}"
  job "${spec#*|}" > "$work/job.yaml"
  for B in 2 3 4; do
    $hz train "$work/job.yaml" --data-parallel 1 --stages "$B" --microbatches 8 --max-steps "$steps" --no-progress \
        --out "$work/run-$B" > /dev/null 2>&1
    /usr/bin/python3 - "$work/run-$B/summary.json" "$name" "$B" "$(nproc)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); i = s["iteration_seconds"]; b = s["bubble_fraction"]
note = "" if int(sys.argv[3]) <= int(sys.argv[4]) else "  (more workers than cores)"
print("  %-28s %6s %9.1f ms %9.1f ms %+7.0f%% %8.2f / %.2f%s" % (sys.argv[2], sys.argv[3], 1e3 * i["measured_median"],
      1e3 * i["predicted"], 100 * i["relative_error"], b["measured_median"], b["predicted"], note))
PY
    rm -rf "$work/run-$B"
  done
done
