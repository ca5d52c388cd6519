#!/usr/bin/env bash
# The GPU check's benchmarks (scripts/gpu-check; docs/gpu.md), each side by
# side in one run on the same device. Prints a JSON line per figure,
# starting {"figure": ...}, and a readable line.
#
#   bench/gpu_bench.sh overhead BUILD_DIR cuda|cpu PYTHON [steps=200]
#     (a) the main job's CNN, one worker, against a plain libtorch loop
#         (bench/plain_loop.cc) on the same device: same model, batch 128,
#         synthetic 28x28 images (a lent GPU machine has no Fashion-MNIST),
#         SGD with momentum. Target: >= 0.95.
#   bench/gpu_bench.sh shared BUILD_DIR cuda|cpu PYTHON [steps=100]
#     (e) 1, 2 and 4 workers in a pipeline on the one device (NOTE [Workers
#         sharing a GPU]): samples/s of each.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?overhead or shared}"
build="${2:?build dir}"
device="${3:?cuda or cpu}"
py="${4:?python}"
hz="$build/hydrozoa"
warmup=20
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

job() {  # job NAME WORKERS
  cat > "$work/$1.yaml" <<YAML
name: $1
model: {name: cnn}
data: {dataset: synthetic, synthetic_train: 8192}
training: {epochs: 1, global_batch: 128, eval: false, device: $device, optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
cluster: {workers: $2, launcher: local}
output: {checkpoint_every_epochs: 0, trace_steps: 0}
YAML
}

# Samples per second of a run after `warmup` steps (from metrics.jsonl).
rate() {
  "$py" - "$1" "$warmup" 128 <<'PY'
import json, sys
run, warmup, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"loss"' in l]
a, b = steps[warmup - 1], steps[-1]
print(round((len(steps) - warmup) * batch / (b["t"] - a["t"]), 1))
PY
}

train() {  # train NAME STAGES MICROBATCHES STEPS: its samples/s (each call a run directory of its own)
  local run
  run=$(mktemp -u -p "$work" "run-$1-XXXXXX")
  "$hz" train "$work/$1.yaml" --data-parallel 1 --stages "$2" --microbatches "$3" --max-steps $(($4 + warmup)) \
    --no-progress --out "$run" > "$run.log" 2>&1 || { cat "$run.log" >&2; return 1; }
  rate "$run"
}

case "$what" in
  overhead)
    steps="${5:-200}"
    job one 1
    plain=() ours=()
    for round in 1 2; do
      plain+=("$("$build/bench/plain_loop" --device "$device" --data synthetic --steps "$steps" --warmup "$warmup" |
        "$py" -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')")
      ours+=("$(train one 1 1 "$steps")")
    done
    "$py" - "$device" "${plain[*]}" "${ours[*]}" <<'PY'
import json, sys
device, plain, ours = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
p, o = max(plain), max(ours)
print(f"cnn, one worker vs a plain libtorch loop on {device}: {o:.0f} vs {p:.0f} samples/s, {o / p:.2f}x "
      f"(best of {len(plain)} rounds each; target >= 0.95)")
print(json.dumps({"figure": "overhead", "device": device, "hydrozoa_samples_per_s": ours,
                  "plain_loop_samples_per_s": plain, "ratio": round(o / p, 3)}))
PY
    ;;
  shared)
    steps="${5:-100}"
    rates=()
    for n in 1 2 4; do
      job "p$n" "$n"
      rates+=("$(train "p$n" "$n" $((n == 1 ? 1 : 2 * n)) "$steps")")
    done
    grep -h "data plane through" "$work"/run-p*/workers/*.log 2>/dev/null | sed 's/.*\] //' | sort | uniq -c || true
    "$py" - "$device" "${rates[*]}" <<'PY'
import json, sys
device, rates = sys.argv[1], [float(x) for x in sys.argv[2].split()]
for n, r in zip((1, 2, 4), rates):
    print(f"cnn, a {n}-stage pipeline on one {device}: {r:.0f} samples/s")
print(json.dumps({"figure": "workers sharing one device", "device": device,
                  "stages": [1, 2, 4], "samples_per_s": rates}))
PY
    ;;
  *) echo "gpu_bench.sh: unknown benchmark $what (overhead or shared)" >&2; exit 2 ;;
esac
