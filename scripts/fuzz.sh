#!/usr/bin/env bash
# Fuzzes the frame parser and envelope codec with libFuzzer for a fixed time.
#   scripts/fuzz.sh [SECONDS]   (default 60)
# Builds HeadUnitFuzz with --sanitize=fuzzer in .build-fuzz, seeds a fresh copy
# of the corpus (Protocol/vectors via scripts/fuzz-seeds.sh, plus
# Tests/FuzzCorpus/regressions), and runs. On a crash it fails and leaves the
# input as ./crash-<sha1> (or leak-/timeout-/oom-); replay it with
#   swift build --product HeadUnitFuzz && .build/debug/HeadUnitFuzz crash-<sha1>
# and, once fixed, copy it into Tests/FuzzCorpus/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scratch=.build-fuzz

echo "==> fuzz: build (swift build --product HeadUnitFuzz --sanitize=fuzzer)"
swift build --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch"
binary="$(swift build --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch" --show-bin-path)/HeadUnitFuzz"

echo "==> fuzz: corpus"
corpus="$scratch/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"
scripts/fuzz-seeds.sh "$corpus"
find Tests/FuzzCorpus/regressions -type f ! -name '.*' ! -name '*.md' -exec cp {} "$corpus/" \;

echo "==> fuzz: run for ${seconds}s"
status=0
# SWIFT_BACKTRACE=enable=no: let libFuzzer, not the Swift runtime, handle a crash.
SWIFT_BACKTRACE=enable=no "$binary" "$corpus" \
  -max_total_time="$seconds" \
  -dict=Tests/FuzzCorpus/headunit.dict \
  -max_len=8192 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -artifact_prefix=./ \
  -print_final_stats=1 </dev/null || status=$?

if [ "$status" -ne 0 ]; then
  echo "==> fuzz: FAILED (exit $status); reproducer(s):" >&2
  ls -1 crash-* leak-* timeout-* oom-* 2>/dev/null >&2 || true
  exit 1
fi
echo "==> fuzz: no crash in ${seconds}s"
