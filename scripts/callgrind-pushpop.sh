#!/usr/bin/env bash
# The daemon's CPU cost per push/pop pair as a noise-free count: instructions
# (valgrind --tool=callgrind) executed by headunitd for N requests minus the
# same run with none, divided by the N/2 push/pop pairs. Judges a change on a
# noisy shared machine, where timings cannot.
#   scripts/callgrind-pushpop.sh [REQUESTS] [ITEMS] [HMIS]
#       (defaults 2000 requests, 12-item lists, 1 HMI; release build)
#   SCRATCH_PATH=.build-release scripts/callgrind-pushpop.sh   (a release build kept apart from the debug one)
#   BIN_DIR=/some/dir scripts/callgrind-pushpop.sh            (binaries built before, e.g. a copy of the last build)
#   KEEP_CALLGRIND=/some/dir ...                              (keeps both profiles, for callgrind_annotate)
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-2000}"
items="${2:-12}"
hmis="${3:-1}"
. scripts/callgrind-common.sh

instructions() {  # instructions N -> total Ir of the daemon for N measured requests
  local n="$1" file="$out/callgrind.$1"
  "$bin/HeadUnitBench" "${daemon_args[@]}" --daemon-arg=--callgrind-out-file="$file" "${daemon_command[@]}" \
    --transport unix --no-floor --no-lean --items "$items" --hmis "$hmis" --requests "$n" --warmup 200 --seconds 0 >/dev/null
  sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file"
}

base=$(instructions 0)
run=$(instructions "$requests")
pairs=$((requests / 2))
echo "headunitd instructions: ${base} (setup, 200 warm-up requests, 0 measured), ${run} (${requests} more)"
echo "per push/pop pair: $(( (run - base) / pairs )) instructions (${items}-item list; ${hmis} HMI(s))"
