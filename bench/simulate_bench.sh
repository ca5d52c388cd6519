#!/usr/bin/env bash
# Gavel's policies in the simulator (issue 13 §5), on Gavel's throughputs
# (../shared/gavel, or GAVEL=DIR); generated traces on Gavel's simulated
# cluster, 36 GPUs of each type (issue 52 §4), Gavel's physical-cluster
# traces on 12 of each (2) and 4 of each (4):
#  1. heterogeneity-aware max-min fairness (LAS) against its agnostic form:
#     average completion time of jobs 200-400 of a 600-job continuous-single
#     trace (Poisson arrivals, Gavel's durations) at increasing load, SEEDS
#     seeds each, and the ratio (bench/gavel_vs_gavel.sh runs Gavel's own
#     simulator beside ours on such traces); 1b. the same at 5.6 jobs/h on
#     5,000 jobs, jobs 4000-5000 measured (Gavel's steady state);
#  2. the makespan policy against its agnostic form on Gavel's static
#     minimize_makespan trace;
#  3. the policies' solve time for 2,048 jobs present at once, and the
#     simulator's wall time for 1,000 jobs;
#  4. spot workers (issue 13 §6): Gavel's max_min_fairness trace on 12
#     on-demand workers against 12 spot ones at GCP's prices (gcp-vm), each
#     spot worker reclaimed after 4 h on average and another to be had 30 min
#     later, a minute lost to each restart; SEEDS draws of the market;
#  5. space sharing (issue 13 §3): heterogeneity-aware max-min fairness with
#     and without pairs of jobs sharing a GPU at the throughputs file's pair
#     rates, and the agnostic form, on the traces of 1 at 2-6 jobs/hour.
#
#   bench/simulate_bench.sh [SEEDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=build/hydrozoa
gavel=${GAVEL:-../shared/gavel}
seeds=${1:-2}
[ -f "$gavel/simulation_throughputs.json" ] || { echo "simulate_bench: no $gavel/simulation_throughputs.json" >&2; exit 77; }
t="$gavel/simulation_throughputs.json"
cluster=v100=12,p100=12,k80=12
gavels=v100=36,p100=36,k80=36  # Gavel's simulated cluster
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jct() {  # rate seed policy -> hours
  $hz simulate --generate 600 --rate "$1" --seed "$2" --throughputs "$t" --cluster $gavels --policy $3 \
    --measure 200-400 --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["average_jct_seconds"] / 3600)'
}
echo "1. average JCT (hours) of jobs 200-400, continuous-single, $gavels, mean of $seeds seeds"
printf '%10s %10s %10s %8s\n' "jobs/hour" "aware" "agnostic" "ratio"
for rate in 1 2 3 4 5 5.6 6 7; do
  a=0; b=0
  for seed in $(seq 1 "$seeds"); do
    a=$("$py" -c "print($a + $(jct $rate $seed max_min_fairness))")
    b=$("$py" -c "print($b + $(jct $rate $seed max_min_fairness_agnostic))")
  done
  "$py" -c "a, b = $a / $seeds, $b / $seeds; print(f'{$rate:>10} {a:10.2f} {b:10.2f} {b / a:7.2f}x')"
done
echo
echo "1b. Gavel's steady state at the thesis's high load: 5,000 jobs at 5.6 jobs/h, the average JCT of jobs"
echo "    4000-5000 (Gavel measures these), $gavels, seed 1 (about 3 minutes)"
printf '%10s %10s %10s %8s\n' "jobs/hour" "aware" "agnostic" "ratio"
long() {  # policy -> hours
  $hz simulate --generate 5000 --rate 5.6 --seed 1 --throughputs "$t" --cluster $gavels --policy "$1" \
    --measure 4000-5000 --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["average_jct_seconds"] / 3600)'
}
long max_min_fairness >"$work/long_aware" &
la=$(long max_min_fairness_agnostic)
wait
"$py" -c "a, b = $(cat "$work/long_aware"), $la; print(f'{5.6:>10} {a:10.2f} {b:10.2f} {b / a:7.2f}x')"
echo
echo "2. makespan (hours) of Gavel's minimize_makespan trace (100 jobs, all at the start) on $cluster"
for p in min_makespan min_makespan_agnostic max_min_fairness; do
  $hz simulate --trace "$gavel/minimize_makespan.trace" --throughputs "$t" --cluster $cluster --policy $p --json |
    "$py" -c "import json,sys; d = json.load(sys.stdin); print(f'{\"$p\":<24} {d[\"makespan_seconds\"] / 3600:8.2f}')"
done
echo
echo "3. solve time for 2,048 jobs present at once (one allocation), and 1,000 jobs simulated"
$hz simulate --generate 2048 --rate 1 --seed 1 --multiple --throughputs "$t" --cluster v100=512,p100=512,k80=512 \
  --policy max_min_fairness --write-trace "$work/2048.trace" >/dev/null
for p in max_min_fairness finish_time_fairness min_makespan max_total_throughput fifo; do
  s=$(date +%s.%N)
  $hz allocate --throughputs "$t" --jobs "$work/2048.trace" --cluster v100=512,p100=512,k80=512 --policy $p \
    --json >/dev/null
  "$py" -c "print(f'{\"$p\":<24} {$(date +%s.%N) - $s:6.2f} s (the whole command)')"
done
s=$(date +%s.%N)
$hz simulate --generate 1000 --rate 2 --seed 1 --throughputs "$t" --cluster $cluster --policy max_min_fairness \
  >/dev/null
"$py" -c "print(f'1,000 jobs simulated (max_min_fairness, rate 2/h): {$(date +%s.%N) - $s:.2f} s')"
echo
echo "4. Gavel's max_min_fairness trace (96 jobs) on v100=4,p100=4,k80=4, on demand against spot (gcp-vm prices,"
echo "   spot workers up 4 h / away 30 min on average, 1 min per restart), mean of $seeds draws"
spot_run() {  # cluster policy [seed] -> "jct_hours cost reclaimed"
  extra=()
  [ $# -ge 3 ] && extra=(--spot-uptime 4h --spot-downtime 30min --seed "$3")
  $hz simulate --trace "$gavel/max_min_fairness.trace" --throughputs "$t" --cluster "$1" --policy "$2" \
    --prices gcp-vm --preemption-cost 1min "${extra[@]}" --json |
    "$py" -c 'import json,sys; d = json.load(sys.stdin); print(d["average_jct_seconds"] / 3600, d["makespan_seconds"] / 3600, d["cost_usd"], d["reclaimed"])'
}
printf '%-18s %-10s %10s %10s %10s %10s\n' policy workers "avg JCT" makespan cost reclaimed
for p in max_min_fairness min_cost; do
  read -r oj om oc _ <<<"$(spot_run v100=4,p100=4,k80=4 $p)"
  sj=0; sm=0; sc=0; sr=0
  for seed in $(seq 1 "$seeds"); do
    read -r j m c n <<<"$(spot_run v100:spot=4,p100:spot=4,k80:spot=4 $p "$seed")"
    sj=$("$py" -c "print($sj + $j)"); sm=$("$py" -c "print($sm + $m)"); sc=$("$py" -c "print($sc + $c)")
    sr=$("$py" -c "print($sr + $n)")
  done
  "$py" -c "
oj, om, oc = $oj, $om, $oc
sj, sm, sc, sr = $sj / $seeds, $sm / $seeds, $sc / $seeds, $sr / $seeds
print(f'{\"$p\":<18} {\"on demand\":<10} {oj:8.2f} h {om:8.2f} h \${oc:8.2f} {0:10}')
print(f'{\"\":<18} {\"spot\":<10} {sj:8.2f} h {sm:8.2f} h \${sc:8.2f} {sr:10.0f}')
print(f'{\"\":<18} {\"ratio\":<10} {sj / oj:8.2f}x  {sm / om:8.2f}x  {oc / sc:8.2f}x cheaper')"
done
echo
echo "5. space sharing: average JCT (hours) of jobs 200-400, continuous-single, $gavels, mean of $seeds seeds"
printf '%10s %10s %10s %10s %12s %12s\n' "jobs/hour" "agnostic" "aware" "aware+SS" "SS vs aware" "vs agnostic"
for rate in 2 4 6; do
  a=0; b=0; c=0
  for seed in $(seq 1 "$seeds"); do
    a=$("$py" -c "print($a + $(jct $rate $seed max_min_fairness_agnostic))")
    b=$("$py" -c "print($b + $(jct $rate $seed max_min_fairness))")
    c=$("$py" -c "print($c + $(jct $rate $seed 'max_min_fairness --space-sharing'))")
  done
  "$py" -c "a, b, c = $a / $seeds, $b / $seeds, $c / $seeds; print(f'{$rate:>10} {a:10.2f} {b:10.2f} {c:10.2f} {b / c:11.2f}x {a / c:11.2f}x')"
done
