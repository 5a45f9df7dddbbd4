#!/usr/bin/env bash
# The long fuzz run (issue 10): every target of Sources/HeadUnitFuzz (the
# byte stream, the seven families, bounds included, and the thirteen round-trip
# families of CodecFuzz.swift) to RUNS executions each, one
# libFuzzer process per target, JOBS targets at a time, longest first.
#   scripts/fuzz-long.sh [RUNS [JOBS [OUT]]]   (default 10000000, 2, .build-fuzz-long/run)
# Builds an optimised fuzz build (-c release --sanitize=fuzzer in
# .build-fuzz-long; Swift's bounds and overflow checks stay on, `assert` is
# off, none is used in Core or Wire), starts each target from the committed
# corpus with the flags scripts/fuzz.sh uses (both from scripts/fuzz-common.sh),
# writes OUT/<target>.log and keeps OUT/corpus-<target>, and prints one line
# per target. A crash leaves OUT/crash-<sha1> (or leak-/timeout-/oom-) and
# fails the run; replay it as scripts/fuzz.sh says. Results: Tests/FuzzCorpus/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10000000}"
jobs="${2:-2}"
out="${3:-.build-fuzz-long/run}"
scratch=.build-fuzz-long
targets=(stream templates phone hmi navigation accessory handshake bounds)
. scripts/fuzz-common.sh
targets+=("${codec_families[@]}")

echo "==> fuzz-long: build (swift build -c release --product HeadUnitFuzz --sanitize=fuzzer)"
swift build -c release --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch"
mkdir -p "$out"
# A copy, so rebuilding during a run of hours cannot change the binary under it.
cp "$(swift build -c release --product HeadUnitFuzz --sanitize=fuzzer --scratch-path "$scratch" --show-bin-path)/HeadUnitFuzz" "$out/HeadUnitFuzz"
echo "commit $(git rev-parse HEAD), $runs runs per target, $jobs at a time, $(nproc) cores" >"$out/README"

for target in "${targets[@]}"; do
  fuzz_corpus "$target" "$out/corpus-$target"
done

one() {  # one TARGET: runs it to the end; its exit status is libFuzzer's
  local target="$1" family="$1" flags
  if [ "$target" = stream ]; then family=""; fi
  mapfile -t flags < <(fuzz_flags "$target")
  local started=$SECONDS status=0
  HEADUNIT_FUZZ_FAMILY="$family" SWIFT_BACKTRACE=enable=no "$out/HeadUnitFuzz" "$out/corpus-$target" \
    -runs="$runs" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/" \
    -print_final_stats=1 "${flags[@]}" </dev/null >"$out/$target.log" 2>&1 || status=$?
  local executed rate
  executed="$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$target.log")"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/$target.log")"
  echo "$target: exit $status, ${executed:-?} executions in $((SECONDS - started)) s (${rate:-?}/s), corpus $(find "$out/corpus-$target" -type f | wc -l) inputs"
  return "$status"
}
export -f one fuzz_flags
export out runs

status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'one {}' | tee -a "$out/README" || status=$?
if [ "$status" -ne 0 ]; then
  echo "==> fuzz-long: FAILED; reproducer(s):" >&2
  ls -1 "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null >&2 || true
  exit 1
fi
echo "==> fuzz-long: no crash ($runs executions per target)"
