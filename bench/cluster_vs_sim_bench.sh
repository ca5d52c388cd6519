#!/usr/bin/env bash
# Issue 13 §5: the scheduler service on this machine's pool and the simulator
# on the same small trace agree on the jobs' completion times.
#
#  1. Each job type's steps/s alone on each worker type (hydrozoa train
#     --max-steps on that type's containers) -> throughputs.json in Gavel's
#     format.
#  2. The trace run for real: `hydrozoa cluster serve` on the pool, each job
#     submitted at its arrival time, until every one has completed; each
#     job's JCT = completion - submission (state.json), and what its starts
#     cost (from the start of the round it was placed in to its first step
#     there: stopping the job it replaces, starting its processes and
#     containers, restoring its checkpoint).
#  3. The same trace in `hydrozoa simulate` with the measured throughputs, the
#     same policy and round, the measured mean start cost as --preemption-cost.
#
# The pool's CPU quotas add up to 1.5 cores, so that jobs running at once on
# this 2-core machine do not slow each other (the simulator assumes they do
# not). Needs containers (root, iproute2, cgroups); about 10 minutes.
#
#   bench/cluster_vs_sim_bench.sh [ROUND_SECONDS=20] [POLICY=max_min_fairness]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=$(pwd)/build/hydrozoa
round=${1:-20}
policy=${2:-max_min_fairness}
work=$(mktemp -d /tmp/hz-cluster-vs-sim.XXXXXX)
server=""
cleanup() {
  local rc=$?
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  echo "cluster_vs_sim_bench: its files are in $work" >&2
}
trap cleanup EXIT
cd "$work"

# The pool: two container sizes.
cat > cluster.yaml <<EOF
name: bench-pool
policy: $policy
round: ${round}s
worker_types:
  - {name: fast, count: 2, launcher: container, cpu_limit: 0.5, price: 0.4}
  - {name: slow, count: 2, launcher: container, cpu_limit: 0.25, price: 0.1}
EOF
declare -A flags=([fast]="--launcher container --cpu-limit 0.5" [slow]="--launcher container --cpu-limit 0.25")

# Two job types of 2 workers (2 replicas), synthetic data, no evaluation.
spec() {  # type steps seed
  local model
  case $1 in
    mlp) model="{name: mlp, options: {hidden: 256, depth: 4}}" ;;
    cnn) model="{name: cnn, options: {width: 0.25}}" ;;
  esac
  cat <<EOF
name: $1-$3
model: $model
data: {dataset: synthetic, synthetic_train: $(($2 * 32)), synthetic_test: 32}
training: {epochs: 1, global_batch: 32, seed: $3, eval: false, optimizer: {name: sgd, lr: 0.01}}
cluster: {workers: 2}
plan: {data_parallel: 2, stages: 1}
EOF
}
steps_per_s() {  # run dir -> steps/s of its steps (evaluations and checkpoints excluded)
  "$py" -c "import json; s = json.load(open('$1/summary.json')); print(s['throughput_samples_per_s'] / 32)"
}

echo "1. each job type alone on each worker type (200 steps)"
echo '{}' > throughputs.json
for type in mlp cnn; do
  spec $type 400 1 > measure-$type.yaml
  for wt in fast slow; do
    # shellcheck disable=SC2086
    $hz train measure-$type.yaml --out m-$type-$wt --max-steps 200 --no-progress ${flags[$wt]} > /dev/null 2>&1
    rate=$(steps_per_s m-$type-$wt)
    "$py" - "$wt" "$type" "$rate" <<'EOF'
import json, sys
t = json.load(open("throughputs.json"))
t.setdefault(sys.argv[1], {})[f"('{sys.argv[2]}', 2)"] = {"null": float(sys.argv[3])}
json.dump(t, open("throughputs.json", "w"), indent=1)
EOF
    printf '   %-4s on %-4s %7.1f steps/s\n' "$type" "$wt" "$rate"
  done
done

# The trace: six jobs, about a minute each alone on fast, arriving over 80 s.
# type steps arrival
trace_jobs=("mlp 0 0" "cnn 0 5" "mlp 0 15" "cnn 0 30" "mlp 0 50" "cnn 0 80")
: > trace.txt
i=0
for j in "${trace_jobs[@]}"; do
  read -r type _ arrival <<< "$j"
  rate=$("$py" -c "import json; print(json.load(open('throughputs.json'))['fast'][\"('$type', 2)\"]['null'])")
  steps=$("$py" -c "print(int(60 * $rate))")
  i=$((i + 1))
  spec $type "$steps" $i > job-$i.yaml
  printf '%s\t-\t-\t-\tFalse\t%s\t2\t1\t-1\t%s\n' "$type" "$steps" "$arrival" >> trace.txt
done

echo "2. the trace on the pool ($policy, rounds of ${round} s)"
$hz cluster serve --config cluster.yaml --state state > serve.log 2>&1 &
server=$!
for _ in $(seq 100); do [ -f state/service.json ] && break; sleep 0.1; done
start=$(date +%s.%N)
i=0
for j in "${trace_jobs[@]}"; do
  read -r type _ arrival <<< "$j"
  i=$((i + 1))
  sleep "$("$py" -c "print(max(0.0, $start + $arrival - $(date +%s.%N)))")"
  $hz submit job-$i.yaml --cluster state > /dev/null
done
until "$py" -c "
import json, sys
s = json.load(open('state/state.json'))
sys.exit(0 if len(s['jobs']) == 6 and all(j['status'] in ('completed', 'failed') for j in s['jobs']) else 1)"; do
  sleep 2
done
kill "$server"; wait "$server" 2>/dev/null || true; server=""

restart=$("$py" -c "
import json
jobs = json.load(open('state/state.json'))['jobs']
print(sum(j['start_seconds'] for j in jobs) / max(1, sum(j['starts_measured'] for j in jobs)))")
printf '   a start costs %.1f s on average (%s starts)\n' "$restart" \
  "$("$py" -c "import json; print(sum(j['starts_measured'] for j in json.load(open('state/state.json'))['jobs']))")"

echo "3. the same trace in the simulator"
# Both give the workers the allocation leaves free to waiting jobs (the
# service's fill_idle, the simulator's default; as Gavel's mechanism).
$hz simulate --trace trace.txt --throughputs throughputs.json --cluster fast=2,slow=2 --policy "$policy" \
  --round "${round}s" --preemption-cost "${restart}s" --json > sim.json
"$py" - <<'EOF'
import json
state = json.load(open("state/state.json"))
sim = json.load(open("sim.json"))
real = {j["id"]: j for j in state["jobs"]}
failed = [j["id"] for j in state["jobs"] if j["status"] != "completed"]
if failed:
    raise SystemExit(f"jobs {failed} did not complete: see their logs")
print(f"{'job':>4} {'type':>5} {'JCT real':>9} {'JCT sim':>9} {'starts':>7} {'preempted':>10}")
rj, sj = [], []
for i, s in enumerate(sim["jobs"]):
    r = real[i + 1]
    rj.append(r["finished"] - r["submitted"])
    sj.append(s["finish"] - s["arrival"])
    print(f"{i + 1:>4} {r['name'].split('-')[0]:>5} {rj[-1]:8.1f}s {sj[-1]:8.1f}s {r['starts']:>7} {r['preemptions']:>10}")
a, b = sum(rj) / len(rj), sum(sj) / len(sj)
print(f"average JCT: real {a:.1f} s, simulated {b:.1f} s: the simulator is {100 * (b / a - 1):+.1f}% off")
EOF
