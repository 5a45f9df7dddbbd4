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
command -v valgrind >/dev/null || apt-get install -y valgrind >/dev/null
command -v cc >/dev/null || apt-get install -y gcc >/dev/null
scratch=(--scratch-path "${SCRATCH_PATH:-.build}")
if [ -n "${BIN_DIR:-}" ]; then
  bin="$BIN_DIR"
else
  swift build -c release "${scratch[@]}" --product headunitd >/dev/null
  swift build -c release "${scratch[@]}" --product HeadUnitBench >/dev/null
  bin="$(swift build -c release "${scratch[@]}" --show-bin-path)"
fi
out="$(mktemp -d)"
trap '[ -n "${KEEP_CALLGRIND:-}" ] && cp "$out"/callgrind.* "$KEEP_CALLGRIND"/ ; rm -rf "$out"' EXIT

# As in callgrind-pushpop.sh: a copy without DWARF 5 (valgrind 3.19 cannot
# read it) and a sigsuspend that does not hand valgrind a read-only mask.
objcopy --strip-debug "$bin/headunitd" "$out/headunitd"
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

run() {  # run MIB -> "instructions frames grants" of the daemon for MIB each way
  local mib="$1" file="$out/callgrind.$1"
  "$bin/HeadUnitBench" --spawn /usr/bin/env --transport unix --no-floor --no-lean --startup-timeout 120 \
    --requests 100 --warmup 10 --seconds 0 --accessory-lean-mib "$mib" \
    --daemon-arg=LD_PRELOAD="$out/sigsuspend.so" --daemon-arg="$(command -v valgrind)" --daemon-arg=--tool=callgrind --daemon-arg=--callgrind-out-file="$file" \
    --daemon-arg="$out/headunitd" --daemon-arg=--unix-socket --daemon-arg='{socket}' \
    --daemon-arg=--no-tcp --daemon-arg=--config --daemon-arg='{config}' > "$out/bench.$mib"
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
