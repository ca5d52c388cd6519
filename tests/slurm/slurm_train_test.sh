#!/usr/bin/env bash
# `hydrozoa train --launcher slurm` against a real Slurm (scripts/slurm-local),
# as a user runs it (issue 10 §2, §4): the main job's 2x2 plan trains to the
# same losses as with the local launcher; a step cancelled mid-run is
# recovered; Ctrl-C leaves nothing in squeue; after a kill -9 of the
# coordinator, `hydrozoa cleanup` cancels what it left; a partition that does
# not exist, a worker bigger than any node, an allocation too small for the
# workers and a Slurm that does not answer are each one clear error with
# nothing left queued; the scheduler service runs a submitted job on a pool
# whose worker type is Slurm's. Skips (77) only without root.
#
#   tests/slurm/slurm_train_test.sh build/hydrozoa
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
hz="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: a local Slurm needs root (slurmd starts steps as their users)"
  exit 77
fi
work=$(mktemp -d /tmp/hz-slurm-train.XXXXXX)
export HYDROZOA_SLURM_DIR="$work/slurm" HYDROZOA_SLURM_PORT=16817 HYDROZOA_STATE_DIR="$work/state"
mkdir -p "$HYDROZOA_SLURM_DIR" "$HYDROZOA_STATE_DIR"
coordinator=""
finish() {
  [ -n "$coordinator" ] && kill -9 "$coordinator" 2> /dev/null || true
  squeue -h -o %i 2> /dev/null | xargs -r scancel 2> /dev/null || true
  "$root/scripts/slurm-local" stop > /dev/null
  rm -rf "$work"
}
trap finish EXIT
"$root/scripts/slurm-local" start
eval "$("$root/scripts/slurm-local" env)"
cd "$root"

fail() { echo "FAILED: $*"; exit 1; }
nothing_queued() { [ -z "$(squeue -h)" ] || fail "$1: left in squeue: $(squeue -s)"; }
field() { grep -o "\"$2\": *[^,}]*" "$1" | head -1 | sed 's/.*: *//'; }
wait_training() {  # until the run in $1 has a step in its metrics
  for _ in $(seq 1 240); do
    [ -s "$1/metrics.jsonl" ] && return 0
    kill -0 "$coordinator" 2> /dev/null || fail "the coordinator ended before training: $(tail -5 "$1.log")"
    sleep 0.5
  done
  fail "no step within 120 s: $(tail -5 "$1.log")"
}
job=(examples/fashion_mnist_cnn.yaml --seed 1 --no-progress)

echo "== the main job's 2x2 plan: local, then Slurm, same losses"
"$hz" train "${job[@]}" --launcher local --max-steps 30 --out "$work/local" > "$work/local.log" 2>&1 ||
  fail "local run: $(tail -5 "$work/local.log")"
"$hz" train "${job[@]}" --launcher slurm --plan "$work/local/plan.json" --max-steps 30 --out "$work/slurm" \
  > "$work/slurm.log" 2>&1 || fail "Slurm run: $(tail -5 "$work/slurm.log")"
grep -q "Slurm granted allocation" "$work/slurm.log" || fail "no allocation in the log: $(head "$work/slurm.log")"
diff <(grep -o '"loss":[^,]*' "$work/local/metrics.jsonl") <(grep -o '"loss":[^,]*' "$work/slurm/metrics.jsonl") ||
  fail "the Slurm run's losses differ from the local run's"
[ "$(grep -c '"loss"' "$work/slurm/metrics.jsonl")" -eq 30 ] || fail "the Slurm run did not log 30 steps"
grep -q '"source": "Slurm'"'"'s accounting (sacct)"' "$work/slurm/summary.json" ||
  fail "not billed from Slurm's accounting: $(grep -o '"source": "[^"]*"' "$work/slurm/summary.json")"
nothing_queued "a finished run"

echo "== a step cancelled mid-run is recovered"
set -m  # background jobs get SIGINT as a terminal's would
"$hz" train "${job[@]}" --launcher slurm --max-steps 150 --out "$work/lost" > "$work/lost.log" 2>&1 &
coordinator=$!
wait_training "$work/lost"
step=$(squeue -h -s -o "%i %j" | awk '/\.w1$/ {print $1}')
[ -n "$step" ] || fail "no step named ...w1: $(squeue -s)"
scancel "$step"
wait "$coordinator" || fail "the run did not survive the cancelled step: $(tail -5 "$work/lost.log")"
coordinator=""
grep -q "Lost worker 1" "$work/lost.log" || fail "the loss was not reported: $(tail "$work/lost.log")"
grep -q '"event": "recovered"' "$work/lost/summary.json" || fail "no recovery in summary.json"
[ "$(field "$work/lost/summary.json" done)" = 150 ] || fail "did not reach step 150"
nothing_queued "a recovered run"

echo "== scaling from 1 to 2 replicas: more workers than the allocation holds"
cat > "$work/scale.yaml" << EOF
name: "scale up|1"          # a name Slurm's listings would split: sanitized for its job names
model: {name: mlp, options: {hidden: 32, depth: 2}}
data: {dataset: synthetic, synthetic_train: 960, synthetic_test: 48}
training: {epochs: 3, global_batch: 24, seed: 5, optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
cluster: {workers: 4, bandwidth: 1Gbit/s, launcher: slurm}
plan: {stages: 2, microbatches: 3}
scaling: {policy: adabatch, min_replicas: 1, max_replicas: 2, every_epochs: 1}
EOF
"$hz" train "$work/scale.yaml" --no-progress --out "$work/scaled" > "$work/scaled.log" 2>&1 ||
  fail "scaling under Slurm: $(tail -5 "$work/scaled.log")"
grep -q "allocation of 2 workers" "$work/scaled.log" || fail "the allocation was not for the first generation"
[ "$(grep -c "runs as a Slurm job of its own" "$work/scaled.log")" -eq 2 ] || fail "no own jobs for the extra workers"
grep -q "Finished 160 steps" "$work/scaled.log" || fail "the scaled run did not finish: $(tail -3 "$work/scaled.log")"
grep -q "billed 6 worker runs on the times Slurm's accounting" "$work/scaled.log" ||
  fail "the scaled run's six worker runs were not all billed from sacct: $(grep -i billed "$work/scaled.log")"
nothing_queued "a scaled run"

echo "== Ctrl-C leaves no step in squeue"
"$hz" train "${job[@]}" --launcher slurm --max-steps 100000 --out "$work/int" > "$work/int.log" 2>&1 &
coordinator=$!
wait_training "$work/int"
kill -INT "$coordinator"
rc=0
wait "$coordinator" || rc=$?
coordinator=""
[ "$rc" -eq 130 ] || fail "Ctrl-C: exit status $rc, expected 130: $(tail -5 "$work/int.log")"
nothing_queued "Ctrl-C"

echo "== kill -9 of the coordinator, then hydrozoa cleanup"
"$hz" train "${job[@]}" --launcher slurm --max-steps 100000 --out "$work/k9" > "$work/k9.log" 2>&1 &
coordinator=$!
wait_training "$work/k9"
kill -9 "$coordinator"
wait "$coordinator" 2> /dev/null || true
coordinator=""
[ -n "$(squeue -h)" ] || fail "kill -9: the allocation was already gone, nothing for cleanup to test"
"$hz" cleanup | tee "$work/cleanup.log"
grep -q "cancelled job" "$work/cleanup.log" || fail "cleanup cancelled nothing"
for _ in $(seq 1 50); do [ -z "$(squeue -h)" ] && break; sleep 0.2; done
nothing_queued "hydrozoa cleanup"
"$hz" cleanup | grep -q "Nothing to clean up" || fail "a second cleanup found more"

echo "== the scheduler service with a Slurm worker type: a submitted job trains on it (issue 13 §2)"
mkdir -p "$work/svc"
cat > "$work/svc/cluster.yaml" << EOF
name: slurm-pool
policy: max_min_fairness
round: 5s
worker_types:
  - {name: node, count: 4, launcher: slurm, price: 0.1}
EOF
cat > "$work/svc/job.yaml" << EOF
name: on-slurm
model: {name: mlp, options: {hidden: 32, depth: 2}}
data: {dataset: synthetic, synthetic_train: 960, synthetic_test: 48}
training: {epochs: 1, global_batch: 24, seed: 5, optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
cluster: {workers: 4}
plan: {data_parallel: 2, stages: 2, microbatches: 2}
EOF
"$hz" cluster serve --config "$work/svc/cluster.yaml" --state "$work/svc/state" > "$work/svc/serve.log" 2>&1 &
coordinator=$!  # the service: ended by finish() if a check fails
for _ in $(seq 1 100); do [ -f "$work/svc/state/service.json" ] && break; sleep 0.1; done
"$hz" submit --cluster "$work/svc/state" "$work/svc/job.yaml" || fail "submit: $(tail -3 "$work/svc/serve.log")"
for _ in $(seq 1 240); do
  grep -q '"status": "completed"' "$work/svc/state/state.json" 2> /dev/null && break
  grep -q '"status": "failed"' "$work/svc/state/state.json" 2> /dev/null &&
    fail "the job failed: $(tail -5 "$work/svc/state/jobs/1/log")"
  sleep 0.5
done
grep -q '"status": "completed"' "$work/svc/state/state.json" ||
  fail "the job did not complete within 120 s: $(tail -5 "$work/svc/state/jobs/1/log")"
grep -q "Slurm granted allocation" "$work/svc/state/jobs/1/log" ||
  fail "the job did not run under Slurm: $(head -5 "$work/svc/state/jobs/1/log")"
[ "$(grep -c '"loss"' "$work/svc/state/jobs/1/run/metrics.jsonl")" -eq 40 ] || fail "the job did not log 40 steps"
"$hz" jobs --cluster "$work/svc/state" | grep -q "completed" || fail "hydrozoa jobs does not show it completed"
kill -TERM "$coordinator"
wait "$coordinator" || fail "the service did not stop cleanly: $(tail -3 "$work/svc/serve.log")"
coordinator=""
nothing_queued "a job of the scheduler service"

echo "== bad input: one clear error each, nothing queued"
expect_error() {  # expect_error WHAT PATTERN ARGS...: exits non-zero, says PATTERN on one line
  local what=$1 pattern=$2 out rc=0
  shift 2
  rm -rf "$work/bad"
  out=$("$@" --out "$work/bad" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "$what: exited 0"
  [ "$rc" -lt 128 ] || fail "$what: killed by a signal ($rc)"
  grep -q "^hydrozoa: error: .*$pattern" <<< "$out" || fail "$what: unclear message: $out"
  nothing_queued "$what"
  echo "ok: $what: $(grep '^hydrozoa: error' <<< "$out")"
}
expect_error "a partition that does not exist" "invalid partition.*sinfo -s" \
  "$hz" train "${job[@]}" --launcher slurm --partition nope --max-steps 5
expect_error "a worker bigger than any node" "more than the largest node.*--memory-limit" \
  "$hz" train "${job[@]}" --launcher slurm --memory-limit 100GB --max-steps 5
expect_error "an option salloc refuses" "Invalid feature specification" \
  "$hz" train "${job[@]}" --launcher slurm --slurm-args "--constraint=nosuch" --max-steps 5
expect_error "Slurm flags without the Slurm launcher" "add --launcher slurm" \
  "$hz" train "${job[@]}" --launcher local --partition p --max-steps 5
# Inside an allocation (as from an sbatch script) that cannot hold the workers.
salloc --no-shell -J small -n 4 -c 1 --mem-per-cpu=200M
small=$(squeue -h -n small -o %i)
rc=0
out=$(SLURM_JOB_ID=$small "$hz" train "${job[@]}" --launcher slurm --max-steps 5 --out "$work/small" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "an allocation too small: exit status $rc"
grep -q "^hydrozoa: error: .*holds 4 CPUs.*bigger allocation" <<< "$out" || fail "an allocation too small: $out"
[ -z "$(squeue -h -s -j "$small")" ] || fail "an allocation too small: steps left: $(squeue -s)"
echo "ok: an allocation too small: $(grep '^hydrozoa: error' <<< "$out")"
scancel "$small"
for _ in $(seq 1 50); do [ -z "$(squeue -h)" ] && break; sleep 0.2; done
# A controller that does not answer: this cluster's configuration, another port.
sed "s/^SlurmctldPort=.*/SlurmctldPort=16899/" "$SLURM_CONF" > "$work/away.conf"
rc=0
out=$(SLURM_CONF="$work/away.conf" "$hz" train "${job[@]}" --launcher slurm --max-steps 5 --out "$work/away" 2>&1) ||
  rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "a Slurm that does not answer: exit status $rc"
grep -q "^hydrozoa: error: .*controller does not answer.*scripts/slurm-local start" <<< "$out" ||
  fail "a Slurm that does not answer: $out"
echo "ok: a Slurm that does not answer: $(grep '^hydrozoa: error' <<< "$out")"
# Slurm's commands not installed (none on the PATH).
mkdir -p "$work/empty"
rc=0
out=$(PATH="$work/empty" "$hz" train "${job[@]}" --launcher slurm --max-steps 5 --out "$work/none" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "no Slurm installed: exit status $rc"
grep -q "^hydrozoa: error: .*not installed.*scripts/slurm-local start" <<< "$out" || fail "no Slurm installed: $out"
echo "ok: no Slurm installed: $(grep '^hydrozoa: error' <<< "$out")"
echo "PASSED"
