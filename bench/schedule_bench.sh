#!/usr/bin/env bash
# Pipeline schedules side by side (issue 11 §4): for each model and
# microbatch count, GPipe, 1F1B, interleaved 1F1B (2 chunks per stage),
# PipeDream-2BW and PipeDream on
# the same 2-stage pipeline, as a user runs them (`hydrozoa train --schedule`,
# plain processes, one profile per model shared by its cells). Per cell: the
# measured median step and samples/s, the planner's predicted step, and each
# stage's peak tensor memory in a step (the counting allocator; summary.json
# workers[].peak_tensor_memory), with ratios against GPipe measured in the
# same run. Rounds alternate the schedules, and each cell's figure is its
# median over the rounds.
#
#   bench/schedule_bench.sh [rounds=2] [steps=30] [models="cnn gpt"]
#   SCHEDULES="gpipe 2bw" bench/schedule_bench.sh   # some of them
#   STAGES=4 GPT_LAYERS=6 bench/schedule_bench.sh 1 20 gpt   # 4 workers
#   VS=HYDROZOA_HELPER_SLICE_US=0 bench/schedule_bench.sh      # A/B
#   ROWS=rows.jsonl bench/schedule_bench.sh   # keep each run's figures
#
# VS=NAME=value runs every cell a second time in each round, right after the
# first, with that variable in the environment, and adds a column: the
# measured step against that variant's (below 1: the default is faster).
#
# About 14 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
rounds="${1:-2}"
steps="${2:-30}"
models="${3:-cnn gpt}"
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# STAGES=4 runs 4-stage pipelines (4 workers: on 2 cores, oversubscribed);
# GPT_LAYERS=6 gives the GPT enough layers for 4 stages × 2 chunks.
stages="${STAGES:-2}"

model_spec() {
  case "$1" in
    cnn) echo "model: {name: cnn}
data: {dataset: fashion_mnist}" ;;
    gpt) echo "model: {name: gpt, options: {layers: ${GPT_LAYERS:-4}, hidden: 128, heads: 4, vocab: 1024, seq_len: 64}}
data: {dataset: synthetic, synthetic_train: 4096, synthetic_test: 64}" ;;
    *) echo "unknown model $1" >&2; exit 2 ;;
  esac
}

rows="${ROWS:-$work/rows.jsonl}"  # one JSON line per run, written as it ends
: > "$rows"
for model in $models; do
  { model_spec "$model"; cat <<YAML
name: schedules
training: {epochs: 1, global_batch: 64, eval: false}
cluster: {workers: $stages}
output: {checkpoint_every_epochs: 0, trace_steps: 0}
YAML
  } > "$work/$model.yaml"
  export HYDROZOA_CACHE_DIR="$work/cache-$model"  # one profile per model, shared by its cells
  for M in $((4 * stages)) $((8 * stages)); do
    for round in $(seq "$rounds"); do
      for schedule in ${SCHEDULES:-gpipe 1f1b interleaved 2bw pipedream}; do
        for variant in default ${VS:+vs}; do
          out="$work/run-$model-$M-$schedule-$round-$variant"
          extra=(); [ "$schedule" = interleaved ] && extra=(--chunks 2)
          env=(); [ "$variant" = vs ] && env=("$VS")
          echo "$model M=$M $schedule (round $round${VS:+, $variant})..." >&2
          if ! env "${env[@]}" $hz train "$work/$model.yaml" --launcher local --data-parallel 1 --stages "$stages" --microbatches "$M" \
              --schedule "$schedule" "${extra[@]}" --max-steps "$steps" --no-progress --out "$out" > "$out.log" 2>&1; then
            echo "  failed: $(tail -1 "$out.log")" >&2
            continue
          fi
          "$py" - "$out" "$model" "$M" "$schedule" "$variant" >> "$rows" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
model, M, schedule, variant = sys.argv[2:6]
mem = {}
for w in s["workers"]:
    mem[w["stage"]] = max(mem.get(w["stage"], 0), w.get("peak_tensor_memory", 0))
it = s["iteration_seconds"]
# What the plan charged each transfer and the profile's one-at-a-time figures
# (NOTE [A message's delivery on busy cores]), for the record.
plan = json.load(open(sys.argv[1] + "/plan.json"))
net = json.load(open(sys.argv[1] + "/profile.json")).get("network", {})
print(json.dumps({"model": model, "M": int(M), "schedule": schedule, "variant": variant, "predicted": it["predicted"],
                  "measured": it["measured_median"], "samples_per_s": s["throughput_samples_per_s"],
                  "memory": [mem[k] for k in sorted(mem)],
                  "transfer_latency": plan.get("inputs", {}).get("transfer_latency_s"),
                  "delivery": net.get("delivery")}))
PY
          rm -rf "$out"
        done
      done
    done
  done
done

"$py" - "$rows" "$stages" "${VS:-}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
p = int(sys.argv[2])
vs = sys.argv[3]
versus = {}
for r in rows:
    if r["variant"] == "vs":
        versus.setdefault((r["model"], r["M"], r["schedule"]), []).append(r["measured"])
rows = [r for r in rows if r["variant"] == "default"]
ORDER = ["gpipe", "1f1b", "interleaved", "2bw", "pipedream"]
cells = {}
for r in rows:
    cells.setdefault((r["model"], r["M"], r["schedule"]), []).append(r)
def med(rs, key): return statistics.median(r[key] for r in rs)
def medmem(rs, s): return statistics.median(r["memory"][s] for r in rs)
print(f"\nSchedules on a {p}-stage pipeline, global batch 64, plain processes (median of rounds)\n")
for model in sorted({r["model"] for r in rows}):
    d = next((r["delivery"] for r in rows if r["model"] == model and r.get("delivery")), None)
    if d:
        print(f"  {model}'s profile: a message's delivery {1e6 * d['mean_s']:.0f} us (mean), "
              f"helper threads' CPU {1e6 * d['helper_cpu_s']:.0f} us per message sent and received")
print(f"  {'model':5} {'M':>3} {'schedule':12} {'measured':>9} {'predicted':>9} {'error':>6} {'samples/s':>9} "
      f"{'vs gpipe':>8}   " + "  ".join(f"{'stage ' + str(s) + ' tensors':>16}" for s in range(p))
      + (f"   step vs {vs}" if vs else ""))
for (model, M, schedule), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], ORDER.index(kv[0][2]) if kv[0][2] in ORDER else len(ORDER))):
    base = cells.get((model, M, "gpipe"))
    meas, pred, sps = med(rs, "measured"), med(rs, "predicted"), med(rs, "samples_per_s")
    ratio = sps / med(base, "samples_per_s") if base else float("nan")
    mems = []
    for s in range(p):
        m = medmem(rs, s)
        rel = f" ({m / medmem(base, s):.2f}×)" if base and schedule != "gpipe" else "        "
        mems.append(f"{m / 1e6:7.1f} MB{rel}")
    print(f"  {model:5} {M:3d} {schedule:12} {1e3 * meas:6.1f} ms {1e3 * pred:6.1f} ms {100 * (pred / meas - 1):+5.0f}% "
          f"{sps:9.0f} {ratio:7.2f}×   " + "  ".join(f"{m:>16}" for m in mems)
          + (f"   {meas / statistics.median(versus[(model, M, schedule)]):.3f}×" if (model, M, schedule) in versus else ""))
PY
