#!/usr/bin/env bash
# The Wireshark dissector (Protocol/headunit.lua) against real captures:
#   1. a session over TCP on loopback, captured with dumpcap (heuristic: not port 7420);
#   2. a Hello split across two TCP segments, and several frames in one segment;
#   3. the same session over the Unix socket, recorded by Tests/Dissector/unix_capture.py.
# Each capture is read back with `tshark -X lua_script:Protocol/headunit.lua -r FILE`.
#   .ci/dissector-test.sh BIN_DIR   (holding headunitd and headunitctl)
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: .ci/dissector-test.sh BIN_DIR}"
command -v tshark >/dev/null && command -v dumpcap >/dev/null || { echo "dissector: tshark and dumpcap are needed (apt-get install tshark)"; exit 1; }
work="$(mktemp -d)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
passed=0 failed=0
check() {  # check NAME FILE PATTERN: the decoded capture contains PATTERN
  if grep -qF -- "$3" "$2"; then passed=$((passed + 1)); echo "ok    $1"
  else failed=$((failed + 1)); echo "FAIL  $1: no '$3' in the decoded capture"; fi
}
decode() { tshark -X lua_script:Protocol/headunit.lua -r "$1" -Y headunit 2>/dev/null > "$2"; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin/headunitd" --unix-socket "$work/hu.sock" --tcp "127.0.0.1:$port" > "$work/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/hu.sock" ] && break; sleep 0.1; done

# 1 and 2: TCP on loopback.
dumpcap -q -i lo -f "tcp port $port" -w "$work/tcp.pcap" > "$work/dumpcap.log" 2>&1 &
capture=$!
pids+=($capture)
for _ in $(seq 100); do [ -s "$work/tcp.pcap" ] && break; sleep 0.1; done
sleep 1  # dumpcap writes the file header before the capture is live
"$bin/headunitctl" play --tcp "127.0.0.1:$port" --hmi-socket "$work/hu.sock" Tests/Dissector/session.json > "$work/play.log" 2>&1 \
  || { echo "FAIL  the scripted session did not pass:"; cat "$work/play.log"; }
python3 - "$port" <<'PY'
import socket, struct, sys, time
# A Hello as PROTOCOL.md section 15 spells it, sent in two pieces (the header
# split in the middle), then two PINGs in one write.
hello = bytes.fromhex("48550100000000000000001a" "0801" "1216" "0801" "1001" "1801" "220e" + "Alice's iPhone".encode().hex())
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(hello[:5]); time.sleep(0.3); s.sendall(hello[5:]); time.sleep(0.3)
ping = lambda p: b"HU\x02\x00" + struct.pack(">II", 0, len(p)) + p
s.sendall(ping(b"\x01\x02") + ping(b"\x03\x04")); time.sleep(0.3)
s.close()
PY
sleep 1
kill -INT "$capture"; wait "$capture" 2>/dev/null
decode "$work/tcp.pcap" "$work/tcp.txt"
check "TCP: the handshake by name" "$work/tcp.txt" "Hello{ROLE_PHONE 'Capture iPhone'}"
check "TCP: Welcome" "$work/tcp.txt" "Welcome{version 1}"
check "TCP: a push by name" "$work/tcp.txt" "TemplateRequest{push: list 'genres'}"
check "TCP: an error result by name" "$work/tcp.txt" "Result ERROR_CODE_INVALID_POSITION"
check "TCP: a lifecycle event" "$work/tcp.txt" "AppEvent{LIFECYCLE_PHASE_DID_APPEAR 'library'}"
check "TCP: a Hello split across segments, reassembled" "$work/tcp.txt" "Hello{ROLE_PHONE 'Alice's iPhone'}"
check "TCP: two frames in one segment" "$work/tcp.txt" "PING 0102 | PING 0304"
tshark -X lua_script:Protocol/headunit.lua -o 'uat:protobuf_search_paths:"'"$PWD"'/Protocol","TRUE"' -r "$work/tcp.pcap" -V -Y headunit 2>/dev/null > "$work/tcp-full.txt"
check "TCP: the Envelope field by field (protobuf search path)" "$work/tcp-full.txt" "Message: headunit.v1.TemplateRequest"

# 3: the Unix socket, through the recording proxy.
python3 Tests/Dissector/unix_capture.py --listen "$work/proxy.sock" --daemon "$work/hu.sock" --out "$work/unix.pcap" > "$work/proxy.log" 2>&1 &
proxy=$!
pids+=($proxy)
for _ in $(seq 50); do [ -S "$work/proxy.sock" ] && break; sleep 0.1; done
"$bin/headunitctl" play --unix-socket "$work/proxy.sock" Tests/Dissector/session.json > "$work/play-unix.log" 2>&1 \
  || { echo "FAIL  the scripted session over the proxy did not pass:"; cat "$work/play-unix.log"; }
sleep 0.5
kill "$proxy"; wait "$proxy" 2>/dev/null
decode "$work/unix.pcap" "$work/unix.txt"
check "Unix: the HMI's handshake" "$work/unix.txt" "Hello{ROLE_HMI 'headunitctl play'}"
check "Unix: a push by name" "$work/unix.txt" "TemplateRequest{push: list 'genres'}"
check "Unix: an error result by name" "$work/unix.txt" "Result ERROR_CODE_INVALID_POSITION"

if [ "$failed" -gt 0 ]; then
  echo "--- decoded TCP capture:"; cat "$work/tcp.txt"
fi
echo "dissector: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
