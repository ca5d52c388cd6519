#!/usr/bin/env bash
# Planning fidelity (issue 9 §1): the planner's predicted step time and peak
# memory against measured runs, over a matrix of models x plans x launchers,
# and for each (model, workers, link) the plan the planner chose beside the
# fastest plan measured.
#
# Each cell is `hydrozoa train` as a user runs it, with the strategy pinned
# (A replicas x B stages; the planner picks the split and the microbatches):
# the coordinator measures the profile in a worker process on this machine
# and the network between two workers, plans with them, and trains `steps`
# steps. Each cell profiles afresh, a minute before its run: on this VM the
# same process runs 25-40% faster or slower from one run to the next, and the
# whole machine changes pace over hours, so a profile shared by a model's
# twelve cells would compare runs with another machine state. Measured: the
# median step (summary.json's iteration_seconds.measured_median; the median leaves
# out the slow first steps), and the worker whose peak resident memory is
# furthest from its planned memory. The planner's choice for W workers is what
# `hydrozoa plan` picks from the same profile and network figures, for this
# machine's cores (--host-cores, as `hydrozoa train` plans).
#
# Plans with more busy workers than this machine has cores (2x2, 1x4 and 4x1
# on 2 cores) are marked "oversubscribed": there the planner's premise of a
# core per worker does not hold (docs/plan.md, "How far predictions are off").
#
#   bench/fidelity_bench.sh [steps=40] [launchers="local container"] [models="mlp cnn vgg11 resnet18 gpt"]
#
# The container launcher needs root (as scripts/demo sets it up); without it
# those cells are skipped. A full run takes about 40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
py="$PWD/.venv/bin/python"  # the venv's (scripts/setup): one torch for ours and the baselines
steps="${1:-40}"
launchers="${2:-local container}"
models="${3:-mlp cnn vgg11 resnet18 gpt}"
hz=build/hydrozoa
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)

model_spec() {
  case "$1" in
    mlp) echo "model: {name: mlp, options: {hidden: 1024, depth: 4}}
data: {dataset: fashion_mnist}" ;;
    cnn) echo "model: {name: cnn}
data: {dataset: fashion_mnist}" ;;
    vgg11) echo "model: {name: vgg11, options: {image_size: 32, width: 0.25}}
data: {dataset: synthetic, synthetic_train: 4096, synthetic_test: 64}" ;;
    resnet18) echo "model: {name: resnet18, options: {image_size: 32, width: 0.25}}
data: {dataset: synthetic, synthetic_train: 4096, synthetic_test: 64}" ;;
    gpt) echo "model: {name: gpt, options: {layers: 4, hidden: 128, heads: 4, vocab: 1024, seq_len: 64}}
data: {dataset: synthetic, synthetic_train: 4096, synthetic_test: 64}" ;;
    *) echo "unknown model $1" >&2; exit 2 ;;
  esac
}

job() {
  model_spec "$1"
  cat <<YAML
name: fidelity
training: {epochs: 1, global_batch: 64, eval: false}
cluster: {workers: 4}
output: {checkpoint_every_epochs: 0, trace_steps: 0}
YAML
}

can_contain() { [ "$(id -u)" = 0 ] && command -v unshare > /dev/null && command -v ip > /dev/null; }

rows="$work/rows.jsonl"
: > "$rows"
for model in $models; do
  job "$model" > "$work/$model.yaml"
  for launcher in $launchers; do
    link_args=(); link="loopback"
    if [ "$launcher" = container ]; then
      if ! can_contain; then echo "skipping containers (needs root)" >&2; continue; fi
      link_args=(--bandwidth 50MB/s); link="50 MB/s"
    fi
    for plan in 1x1 2x1 1x2 2x2 1x4 4x1; do
      A=${plan%x*}; B=${plan#*x}; W=$((A * B))
      out="$work/run-$model-$launcher-$plan"
      echo "$model $launcher $plan..." >&2
      export HYDROZOA_CACHE_DIR="$out.cache"   # profile afresh for each cell
      if ! $hz train "$work/$model.yaml" --workers "$W" --data-parallel "$A" --stages "$B" --max-steps "$steps" \
          --no-progress --launcher "$launcher" "${link_args[@]}" --out "$out" > "$out.log" 2>&1; then
        echo "  failed: $(tail -1 "$out.log")" >&2
        continue
      fi
      # The planner's choice for W workers from this run's profile and network figures.
      choice=$("$py" - "$out/plan.json" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))["inputs"]
print(int(i["bandwidth_bytes_per_s"]), i["allreduce_alpha_s_per_byte"], i["allreduce_beta_s"],
      "--shared-memory" if i.get("shared_memory_allreduce") else "")
PY
)
      read -r bw alpha beta shm <<< "$choice"
      # shellcheck disable=SC2086 # $shm: one flag or none
      chosen=$($hz plan --profile "$out/profile.json" --workers "$W" --global-batch 64 --bandwidth "${bw}B/s" \
          --allreduce-alpha "$alpha" --allreduce-beta "$beta" --host-cores "$cores" $shm -o - --json 2> /dev/null |
          "$py" -c 'import json,sys; s=json.load(sys.stdin)["strategy"]; print("%dx%d" % (s["data_parallel"], s["pipeline_stages"]))' ||
          echo "?")
      "$py" - "$out" "$model" "$launcher" "$link" "$plan" "$W" "$cores" "$chosen" >> "$rows" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
stages = json.load(open(sys.argv[1] + "/plan.json"))["stages"]
model, launcher, link, plan, W, cores, chosen = sys.argv[2:9]
it = s["iteration_seconds"]
# The plan's memory of the worker's stage (what right-sizing prices) against its peak resident memory.
mem = [(stages[w["stage"]]["memory_bytes"], w.get("peak_memory")) for w in s.get("workers", [])]
mem = [(p, m) for p, m in mem if p and m]
worst = max(mem, key=lambda pm: abs(pm[1] / pm[0] - 1)) if mem else (None, None)
print(json.dumps({"model": model, "launcher": launcher, "link": link, "plan": plan, "workers": int(W),
                  "oversubscribed": int(W) > int(cores), "predicted": it["predicted"],
                  "measured": it["measured_median"], "planned_memory": worst[0], "peak_memory": worst[1],
                  "chosen": chosen}))
PY
      rm -rf "$out" "$out.cache"
    done
  done
done

"$py" - "$rows" "$cores" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cores = sys.argv[2]
def err(p, m): return m / p - 1 if p and m else None
print(f"\nPredicted against measured, global batch 64, this machine ({cores} cores)\n")
print(f"  {'model':9} {'launcher':10} {'plan':5} {'predicted':>10} {'measured':>10} {'error':>7}   "
      f"{'memory planned':>14} {'peak':>8} {'error':>7}")
for r in rows:
    e = err(r["predicted"], r["measured"]); me = err(r["planned_memory"], r["peak_memory"])
    mem = (f"{r['planned_memory'] / 1e6:11.0f} MB {r['peak_memory'] / 1e6:5.0f} MB {100 * me:+6.0f}%"
           if me is not None else f"{'':14} {'':>8} {'':>7}")
    print(f"  {r['model']:9} {r['launcher']:10} {r['plan']:5} {1e3 * r['predicted']:7.1f} ms {1e3 * r['measured']:7.1f} ms "
          f"{100 * e:+6.0f}%   {mem}{'   oversubscribed' if r['oversubscribed'] else ''}")
for over in (False, True):
    es = [abs(err(r["predicted"], r["measured"])) for r in rows if r["oversubscribed"] == over and r["measured"]]
    ms = [abs(err(r["planned_memory"], r["peak_memory"])) for r in rows
          if r["oversubscribed"] == over and r["peak_memory"] and r["planned_memory"]]
    label = "oversubscribed" if over else "a core per worker"
    if es:
        print(f"\n  {label}: step time |error| median {100 * statistics.median(es):.0f}%, worst {100 * max(es):.0f}%"
              + (f"; peak memory median {100 * statistics.median(ms):.0f}%, worst {100 * max(ms):.0f}%" if ms else ""))
print("\nThe planner's choice beside the fastest plan measured, per (model, workers, link):\n")
cells = {}
for r in rows:
    cells.setdefault((r["model"], r["workers"], r["link"]), []).append(r)
for (model, W, link), rs in cells.items():
    if len(rs) < 2:
        continue
    fastest = min(rs, key=lambda r: r["measured"])
    chosen = next((r for r in rs if r["plan"] == rs[0]["chosen"]), None)
    gap = f"{100 * (chosen['measured'] / fastest['measured'] - 1):+.0f}%" if chosen else "not measured"
    print(f"  {model:9} {W} workers, {link:9}: planner chose {rs[0]['chosen']:5} fastest measured {fastest['plan']:5} "
          f"(the choice's measured step is {gap} of the fastest)")
PY
