#!/bin/sh
# Builds CarPlayKit's DocC archive with the toolchain's own `docc` (no
# swift-docc-plugin dependency in Package.swift; see docs/CARPLAYKIT.md).
# Any DocC warning (a broken symbol link, an undocumented curation) fails it.
#   scripts/carplaykit-docs.sh [output dir]   (default .build-docs/CarPlayKit.doccarchive)
# Preview: docc preview Sources/CarPlayKit/CarPlayKit.docc --additional-symbol-graph-dir .build-docs/symbols
set -eu
cd "$(dirname "$0")/.."
out=${1:-.build-docs/CarPlayKit.doccarchive}
symbols=.build-docs/symbols
scratch="${HEADUNIT_SCRATCH:-.build}"  # as in scripts/test.sh
# HEADUNIT_BUILD_FLAGS: the flags scripts/test.sh built that folder with, so nothing is rebuilt.
swift build --scratch-path "$scratch" ${HEADUNIT_BUILD_FLAGS:-} --target CarPlayKit
bin=$(swift build --scratch-path "$scratch" --show-bin-path)
# The C modules NIO and the others import: their include folders and generated module maps.
includes=$(find "$scratch/checkouts" -path '*/include' -type d | sed 's/^/-I /')
maps=$(find "$(readlink -f "$bin")" -maxdepth 2 -name module.modulemap -exec dirname {} \; | sort -u | sed 's/^/-I /')
# System library targets (COpenH264 under CarPlayKit's windows) keep their module maps in Sources/.
system_maps=$(find Sources -maxdepth 2 -name module.modulemap -exec dirname {} \; | sort -u | sed 's/^/-I /')
rm -rf "$symbols" && mkdir -p "$symbols"
# shellcheck disable=SC2086
swift-symbolgraph-extract -module-name CarPlayKit -target "$(uname -m)-unknown-linux-gnu" \
    -I "$bin/Modules" $includes $maps $system_maps -minimum-access-level public -output-dir "$symbols"
docc convert Sources/CarPlayKit/CarPlayKit.docc --additional-symbol-graph-dir "$symbols" \
    --fallback-display-name CarPlayKit --fallback-bundle-identifier org.headunitd.CarPlayKit \
    --output-path "$out" --warnings-as-errors
echo "$out"
