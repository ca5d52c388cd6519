#!/usr/bin/env bash
# FuncPipe's recommendation against what the configurations it chose among
# measure (issue 12 §5): the Fashion-MNIST CNN's measured profile, planned
# with `plan --planner funcpipe` on lambda for at most WORKERS functions at
# once and a global batch of 256, the store's latency that of the job's own
# Redis (0.1 ms, --latency), every configuration on the cost/time frontier
# written with --frontier-point and trained STEPS steps as function workers.
# Per configuration: the iteration FuncPipe's model predicts and the median
# measured, the price of an iteration predicted and at the measured time
# (each function's size at lambda's price per GB-second; the fee per
# invocation, $2e-7 per function and invocation, is left out: an invocation
# runs for minutes); then which one is fastest and which cheapest as
# measured, and which FuncPipe's rule (the fastest with δ ≥ 0.8) picks on
# the predicted figures and on the measured ones. Needs root.
#
#   bench/funcpipe_choice_bench.sh [STEPS=60] [WORKERS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
[ "$(id -u)" -eq 0 ] || { echo "funcpipe_choice_bench: needs root (function workers)" >&2; exit 77; }
hz=build/hydrozoa
steps=${1:-60}
workers=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$hz profile --model cnn --microbatch-sizes 8,16,32,64,128,256 -o "$work/p.json" >/dev/null 2>&1
plan=(plan --platform lambda --planner funcpipe --profile "$work/p.json" --workers "$workers" --global-batch 256
      --latency 0.1ms)
$hz "${plan[@]}" --json >"$work/frontier.json"
rows=$("$py" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["frontier"]))' "$work/frontier.json")
for n in $(seq 1 "$rows"); do
  $hz "${plan[@]}" -o "$work/plan$n.json" --frontier-point "$n" >/dev/null
  $hz train examples/fashion_mnist_cnn.yaml --plan "$work/plan$n.json" --launcher function --platform lambda \
    --global-batch 256 --max-steps "$steps" --start-delay 0s --no-progress --out "$work/run$n" >/dev/null 2>&1
done
"$py" - "$work" "$rows" <<'PY'
import json, sys
work, rows = sys.argv[1], int(sys.argv[2])
frontier = json.load(open(f"{work}/frontier.json"))["frontier"]

def pick(points):
    """FuncPipe's rule (§5.1): the fastest with δ = (t_c/t − 1)/(c/c_c − 1) ≥ 0.8."""
    cheapest = min(range(len(points)), key=lambda i: (points[i][1], points[i][0]))
    tc, cc = points[cheapest]
    ok = [i for i, (t, c) in enumerate(points)
          if i == cheapest or (c > cc and (tc / t - 1) / (c / cc - 1) >= 0.8)]
    return min(ok, key=lambda i: points[i][0])

predicted, measured = [], []
print(f'{"#":>2}  {"configuration":<44} {"predicted":>9} {"measured":>9} {"error":>7} '
      f'{"$/it pred":>10} {"$/it meas":>10}')
for n in range(1, rows + 1):
    p = frontier[n - 1]
    s = json.load(open(f"{work}/run{n}/summary.json"))
    t = s["iteration_seconds"]["measured_median"]
    size = sum(st["memory_bytes"] for st in p["stages"]) * p["data_parallel"]
    usd = t * size / 1e9 * 0.06 / 3600  # lambda: $0.06 per GB-hour
    stages = ", ".join(f'{st["first_layer"]}-{st["last_layer"]}: {st["memory_bytes"] / 1e9:.2f} GB'
                       for st in p["stages"])
    conf = f'{p["microbatches"]}×{p["microbatch_size"]}, d={p["data_parallel"]}, {stages}'
    predicted.append((p["iteration_seconds"], p["dollars_per_iteration"]))
    measured.append((t, usd))
    print(f'{n:>2}  {conf:<44} {p["iteration_seconds"] * 1e3:7.1f}ms {t * 1e3:7.1f}ms '
          f'{t / p["iteration_seconds"] - 1:+7.1%} {p["dollars_per_iteration"]:10.3g} {usd:10.3g}')
fast = min(range(rows), key=lambda i: measured[i][0])
cheap = min(range(rows), key=lambda i: measured[i][1])
print(f"measured: fastest #{fast + 1}, cheapest #{cheap + 1}; FuncPipe's rule picks #{pick(predicted) + 1} "
      f"on the predictions (the recommendation) and #{pick(measured) + 1} on the measurements")
PY
