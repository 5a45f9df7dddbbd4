#!/usr/bin/env bash
# Fuzzes the frame parser and envelope codec with libFuzzer for a fixed time,
# then each message family (structure-aware, Sources/HeadUnitFuzz/FamilyFuzz.swift).
#   scripts/fuzz.sh [SECONDS [FAMILY_SECONDS]]   (default 60, and 15 per family)
# Builds HeadUnitFuzz with --sanitize=fuzzer in .build-fuzz, seeds a fresh copy
# of the corpus (Protocol/vectors via scripts/fuzz-seeds.sh, plus
# Tests/FuzzCorpus/regressions), and runs. On a crash it fails and leaves the
# input as ./crash-<sha1> (or leak-/timeout-/oom-); replay it with
#   swift build --product HeadUnitFuzz && .build/debug/HeadUnitFuzz crash-<sha1>
# and, once fixed, copy it into Tests/FuzzCorpus/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
family_seconds="${2:-15}"
families=(handshake phone templates hmi navigation accessory bounds)
scratch=.build-fuzz
. scripts/fuzz-common.sh

echo "==> fuzz: build (swift build --product HeadUnitFuzz --sanitize=fuzzer)"
swift build --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch"
binary="$(swift build --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch" --show-bin-path)/HeadUnitFuzz"

echo "==> fuzz: corpus"
corpus="$scratch/corpus"
fuzz_corpus stream "$corpus"

run() {  # run NAME SECONDS CORPUS [libFuzzer flags...]
  local name="$1" time="$2" dir="$3"
  shift 3
  echo "==> fuzz: $name for ${time}s"
  # SWIFT_BACKTRACE=enable=no: let libFuzzer, not the Swift runtime, handle a crash.
  SWIFT_BACKTRACE=enable=no "$binary" "$dir" \
    -max_total_time="$time" \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -artifact_prefix=./ \
    -print_final_stats=1 "$@" </dev/null
}

# libFuzzer runs on one core: the stream fuzzer runs beside the families
# (one after the other) on the machine's second core, its output kept apart
# and printed after, so the whole run takes the longer of the two.
status=0
mapfile -t flags < <(fuzz_flags stream)
run stream "$seconds" "$corpus" "${flags[@]}" >"$scratch/stream.log" 2>&1 &
stream_pid=$!
for family in "${families[@]}"; do
  [ "$status" -eq 0 ] || break
  dir="$scratch/corpus-$family"
  fuzz_corpus "$family" "$dir"
  mapfile -t flags < <(fuzz_flags "$family")
  HEADUNIT_FUZZ_FAMILY="$family" run "$family" "$family_seconds" "$dir" "${flags[@]}" || status=$?
done
stream_status=0
wait "$stream_pid" || stream_status=$?
cat "$scratch/stream.log"
[ "$status" -ne 0 ] || status=$stream_status

if [ "$status" -ne 0 ]; then
  echo "==> fuzz: FAILED (exit $status); reproducer(s) (replay a family's with HEADUNIT_FUZZ_FAMILY=<family>):" >&2
  ls -1 crash-* leak-* timeout-* oom-* 2>/dev/null >&2 || true
  exit 1
fi
echo "==> fuzz: no crash (stream ${seconds}s, ${#families[@]} families ${family_seconds}s each)"
