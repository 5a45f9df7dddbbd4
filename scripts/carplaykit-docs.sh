#!/bin/sh
# Builds CarPlayKit's DocC archive with the toolchain's own `docc` (no
# swift-docc-plugin dependency in Package.swift; see docs/CARPLAYKIT.md).
#   scripts/carplaykit-docs.sh [output dir]   (default .build-docs/CarPlayKit.doccarchive)
# Preview: docc preview Sources/CarPlayKit/CarPlayKit.docc --additional-symbol-graph-dir .build-docs/symbols
set -eu
cd "$(dirname "$0")/.."
out=${1:-.build-docs/CarPlayKit.doccarchive}
symbols=.build-docs/symbols
swift build --target CarPlayKit
bin=$(swift build --show-bin-path)
# The C modules NIO and the others import: their include folders and generated module maps.
includes=$(find .build/checkouts -path '*/include' -type d | sed 's/^/-I /')
maps=$(find "$(readlink -f "$bin")" -maxdepth 2 -name module.modulemap -exec dirname {} \; | sort -u | sed 's/^/-I /')
rm -rf "$symbols" && mkdir -p "$symbols"
# shellcheck disable=SC2086
swift-symbolgraph-extract -module-name CarPlayKit -target "$(uname -m)-unknown-linux-gnu" \
    -I "$bin/Modules" $includes $maps -minimum-access-level public -output-dir "$symbols"
docc convert Sources/CarPlayKit/CarPlayKit.docc --additional-symbol-graph-dir "$symbols" \
    --fallback-display-name CarPlayKit --fallback-bundle-identifier org.headunitd.CarPlayKit \
    --output-path "$out" --warnings-as-errors
echo "$out"
