#!/usr/bin/env bash
# BidBrain in the simulator (issue 16 §3-4; docs/spot.md): a job of WORK
# instance-hours on 1 reliable (on-demand) + up to 15 transient (spot)
# instances, replayed from 20 starts over synthetic 14-day spot histories
# (4 markets: c4.xlarge and c4.2xlarge in two zones; seeds 1 to SEEDS), and
# on examples/spot_prices.json: the mean cost and time of buying everything
# on demand, all spot with checkpoint-restart (bid = on-demand price,
# checkpoint every 30 min, 10 min to restart), a fixed bid (spot + $0.05,
# AgileML's tiers) and BidBrain, side by side.
#
#   bench/bidbrain_bench.sh [SEEDS=5] [WORK=64]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=$PWD/build/hydrozoa
seeds=${1:-5}
work=${2:-64}
printf '%-22s %-16s %9s %7s %9s %15s %14s %9s\n' history strategy cost hours evicted "vs on-demand" "vs spot+ckpt" "time"
row() {  # label args...
  local label=$1
  shift
  $hz simulate --bidbrain "$@" --work-hours "$work" --tiers reliable=1,transient=15 --starts 20 --json |
    "$py" -c "
import json, sys
j = json.load(sys.stdin)
s = j['strategies']
od, ck = s[0], s[1]
for x in s:
    print(f\"{'$label':<22} {x['name']:<16} {x['cost_usd']:9.2f} {x['hours']:7.2f} {x['evictions']:9d} \"
          f\"{100 * (x['cost_usd'] / od['cost_usd'] - 1):+14.0f}% {100 * (x['cost_usd'] / ck['cost_usd'] - 1):+13.0f}% \"
          f\"{100 * (x['hours'] / ck['hours'] - 1):+8.0f}%\")
"
}
for seed in $(seq 1 "$seeds"); do
  row "synthetic 14d seed $seed" --synthetic-spot-days 14 --seed "$seed"
done
row "examples/spot_prices" --spot-trace examples/spot_prices.json
