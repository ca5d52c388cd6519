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
#    vocabulary-parallel head, summed over a step's microbatches.
# Every run trains the same global batch of 16, 4 microbatches per replica.
#
#   bench/tensor_parallel_bench.sh [STEPS=12] [LAYERS=8]
set -euo pipefail
cd "$(dirname "$0")/.."
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
printf '%-9s %-8s %9s %11s %11s %8s %14s %14s %6s\n' workers plan samples/s measured predicted error \
  "tensor MB/wkr" "TP MB/step" "/formula"
run() {  # p t d
  local p=$1 t=$2 d=$3 name="p$1t$2d$3"
  (cd "$work" && $hz train job.yaml --stages "$p" --tensor-parallel "$t" --data-parallel "$d" --microbatches 4 \
    --workers $((p * t * d)) --max-steps "$steps" --no-progress --out "$name" > "$name.log" 2>&1) ||
    { cat "$work/$name.log" >&2; exit 1; }
  python3 - "$work/$name" "$p" "$t" "$d" "$layers" <<'PY'
import json, re, sys
run, p, t, d, layers = sys.argv[1], *map(int, sys.argv[2:])
s = json.load(open(f"{run}/summary.json"))
plan = json.load(open(f"{run}/plan.json"))
it = s["iteration_seconds"]
peak = max(w["peak_tensor_memory"] for w in s["workers"]) / 1e6
# The workers' own count of their tensor groups' payload per step, and the
# formula's (bytes of float32; b·s·h summed over the step: G/d samples).
measured = []
for w in s["workers"]:
    for line in open(w["log"]):
        m = re.search(r"tensor-parallel traffic: \d+ bytes allreduced in \d+ steps, (\d+) per step", line)
        if m:
            measured.append(int(m.group(1)))
traffic = formula = 0.0
if t > 1:
    samples, seq, hidden = 16 / d, 128, 256
    bsh = samples * seq * hidden * 4
    per_stage = []
    for st in plan["stages"]:
        blocks = sum(1 for i in range(st["first_layer"], st["last_layer"] + 1) if 1 <= i <= layers)
        first, last = st["first_layer"] == 0, st["last_layer"] == layers + 1
        per_stage.append(4 * blocks * bsh + (bsh if first else 0) + ((bsh + 3 * samples * seq * 4) if last else 0))
    traffic = sum(measured) / len(measured) / 1e6
    formula = sum(per_stage) / len(per_stage) / 1e6
ratio = f"{traffic / formula:.3f}" if formula else "-"
print(f"{p*t*d:<9} {'p%dt%dd%d' % (p, t, d):<8} {s['throughput_samples_per_s']:9.2f} {it['measured_median']:10.3f}s"
      f" {it['predicted']:10.3f}s {100 * it['relative_error']:7.0f}% {peak:14.1f} {traffic:14.2f} {ratio:>6}")
PY
}
run 2 1 1
run 1 2 1
run 1 1 2
run 4 1 1
run 1 4 1
run 2 2 1
run 1 2 2
