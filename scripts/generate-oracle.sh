#!/usr/bin/env bash
# Regenerates Sources/HeadUnitProtobufOracle/*.pb.swift from Protocol/*.proto
# with swift-protobuf's own protoc-gen-swift 1.39: the independent oracle the
# codec tests (Tests/HeadUnitWireTests/CodecOracleTests.swift) and the
# round-trip fuzz families (Sources/HeadUnitFuzz/CodecFuzz.swift) hold our
# plugin's codec to. Used by tests and fuzzing only, in no vended product.
# The output is committed. Needs protoc (Debian protobuf-compiler) and
# protoc-gen-swift 1.39 (built once into .build-protoc-plugin, a few minutes).
#   PROTOC_GEN_SWIFT=/path/to/protoc-gen-swift scripts/generate-oracle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler" >&2; exit 1; }
plugin="${PROTOC_GEN_SWIFT:-}"
if [ -z "$plugin" ]; then
  plugin="$(command -v protoc-gen-swift || true)"
fi
if [ -z "$plugin" ]; then
  scratch=.build-protoc-plugin
  if [ ! -x "$scratch/src/.build/release/protoc-gen-swift" ]; then
    echo "building protoc-gen-swift 1.39.0 (a few minutes)..." >&2
    rm -rf "$scratch/src"
    mkdir -p "$scratch"
    git clone -q --branch 1.39.0 https://github.com/apple/swift-protobuf.git "$scratch/src"
    (cd "$scratch/src" && swift build -c release --product protoc-gen-swift)
  fi
  plugin="$scratch/src/.build/release/protoc-gen-swift"
fi
version="$("$plugin" --version 2>&1 || true)"
case "$version" in
  *1.39.*) ;;
  *) echo "protoc-gen-swift 1.39 wanted, found: $version" >&2; exit 1 ;;
esac
out=Sources/HeadUnitProtobufOracle
mkdir -p "$out"
rm -f "$out"/*.pb.swift
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_out="$out" --swift_opt=Visibility=Public \
  -I Protocol Protocol/*.proto
echo "generated: $(ls "$out")"
