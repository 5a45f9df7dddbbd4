#!/usr/bin/env bash
# Regenerates Sources/HeadUnitWire/Generated/*.pb.swift from Protocol/*.proto
# with our plugin, protoc-gen-headunit (Sources/protoc-gen-headunit): plain
# Swift structs, the daemon's one wire codec, and swift-protobuf's Message
# conformance for JSON, text format and the tests' oracle. The output is
# committed. Needs protoc (Debian protobuf-compiler).
#   scripts/generate-protos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler" >&2; exit 1; }
swift build --product protoc-gen-headunit >&2
plugin="$(swift build --show-bin-path)/protoc-gen-headunit"
out=Sources/HeadUnitWire/Generated
rm -f "$out"/*.pb.swift
protoc --plugin=protoc-gen-headunit="$plugin" --headunit_out="$out" -I Protocol Protocol/*.proto
echo "generated: $(ls "$out")"
