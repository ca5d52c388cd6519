#!/usr/bin/env bash
# FuncPipe's co-optimiser (issue 12 §4): the solver's time on ResNet-101- and
# BERT-large-sized chains (FuncPipe: 274 s on average with Gurobi), on AWS
# Lambda's eight function sizes, 16 workers, global batch 64 at microbatches
# of 4, profiles predicted for this CPU (`--device cpu`). Each model with all
# its layers and merged down to 16 (`--merge-layers`); per run the MILPs
# solved, the wall time, and the recommended configuration.
#
#   bench/funcpipe_bench.sh [models="resnet101 bert-large"]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-11s %7s %8s %8s %10s  %s\n' model layers merged MILPs seconds recommended
for model in ${1:-resnet101 bert-large}; do
  $hz profile --model "$model" --device cpu --microbatch-sizes 4 -o "$work/$model.json" >/dev/null
  for merge in 100 16; do
    $hz plan --platform lambda --planner funcpipe --profile "$work/$model.json" --workers 16 --global-batch 64 \
      --merge-layers "$merge" --json > "$work/out.json"
    "$py" - "$model" "$work/out.json" <<'PY'
import json, sys
model, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))
rec = next(p for p in j["frontier"] if p["recommended"])
stages = ", ".join(f'{s["first_layer"]}-{s["last_layer"]}: {s["memory_bytes"] / 1e9:g} GB' for s in rec["stages"])
print(f'{model:<11} {j["layers"]:>7} {j["merged_layers"]:>8} {j["programs"]:>8} {j["solve_seconds"]:>10.1f}  '
      f'{rec["data_parallel"]} x [{stages}], {rec["iteration_seconds"]:.2f} s, ${rec["dollars_per_iteration"]:.5f}')
PY
  done
done
