#!/usr/bin/env bash
# Gavel's policies in the simulator (issue 13 §5), on Gavel's throughputs
# (../shared/gavel, or GAVEL=DIR) and a cluster of 12 V100s, 12 P100s and 12
# K80s (the thesis's 36 GPUs):
#  1. heterogeneity-aware max-min fairness (LAS) against its agnostic form:
#     average completion time of jobs 200-400 of a 600-job continuous-single
#     trace (Poisson arrivals, Gavel's durations) at increasing load, SEEDS
#     seeds each, and the ratio;
#  2. the makespan policy against its agnostic form on Gavel's static
#     minimize_makespan trace;
#  3. the policies' solve time for 2,048 jobs present at once, and the
#     simulator's wall time for 1,000 jobs.
#
#   bench/simulate_bench.sh [SEEDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
hz=build/hydrozoa
gavel=${GAVEL:-../shared/gavel}
seeds=${1:-2}
[ -f "$gavel/simulation_throughputs.json" ] || { echo "simulate_bench: no $gavel/simulation_throughputs.json" >&2; exit 77; }
t="$gavel/simulation_throughputs.json"
cluster=v100=12,p100=12,k80=12
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jct() {  # rate seed policy -> hours
  $hz simulate --generate 600 --rate "$1" --seed "$2" --throughputs "$t" --cluster $cluster --policy "$3" \
    --measure 200-400 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["average_jct_seconds"] / 3600)'
}
echo "1. average JCT (hours) of jobs 200-400, continuous-single, $cluster, mean of $seeds seeds"
printf '%10s %10s %10s %8s\n' "jobs/hour" "aware" "agnostic" "ratio"
for rate in 0.5 1 1.5 2 3 4; do
  a=0; b=0
  for seed in $(seq 1 "$seeds"); do
    a=$(python3 -c "print($a + $(jct $rate $seed max_min_fairness))")
    b=$(python3 -c "print($b + $(jct $rate $seed max_min_fairness_agnostic))")
  done
  python3 -c "a, b = $a / $seeds, $b / $seeds; print(f'{$rate:>10} {a:10.2f} {b:10.2f} {b / a:7.2f}x')"
done
echo
echo "2. makespan (hours) of Gavel's minimize_makespan trace (100 jobs, all at the start) on $cluster"
for p in min_makespan min_makespan_agnostic max_min_fairness; do
  $hz simulate --trace "$gavel/minimize_makespan.trace" --throughputs "$t" --cluster $cluster --policy $p --json |
    python3 -c "import json,sys; d = json.load(sys.stdin); print(f'{\"$p\":<24} {d[\"makespan_seconds\"] / 3600:8.2f}')"
done
echo
echo "3. solve time for 2,048 jobs present at once (one allocation), and 1,000 jobs simulated"
$hz simulate --generate 2048 --rate 1 --seed 1 --multiple --throughputs "$t" --cluster v100=512,p100=512,k80=512 \
  --policy max_min_fairness --write-trace "$work/2048.trace" >/dev/null
for p in max_min_fairness finish_time_fairness min_makespan max_total_throughput fifo; do
  s=$(date +%s.%N)
  $hz allocate --throughputs "$t" --jobs "$work/2048.trace" --cluster v100=512,p100=512,k80=512 --policy $p \
    --json >/dev/null
  python3 -c "print(f'{\"$p\":<24} {$(date +%s.%N) - $s:6.2f} s (the whole command)')"
done
s=$(date +%s.%N)
$hz simulate --generate 1000 --rate 2 --seed 1 --throughputs "$t" --cluster $cluster --policy max_min_fairness \
  >/dev/null
python3 -c "print(f'1,000 jobs simulated (max_min_fairness, rate 2/h): {$(date +%s.%N) - $s:.2f} s')"
