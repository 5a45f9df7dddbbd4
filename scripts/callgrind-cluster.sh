#!/usr/bin/env bash
# The daemon's cost per metadata update fanned out to SUBSCRIBERS cluster
# subscribers (one stalled; the others lean, in a process of their own), as a
# noise-free count: instructions (valgrind --tool=callgrind) executed by
# headunitd for a SHORT and a LONG run of the paced app (100 updates/s, one at
# a time), the difference divided by the updates the longer run adds.
# Issue 30, item 3.
#   scripts/callgrind-cluster.sh [SUBSCRIBERS] [SHORT_S] [LONG_S]   (defaults 100, 3, 12; release build)
#   SCRATCH_PATH=.build-release scripts/callgrind-cluster.sh
#   BIN_DIR=/some/dir scripts/callgrind-cluster.sh          (binaries built before)
#   KEEP_CALLGRIND=/some/dir ...                            (keeps both profiles, for callgrind_annotate)
set -euo pipefail
cd "$(dirname "$0")/.."
subscribers="${1:-100}"
short="${2:-3}"
long="${3:-12}"
. scripts/callgrind-common.sh

run() {  # run SECONDS -> "instructions updates" of the daemon
  local seconds="$1" file="$out/callgrind.$1"
  "$bin/HeadUnitBench" "${daemon_args[@]}" --daemon-arg=--callgrind-out-file="$file" "${daemon_command[@]}" \
    --cluster-subscribers "$subscribers" --cluster-seconds "$seconds" --cluster-hz 100 --cluster-subscribers-apart > "$out/bench.$seconds"
  local updates
  updates=$(sed -n 's/.*(of \([0-9]*\) updates).*/\1/p' "$out/bench.$seconds")
  echo "$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file") ${updates:-0}"
}

read -r base_ir base_updates < <(run "$short")
read -r ir updates < <(run "$long")
echo "headunitd instructions: ${base_ir} (${short} s: ${base_updates} updates), ${ir} (${long} s: ${updates} updates)"
added=$((updates - base_updates))
[ "$added" -gt 0 ] || { echo "no updates added: see the benchmark's output" >&2; exit 1; }
echo "per metadata update to ${subscribers} subscribers (1 stalled): $(( (ir - base_ir) / added )) instructions"
