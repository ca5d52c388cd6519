#!/usr/bin/env bash
# Nothing shared but the network (issue 10 §1): the workers of the main job's
# 2x2 plan run as containers (own network namespaces, the bridge between
# them) and in their own mount namespaces, where an empty tmpfs covers the
# coordinator's run directory. They train, ship their checkpoints to the
# coordinator, survive a killed worker (the survivors ship their state, the
# new generation fetches it), and resume from the shipped checkpoint; the
# losses equal, step by step, a local run of the same plan and seed that
# never stopped. Skips (77) only without root.
#
#   tests/cluster/no_shared_fs_test.sh build/hydrozoa
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
hz="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: containers and mount namespaces need root"
  exit 77
fi
work=$(mktemp -d /tmp/hz-noshare.XXXXXX)
export HYDROZOA_STATE_DIR="$work/state"
coordinator=""
finish() {
  [ -n "$coordinator" ] && kill -9 "$coordinator" 2> /dev/null || true
  "$hz" cleanup > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap finish EXIT
cd "$root"
py="$root/.venv/bin/python"  # the venv's (scripts/setup)
fail() { echo "FAILED: $*"; exit 1; }

# The worker, as the launcher runs it: first its own mount namespace with the
# run directory covered (and checked to be gone), then hydrozoa.
run="$work/run"
cat > "$work/hidden-worker" << EOF
#!/bin/sh
exec unshare --mount --propagation private sh -c '
  mount -t tmpfs -o size=1m,mode=0700 hidden "$run" || exit 90
  [ ! -e "$run/job.yaml" ] || { echo "the run directory is still visible" >&2; exit 91; }
  exec "$hz" "\$@"' hidden-worker "\$@"
EOF
chmod +x "$work/hidden-worker"
job=(examples/fashion_mnist_cnn.yaml --seed 1 --no-progress)

echo "== reference: local processes, 200 steps without a stop"
"$hz" train "${job[@]}" --launcher local --max-steps 200 --out "$work/ref" > "$work/ref.log" 2>&1 ||
  fail "reference run: $(tail -5 "$work/ref.log")"

echo "== hidden run directory: 100 steps, checkpointed by shipping"
"$hz" train "${job[@]}" --launcher container --worker-binary "$work/hidden-worker" --plan "$work/ref/plan.json" \
  --max-steps 100 --out "$run" > "$work/a.log" 2>&1 || fail "first part: $(tail -5 "$work/a.log")"
for f in layer-0000.pt layer-0001.pt layer-0002.pt layer-0003.pt manifest.json; do
  [ -s "$run/checkpoints/step-00000100/$f" ] || fail "the shipped checkpoint lacks $f: $(ls -R "$run/checkpoints")"
done
grep -q "the run directory is still visible" "$run"/workers/*.log && fail "a worker saw the run directory"
[ -z "$(ls "$run"/workers/*.trace.jsonl 2> /dev/null)" ] || fail "a worker wrote into the hidden run directory"

echo "== resumed to step 200, worker 1 killed on the way"
set -m
"$hz" train --resume "$run" --worker-binary "$work/hidden-worker" --max-steps 200 --no-progress \
  > "$work/b.log" 2>&1 &
coordinator=$!
for _ in $(seq 1 600); do
  [ "$(grep -c '"loss"' "$run/metrics.jsonl" 2> /dev/null)" -ge 130 ] && break
  kill -0 "$coordinator" 2> /dev/null || fail "the resumed run ended early: $(tail -5 "$work/b.log")"
  sleep 0.1
done
victim=$(pgrep -f "worker --join .* --id 1\$" | head -1)
[ -n "$victim" ] || fail "no worker 1 to kill"
kill -9 "$victim"
wait "$coordinator" || fail "the resumed run failed: $(tail -5 "$work/b.log")"
coordinator=""
grep -q "Resuming .* from its checkpoint at step 100" "$work/b.log" || fail "did not resume at 100: $(head "$work/b.log")"
grep -q "fetched layers" "$run/workers/worker-0.log" || fail "worker 0 did not fetch the checkpoint"
grep -q "Lost worker 1" "$work/b.log" || fail "the killed worker was not reported: $(tail "$work/b.log")"
grep -q '"event": "recovered"' "$run/summary.json" || fail "no recovery in summary.json"

echo "== the same losses as the reference"
# Every step once, each loss as the reference's, except the few steps just
# before the restore point whose reports died with the killed worker: those
# are estimated and marked partial (docs/recovery.md).
"$py" - "$work/ref/metrics.jsonl" "$run/metrics.jsonl" << 'EOF' || fail "the losses differ from the reference run's"
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        m = json.loads(line)
        if "loss" in m and "step" in m:
            out[m["step"]] = (m["loss"], m.get("partial", False))
    return out
ref, run = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(run) == list(range(1, 201)), f"steps logged: {len(run)}"
partial = [s for s, (_, p) in run.items() if p]
assert len(partial) <= 3, f"partial steps: {partial}"
differ = [s for s in ref if not run[s][1] and run[s][0] != ref[s][0]]
assert not differ, f"steps whose loss differs: {differ[:10]}"
print(f"200 losses equal the reference's ({len(partial)} partial, estimated: {partial})")
EOF
echo "PASSED"
