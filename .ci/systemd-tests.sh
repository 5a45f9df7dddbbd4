#!/usr/bin/env bash
# The systemd integration checks of headunitd (issue #3):
#   1. systemd-analyze verify of the shipped units prints nothing
#   2. systemd-analyze security --offline=true: exposure <= 1.0
#   3. level (a): the daemon under systemd-socket-activate (Tests/SystemdIntegration/test_socket_activate.py)
#      and the restart handover with the test as the fd store (Tests/SystemdIntegration/test_fdstore_handover.py)
#   4. level (b): the shipped units under a real systemd as PID 1 in fresh
#      namespaces (Tests/SystemdIntegration/test_systemd_pid1.sh; needs root)
#
#   .ci/systemd-tests.sh [PATH/TO/headunitd]
#   .ci/systemd-tests.sh --install-deps    only install what is missing (before a build:
#                                          the Systemd module needs libsystemd-dev)
#
# Without an argument (or $HEADUNITD_BIN) it builds the daemon with
# `swift build --scratch-path .build-systemd --product headunitd`.
# Installs libsystemd-dev, pkg-config, systemd (and python3, util-linux) with
# apt-get when missing. Exits non-zero on any failure; the last line is
# `N passed, N failed`.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
passed=0 failed=0
started=$SECONDS

record() {  # record NAME STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS: $1${3:+ -- $3}"
    else
        failed=$((failed + 1)); echo "FAIL: $1${3:+ -- $3}"
    fi
}
finish() {
    echo "systemd tests took $((SECONDS - started)) s"
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}
# Counts a sub-suite's PASS:/FAIL: lines, echoing them.
run_suite() {
    local name=$1; shift
    local log rc
    log=$(mktemp)
    echo "== $name"
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    local p f
    p=$(grep -c '^PASS:' "$log"); f=$(grep -c '^FAIL:' "$log")
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        failed=$((failed + 1)); echo "FAIL: $name exited with status $rc"
    fi
    rm -f "$log"
}

# --- dependencies -------------------------------------------------------------
missing=()
pkg-config --exists libsystemd 2>/dev/null || missing+=(libsystemd-dev)
command -v pkg-config >/dev/null || missing+=(pkg-config)
{ command -v systemd-socket-activate && command -v systemd-analyze && test -x /lib/systemd/systemd; } >/dev/null 2>&1 || missing+=(systemd)
command -v python3 >/dev/null || missing+=(python3)
command -v ss >/dev/null || missing+=(iproute2)
{ command -v unshare && command -v nsenter && command -v findmnt; } >/dev/null 2>&1 || missing+=(util-linux)
# The handover test's client (Tests/SystemdIntegration/handover_client.py):
# Python classes generated from Protocol/*.proto, run by Debian's python3.
command -v protoc >/dev/null || missing+=(protobuf-compiler)
/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null || missing+=(python3-protobuf)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        record "dependencies (${missing[*]}) missing and not root to install them" 1
        finish
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    record "apt-get install ${missing[*]}" $?
fi
if [ "${1:-}" = --install-deps ]; then
    [ "$failed" -eq 0 ]
    exit $?
fi

# --- the binary ---------------------------------------------------------------
BIN=${1:-${HEADUNITD_BIN:-}}
if [ -z "$BIN" ]; then
    echo "building headunitd (swift build --scratch-path .build-systemd --product headunitd)"
    swift build --scratch-path .build-systemd --product headunitd 2>&1 | tail -n 5
    BIN="$(swift build --scratch-path .build-systemd --show-bin-path)/headunitd"
fi
if [ ! -x "$BIN" ]; then
    record "headunitd binary at $BIN" 1
    finish
fi
BIN=$(readlink -f "$BIN")
echo "binary: $BIN"

# --- systemd-analyze verify -----------------------------------------------------
# verify exits 0 even on bad values: its output is the verdict. The units are
# checked as installed (Debian layout) in a scratch root holding the distro's
# own units and the binary at /usr/sbin/headunitd, so ExecStart= resolves.
VROOT=$(mktemp -d /tmp/headunitd-verify.XXXXXX)
mkdir -p "$VROOT/usr/lib/systemd" "$VROOT/usr/sbin" "$VROOT/etc/headunitd"
cp -a /lib/systemd/system "$VROOT/usr/lib/systemd/"
cp systemd/headunitd.service systemd/headunitd.socket systemd/headunitd-tcp.socket "$VROOT/usr/lib/systemd/system/"
cp "$BIN" "$VROOT/usr/sbin/headunitd"
verify_out=$(systemd-analyze verify --man=no --root="$VROOT" \
    headunitd.socket headunitd-tcp.socket headunitd.service 2>&1)
rm -rf "$VROOT"
[ -z "$verify_out" ]
record "systemd-analyze verify prints nothing" $? "${verify_out:-(no output)}"

# --- systemd-analyze security ---------------------------------------------------
security_out=$(systemd-analyze security --offline=true --no-pager systemd/headunitd.service 2>&1)
exposure=$(echo "$security_out" | sed -n 's/.*Overall exposure level for headunitd.service: \([0-9.]*\).*/\1/p')
[ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 1.0) }'
record "systemd-analyze security --offline=true exposure <= 1.0" $? \
    "$(echo "$security_out" | grep 'Overall exposure')"

# --- level (a): systemd-socket-activate -----------------------------------------
host_files() { ls -d /tmp/headunitd-* /tmp/systemd-private-*-headunitd* /var/tmp/systemd-private-*-headunitd* 2>/dev/null | sort; }
before=$(host_files)
run_suite "level a: systemd-socket-activate" python3 Tests/SystemdIntegration/test_socket_activate.py "$BIN"
run_suite "level a: restart handover (the test plays the fd store)" python3 Tests/SystemdIntegration/test_fdstore_handover.py "$BIN"

# --- level (b): systemd as PID 1 -------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
    record "level b needs root (unshare, mount, cgroups)" 1
else
    run_suite "level b: systemd as PID 1" timeout 300 Tests/SystemdIntegration/test_systemd_pid1.sh "$BIN"
    after=$(host_files)
    cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n1)
    leftovers="$(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
    [ -n "$cg2" ] && leftovers+="$(find "$cg2" -maxdepth 3 -type d -name 'headunitd-test-*' 2>/dev/null | tr '\n' ' ')"
    leftovers+="$(pgrep -a -f 'systemd --system --unit=headunitd-test' | tr '\n' ' ')"
    leftovers+="$(pgrep -a -x headunitd | grep -F "$BIN" | tr '\n' ' ')"
    [ -z "${leftovers// /}" ]
    record "nothing left behind on the host (temp and PrivateTmp dirs, cgroups, processes)" $? "$leftovers"
fi

finish
