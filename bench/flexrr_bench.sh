#!/usr/bin/env bash
# FlexRR under an injected straggler (issue 16 §4; docs/stragglers.md): 4
# data-parallel replicas of the zoo's CNN on Fashion-MNIST, each a container
# with CPU_LIMIT vCPUs (so that, on a 2-core machine, each is its own small
# machine), worker 1 slowed by a delay of 0, 50, 100, 200 and 400% (a
# slowdown of 1, 1.5, 2, 3 and 5x: its container's CPU quota cut), for the
# whole run (persistent) or for half of it from a quarter in (transient).
# In one run of this script, side by side for every delay:
#  - bsp: plain synchronous data parallelism with the straggler;
#  - flexrr: the same with --flexrr (rapid reassignment);
#  - ideal: no straggler (measured first and last).
# Every run trains the same global batch of 128 in 8 microbatches per
# replica, STEPS steps; reported: the mean step time (the run's steps over
# their time), FlexRR's time saved against BSP, its step time over the
# ideal's, and the share of the microbatches that moved.
#
#   bench/flexrr_bench.sh [STEPS=40] [CPU_LIMIT=0.45]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=$PWD/build/hydrozoa
steps=${1:-40}
cpus=${2:-0.45}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.yaml" <<YAML
name: flexrr-bench
model: cnn
data: {dataset: fashion_mnist}
training: {epochs: 1, global_batch: 128, seed: 0, eval: false, optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
cluster: {workers: 4, launcher: container, cpu_limit: $cpus}
plan: {data_parallel: 4, stages: 1, microbatches: 8}
output: {checkpoint_every_epochs: 0}
YAML
# Prints a run's mean step time and the share of microbatches that moved.
run() {  # name [args...]
  local name=$1
  shift
  (cd "$work" && $hz train job.yaml --max-steps "$steps" --no-progress --out "$name" "$@" > "$name.log" 2>&1) ||
    { cat "$work/$name.log" >&2; exit 1; }
  "$py" - "$work/$name" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
f = s.get("flexrr", {})
moved = f["reassigned_microbatches"] / f["microbatches"] if f.get("microbatches") else 0
print(f'{128 / s["throughput_samples_per_s"]:.4f} {moved:.3f}')
PY
}
echo "cnn on fashion-mnist: 4 replicas x 8 microbatches of 4, $steps steps; containers of $cpus vCPUs; $(nproc) cores"
read -r ideal0 _ < <(run ideal-first)
printf '%-10s %6s %9s %9s %9s %9s %13s %7s\n' pattern delay "bsp s" "flexrr s" "ideal s" saved "flexrr/ideal" moved
for pattern in persistent transient; do
  for delay in 0 50 100 200 400; do
    [ "$delay" = 0 ] && [ "$pattern" = transient ] && continue
    slow=$("$py" -c "print(1 + $delay / 100)")
    args=()
    if [ "$delay" != 0 ]; then
      spec="worker=1,slowdown=${slow}x,mode=quota"
      if [ "$pattern" = transient ]; then
        # From a quarter of the ideal run's time, for half of the slowed run's.
        spec="$spec,start=$("$py" -c "print(round($ideal0 * $steps * 0.25, 2))")s"
        spec="$spec,for=$("$py" -c "print(round($ideal0 * $steps * $slow * 0.5, 2))")s"
      fi
      args=(--stragglers "$spec")
    fi
    read -r bsp _ < <(run "bsp-$pattern-$delay" ${args[@]+"${args[@]}"})
    read -r flexrr moved < <(run "flexrr-$pattern-$delay" --flexrr ${args[@]+"${args[@]}"})
    "$py" -c "
b, f, i = $bsp, $flexrr, $ideal0
print(f'{\"$pattern\":<10} {$delay:>5}% {b:9.4f} {f:9.4f} {i:9.4f} {100 * (1 - f / b):8.1f}% {f / i:12.2f}x {100 * $moved:6.1f}%')"
  done
done
read -r ideal1 _ < <(run ideal-last)
echo "ideal (no straggler), first and last: $ideal0 s and $ideal1 s a step"
