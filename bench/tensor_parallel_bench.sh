#!/usr/bin/env bash
# Tensor parallelism (issue 15 §5; docs/tensor_parallel.md): a small GPT
# (LAYERS blocks, hidden 256, 4 heads, context 128, byte vocabulary) learning
# /usr/share/common-licenses/GPL-3 on 2 and 4 local workers, in one run of
# this script, pipeline-only, tensor-only and mixed plans side by side:
#  - measured samples/s and, per worker, the counting allocator's peak of
#    tensor memory in a step (parameters, optimizer state, activations);
#  - the planner's predicted iteration against the measured median;
#  - the tensor groups' allreduce payload per step, as the workers counted
#    it, against the formula: per rank, 4 allreduces of b·s·h per block
#    (2 forward, 2 backward), 1 for the embedding, 1 and 3 of b·s for the
#    vocabulary-parallel head, summed over a step's microbatches; with
#    scatter/gather, an all-gather of b·s·h/t per boundary received;
#  - the activations and gradients each worker sent to other stages per
#    step, against b·s·h per boundary crossed (b·s·h/t with scatter/gather):
#    p2t2d1 with and without --scatter-gather (sg) side by side.
# Every run trains the same global batch of 16, 4 microbatches per replica.
#
#   bench/tensor_parallel_bench.sh [STEPS=12] [LAYERS=8]
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
hz=$PWD/build/hydrozoa
steps=${1:-12}
layers=${2:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.yaml" <<EOF
name: tp-bench
model:
  name: gpt
  options: {layers: $layers, hidden: 256, heads: 4, vocab: 256, seq_len: 128, dropout: 0.1}
data: {dataset: text, path: /usr/share/common-licenses/GPL-3}
training: {epochs: 1, global_batch: 16, seed: 0, eval: false, optimizer: {name: adam, lr: 0.0005}}
cluster: {workers: 4, launcher: local}
output: {checkpoint_every_epochs: 0}
EOF
echo "gpt: $layers blocks, hidden 256, 4 heads, context 128; global batch 16, $steps steps; $(nproc) cores"
printf '%-9s %-10s %9s %11s %11s %8s %14s %11s %6s %12s %6s\n' workers plan samples/s measured predicted error \
  "tensor MB/wkr" "TP MB/step" "/formula" "pipe MB/step" "/formula"
runs=0
run() {  # p t d [sg]
  runs=$((runs + 1))
  local p=$1 t=$2 d=$3 sg=${4:-} name="$runs-p$1t$2d$3${4:+-sg}"
  (cd "$work" && $hz train job.yaml --stages "$p" --tensor-parallel "$t" --data-parallel "$d" --microbatches 4 \
    --workers $((p * t * d)) --max-steps "$steps" --no-progress --out "$name" ${sg:+--scatter-gather} \
    > "$name.log" 2>&1) || { cat "$work/$name.log" >&2; exit 1; }
  "$py" - "$work/$name" "$p" "$t" "$d" "$layers" "${sg:+1}" <<'PY'
import json, re, sys
run, p, t, d, layers = sys.argv[1], *map(int, sys.argv[2:6])
sg = sys.argv[6] == "1"
s = json.load(open(f"{run}/summary.json"))
plan = json.load(open(f"{run}/plan.json"))
it = s["iteration_seconds"]
peak = max(w["peak_tensor_memory"] for w in s["workers"]) / 1e6
# The workers' own count of their tensor groups' payload per step, and the
# formula's (bytes of float32; b·s·h summed over the step: G/d samples).
measured, sent = [], []
for w in s["workers"]:
    for line in open(w["log"]):
        m = re.search(r"tensor-parallel traffic: \d+ bytes in \d+ steps, (\d+) per step", line)
        if m:
            measured.append(int(m.group(1)))
        m = re.search(r"pipeline traffic: \d+ bytes sent in \d+ steps, (\d+) per step", line)
        if m:
            sent.append(int(m.group(1)))
samples, seq, hidden = 16 / d, 128, 256
bsh = samples * seq * hidden * 4
part = bsh / t if sg else bsh  # what crosses a boundary from each slice
traffic = formula = pipe = pipe_formula = 0.0
if t > 1:
    per_stage = []
    for k, st in enumerate(plan["stages"]):
        blocks = sum(1 for i in range(st["first_layer"], st["last_layer"] + 1) if 1 <= i <= layers)
        first, last = st["first_layer"] == 0, st["last_layer"] == layers + 1
        gathers = (k > 0) + (k < p - 1) if sg else 0  # activations in, gradients in
        per_stage.append(4 * blocks * bsh + (bsh if first else 0) + ((bsh + 3 * samples * seq * 4) if last else 0)
                         + gathers * bsh / t)
    traffic = sum(measured) / len(measured) / 1e6
    formula = sum(per_stage) / len(per_stage) / 1e6
if p > 1:
    # Stage k sends activations forward (k < p − 1) and gradients back (k > 0).
    pipe = sum(sent) / len(sent) / 1e6
    pipe_formula = sum(((k < p - 1) + (k > 0)) * part for k in range(p)) / p / 1e6
ratio = f"{traffic / formula:.3f}" if formula else "-"
pipe_ratio = f"{pipe / pipe_formula:.3f}" if pipe_formula else "-"
name = "p%dt%dd%d%s" % (p, t, d, " sg" if sg else "")
print(f"{p*t*d:<9} {name:<10} {s['throughput_samples_per_s']:9.2f} {it['measured_median']:10.3f}s"
      f" {it['predicted']:10.3f}s {100 * it['relative_error']:7.0f}% {peak:14.1f} {traffic:11.2f} {ratio:>6}"
      f" {pipe:12.2f} {pipe_ratio:>6}")
PY
}
run 2 1 1
run 1 2 1
run 1 1 2
run 4 1 1
run 1 4 1
run 2 2 1
run 2 2 1 sg
run 1 2 2
run 2 2 1 sg  # the pair again, in the other order (one run's noise on this machine is ±10%)
run 2 2 1
