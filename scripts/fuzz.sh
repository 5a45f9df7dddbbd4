#!/usr/bin/env bash
# Fuzzes the frame parser and envelope codec with libFuzzer for a fixed time,
# then each message family (structure-aware, Sources/HeadUnitFuzz/FamilyFuzz.swift)
# and each round-trip family against swift-protobuf (CodecFuzz.swift).
#   scripts/fuzz.sh [SECONDS [FAMILY_SECONDS]]   (default 60, and 15 per family)
#   scripts/fuzz.sh --build                      (only the build: .ci/run builds it beforehand)
# Builds HeadUnitFuzz with --sanitize=fuzzer in .build-fuzz, seeds a fresh copy
# of the corpus (Protocol/vectors via scripts/fuzz-seeds.sh, plus
# Tests/FuzzCorpus/regressions), and runs. On a crash it fails and leaves the
# input as ./crash-<sha1> (or leak-/timeout-/oom-); replay it with
#   swift build --product HeadUnitFuzz && .build/debug/HeadUnitFuzz crash-<sha1>
# and, once fixed, copy it into Tests/FuzzCorpus/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = --build ]; then build_only=1; shift; fi
seconds="${1:-60}"
family_seconds="${2:-15}"
families=(handshake phone templates hmi navigation accessory bounds assistant)
scratch=.build-fuzz
. scripts/fuzz-common.sh
families+=("${codec_families[@]}")

echo "==> fuzz: build (swift build --product HeadUnitFuzz --sanitize=fuzzer)"
swift build --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch"
binary="$(swift build --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch" --show-bin-path)/HeadUnitFuzz"
[ "$build_only" -eq 0 ] || exit 0

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

run_families() {  # run_families FAMILY...: one after the other, up to the first failure
  local family dir
  for family in "$@"; do
    dir="$scratch/corpus-$family"
    fuzz_corpus "$family" "$dir"
    mapfile -t flags < <(fuzz_flags "$family")
    HEADUNIT_FUZZ_FAMILY="$family" run "$family" "$family_seconds" "$dir" "${flags[@]}" || return
  done
}

# libFuzzer runs on one core: two lanes, one per core, of about the same
# length: the stream and the first `split` families in the background (its
# output kept apart and printed after), the other families here.
split=$(( (${#families[@]} * family_seconds - seconds) / (2 * family_seconds) ))
[ "$split" -ge 0 ] || split=0
status=0
mapfile -t flags < <(fuzz_flags stream)
{ run stream "$seconds" "$corpus" "${flags[@]}" && run_families "${families[@]:0:split}"; } >"$scratch/lane.log" 2>&1 &
lane_pid=$!
run_families "${families[@]:split}" || status=$?
lane_status=0
wait "$lane_pid" || lane_status=$?
cat "$scratch/lane.log"
[ "$status" -ne 0 ] || status=$lane_status

if [ "$status" -ne 0 ]; then
  echo "==> fuzz: FAILED (exit $status); reproducer(s) (replay a family's with HEADUNIT_FUZZ_FAMILY=<family>):" >&2
  ls -1 crash-* leak-* timeout-* oom-* 2>/dev/null >&2 || true
  exit 1
fi
echo "==> fuzz: no crash (stream ${seconds}s, ${#families[@]} families ${family_seconds}s each)"
