#!/usr/bin/env bash
# The daemon's user-space cost per DATA frame relayed, as a noise-free count:
# instructions (valgrind --tool=callgrind) executed by headunitd for the lean
# accessory run with SMALL and with LARGE MiB each way, the difference divided
# by the 64 KiB DATA frames the larger run adds (grants and the echo's frames
# included; the kernel's socket copies are not counted). Issue 25, item 6.
#   scripts/callgrind-accessory.sh [SMALL_MIB] [LARGE_MIB]   (defaults 16 and 80; release build)
#   SCRATCH_PATH=.build-release scripts/callgrind-accessory.sh
#   BIN_DIR=/some/dir scripts/callgrind-accessory.sh          (binaries built before)
#   KEEP_CALLGRIND=/some/dir ...                              (keeps both profiles, for callgrind_annotate)
set -euo pipefail
cd "$(dirname "$0")/.."
small="${1:-16}"
large="${2:-80}"
. scripts/callgrind-common.sh

run() {  # run MIB -> "instructions frames grants" of the daemon for MIB each way
  local mib="$1" file="$out/callgrind.$1"
  "$bin/HeadUnitBench" "${daemon_args[@]}" --daemon-arg=--callgrind-out-file="$file" "${daemon_command[@]}" \
    --transport unix --no-floor --no-lean --requests 100 --warmup 10 --seconds 0 --accessory-lean-mib "$mib" --accessory-rounds 1 > "$out/bench.$mib"
  local frames grants
  frames=$(sed -n 's/.*frames \/ grants *\([0-9,]*\) \/ \([0-9,]*\).*/\1/p' "$out/bench.$mib" | tr -d ,)
  grants=$(sed -n 's/.*frames \/ grants *\([0-9,]*\) \/ \([0-9,]*\).*/\2/p' "$out/bench.$mib" | tr -d ,)
  echo "$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file") ${frames:-0} ${grants:-0}"
}

read -r base_ir base_frames base_grants < <(run "$small")
read -r ir frames grants < <(run "$large")
echo "headunitd instructions: ${base_ir} (${small} MiB each way: ${base_frames} DATA frames, ${base_grants} grants), ${ir} (${large} MiB: ${frames} frames, ${grants} grants)"
added=$((frames - base_frames))
[ "$added" -gt 0 ] || { echo "no frames added: see the benchmark's output" >&2; exit 1; }
echo "per 64 KiB DATA frame relayed: $(( (ir - base_ir) / added )) instructions ($(( grants - base_grants )) grants for ${added} frames)"
