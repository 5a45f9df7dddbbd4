# Sourced by scripts/fuzz.sh, fuzz-long.sh and test.sh: what a fuzz target
# starts from and how libFuzzer runs it, kept in one place so the short CI run,
# the long run and the replay in the tests use the same corpus and flags.
# A TARGET is `stream` (the byte stream) or a message family
# (Tests/FuzzCorpus/families/<family>). Run from the repository's root.

# The round-trip families (Sources/HeadUnitFuzz/CodecFuzz.swift): each template
# kind and the Envelope decoded and encoded by our codec and by swift-protobuf's
# generated code (HeadUnitProtobufOracle), which must agree.
codec_families=(codec-list codec-grid codec-tab-bar codec-now-playing codec-alert
  codec-action-sheet codec-information codec-point-of-interest codec-contact
  codec-map codec-search codec-voice-control codec-envelope)

# fuzz_corpus TARGET DIR: a fresh starting corpus for TARGET in DIR. The
# stream's is written from Protocol/vectors (scripts/fuzz-seeds.sh) plus the
# kept regressions; a family's is its committed seeds.
fuzz_corpus() {
  local target="$1" dir="$2"
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$target" = stream ]; then
    scripts/fuzz-seeds.sh "$dir"
    find Tests/FuzzCorpus/regressions -type f ! -name '.*' ! -name '*.md' -exec cp {} "$dir/" \;
  else
    cp Tests/FuzzCorpus/families/"$target"/* "$dir/"
  fi
}

# fuzz_flags TARGET: TARGET's own libFuzzer flags, one per line
# (read them with `mapfile -t flags < <(fuzz_flags TARGET)`).
fuzz_flags() {
  if [ "$1" = stream ]; then
    printf '%s\n' -dict=Tests/FuzzCorpus/headunit.dict -max_len=8192
  else
    printf '%s\n' -max_len=4096
  fi
}
