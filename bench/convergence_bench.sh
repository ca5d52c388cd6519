#!/usr/bin/env bash
# Staleness against accuracy (issue 11 §4): the Fashion-MNIST CNN of
# examples/fashion_mnist_cnn.yaml (3 epochs, 2 replicas of a 2-stage
# pipeline, 8 microbatches) trained with GPipe and with PipeDream-2BW, whose
# gradients are one update stale, with the example's SGD and with Adam. Per schedule: the test accuracy after each
# epoch, the wall time at which it first reached 88% (epochs are evaluated at
# their ends, so this is the end of the first epoch at or above it), and the
# final accuracy's difference from GPipe's, measured in the same run.
#
#   bench/convergence_bench.sh [schedules="gpipe 2bw"] [target=0.88]
#
# About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
schedules="${1:-gpipe 2bw}"
target="${2:-0.88}"
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The example's optimizer (SGD, momentum 0.9), and Adam (lr 1e-3) as the
# thesis trains 2BW with.
sed 's/optimizer: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005}/optimizer: {name: adam, lr: 0.001}/' \
    examples/fashion_mnist_cnn.yaml > "$work/adam.yaml"
for optimizer in sgd adam; do
  spec=examples/fashion_mnist_cnn.yaml; [ "$optimizer" = adam ] && spec="$work/adam.yaml"
  for schedule in $schedules; do
    echo "$optimizer $schedule..." >&2
    $hz train "$spec" --schedule "$schedule" --data-parallel 2 --stages 2 --microbatches 8 --no-progress \
        --out "$work/$optimizer-$schedule" > "$work/$optimizer-$schedule.log" 2>&1 \
        || { tail -3 "$work/$optimizer-$schedule.log" >&2; exit 1; }
  done
done
"$py" - "$work" "$target" $schedules <<'PY'
import json, sys
work, target, schedules = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
print(f"\nFashion-MNIST CNN, 2x2, 8 microbatches of 8, 3 epochs (examples/fashion_mnist_cnn.yaml)\n")
print(f"  {'optimizer':9} {'schedule':9} " + " ".join(f"{'epoch ' + str(i + 1):>8}" for i in range(3)) +
      f" {'to ' + format(target, '.0%'):>9} {'samples/s':>9} {'final vs ' + schedules[0]:>14}")
for optimizer in ["sgd", "adam"]:
    base = None
    for s in schedules:
        lines = [json.loads(l) for l in open(f"{work}/{optimizer}-{s}/metrics.jsonl")]
        evals = [l for l in lines if "test_accuracy" in l]
        summary = json.load(open(f"{work}/{optimizer}-{s}/summary.json"))
        reached = next((l["t"] for l in evals if l["test_accuracy"] >= target), None)
        if base is None:
            base = evals[-1]["test_accuracy"]
        accs = " ".join(f"{100 * e['test_accuracy']:7.2f}%" for e in evals)
        t = f"{reached:8.1f}s" if reached is not None else "    never"
        print(f"  {optimizer:9} {s:9} {accs} {t} {summary.get('throughput_samples_per_s', 0):9.0f} "
              f"{100 * (evals[-1]['test_accuracy'] - base):+13.2f}pt")
PY
