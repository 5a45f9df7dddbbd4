#!/usr/bin/env bash
# The test command: installs what is missing, runs every test, then replays
# the fuzz seeds and regressions through the fuzz entry point (a plain build,
# no libFuzzer; scripts/fuzz.sh does the fuzzing).
# Arguments go to `swift test`, e.g. `scripts/test.sh --filter HeadUnitWireTests`.
# HEADUNIT_SCRATCH=.build-x uses that build folder instead of .build.
# HEADUNIT_BUILD_FLAGS="-debug-info-format none" (as CI sets it) builds without
# DWARF: 15% less CPU for the build; a crash's backtrace then names functions
# but not lines. Every build in that folder must get the same flags, or the
# next one rebuilds it (scripts/carplaykit-docs.sh reads it too).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=()
if [ -n "${HEADUNIT_SCRATCH:-}" ]; then scratch=(--scratch-path "$HEADUNIT_SCRATCH"); fi
read -r -a build_flags <<<"${HEADUNIT_BUILD_FLAGS:-}"
scratch+=("${build_flags[@]}")

echo "==> test: dependencies"
scripts/setup.sh

echo "==> test: swift test $*"
# Swift Testing runs the tests of one process in parallel already.
swift test "${scratch[@]}" "$@"

echo "==> test: fuzz corpus replay"
swift build "${scratch[@]}" --product HeadUnitFuzz
seeds="$(mktemp -d)"
trap 'rm -rf "$seeds"' EXIT
. scripts/fuzz-common.sh
fuzz_corpus stream "$seeds" >/dev/null
find "$seeds" -type f -print0 \
  | xargs -0 "$(swift build "${scratch[@]}" --show-bin-path)/HeadUnitFuzz"
for family in Tests/FuzzCorpus/families/*/; do
  HEADUNIT_FUZZ_FAMILY="$(basename "$family")" "$(swift build "${scratch[@]}" --show-bin-path)/HeadUnitFuzz" "$family"*
done
