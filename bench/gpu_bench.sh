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
#   bench/gpu_bench.sh gpt BUILD_DIR cuda|cpu PYTHON [steps=30] [batch=8]
#     (b) GPT-2 small (12 layers, hidden 768, context 1024) in bf16, one
#         worker: tokens/s and MFU beside the same model as PyTorch eager
#         Python (bench/gpt_eager.py) on the same device, with the zoo's
#         attention op for op and with scaled_dot_product_attention; the
#         ratio is against the stronger. Dropout 0 in both, SGD with
#         momentum, random tokens. The run is planned from a predicted
#         profile (--profile), so no CPU profile of the model is taken.
#         Without a GPU: a 2-layer GPT of hidden 64, to prove the script.
#   bench/gpu_bench.sh prediction BUILD_DIR cuda|cpu PYTHON [models=resnet50,gpt] [sizes=4,16]
#     (c) `hydrozoa profile --device h100` (the prediction) against
#         `hydrozoa profile --on cuda` (measured with CUDA events, NOTE
#         [Profiles on a GPU]) on the same card: each layer's forward and
#         backward time per microbatch size, the error's median and worst per
#         layer kind. Without a GPU: --device cpu against the CPU, to prove
#         the script.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?overhead, shared, gpt or prediction}"
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

# Samples per second of run $1 after `warmup` steps of $2 (128) samples (from metrics.jsonl).
rate() {
  "$py" - "$1" "$warmup" "${2:-128}" <<'PY'
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
  gpt)
    steps="${5:-30}" batch="${6:-8}" warmup=5
    if [ "$device" = cpu ]; then
      sizes=(--layers 2 --hidden 64 --heads 2 --vocab 512 --seq 64) options="layers: 2, hidden: 64, heads: 2, vocab: 512, seq_len: 64, " seq=64 predict=cpu
    else
      sizes=() options="" seq=1024 predict=h100
    fi
    cat > "$work/gpt.yaml" <<YAML
name: gpt
model: {name: gpt, options: {${options}dropout: 0}}
data: {dataset: synthetic, synthetic_train: $(((steps + warmup + 2) * batch))}
training: {epochs: 1, global_batch: $batch, eval: false, device: $device, precision: bf16,
           optimizer: {name: sgd, lr: 0.01, momentum: 0.9}}
cluster: {workers: 1, launcher: local}
output: {checkpoint_every_epochs: 0, trace_steps: 0}
YAML
    model_options=()
    [ "$device" = cpu ] && model_options=(-O layers=2 -O hidden=64 -O heads=2 -O vocab=512 -O seq_len=64 -O dropout=0)
    "$hz" profile --model gpt "${model_options[@]}" --device "$predict" --microbatch-sizes "$batch" \
      -o "$work/gpt-profile.json" > "$work/gpt-profile.log" 2>&1 || { cat "$work/gpt-profile.log" >&2; exit 1; }
    run="$work/run-gpt"
    "$hz" train "$work/gpt.yaml" --profile "$work/gpt-profile.json" --data-parallel 1 --stages 1 --microbatches 1 \
      --max-steps $((steps + warmup)) --no-progress --out "$run" > "$run.log" 2>&1 || { cat "$run.log" >&2; exit 1; }
    ours=$(rate "$run" "$batch")
    eager=()
    for attention in explicit sdpa; do
      eager+=("$("$py" bench/gpt_eager.py --device "$device" --attention "$attention" "${sizes[@]}" --batch "$batch" \
        --steps "$steps" --warmup "$warmup")")
    done
    "$py" - "$device" "$ours" "$seq" "$batch" "${eager[@]}" <<'PY'
import json, sys
device, ours, seq, batch = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
eager = [json.loads(x) for x in sys.argv[5:]]
tokens = ours * seq  # samples/s of sequences of seq tokens
best = max(eager, key=lambda e: e["tokens_per_s"])
peak_mfu = best["mfu"] / best["tokens_per_s"] if best["mfu"] else None  # MFU per token/s: the same model and card
mfu = round(tokens * peak_mfu, 4) if peak_mfu else None
for e in eager:
    print(f"gpt bf16 on {device}: {e['baseline']}: {e['tokens_per_s']:.0f} tokens/s, MFU {e['mfu']}")
print(f"gpt bf16 on {device}: hydrozoa, one worker: {tokens:.0f} tokens/s, MFU {mfu}; "
      f"{tokens / best['tokens_per_s']:.2f}x the stronger baseline ({best['baseline']}; target >= 1.0)")
print(json.dumps({"figure": "gpt bf16", "device": device, "card": best["device"], "batch": batch, "seq": seq,
                  "hydrozoa_tokens_per_s": round(tokens, 1), "hydrozoa_mfu": mfu, "baselines": eager,
                  "ratio_to_stronger": round(tokens / best["tokens_per_s"], 3)}))
PY
    ;;
  prediction)
    models="${5:-resnet50,gpt}" sizes="${6:-4,16}" min_time="${7:-1s}"
    on=cuda predict=h100
    [ "$device" = cpu ] && on=cpu predict=cpu
    for m in ${models//,/ }; do
      "$hz" profile --model "$m" --on "$on" --microbatch-sizes "$sizes" --min-time "$min_time" \
        -o "$work/$m-measured.json" > "$work/$m-measured.log" 2>&1 || { cat "$work/$m-measured.log" >&2; exit 1; }
      "$hz" profile --model "$m" --device "$predict" --microbatch-sizes "$sizes" \
        -o "$work/$m-predicted.json" > "$work/$m-predicted.log" 2>&1 || { cat "$work/$m-predicted.log" >&2; exit 1; }
    done
    "$py" - "$work" "$models" "$predict" <<'PY'
import json, statistics, sys
work, models, predict = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
for m in models:
    meas = json.load(open(f"{work}/{m}-measured.json"))
    pred = json.load(open(f"{work}/{m}-predicted.json"))
    kinds = [l["kind"] for l in meas["layers"]]
    errors = {}  # kind -> relative errors of the prediction, (predicted - measured) / measured
    for a, b in zip(meas["measurements"], pred["measurements"]):
        assert a["microbatch_size"] == b["microbatch_size"]
        for kind, x, y in zip(kinds, a["layers"], b["layers"]):
            for part in ("forward_ms", "backward_ms"):
                if x[part] > 0:
                    errors.setdefault(kind, []).append((y[part] - x[part]) / x[part])
    card = meas["device"]["name"]
    for kind, e in sorted(errors.items()):
        worst = max(e, key=abs)
        print(f"{m}: {kind} layers, the {predict} prediction vs measured on {card}: median error "
              f"{statistics.median(e):+.0%}, worst {worst:+.0%} ({len(e)} passes)")
        print(json.dumps({"figure": "prediction", "model": m, "kind": kind, "predicted_for": predict,
                          "measured_on": card, "median_error": round(statistics.median(e), 3),
                          "worst_error": round(worst, 3), "passes": len(e)}))
PY
    ;;
  *) echo "gpu_bench.sh: unknown benchmark $what (overhead, shared, gpt or prediction)" >&2; exit 2 ;;
esac
