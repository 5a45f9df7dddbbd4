# Sourced by the callgrind-*.sh scripts: what every run of the daemon under
# valgrind --tool=callgrind needs. Sets `bin` (release binaries: BIN_DIR, or
# built now in SCRATCH_PATH, .build by default), `out` (a temporary directory,
# removed on exit; KEEP_CALLGRIND=DIR keeps the profiles) and `daemon_args`
# (HeadUnitBench's --spawn /usr/bin/env arguments that run the daemon under
# callgrind: append --daemon-arg=--callgrind-out-file=FILE and the daemon's own).
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

daemon_args=(--spawn /usr/bin/env --startup-timeout 120
  --daemon-arg=LD_PRELOAD="$out/sigsuspend.so" --daemon-arg="$(command -v valgrind)" --daemon-arg=--tool=callgrind)
# The daemon itself, after --daemon-arg=--callgrind-out-file=FILE.
daemon_command=(--daemon-arg="$out/headunitd" --daemon-arg=--unix-socket --daemon-arg='{socket}'
  --daemon-arg=--no-tcp --daemon-arg=--config --daemon-arg='{config}')
