#!/usr/bin/env bash
# Recovery (issue 4 §6): time from a SIGKILL of a worker to training again,
# and the work lost, measured on the same job side by side with a run that
# loses nothing. Two cases: a 2x2 hybrid (the lost stage has a live replica:
# restored from the survivors) and a 1x2 pipeline (no replica: restored from
# the last checkpoint, at the epoch's end). Workers run as local processes.
#
#   bench/recovery_bench.sh [kill_at_step=600]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
kill_at="${1:-600}"
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

job() {  # $1: plan
  cat <<YAML
name: recovery
model: {name: cnn, options: {width: 0.5}}
data: {dataset: fashion_mnist}
training: {epochs: 2, global_batch: 128, eval: false}
cluster: {workers: 4, launcher: local}
plan: $1
YAML
}

steps_done() {
  local n
  n=$(grep -c '"loss"' "$1/metrics.jsonl" 2>/dev/null) || true
  echo "${n:-0}"
}

# Runs the job; with a victim id, kills that worker once kill_at steps are done.
run() {  # $1: name, $2: plan, $3: victim id or ""
  job "$2" > "$work/$1.yaml"
  "$hz" train "$work/$1.yaml" --no-progress --out "$work/$1" > "$work/$1.log" 2>&1 &
  local pid=$!
  if [ -n "$3" ]; then
    while [ "$(steps_done "$work/$1")" -lt "$kill_at" ]; do sleep 0.05; done
    local endpoint victim
    endpoint=$("$py" -c "import json;print(json.load(open('$work/$1/coordinator.json'))['control'])")
    victim=$(pgrep -f -- "--join $endpoint --id $3\$" | head -1)
    kill -9 "$victim"
  fi
  wait "$pid"
}

report() {  # $1: case, $2: baseline run, $3: run with a loss
  "$py" - "$1" "$work/$2" "$work/$3" <<'PY'
import json, sys
name, base, lost = sys.argv[1], json.load(open(sys.argv[2] + "/summary.json")), json.load(open(sys.argv[3] + "/summary.json"))
e = lost["recoveries"][0]
print(f"| {name} | {e['restored_from']} | {e['seconds_to_training']:.2f} s | {e['lost_steps']} "
      f"| {base['wall_seconds']:.1f} s | {lost['wall_seconds']:.1f} s | +{lost['wall_seconds'] - base['wall_seconds']:.1f} s "
      f"| {lost['steps']['done']} |")
PY
}

echo "recovery_bench: CNN (width 0.5) on Fashion-MNIST, 2 epochs of 469 steps, kill -9 at step $kill_at"
echo
echo "| case | restored from | loss to training again | steps redone | wall, no loss | wall, one loss | difference | steps done |"
echo "|---|---|---|---|---|---|---|---|"
run hybrid_base "{data_parallel: 2, stages: 2, microbatches: 2}" ""
run hybrid_lost "{data_parallel: 2, stages: 2, microbatches: 2}" 3
report "2x2, worker 3 killed" hybrid_base hybrid_lost
run pipe_base "{data_parallel: 1, stages: 2, microbatches: 2}" ""
run pipe_lost "{data_parallel: 1, stages: 2, microbatches: 2}" 0
report "1x2, worker 0 killed" pipe_base pipe_lost
