#!/usr/bin/env bash
# The Hydrozoa effect (issue 4 §6), measured side by side in one run: four
# workers as containers limited to 50 MB/s each train a model dominated by
# large dense layers (VGG-11's classifier: two 4096-wide layers, ~19M
# parameters) on synthetic CIFAR-sized images, once with the planner's own
# hybrid choice and once as pure 4-way data parallelism. Target: the
# planner's choice at least 1.5x faster.
#
# Needs root (containers). Throughput is samples per second over the steps
# after the first `warmup` (from metrics.jsonl); the two alternate over
# `rounds` rounds and the medians are compared.
#
#   sudo bench/container_bench.sh [rounds=2] [steps=12]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
rounds="${1:-2}"
steps="${2:-12}"
warmup=3
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$(id -u)" != 0 ]; then echo "container_bench: containers need root" >&2; exit 2; fi

cat > "$work/job.yaml" <<YAML
name: effect
model: {name: vgg11, options: {image_size: 32, width: 0.25, classes: 10}}
data: {dataset: synthetic, synthetic_train: 4096, synthetic_test: 64}
training: {epochs: 1, global_batch: 64, eval: false, optimizer: {name: sgd, lr: 0.01, momentum: 0.9}}
# memory_limit: the plan right-sizes 1 GB containers, but its memory model
# leaves out the worker process's own footprint (libtorch); the classifier's
# stage then stalls at its limit (docs/containers.md, "Known gaps").
cluster: {workers: 4, launcher: container, bandwidth: 50MB/s, memory_limit: 2GB}
output: {checkpoint_every_epochs: 0, trace_steps: 0}
YAML

rate() {
  "$py" - "$1" "$warmup" <<'PY'
import json, sys
run, warmup = sys.argv[1], int(sys.argv[2])
steps = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"loss"' in l]
a, b = steps[warmup - 1], steps[-1]
print((len(steps) - warmup) * 64 / (b["t"] - a["t"]))
PY
}
shape() { "$py" -c 'import json,sys; p=json.load(open(sys.argv[1])); s=p["strategy"]; print("%sx%s, %s microbatch(es) of %s" % (s["data_parallel"], s["pipeline_stages"], p.get("num_microbatches"), p.get("microbatch_size")))' "$1/plan.json"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

planned=(); dp=()
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds..." >&2
  $hz train "$work/job.yaml" --max-steps "$steps" --no-progress --out "$work/planned$r" > "$work/planned$r.log" 2>&1 \
    || { cat "$work/planned$r.log" >&2; exit 1; }
  planned+=("$(rate "$work/planned$r")")
  $hz train "$work/job.yaml" --data-parallel 4 --stages 1 --max-steps "$steps" --no-progress --out "$work/dp$r" \
      > "$work/dp$r.log" 2>&1 || { cat "$work/dp$r.log" >&2; exit 1; }
  dp+=("$(rate "$work/dp$r")")
done
p=$(median "${planned[@]}"); d=$(median "${dp[@]}")
echo
echo "VGG-11 (32x32, width 0.25; dense layers dominate), 4 containers at 50 MB/s, global batch 64"
printf '| plan | samples/s (median of %s) | per round |\n|---|---|---|\n' "$rounds"
printf '| planner: %s | %.1f | %s |\n' "$(shape "$work/planned1")" "$p" "${planned[*]}"
printf '| pure data parallel: %s | %.1f | %s |\n' "$(shape "$work/dp1")" "$d" "${dp[*]}"
"$py" -c "import sys; print(f'planner / data parallel: {float(sys.argv[1]) / float(sys.argv[2]):.2f}x (target >= 1.5x)')" "$p" "$d"
