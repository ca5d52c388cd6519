#!/usr/bin/env bash
# Dynamic scaling (issue 4 §6): AdaBatch DP-(1->R) against DP-1 and DP-R on
# Fashion-MNIST, run one after the other on this machine: wall time and
# dollars until the test accuracy first reaches the target (evaluated at each
# epoch end), and at the end. Every run has the same per-replica batch (64),
# model, optimizer and seed; AdaBatch doubles the replicas each epoch with the
# learning rate x 0.75 at each doubling (Hydrozoa §5.4's DP-(1-16) in small).
# Workers are containers when run as root (billed per second at the
# platform's rates), else processes.
#
# R = 4 (the default) runs DP-4 as 4 busy processes on this machine's 2
# cores: oversubscribed, so DP-4 and AdaBatch's last epochs are slower than
# on 4 real workers. R = 2 is the comparison without oversubscription.
#
#   bench/scaling_bench.sh [epochs=4] [target=0.88] [R=4]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
epochs="${1:-4}"
target="${2:-0.88}"
most="${3:-4}"
cores=$(nproc)
if ((most > cores)); then
  echo "scaling_bench: note: DP-$most runs $most busy workers on $cores cores (oversubscribed); R=$cores does not" >&2
fi
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

job() {  # $1: plan replicas, $2: scaling
  cat <<YAML
name: adabatch
model: {name: cnn}
data: {dataset: fashion_mnist}
training:
  epochs: $epochs
  global_batch: $((64 * $1))
  optimizer: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005}
  seed: 0
cluster: {workers: $most}
plan: {data_parallel: $1, stages: 1, microbatches: 1}
scaling: $2
output: {checkpoint_every_epochs: 1}
YAML
}

run() {  # $1: name, $2: plan replicas, $3: scaling
  job "$2" "$3" > "$work/$1.yaml"
  "$hz" train "$work/$1.yaml" --no-progress --out "$work/$1" > "$work/$1.log" 2>&1 || {
    cat "$work/$1.log" >&2
    exit 1
  }
}

echo "scaling_bench: CNN on Fashion-MNIST, $epochs epochs, 64 samples per replica, target $target test accuracy"
run dp1 1 fixed
run dpR "$most" fixed
run ada "$most" "{policy: adabatch, min_replicas: 1, max_replicas: $most, every_epochs: 1, lr_decay: 0.75}"
"$py" - "$work" "$target" "$most" <<'PY'
import json, sys
work, target, most = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rows = {}
for name, label in (("dp1", "DP-1"), ("dpR", f"DP-{most}"), ("ada", f"AdaBatch DP-(1→{most})")):
    lines = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl") if l.strip()]
    evals = [l for l in lines if "test_accuracy" in l]
    hit = next((l for l in evals if l["test_accuracy"] >= target), None)
    s = json.load(open(f"{work}/{name}/summary.json"))
    reps = [str(seg["replicas"]) for seg in s["scaling"]["segments"]]
    rows[name] = (label, hit, s, evals, reps)
print()
print(f"| run | replicas by epoch | time to {target:.0%} | dollars to {target:.0%} | accuracy by epoch | final accuracy | wall | dollars |")
print("|---|---|---|---|---|---|---|---|")
for name, (label, hit, s, evals, reps) in rows.items():
    acc = " / ".join(f"{100 * e['test_accuracy']:.1f}" for e in evals)
    t = f"{hit['t']:.1f} s (epoch {hit['epoch']})" if hit else "not reached"
    c = f"${hit['cost_usd']:.5f}" if hit else "-"
    print(f"| {label} | {'→'.join(reps)} | {t} | {c} | {acc} | {100 * s['final_test_accuracy']:.2f}% "
          f"| {s['training_seconds']:.1f} s | ${s['cost_usd']:.5f} |")
ada = rows["ada"]
for base in ("dp1", "dpR"):
    b = rows[base]
    if ada[1] and b[1]:
        def change(x, less, more):
            return f"{abs(100 * (1 - x)):.0f}% {less if x <= 1 else more}"
        print(f"AdaBatch vs {b[0]} to {target:.0%}: {change(ada[1]['t'] / b[1]['t'], 'less time', 'more time')}, "
              f"{change(ada[1]['cost_usd'] / b[1]['cost_usd'], 'lower cost', 'higher cost')}")
for e in json.load(open(f"{work}/ada/summary.json"))["scaling"]["events"]:
    print(f"AdaBatch boundary, epoch {e['epoch']}: {e['replicas_before']} → {e['replicas']} replicas; "
          f"pre-started {e.get('prestarted_s_before_boundary', 0):.2f} s ahead, ready "
          f"{e.get('ready_before_boundary_s', float('nan')):+.2f} s before the boundary, "
          f"boundary predicted within {e.get('boundary_predicted_error_s', float('nan')):+.2f} s, "
          f"training again {e.get('seconds_to_training', float('nan')):.2f} s after it")
PY
