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
#   FLOOR=1 ...        also counts the floor (the bare SwiftNIO echo server) the same way, and prints the ratio
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

floor_instructions() {  # floor_instructions N -> total Ir of the echo floor for N measured requests
  local n="$1" file="$out/floor.$1"
  # The benchmark starts the floor as itself (--echo-server): a copy without
  # debug sections, as for the daemon, so valgrind can read it.
  "$out/HeadUnitBench" --floor-only --no-lean --startup-timeout 120 \
    --floor-arg=/usr/bin/env --floor-arg=LD_PRELOAD="$out/sigsuspend.so" --floor-arg="$(command -v valgrind)" \
    --floor-arg=--tool=callgrind --floor-arg=--callgrind-out-file="$file" \
    --transport unix --items "$items" --requests "$n" --warmup 200 --seconds 0 >/dev/null
  sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file"
}

base=$(instructions 0)
run=$(instructions "$requests")
pairs=$((requests / 2))
per_pair=$(( (run - base) / pairs ))
echo "headunitd instructions: ${base} (setup, 200 warm-up requests, 0 measured), ${run} (${requests} more)"
echo "per push/pop pair: ${per_pair} instructions (${items}-item list; ${hmis} HMI(s))"
if [ "${FLOOR:-0}" = 1 ]; then
  objcopy --strip-debug "$bin/HeadUnitBench" "$out/HeadUnitBench"
  floor_base=$(floor_instructions 0)
  floor_run=$(floor_instructions "$requests")
  floor_per_pair=$(( (floor_run - floor_base) / pairs ))
  echo "floor (bare SwiftNIO echo) instructions: ${floor_base} (setup, 200 warm-up requests, 0 measured), ${floor_run} (${requests} more)"
  echo "floor per push/pop pair: ${floor_per_pair} instructions; headunitd / floor: $(awk -v d="$per_pair" -v f="$floor_per_pair" 'BEGIN { printf "%.1fx", d / f }')"
fi
