#!/usr/bin/env bash
# Live reliable and transient tiers (issue 16 §2, §4; docs/spot.md, "Live
# tiers"): the zoo's CNN at width 0.5 on Fashion-MNIST, a global batch of
# 128, STEPS steps, each worker a container of CPU_LIMIT vCPUs (so that, on
# a 2-core machine, each is its own small machine and 4 replicas are faster
# than 1), the spot market c4.xlarge/us-east-1b of examples/spot_prices.json
# replayed at SPEED trace seconds a second from its beginning (its price
# rises above the on-demand $0.199/h 6 times in 48 hours) from 12 hours in
# (BidBrain estimates evictions from those 12 hours of history). Side by
# side, in one run:
#  - 4 on demand (tiers reliable=4, transient=0);
#  - 1 on demand + 3 spot bidding the on-demand price, 5 s notices (they
#    leave at a step boundary, the reliable worker regrouping alone in its
#    running process, and come back when the price falls); and the same
#    with every change restarting every worker (regroup: false, NOTE
#    [Regrouping at a step boundary]);
#  - 1 on demand + up to 3 spot bid for by BidBrain (how many and at what
#    bid, NOTE [BidBrain in a live run]);
#  - 4 spot bidding the on-demand price, all transient: evicted, the run
#    stops at a step boundary, saves, waits for the price to fall and
#    restarts from that checkpoint (NOTE [Checkpoint-restart]); and the
#    same without notice (taken, restored from the last checkpoint, at
#    each epoch's end: the steps since are redone);
#  - 1 on demand alone;
#  - AgileML's third stage (NOTE [Reliable workers that compute nothing]):
#    1 on demand + 3 spot at a global batch of 192 in 12 microbatches (so
#    that 3 transient replicas can share them), the reliable worker
#    computing (reliable_idle_ratio: 0) or not (reliable_idle_ratio: 3),
#    at equal speeds and with the reliable worker at half speed (its
#    container's CPU quota halved: a slower or busier on-demand machine).
# Billed as the thesis's cloud (and the simulator): per hour begun, an hour
# cut short by an eviction not charged.
# Each row: the wall time to the steps, the trace hours they covered, the
# market's bill in trace time and per 100 steps, the eviction notices, the
# transient instance-hours, and the median stall of a leave and of a
# return (wall seconds from the last step before the change to the first
# after it).
#
#   bench/proteus_bench.sh [STEPS=2000] [SPEED=720] [CPU_LIMIT=0.45]
#   ONLY='computes|idle' bench/proteus_bench.sh ...   # the rows whose label matches (bash regex)
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=$PWD/build/hydrozoa
steps=${1:-2000}
speed=${2:-720}
cpus=${3:-0.45}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp examples/spot_prices.json "$work/trace.json"
echo "cnn (width 0.5) on fashion-mnist, $steps steps; containers of $cpus vCPUs; $(nproc) cores; c4.xlarge/us-east-1b replayed ${speed}x"
printf '%-40s %8s %8s %9s %10s %8s %8s %8s %8s\n' tiers wall_s trace_h usd usd/100st notices spot_h leave_s return_s
runs=0
# $batch, $microbatches and $stragglers (cluster.stragglers) apply to the rows after them.
batch=128 microbatches=1 stragglers="[]"
row() {  # label reliable transient bidder [", KEY: VALUE" (tiers) [notice]]
  if [[ -n "${ONLY:-}" && ! "$1" =~ $ONLY ]]; then return; fi
  runs=$((runs + 1))
  local label=$1 name=run-$runs
  cat > "$work/$name.yaml" <<YAML
name: proteus-bench
model: {name: cnn, options: {width: 0.5}}
data: {dataset: fashion_mnist}
training: {epochs: $((steps * batch / 60000 + 1)), global_batch: $batch, seed: 0, eval: false, optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
cluster:
  workers: 4
  launcher: container
  cpu_limit: $cpus
  stragglers: $stragglers
  tiers: {reliable: $2, transient: $3, spot_trace: trace.json, market: c4.xlarge/us-east-1b, speed: $speed, notice: ${6:-5s},
         bidder: $4, start: "2016-03-14T12:00:00Z"${5:-}}
plan: {microbatches: $microbatches}
YAML
  (cd "$work" && $hz train "$name.yaml" --max-steps "$steps" --no-progress --out "$name" > "$name.log" 2>&1) ||
    { echo "$label: failed; its log ends:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  "$py" - "$work/$name/summary.json" "$label" "$steps" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["tiers"]
wall = s["wall_seconds"]
if s["steps"]["done"] != int(sys.argv[3]):
    sys.exit(f"{sys.argv[2]}: ran {s['steps']['done']} steps, not {sys.argv[3]}")
stall = lambda key: f"{t[key]:8.2f}" if key in t else f"{'-':>8}"
print(f"{sys.argv[2]:<40} {wall:8.1f} {t['trace_hours']:8.1f} {t['usd']['total']:9.2f} "
      f"{100 * t['usd']['total'] / int(sys.argv[3]):10.3f} {t['eviction_notices']:8d} {t['transient_hours']:8.1f} "
      f"{stall('leave_stall_s')} {stall('return_stall_s')}")
PY
}
echo "global batch 128 in 4 microbatches"
row "4 on demand" 4 0 fixed
row "1 on demand + 3 spot, bid on-demand" 1 3 fixed
row "1 on demand + 3 spot, bid o-d, restarts" 1 3 fixed ", regroup: false"
row "1 on demand + ≤3 spot, BidBrain" 1 3 bidbrain
row "4 spot, ckpt-restart, 5 s notice" 0 4 fixed ", checkpoint_restart: true"
row "4 spot, ckpt-restart, no notice" 0 4 fixed ", checkpoint_restart: true" 0
row "1 on demand alone" 1 0 fixed
echo "AgileML's third stage: global batch 192 in 12 microbatches"
batch=192 microbatches=3
row "1 o-d + 3 spot, reliable computes" 1 3 fixed ", reliable_idle_ratio: 0"
row "1 o-d + 3 spot, reliable idle" 1 3 fixed ", reliable_idle_ratio: 3"
stragglers='["worker=0,slowdown=2x"]'
row "the same, o-d at half speed: computes" 1 3 fixed ", reliable_idle_ratio: 0"
row "the same, o-d at half speed: idle" 1 3 fixed ", reliable_idle_ratio: 3"
