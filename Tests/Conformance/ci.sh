#!/usr/bin/env bash
# The conformance kit in CI (.ci/run): `headunitctl conform` against a freshly
# started headunitd (its defaults) on the Unix socket, then over TCP (TLS) with the HMI on the Unix
# socket, then against broken_endpoint.py, which must fail with a §5 line.
#   Tests/Conformance/ci.sh BIN_DIR     (BIN_DIR holds headunitd and headunitctl)
set -euo pipefail
bin="${1:?usage: ci.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d /tmp/hu-conform-XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits for a line "ready" in FILE (both servers print it once listening).
wait_ready() {
  for _ in $(seq 200); do
    if grep -qx ready "$1"; then return 0; fi
    sleep 0.05
  done
  echo "conformance: $2 did not get ready"; cat "$1"; return 1
}

# The daemon with its defaults (no configuration file), as a new user starts
# it: every limit at its default, and TCP phones must pair and authenticate
# (PROTOCOL.md section 20), which the kit does through the HMI on the Unix
# socket. Only the addresses are ours (a free TCP port) and the state
# directory that keeps the paired-device list (a scratch one).
STATE_DIRECTORY="$work/state" "$bin/headunitd" --unix-socket "$work/hu.sock" --tcp 127.0.0.1:0 \
  >"$work/daemon.out" 2>"$work/daemon.log" &
pids+=($!)
wait_ready "$work/daemon.out" headunitd || { cat "$work/daemon.log"; exit 1; }
port="$(sed -n 's/^listening tcp .*:\([0-9][0-9]*\)$/\1/p' "$work/daemon.out")"

echo "--- conform: unix:$work/hu.sock"
"$bin/headunitctl" conform --endpoint "unix:$work/hu.sock" --slow
echo "--- conform: tls:127.0.0.1:$port (HMI on the Unix socket; the kit's phone pairs)"
"$bin/headunitctl" conform --endpoint "tls:127.0.0.1:$port" --hmi-endpoint "unix:$work/hu.sock" --slow

echo "--- conform: the deliberately broken endpoint (must fail §5)"
python3 "$here/broken_endpoint.py" --unix "$work/broken.sock" >"$work/broken.out" 2>&1 &
pids+=($!)
wait_ready "$work/broken.out" broken_endpoint.py
status=0
"$bin/headunitctl" conform --endpoint "unix:$work/broken.sock" --section 5 --timeout-ms 500 >"$work/broken.txt" || status=$?
cat "$work/broken.txt"
if [ "$status" -ne 1 ] || ! grep -q '^FAIL  §5 ' "$work/broken.txt"; then
  echo "conformance: the broken endpoint was not caught (exit $status, no FAIL §5 line)"
  exit 1
fi
echo "conformance: the broken endpoint failed as it must (exit 1, FAIL lines name §5)"
