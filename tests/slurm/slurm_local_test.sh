#!/usr/bin/env bash
# scripts/slurm-local as the Slurm launcher's tests will use it (issue 10 §2):
# a real slurmctld and slurmd on this machine run a job step with the
# resources asked for, a cancelled step leaves nothing in squeue, and stop
# leaves no daemon running. Skips (exit 77) only when it cannot run: not root.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: a local Slurm needs root (slurmd starts steps as their users)"
  exit 77
fi
export HYDROZOA_SLURM_DIR HYDROZOA_SLURM_PORT=16817
HYDROZOA_SLURM_DIR=$(mktemp -d /tmp/hz-slurm.XXXXXX)
trap '"$root/scripts/slurm-local" stop > /dev/null; rm -rf "$HYDROZOA_SLURM_DIR"' EXIT
"$root/scripts/slurm-local" start
eval "$("$root/scripts/slurm-local" env)"

fail() { echo "FAILED: $*"; exit 1; }

# A step with the resources a right-sized worker asks for.
out=$(timeout 60 srun -n1 --cpus-per-task=1 --mem=64 bash -c 'echo "cpus=$SLURM_CPUS_PER_TASK"')
[ "$out" = "cpus=1" ] || fail "srun printed '$out'"

# A job that runs until cancelled: in squeue while it runs, gone after scancel.
id=$(sbatch --parsable --wrap "sleep 300" --cpus-per-task=1 --mem=64)
for _ in $(seq 1 50); do
  [ "$(squeue -h -j "$id" -o %T)" = "RUNNING" ] && break
  sleep 0.2
done
[ "$(squeue -h -j "$id" -o %T)" = "RUNNING" ] || fail "job $id did not start: $(squeue -j "$id")"
scancel "$id"
for _ in $(seq 1 50); do
  [ -z "$(squeue -h -j "$id" 2> /dev/null)" ] && break
  sleep 0.2
done
[ -z "$(squeue -h -j "$id" 2> /dev/null)" ] || fail "job $id still queued after scancel"

# A request past the node is refused with a message, nothing left queued.
if err=$(timeout 30 srun -n1 --mem=100000000 true 2>&1); then fail "an impossible request ran"; fi
grep -qi "memory\|not available\|configuration" <<< "$err" || fail "unclear refusal: $err"
[ -z "$(squeue -h)" ] || fail "left queued: $(squeue)"

"$root/scripts/slurm-local" stop
for d in slurmctld slurmd munged; do
  [ ! -f "$HYDROZOA_SLURM_DIR/$d.pid" ] || fail "$d.pid left"
done
pgrep -f "$HYDROZOA_SLURM_DIR" > /dev/null && fail "a daemon of this test still runs"
echo "PASSED"
