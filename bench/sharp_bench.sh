#!/usr/bin/env bash
# SHARP (issue 14 §5; docs/select.md): the eight models of
# examples/fashion_mnist_grid.yaml (STEPS steps each, no evaluation) on K = 2
# and 4 workers of 64 MB, a budget that splits every model into shards, in
# one run of this script:
#  1. makespan of Sharded-LRTF with double buffering against the baseline of
#     training the models one after another, each a model-parallel pipeline
#     over the workers (`--scheduler sequential`: one unit at a time), given
#     1 compute thread a unit as SHARP's units have, and again given all the
#     machine's cores (nproc threads); the K× bound is K;
#  2. double buffering's gain (Sharded-LRTF without it), random and
#     round-robin orders, each run's worker utilisation;
#  3. Sharded-LRTF against the exact optimum of Hydra's MILP (CBC) on small
#     instances made from the unit times measured in the runs above
#     (bench/sharp_milp_bench).
#
#   bench/sharp_bench.sh [STEPS=20]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=build/hydrozoa
steps=${1:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
grid() {  # threads -> grid file
  sed -e "s/max_steps: [0-9]*/max_steps: $steps/" -e "s/    seed: 0/    seed: 0\n    eval: false\n    threads: $1/" \
    examples/fashion_mnist_grid.yaml > "$work/grid-$1.yaml"
  echo "$work/grid-$1.yaml"
}
g1=$(grid 1)
gn=$(grid "$cores")
run() {  # name workers grid args... -> "seconds utilisation"
  local name=$1 k=$2 g=$3
  shift 3
  $hz select "$g" --workers "$k" --worker-memory 64MB --out "$work/$name" --no-progress "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; exit 1; }
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))["last_run"]; print(r["seconds"], r["utilisation"])' \
    "$work/$name/sharp.json"
}
echo "8 models of examples/fashion_mnist_grid.yaml, $steps steps each, workers of 64 MB, $cores cores"
for k in 2 4; do
  read -r seq1 _ < <(run "seq1-$k" "$k" "$g1" --scheduler sequential)
  read -r seqn _ < <(run "seqn-$k" "$k" "$gn" --scheduler sequential)
  read -r lrtf ulrtf < <(run "lrtf-$k" "$k" "$g1")
  read -r nodb unodb < <(run "nodb-$k" "$k" "$g1" --no-double-buffer)
  read -r rnd urnd < <(run "random-$k" "$k" "$g1" --scheduler random)
  read -r rr urr < <(run "rr-$k" "$k" "$g1" --scheduler round_robin)
  [ "$k" = 2 ] && grep -E "^Task" "$work/lrtf-2.log" | sed 's/^/  /'
  "$py" - "$k" "$seq1" "$seqn" "$lrtf" "$ulrtf" "$nodb" "$unodb" "$rnd" "$urnd" "$rr" "$urr" "$cores" <<'EOF'
import sys
k, seq1, seqn, lrtf, ulrtf, nodb, unodb, rnd, urnd, rr, urr, cores = sys.argv[1:]
k = int(k)
f = lambda x: float(x)
print(f"K = {k} workers:")
print(f"  one after another (sequential), 1 thread    {f(seq1):8.1f} s")
print(f"  one after another (sequential), {cores} threads   {f(seqn):8.1f} s")
print(f"  Sharded-LRTF, double buffering             {f(lrtf):8.1f} s  busy {100*f(ulrtf):3.0f}%   "
      f"{f(seq1)/f(lrtf):.2f}x / {f(seqn)/f(lrtf):.2f}x faster (bound {k}x; {min(k, int(cores))}x on {cores} cores)")
print(f"  Sharded-LRTF, no double buffering          {f(nodb):8.1f} s  busy {100*f(unodb):3.0f}%   "
      f"double buffering {f(nodb)/f(lrtf):.2f}x")
print(f"  random                                     {f(rnd):8.1f} s  busy {100*f(urnd):3.0f}%")
print(f"  round-robin                                {f(rr):8.1f} s  busy {100*f(urr):3.0f}%")
EOF
done
echo "Sharded-LRTF against the MILP optimum (CBC), instances from the measured unit times (K = 2, no double buffering):"
build/bench/sharp_milp_bench "$work/nodb-2"
