#!/usr/bin/env bash
# BidBrain in the simulator (issue 16 §3-4, issue 52 §1; docs/spot.md),
# on the thesis's footprint (seed 002 §4.5.2): jobs that take 2 and 20
# hours on 64 on-demand c4.xlarge (128 and 1,280 c4.xlarge-hours of work),
# on 1 reliable (on-demand) + up to 63 transient (spot) instances, each
# replayed from 20 starts after the history BidBrain learns from (it sees
# no price after a decision): synthetic 14-day histories (4 markets:
# c4.xlarge and c4.2xlarge in two zones; seeds 1 to SEEDS; the first week
# learnt) and examples/spot_prices.json (2 days; the first learnt). The
# mean cost and time of buying everything on demand, all spot with
# checkpoint-restart (bid = on-demand price, checkpoint every 30 min, 10 min
# to restart; with no time spent writing checkpoints, and with the
# thesis's measured 17%), a fixed bid (spot + $0.05, AgileML's tiers) and
# BidBrain. ν per type: its vCPUs (aws-vm catalog); σ = λ = 1 min; φ = 1.
#
#   bench/bidbrain_bench.sh [SEEDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup)
[ -x "$py" ] || py=python3
hz=$PWD/build/hydrozoa
seeds=${1:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-22s %4s %-16s %9s %6s %8s %13s %13s %13s %8s\n' history job strategy cost hours evicted "vs on-demand" \
  "vs ckpt" "vs ckpt 17%" "time"
row() {  # label job_hours args...
  local label=$1 hours=$2
  shift 2
  local work=$((hours * 64))
  $hz simulate --bidbrain "$@" --work-hours "$work" --tiers reliable=1,transient=63 --starts 20 --json >"$tmp/a.json"
  $hz simulate --bidbrain "$@" --work-hours "$work" --tiers reliable=1,transient=63 --starts 20 --json \
    --checkpoint-overhead 0.17 >"$tmp/b.json"
  "$py" - "$tmp/a.json" "$tmp/b.json" "$label" "${hours}h" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))['strategies']
b = json.load(open(sys.argv[2]))['strategies']
label, job = sys.argv[3], sys.argv[4]
od, ck, ck17 = a[0], a[1], b[1]
rows = a + [dict(ck17, name='spot+ckpt 17%')]
for x in rows:
    print(f"{label:<22} {job:>4} {x['name']:<16} {x['cost_usd']:9.2f} {x['hours']:6.2f} {x['evictions']:8d} "
          f"{100 * (x['cost_usd'] / od['cost_usd'] - 1):+12.0f}% {100 * (x['cost_usd'] / ck['cost_usd'] - 1):+12.0f}% "
          f"{100 * (x['cost_usd'] / ck17['cost_usd'] - 1):+12.0f}% {100 * (x['hours'] / ck['hours'] - 1):+7.0f}%")
EOF
}
for hours in 2 20; do
  for seed in $(seq 1 "$seeds"); do
    row "synthetic 14d seed $seed" "$hours" --synthetic-spot-days 14 --seed "$seed"
  done
  row "examples/spot_prices" "$hours" --spot-trace examples/spot_prices.json
done
