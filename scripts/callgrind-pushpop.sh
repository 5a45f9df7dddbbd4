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
command -v valgrind >/dev/null || apt-get install -y valgrind >/dev/null
command -v cc >/dev/null || apt-get install -y gcc >/dev/null
scratch=(--scratch-path "${SCRATCH_PATH:-.build}")
if [ -n "${BIN_DIR:-}" ]; then
  bin="$BIN_DIR"  # binaries built before (headunitd and HeadUnitBench): compare two builds
else
  swift build -c release "${scratch[@]}" --product headunitd >/dev/null
  swift build -c release "${scratch[@]}" --product HeadUnitBench >/dev/null
  bin="$(swift build -c release "${scratch[@]}" --show-bin-path)"
fi
out="$(mktemp -d)"
trap '[ -n "${KEEP_CALLGRIND:-}" ] && cp "$out"/callgrind.* "$KEEP_CALLGRIND"/ ; rm -rf "$out"' EXIT

# Valgrind 3.19 (Debian 12) cannot read the DWARF 5 that Swift 6.3 emits, so it
# runs a copy without debug sections (symbols stay: the profile keeps names).
objcopy --strip-debug "$bin/headunitd" "$out/headunitd"
# It also crashes when a program calls sigsuspend with a mask in read-only
# memory (it writes into the mask), which libdispatch does in the thread left
# behind by an async main. This preload passes a copy on the stack instead.
cat > "$out/sigsuspend.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)8);
}
C
cc -shared -fPIC -O2 "$out/sigsuspend.c" -o "$out/sigsuspend.so"

instructions() {  # instructions N -> total Ir of the daemon for N measured requests
  local n="$1" file="$out/callgrind.$1"
  "$bin/HeadUnitBench" --spawn /usr/bin/env --transport unix --no-floor --no-lean --startup-timeout 120 --items "$items" --hmis "$hmis" --requests "$n" --warmup 200 --seconds 0 \
    --daemon-arg=LD_PRELOAD="$out/sigsuspend.so" --daemon-arg="$(command -v valgrind)" --daemon-arg=--tool=callgrind --daemon-arg=--callgrind-out-file="$file" \
    --daemon-arg="$out/headunitd" --daemon-arg=--unix-socket --daemon-arg='{socket}' \
    --daemon-arg=--no-tcp --daemon-arg=--config --daemon-arg='{config}' >/dev/null
  sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file"
}

base=$(instructions 0)
run=$(instructions "$requests")
pairs=$((requests / 2))
echo "headunitd instructions: ${base} (setup, 200 warm-up requests, 0 measured), ${run} (${requests} more)"
echo "per push/pop pair: $(( (run - base) / pairs )) instructions (${items}-item list; ${hmis} HMI(s))"
