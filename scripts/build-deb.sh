#!/usr/bin/env bash
# Builds the Debian package of headunitd: one command, from a clean tree.
#
#   scripts/build-deb.sh [--no-build] [--no-lintian]
#
# 1. swift build -c release --static-swift-stdlib of headunitd and headunitctl
#    (scratch path $HEADUNIT_DEB_SCRATCH, default .build-static), so the
#    binaries need no Swift toolchain on the target: only libc, libm,
#    libstdc++/libgcc_s and libsystemd (checked below with the ELF's NEEDED).
# 2. Strips copies of them and stages a source tree with packaging/debian/.
# 3. dpkg-buildpackage -b (debhelper: units, sysusers, tmpfiles, conffile,
#    maintainer scripts, ${shlibs:Depends} from the binaries' NEEDED).
# 4. lintian (remaining tags are explained in docs/PACKAGING.md).
#
# The package lands in .build-deb/ (printed on the last line). Installs
# debhelper, dpkg-dev and lintian with apt-get when missing (root only).
# HEADUNIT_DEB_VERSION overrides the version from packaging/debian/changelog.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
build=1 run_lintian=1
for arg in "$@"; do
    case $arg in
        --no-build) build=0 ;;
        --no-lintian) run_lintian=0 ;;
        *) echo "usage: $0 [--no-build] [--no-lintian]" >&2; exit 2 ;;
    esac
done
SCRATCH=${HEADUNIT_DEB_SCRATCH:-.build-static}
OUT=$ROOT/.build-deb

# debhelper, dpkg-dev, fakeroot (and lintian) from Debian, through
# scripts/setup.sh (apt-get update at most once, only when something is missing).
scripts/setup.sh debhelper dpkg-dev fakeroot binutils $([ $run_lintian = 1 ] && echo lintian) >&2

# No debug information: the packaged binaries are stripped below anyway, and
# emitting DWARF for every module (BoringSSL twice, NIO, protobuf) is time
# the build does not need.
# --no-export-dynamic: swiftc exports every symbol of an executable (50,000 in
# .dynsym, 1.2 MiB, with 3 MiB of names), which nothing here looks up (the one
# dlsym at start, libdispatch's dispatch_async_swift_job, is not found either
# way) and a stripped binary prints no backtrace with. Without them: 5 MiB off
# the file, 2 MiB off the idle RSS, and the Swift runtime's dladdr of itself
# at start no longer walks them (BENCHMARKS.md, start-up round two).
BUILD=(swift build -c release --static-swift-stdlib -debug-info-format none --scratch-path "$SCRATCH"
    -Xlinker --no-export-dynamic)
if [ $build = 1 ]; then
    for product in headunitd headunitctl; do
        nice -n 10 "${BUILD[@]}" --product "$product" >&2
    done
fi
BIN=$("${BUILD[@]}" --show-bin-path)

# The whole point: nothing from the toolchain may be needed at run time.
for b in headunitd headunitctl; do
    [ -x "$BIN/$b" ] || { echo "build-deb: $BIN/$b missing (run without --no-build)" >&2; exit 1; }
    needed=$(objdump -p "$BIN/$b" | awk '/NEEDED/ {print $2}')
    if echo "$needed" | grep -Eq 'swift|Foundation|dispatch|BlocksRuntime|icu'; then
        echo "build-deb: $b still needs a toolchain library:" $needed >&2
        exit 1
    fi
    # Foundation (with ICU's 30 MiB of data) must stay out: FoundationEssentials
    # serves. It creeps in when an API binds to Foundation's overload through a
    # transitive import (String(format:), String.contains(String), range(of:)):
    # find the culprits with `nm -u .build-static/release/*.build/*.o | grep 10Foundation`.
    # Counted, not `grep -q`: under pipefail, grep -q quitting at the first
    # match makes nm die of SIGPIPE and the pipeline fail, so the check passed
    # exactly when it should not have (Foundation and ICU crept in that way).
    linked=$(nm "$BIN/$b" | grep -c -e ' [TtDdBbRr] \$s10Foundation' -e ' [DdRr] icudt' || true)
    if [ "$linked" -gt 0 ]; then
        echo "build-deb: $b links Foundation or ICU's data ($linked symbols; see the comment above this check)" >&2
        exit 1
    fi
done

STAGE=$(mktemp -d /tmp/headunitd-deb.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
version=${HEADUNIT_DEB_VERSION:-$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)}
SRC=$STAGE/headunitd-$version
mkdir -p "$SRC/bin" "$SRC/systemd" "$SRC/docs" "$SRC/Protocol" "$SRC/scenarios"
cp -r packaging/debian "$SRC/debian"
if [ -n "${HEADUNIT_DEB_VERSION:-}" ]; then
    sed -i "1s/(.*)/($version)/" "$SRC/debian/changelog"
fi
for b in headunitd headunitctl; do
    strip --strip-all --remove-section=.comment -o "$SRC/bin/$b" "$BIN/$b"
done
cp systemd/headunitd.service systemd/headunitd.socket systemd/headunitd-tcp.socket systemd/headunitd.json "$SRC/systemd/"
cp systemd/headunitd.sysusers "$SRC/debian/headunitd.sysusers"
cp systemd/headunitd.tmpfiles "$SRC/debian/headunitd.tmpfiles"
cp README.md "$SRC/"
cp docs/SYSTEMD.md docs/PACKAGING.md docs/CLIENT.md "$SRC/docs/"
cp Protocol/PROTOCOL.md "$SRC/Protocol/"
cp scenarios/quickstart.json "$SRC/scenarios/"
# Reproducible timestamps in the .deb: the changelog's date.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Timestamp)}

(cd "$SRC" && dpkg-buildpackage -b -uc -us --no-sign >&2)
mkdir -p "$OUT"
arch=$(dpkg --print-architecture)
deb=headunitd_${version}_${arch}.deb
cp "$STAGE/$deb" "$OUT/$deb"

if [ $run_lintian = 1 ]; then
    echo "== lintian $deb (tags explained in docs/PACKAGING.md)" >&2
    lintian --info --display-info --pedantic "$OUT/$deb" >&2 || true
fi
dpkg-deb --info "$OUT/$deb" >&2
dpkg-deb --contents "$OUT/$deb" >&2
echo "$OUT/$deb"
