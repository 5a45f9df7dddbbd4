#!/usr/bin/env bash
# Regenerates Sources/HeadUnitWire/Generated/*.pb.swift from Protocol/*.proto.
# Needs protoc (Debian protobuf-compiler) and protoc-gen-swift 1.39 (built once,
# it takes minutes, so CI does not do it; the generated code is committed).
#   PROTOC_GEN_SWIFT=/path/to/protoc-gen-swift scripts/generate-protos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
plugin="${PROTOC_GEN_SWIFT:-}"
if [ -z "$plugin" ]; then
  plugin="$(command -v protoc-gen-swift || true)"
fi
if [ -z "$plugin" ]; then
  scratch=.build-protoc-plugin
  if [ ! -x "$scratch/src/.build/release/protoc-gen-swift" ]; then
    echo "building protoc-gen-swift (a few minutes)..." >&2
    rm -rf "$scratch/src"
    mkdir -p "$scratch"
    git clone -q --branch 1.39.0 https://github.com/apple/swift-protobuf.git "$scratch/src"
    (cd "$scratch/src" && swift build -c release --product protoc-gen-swift)
  fi
  plugin="$scratch/src/.build/release/protoc-gen-swift"
fi
command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler" >&2; exit 1; }
out=Sources/HeadUnitWire/Generated
rm -f "$out"/*.pb.swift
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_out="$out" --swift_opt=Visibility=Public \
  -I Protocol Protocol/*.proto
echo "generated: $(ls "$out")"
