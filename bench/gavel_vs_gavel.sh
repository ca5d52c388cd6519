#!/usr/bin/env bash
# Our Gavel simulator against Gavel's own (issue 52 §4): the same generated
# continuous-single traces (`hydrozoa simulate --generate ... --write-trace`:
# the same jobs, arrival times and steps), Gavel's published throughputs, 36
# GPUs of each type (Gavel's simulated cluster: 36 V100s, 36 P100s, 36
# K80s), rounds of 6 minutes, replayed by both simulators under each policy:
#   LAS (max-min fairness), heterogeneity-aware and agnostic;
#   finish-time fairness, FIFO and the makespan policy, aware;
# and the average completion time of jobs FIRST-LAST side by side: ours as
# it runs (idle workers take waiting jobs, as Gavel's mechanism; a new
# allocation at the first round after any change), with --no-fill-idle (as
# ours ran before issue 52), and with --reallocate-after 32min (as Gavel's
# simulator, which decides a new allocation no sooner than 1920 s after the
# last).
#
#   bench/gavel_vs_gavel.sh GAVEL [SEEDS=1] [JOBS=600] [WINDOW=200-400] [RATES="3 4.5 6"]
#   PARTS=whole bench/gavel_vs_gavel.sh GAVEL   # only the makespan policy's second table
#
# GAVEL: a snapshot of stanford-futuredata/gavel (its `scheduler/` directory,
# or the git directory the search tool's `fetch` brings). Its code stays
# outside this repository: the script copies what the simulator needs into
# a temporary directory, generates its gRPC stubs there, and runs it with
# the project's venv (.venv), into which it installs what Gavel's simulator
# imports (cvxpy with ECOS, grpcio, psutil, scikit-learn, matrix-completion)
# if they are missing. Gavel's simulator takes about half a minute a run
# here at 600 jobs; the whole bench about 10 minutes per seed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
src=${1:?"usage: bench/gavel_vs_gavel.sh GAVEL [SEEDS] [JOBS] [WINDOW] [RATES] (GAVEL: a snapshot of stanford-futuredata/gavel)"}
seeds=${2:-1}
jobs=${3:-600}
window=${4:-200-400}
rates=${5:-3 4.5 6}
parts=${PARTS:-jct whole}  # jct: the JCT table; whole: the makespan policy on the whole trace
py="$root/.venv/bin/python"
[ -x "$py" ] || { echo "gavel_vs_gavel: no $py: run scripts/setup first" >&2; exit 1; }
hz=$root/build/hydrozoa
t=$root/../shared/gavel/simulation_throughputs.json
[ -f "$t" ] || { echo "gavel_vs_gavel: no $t (Gavel's published throughputs)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Gavel's simulator, outside the repository.
mkdir -p "$work/gavel"
if [ -f "$src/scheduler/scheduler.py" ] || [ -f "$src/scheduler.py" ]; then
  [ -f "$src/scheduler.py" ] || src=$src/scheduler
  cp -r "$src" "$work/gavel/scheduler"
elif git --git-dir="$src" rev-parse HEAD >/dev/null 2>&1; then
  git --git-dir="$src" ls-tree -r --name-only HEAD scheduler | grep -E '\.py$|\.proto$' | grep -v 'notebooks/' |
    while read -r f; do
      mkdir -p "$work/gavel/$(dirname "$f")"
      git --git-dir="$src" show "HEAD:$f" >"$work/gavel/$f"
    done
else
  echo "gavel_vs_gavel: $src is neither Gavel's scheduler/ directory nor a git snapshot of it" >&2
  exit 1
fi
g=$work/gavel/scheduler
if ! "$py" -c 'import cvxpy, ecos, grpc, grpc_tools, psutil, sklearn, matrix_completion' 2>/dev/null; then
  echo "gavel_vs_gavel: installing what Gavel's simulator imports into .venv" >&2
  "$root/.venv/bin/pip" install -q cvxpy ecos grpcio grpcio-tools psutil scikit-learn 'setuptools<82'
  "$root/.venv/bin/pip" install -q --no-deps matrix-completion  # its own pins are older than the venv's
fi
# One change to that copy: its driver's --solver also takes HIGHS (a simplex
# solver that cvxpy ships; Gavel's choices are ECOS, GUROBI and SCS), for the
# makespan policy's second table below.
sed -i "s/choices=\['ECOS', 'GUROBI', 'SCS'\]/choices=['ECOS', 'GUROBI', 'SCS', 'HIGHS']/" \
  "$g/scripts/drivers/simulate_scheduler_with_trace.py"
for p in iterator_to_scheduler scheduler_to_worker worker_to_scheduler common enums; do
  (cd "$g" && "$py" -m grpc_tools.protoc -Iruntime/protobuf --python_out=runtime/rpc_stubs \
    --grpc_python_out=runtime/rpc_stubs "runtime/protobuf/$p.proto")
done

# ours policy <-> Gavel's
pairs="max_min_fairness:max_min_fairness_perf max_min_fairness_agnostic:max_min_fairness
finish_time_fairness:finish_time_fairness_perf fifo:fifo_perf min_makespan:min_total_duration_perf"
first=${window%-*}
last=${window#*-}
ours() {  # trace policy [flags] -> hours
  $hz simulate --trace "$1" --throughputs "$t" --cluster v100=36,p100=36,k80=36 --policy "$2" --measure "$window" \
    "${@:3}" --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["average_jct_seconds"] / 3600)'
}
theirs() {  # trace policy seed -> hours (a trailing * where ECOS failed and SCS solved)
  local solver out
  for solver in ECOS SCS; do
    out=$( (cd "$g" && "$py" scripts/drivers/simulate_scheduler_with_trace.py -t "$1" -p "$2" --throughputs_file "$t" \
      -c 36:36:36 --seed "$3" -s "$first" -e "$last" --solver "$solver" 2>&1) |
      sed -n 's/^Average job completion time: \([0-9.]*\) seconds.*/\1/p' | head -1)
    if [ -n "$out" ]; then
      "$py" -c "print(f'{$out / 3600:.2f}' + ('*' if '$solver' == 'SCS' else ''))"
      return
    fi
  done
  echo nan
}
trace_for() {  # rate seed -> the path of its trace, generated once
  local trace=$work/r$1-s$2.trace
  [ -f "$trace" ] || $hz simulate --generate "$jobs" --rate "$1" --seed "$2" --throughputs "$t" \
    --cluster v100=36,p100=36,k80=36 --policy fifo --write-trace "$trace" --json >/dev/null
  echo "$trace"
}
if [[ " $parts " == *" jct "* ]]; then
echo "Average JCT (hours) of jobs $window of $jobs, continuous-single, 36 V100 + 36 P100 + 36 K80, rounds of 6 min"
printf '%6s %4s %-26s %-24s %8s %8s %8s %9s %7s %9s %7s\n' jobs/h seed ours gavel "ours (h)" "no fill" "32 min" \
  "gavel (h)" "ours/g" "no fill/g" "32min/g"
for rate in $rates; do
  for seed in $(seq 0 $((seeds - 1))); do
    trace=$(trace_for "$rate" "$seed")
    for pair in $pairs; do
      o=${pair%%:*}
      gp=${pair#*:}
      a=$(ours "$trace" "$o")
      n=$(ours "$trace" "$o" --no-fill-idle)
      l=$(ours "$trace" "$o" --reallocate-after 32min)
      b=$(theirs "$trace" "$gp" "$seed")
      h=${b%\*}
      printf '%6s %4s %-26s %-24s %8.2f %8.2f %8.2f %9s %7.3f %9.3f %7.3f\n' "$rate" "$seed" "$o" "$gp" "$a" "$n" "$l" \
        "$b" "$("$py" -c "print($a / $h)")" "$("$py" -c "print($n / $h)")" "$("$py" -c "print($l / $h)")"
    done
  done
done | tee "$work/rows"
echo "(* Gavel's simulator with SCS: ECOS, its default solver, failed on one of the rounds' problems)"
echo
echo "aware/agnostic LAS (agnostic JCT over aware), each simulator:"
"$py" - "$work/rows" <<'EOF'
import sys, collections
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(dict)
for r in rows:
    by[(r[0], r[1])][r[2]] = (float(r[4]), float(r[7].rstrip('*')))
for (rate, seed), d in by.items():
    a, g = d['max_min_fairness'], d['max_min_fairness_agnostic']
    print(f"  {rate:>5} jobs/h seed {seed}: ours {g[0] / a[0]:.2f}x, gavel {g[1] / a[1]:.2f}x")
EOF
fi

# The makespan policy's own objective. Its LP fixes only the time until the
# last job ends; every allocation that meets it is an optimum, and which one
# a solver returns decides the other jobs' completion times. So the whole
# trace (every job, no window): the makespan from both simulators, and the
# average JCT from ours and from Gavel's with ECOS (its default, an
# interior-point solver) and with HiGHS (a simplex one).
[[ " $parts " == *" whole "* ]] || exit 0
echo
echo "The makespan policy on the whole trace (all $jobs jobs): makespan and average JCT, hours"
printf '%6s %4s %12s %12s %12s %10s %10s %10s\n' jobs/h seed "ours" "gavel ECOS" "gavel HiGHS" "ours JCT" "ECOS JCT" "HiGHS JCT"
whole_ours() {  # trace -> "makespan_h jct_h"
  $hz simulate --trace "$1" --throughputs "$t" --cluster v100=36,p100=36,k80=36 --policy min_makespan --json |
    "$py" -c 'import json,sys; d=json.load(sys.stdin); print(d["makespan_seconds"] / 3600, d["average_jct_seconds"] / 3600)'
}
whole_theirs() {  # trace solver seed -> "makespan_h jct_h" (nan nan when the solver failed)
  (cd "$g" && "$py" scripts/drivers/simulate_scheduler_with_trace.py -t "$1" -p min_total_duration_perf \
    --throughputs_file "$t" -c 36:36:36 --seed "$3" --solver "$2" 2>&1) | "$py" -c '
import re, sys
text = sys.stdin.read()
d = re.search(r"^Total duration: ([0-9.]+) seconds", text, re.M)
j = re.search(r"^Average job completion time: ([0-9.]+) seconds", text, re.M)
print(f"{float(d[1]) / 3600} {float(j[1]) / 3600}" if d and j else "nan nan")'
}
for rate in $rates; do
  for seed in $(seq 0 $((seeds - 1))); do
    trace=$(trace_for "$rate" "$seed")
    read -r om oj <<<"$(whole_ours "$trace")"
    read -r em ej <<<"$(whole_theirs "$trace" ECOS "$seed")"
    read -r hm hj <<<"$(whole_theirs "$trace" HIGHS "$seed")"
    printf '%6s %4s %12.2f %12.2f %12.2f %10.2f %10.2f %10.2f\n' "$rate" "$seed" "$om" "$em" "$hm" "$oj" "$ej" "$hj"
  done
done
