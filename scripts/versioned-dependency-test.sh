#!/usr/bin/env bash
# Another package can depend on this one by version and use CarPlayKit.
# SwiftPM refuses a product whose targets carry `unsafeFlags` when the package
# is resolved by version (a tag), not when it is the root or a path dependency,
# so building in this repository proves nothing here. This script:
#   1. copies the work tree (tracked and new files, as they are now) into a
#      temporary git repository and tags it 1.0.0;
#   2. writes a scratch package that depends on it through a file:// URL with
#      `from: "1.0.0"` and holds a small CarPlayKit app, and a second target
#      that names the other library products (HeadUnitClient, HeadUnitWire,
#      HeadUnitConformance): SwiftPM checks every product a package names when
#      it loads the graph, so they are checked without building that target;
#   3. checks the tag was resolved as a version, builds the app, and runs it: it
#      builds templates through CarPlayKit's public API and connects to a socket
#      where no daemon listens, which must fail with CarPlayKit's typed error.
# This package's own dependencies resolve from the same URLs as Package.swift
# (on the project's machines, git reads github.com from the local copies).
#   scripts/versioned-dependency-test.sh    (8 minutes on 2 shared cores: the
#   scratch package builds NIO, both BoringSSLs and the rest once more, in debug;
#   .ci/run runs it in the background, at the lowest priority)
# HEADUNIT_VERSIONED_KEEP=1 keeps the temporary folder for a look afterwards;
# HEADUNIT_VERSIONED_SCRATCH=DIR builds the scratch package there (kept), so a
# second run rebuilds only this package's modules.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

work="$(mktemp -d "${TMPDIR:-/tmp}/headunit-versioned.XXXXXX")"
if [ "${HEADUNIT_VERSIONED_KEEP:-0}" = 1 ]; then
  echo "versioned-dependency: keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi

echo "==> versioned-dependency: the work tree as a tagged repository ($work/headunitd, tag 1.0.0)"
mkdir "$work/headunitd"
# Files git tracks or would track (new, not ignored), minus ones deleted in the
# work tree: the same set a commit of the work tree would hold.
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' file; do [ -e "$file" ] && printf '%s\0' "$file"; done \
  | tar --null -T - -cf - | tar -xf - -C "$work/headunitd"
(
  cd "$work/headunitd"
  git init -q
  git add -A -f  # -f: exactly the files copied, whatever a global ignore file says
  git -c user.name=versioned-dependency-test -c user.email=ci@localhost commit -q -m "snapshot for the versioned-dependency test"
  git tag 1.0.0
)

echo "==> versioned-dependency: the scratch package ($work/consumer)"
mkdir -p "$work/consumer/Sources/CarPlayKitExample" "$work/consumer/Sources/OtherProducts"
echo 'import HeadUnitConformance' >"$work/consumer/Sources/OtherProducts/main.swift"
cat >"$work/consumer/Package.swift" <<EOF
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "consumer",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(url: "file://$work/headunitd", from: "1.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "CarPlayKitExample",
            dependencies: [.product(name: "CarPlayKit", package: "headunitd")]
        ),
        // Never built (the script builds CarPlayKitExample only): it names the
        // other library products so that loading the graph checks them too.
        .executableTarget(
            name: "OtherProducts",
            dependencies: [
                .product(name: "HeadUnitClient", package: "headunitd"),
                .product(name: "HeadUnitWire", package: "headunitd"),
                .product(name: "HeadUnitConformance", package: "headunitd"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
EOF
cat >"$work/consumer/Sources/CarPlayKitExample/main.swift" <<'EOF'
// A CarPlayKit app that another package builds against a tagged release:
// templates through the public API, then a connection that must fail
// (nothing listens at the socket it is given).
import CarPlayKit
#if canImport(Glibc)
import Glibc  // exit()
#else
import Darwin
#endif

let socket = CommandLine.arguments.dropFirst().first ?? "/nonexistent/headunitd.sock"
let stations = CPListTemplate(
    title: "Radio",
    sections: [CPListSection(items: [CPListItem(text: "Jazz FM", detailText: "Smooth jazz")], header: "Stations")])
print("template: \(stations.title ?? "") with \(stations.sections.count) section(s), \(stations.sections[0].items.count) item(s)")

let app = CPApplication(bundleIdentifier: "com.example.versioned", displayName: "Versioned", entitlements: [.audio])
do {
    try await app.connect(to: .unix(path: socket), deviceName: "Versioned dependency test")
    print("connected to \(socket), where no daemon was expected")
    exit(1)
} catch let error as CPError {
    print("connect failed as expected: \(error)")
} catch {
    print("connect failed with an error that is not a CPError: \(error)")
    exit(1)
}
EOF

cd "$work/consumer"
scratch=()
if [ -n "${HEADUNIT_VERSIONED_SCRATCH:-}" ]; then
  mkdir -p "$HEADUNIT_VERSIONED_SCRATCH"
  scratch=(--scratch-path "$(cd "$HEADUNIT_VERSIONED_SCRATCH" && pwd)")
fi
echo "==> versioned-dependency: resolve"
swift package "${scratch[@]}" resolve
# The dependency must be pinned to the tag, as an app's would be (not to a branch or a path).
pinned="$(python3 -c 'import json, sys
pins = [p for p in json.load(open("Package.resolved"))["pins"] if p["identity"] == "headunitd"]
print(pins[0]["state"].get("version") if pins else None)')"
if [ "$pinned" != "1.0.0" ]; then
  echo "versioned-dependency: headunitd was resolved as $pinned, not as version 1.0.0" >&2
  exit 1
fi

echo "==> versioned-dependency: build (swift build --product CarPlayKitExample)"
# No debug information: the check is that it builds and runs, and DWARF for
# every module (both BoringSSLs, NIO) is build time nothing here reads.
swift build "${scratch[@]}" -debug-info-format none --product CarPlayKitExample

echo "==> versioned-dependency: run"
output="$("$(swift build "${scratch[@]}" --show-bin-path)/CarPlayKitExample" "$work/no-daemon.sock")"
echo "$output"
grep -q '^template: Radio with 1 section(s), 1 item(s)$' <<<"$output"
grep -q '^connect failed as expected: ' <<<"$output"
echo "versioned-dependency: passed in $(( (SECONDS - started) / 60 ))m$(( (SECONDS - started) % 60 ))s"
