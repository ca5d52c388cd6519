#!/usr/bin/env bash
# Function workers against containers on the same plan (issue 12 §5): the
# Fashion-MNIST CNN as 2 stages × 2 replicas, 4 microbatches of 32, each
# worker 1,769 MB (a vCPU on AWS Lambda) and 70 MB/s, for STEPS steps:
#   container  Gloo between containers, billed per second (aci's prices)
#   function   function workers through the job's Redis channel, billed per
#              GB-second at 1 ms plus a fee per invocation (lambda's)
#   function/lambdaml  the same with LambdaML's scatter-reduce
# Per mode: the median step measured and the plan's prediction, and the
# price of an epoch (469 steps) at the measured step and the workers' billed
# rates (containers: as the plan priced them on aci; functions: their size
# at lambda's price per GB-hour). Needs root.
#
#   bench/function_bench.sh [STEPS=60]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
[ "$(id -u)" -eq 0 ] || { echo "function_bench: needs root (containers, functions)" >&2; exit 77; }
hz=build/hydrozoa
steps=${1:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(examples/fashion_mnist_cnn.yaml --data-parallel 2 --stages 2 --microbatches 4 --max-steps "$steps"
        --memory-limit 1769MB --bandwidth 70MB/s --no-progress)
$hz train "${common[@]}" --launcher container --platform aci --cpu-limit 1.06 --out "$work/container" >/dev/null 2>&1
$hz train "${common[@]}" --launcher function --platform lambda --out "$work/function" >/dev/null 2>&1
$hz train "${common[@]}" --launcher function --platform lambda --channel-sync lambdaml --out "$work/lambdaml" \
  >/dev/null 2>&1
"$py" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
print(f'{"mode":<18} {"step":>9} {"predicted":>9} {"error":>7} {"$/epoch":>10}')
for mode, name in [("container", "container"), ("function", "function"), ("lambdaml", "function/lambdaml")]:
    s = json.load(open(f"{work}/{mode}/summary.json"))
    it = s["iteration_seconds"]
    step, pred = it["measured_median"], it["predicted"]
    per_epoch = 469
    # The workers' rates as billed (a function's size at lambda's price; a
    # container as planned on aci), the last 4 runs: the last generation.
    rate = sum(w["usd_per_hour"] for w in s["billing"]["workers"][-4:])
    usd = rate / 3600 * step * per_epoch
    fee = s["billing"].get("request_fee", 0)
    print(f'{name:<18} {step * 1e3:7.1f}ms {pred * 1e3:7.1f}ms {step / pred - 1:+7.1%} {usd:10.6f}'
          + (f'  (+ ${fee:g} per invocation)' if fee else ''))
PY
