#!/usr/bin/env bash
# The Wireshark dissector (Protocol/headunit.lua) against real captures:
#   (TCP is TLS 1.3: the daemon runs with SSLKEYLOGFILE and tshark decrypts
#   the capture with that key log, docs/WIRESHARK.md; without it no frame
#   shows.)
#   1. a scripted session on loopback TCP, captured with dumpcap on a random
#      port (so the heuristic, not port 7420, finds it): the phone says Hello
#      and announces an audio app over TCP, an HMI on the Unix socket launches
#      it, the phone sets a list root, pushes, pops, and pops at the root,
#      which the daemon refuses with ERROR_CODE_INVALID_POSITION;
#   2. hand-made traffic (Tests/Dissector/wire_cases.py): a frame across two
#      segments, several frames in one segment, and one bad header per kind
#      of header error (each must show as an expert info);
#   3. the same session over the Unix socket, recorded through the proxy
#      Tests/Dissector/unix_capture.py as a synthetic TCP stream.
# Each capture is read back with the command docs/WIRESHARK.md gives:
#   tshark -X lua_script:Protocol/headunit.lua -r FILE
#
#   .ci/dissector-test.sh PATH/TO/headunitd   (or the folder holding it;
#                                             headunitctl must sit beside it)
# The last line reads "N passed, N failed"; the exit status is 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
arg="${1:?usage: .ci/dissector-test.sh PATH/TO/headunitd (or its folder)}"
if [ -d "$arg" ]; then bin="$arg"; else bin="$(dirname "$arg")"; fi
for tool in tshark dumpcap python3; do
  command -v "$tool" >/dev/null || { echo "dissector: $tool is needed (apt-get install tshark python3)"; echo "0 passed, 1 failed"; exit 1; }
done
for exe in headunitd headunitctl; do
  [ -x "$bin/$exe" ] || { echo "dissector: no $bin/$exe"; echo "0 passed, 1 failed"; exit 1; }
done

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  if [ -n "${KEEP:-}" ]; then echo "captures kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok    $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1"; }
check() {  # check NAME FILE TEXT: the decoded capture contains TEXT
  if grep -qF -- "$3" "$2"; then pass "$1"; else fail "$1: no '$3' in $(basename "$2")"; fi
}
check_re() {  # check_re NAME FILE REGEX
  if grep -qE -- "$3" "$2"; then pass "$1"; else fail "$1: nothing matches '$3' in $(basename "$2")"; fi
}
# The documented command (docs/WIRESHARK.md), nothing added (stderr holds
# tshark's root warning). TCP is TLS: the daemon's key log decrypts it.
decode() { tshark -X lua_script:Protocol/headunit.lua -o "tls.keylog_file:$work/keys.log" -r "$1" > "$2" 2> "$2.err"; }
decode_tree() { tshark -X lua_script:Protocol/headunit.lua -o "tls.keylog_file:$work/keys.log" -r "$1" -V "${@:3}" > "$2" 2> "$2.err"; }

# dumpcap writes the pcap header as it opens the interface, a moment before
# packets flow (a fixed second after the header once lost a whole first
# session in a CI run under load): wait for the header, then make bare
# connects to PORT (no payload, nothing to decode) until one is in the file.
start_capture() {  # start_capture FILE FILTER PORT
  dumpcap -q -i lo -f "$2" -w "$1" > "$1.log" 2>&1 &
  capture=$!
  pids+=("$capture")
  for _ in $(seq 100); do [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -ge 24 ] && break; sleep 0.1; done
  local header
  header=$(stat -c %s "$1" 2>/dev/null || echo 0)
  for _ in $(seq 100); do
    python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()' "$3" 2> /dev/null || true
    sleep 0.1
    [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -gt "$header" ] && break
  done
}
stop_capture() {  # stop_capture FILE
  sleep 0.5  # the last packets reach dumpcap
  kill -INT "$capture" 2>/dev/null
  wait "$capture" 2>/dev/null
  # Say why when nothing was captured (dumpcap needs root or CAP_NET_RAW).
  [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -gt 24 ] || { echo "dissector: nothing captured in $1:"; cat "$1.log"; }
}

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# allowUnpairedTcp: the captured TCP phone does not pair (PROTOCOL.md section 20).
echo '{"allowUnpairedTcp": true}' > "$work/config.json"
# SSLKEYLOGFILE: the daemon writes its TLS secrets there (NSS key log format).
SSLKEYLOGFILE="$work/keys.log" "$bin/headunitd" --unix-socket "$work/hu.sock" --tcp "127.0.0.1:$port" --config "$work/config.json" > "$work/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready' "$work/daemon.log" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/daemon.log" || { echo "dissector: the daemon did not start:"; cat "$work/daemon.log"; echo "0 passed, 1 failed"; exit 1; }

# ---- 1 and 2: loopback TCP
start_capture "$work/tcp.pcap" "tcp port $port" "$port"
if "$bin/headunitctl" play --tcp "127.0.0.1:$port" --hmi-socket "$work/hu.sock" Tests/Dissector/session.json > "$work/play.log" 2>&1; then
  pass "the scripted session over TCP ran"
else
  fail "the scripted session over TCP ran:"; cat "$work/play.log"
fi
# The phone's assistant and notifications (PROTOCOL.md section 27), the scenario's phone playing the assistant.
if "$bin/headunitctl" play --tcp "127.0.0.1:$port" --hmi-socket "$work/hu.sock" scenarios/communication-voice.json > "$work/voice.log" 2>&1; then
  pass "the assistant's scenario over TCP ran"
else
  fail "the assistant's scenario over TCP ran:"; cat "$work/voice.log"
fi
python3 Tests/Dissector/wire_cases.py "$port" > "$work/cases.log" 2>&1 || { fail "wire_cases.py ran:"; cat "$work/cases.log"; }
# An accessory session with half-close (PROTOCOL.md 18.6): an echo on the
# Unix socket, the phone over TCP piping 5 bytes through it and back.
"$bin/headunitctl" accessory --unix-socket "$work/hu.sock" --echo com.openmotors.climate > "$work/echo.log" 2>&1 &
echo_pid=$!
pids+=("$echo_pid")
for _ in $(seq 100); do grep -q 'waiting for sessions' "$work/echo.log" 2>/dev/null && break; sleep 0.1; done
if printf 'hello' | "$bin/headunitctl" session --tcp "127.0.0.1:$port" com.example.comfort com.openmotors.climate > "$work/session.out" 2> "$work/session.log" \
  && [ "$(cat "$work/session.out")" = hello ]; then
  pass "an accessory session with half-close ran (5 bytes back)"
else
  fail "an accessory session with half-close ran:"; cat "$work/session.log" "$work/echo.log"
fi
kill "$echo_pid" 2>/dev/null
stop_capture "$work/tcp.pcap"

# Without the secrets the capture is TLS and nothing else: no frame in clear.
tshark -X lua_script:Protocol/headunit.lua -r "$work/tcp.pcap" > "$work/tcp-nokeys.txt" 2> /dev/null
if grep -q HEADUNIT "$work/tcp-nokeys.txt"; then fail "without the key log, a frame in clear"; else pass "without the key log, no frame in clear"; fi
check "without the key log: TLS 1.3 application data only" "$work/tcp-nokeys.txt" "Application Data"
if [ -s "$work/keys.log" ] && grep -q '^CLIENT_TRAFFIC_SECRET_0 ' "$work/keys.log"; then pass "SSLKEYLOGFILE: the daemon wrote the TLS secrets"; else fail "SSLKEYLOGFILE: no secrets in keys.log"; fi
decode "$work/tcp.pcap" "$work/tcp.txt"
check "TCP: the phone's Hello by name (heuristic, port $port)" "$work/tcp.txt" "Hello{ROLE_PHONE 'Capture iPhone'} [req 1]"
check "TCP: Welcome" "$work/tcp.txt" "Welcome{version 1} [req 1]"
check "TCP: kind, channel and length in the Info column" "$work/tcp.txt" "MESSAGE ch=0 len=26 Hello{"
check "TCP: AnnounceApps" "$work/tcp.txt" "AnnounceApps{1 apps} [req 2]"
check "TCP: the set root" "$work/tcp.txt" "TemplateRequest{set_root: list 'library'} [req 3]"
check "TCP: the push" "$work/tcp.txt" "TemplateRequest{push: list 'genres'} [req 4]"
check "TCP: a lifecycle event" "$work/tcp.txt" "AppEvent{LIFECYCLE_PHASE_DID_APPEAR 'genres'}"
check "TCP: the error Result by code name" "$work/tcp.txt" "Result ERROR_CODE_INVALID_POSITION: the root template cannot be popped [req 6]"
check "TCP: Goodbye" "$work/tcp.txt" "Goodbye ERROR_CODE_OK"
check_re "TCP: the assistant's update, its session and state" "$work/tcp.txt" "AssistantUpdate\\{session [1-9][0-9]* ASSISTANT_STATE_LISTENING\\}"
check_re "TCP: the car's assistant event, its session and kind" "$work/tcp.txt" "AssistantEvent\\{session [1-9][0-9]* started\\}"
check_re "TCP: a notification by name" "$work/tcp.txt" "PostNotification\\{"
check "TCP: a notification with a body refused by code name" "$work/tcp.txt" "ERROR_CODE_NOTIFICATION_NOT_ALLOWED"
check_re "TCP: session bytes in a DATA frame" "$work/tcp.txt" "DATA ch=[1-9][0-9]* len=5"
check_re "TCP: the phone's half-close" "$work/tcp.txt" "CloseSession\\{channel [1-9][0-9]*, half\\}"
check_re "TCP: the echo's SessionFinished" "$work/tcp.txt" "SessionFinished\\{channel [1-9][0-9]*\\}"
check_re "TCP: the session's end once both finished" "$work/tcp.txt" "SessionClosed\\{channel [1-9][0-9]* SESSION_CLOSE_REASON_FINISHED\\}"
check_re "TCP: the SDK widening its window" "$work/tcp.txt" "SessionCredit\\{channel [1-9][0-9]*, 196608 bytes\\}"
# The split Hello: a 5-byte segment held for reassembly, then the whole frame.
check_re "TCP: a 5-byte piece of a frame (its own TLS record) is held for reassembly" "$work/tcp.txt" "TLSv1\\.3 [0-9]+ \\[TLS segment of a reassembled PDU\\]"
check "TCP: the frame split across segments, reassembled" "$work/tcp.txt" "Hello{ROLE_PHONE 'Alice's iPhone'} [req 1]"
check "TCP: two frames in one segment" "$work/tcp.txt" "PING ch=0 len=2 0102 | PING ch=0 len=2 0304"
check "TCP: a reassembled frame and a whole one in one segment" "$work/tcp.txt" "PING ch=0 len=2 0506 | PING ch=0 len=2 0708"
check "TCP: the daemon's PONGs" "$work/tcp.txt" "PONG ch=0 len=2 0102"

decode_tree "$work/tcp.pcap" "$work/tcp-tree.txt"
check "tree: the header fields" "$work/tcp-tree.txt" "Kind: MESSAGE (0x01)"
check "tree: the error code field" "$work/tcp-tree.txt" "Error code: ERROR_CODE_INVALID_POSITION"
check "tree: the Envelope's fields by name" "$work/tcp-tree.txt" "template_request: TemplateRequest"
check "tree: a nested message" "$work/tcp-tree.txt" "push: Template"
check "tree: an enum field by name" "$work/tcp-tree.txt" "code: ERROR_CODE_INVALID_POSITION ("
check "expert: flags set (RESERVED_FLAGS)" "$work/tcp-tree.txt" "Flags must be 0: RESERVED_FLAGS"
check "expert: a channel on a MESSAGE" "$work/tcp-tree.txt" "Channel must be 0 except on DATA"
check "expert: an unknown kind" "$work/tcp-tree.txt" "Unknown frame kind: UNKNOWN_FRAME_KIND"
check "expert: a length over 1 MiB" "$work/tcp-tree.txt" "Length over the 1 MiB maximum: FRAME_TOO_LARGE"
check "expert: a PING payload over 64 bytes" "$work/tcp-tree.txt" "PING payload over 64 bytes"
check "expert: bad magic in a recognised stream" "$work/tcp-tree.txt" "Not \"HU\": BAD_MAGIC"
# Wireshark's own protobuf dissector as well, when asked, pointed at Protocol/.
decode_tree "$work/tcp.pcap" "$work/tcp-pb.txt" -o headunit.protobuf:TRUE -o "uat:protobuf_search_paths:\"$PWD/Protocol\",\"TRUE\""
check "protobuf search path: the Envelope field by field" "$work/tcp-pb.txt" "Message: headunit.v1.TemplateRequest"

# ---- 3: the Unix socket, through the recording proxy
python3 Tests/Dissector/unix_capture.py --listen "$work/proxy.sock" --daemon "$work/hu.sock" --out "$work/unix.pcap" > "$work/proxy.log" 2>&1 &
proxy=$!
pids+=("$proxy")
for _ in $(seq 100); do [ -S "$work/proxy.sock" ] && break; sleep 0.1; done
# The phone and the HMI both go through the proxy (--unix-socket alone).
if "$bin/headunitctl" play --unix-socket "$work/proxy.sock" Tests/Dissector/session.json > "$work/play-unix.log" 2>&1; then
  pass "the scripted session over the Unix socket (proxy) ran"
else
  fail "the scripted session over the Unix socket (proxy) ran:"; cat "$work/play-unix.log"
fi
sleep 0.5
if kill -0 "$proxy" 2>/dev/null; then pass "the proxy outlived the session"; else fail "the proxy outlived the session:"; cat "$work/proxy.log"; fi
kill -TERM "$proxy" 2>/dev/null; wait "$proxy" 2>/dev/null
decode "$work/unix.pcap" "$work/unix.txt"
check "Unix: the phone's Hello" "$work/unix.txt" "Hello{ROLE_PHONE 'Capture iPhone'} [req 1]"
check "Unix: the HMI's Hello" "$work/unix.txt" "Hello{ROLE_HMI 'headunitctl play'} [req 1]"
check "Unix: the HMI launches the app" "$work/unix.txt" "LaunchApp{app_id 'com.example.radio'}"
check "Unix: the push" "$work/unix.txt" "TemplateRequest{push: list 'genres'} [req 4]"
check "Unix: the error Result by code name" "$work/unix.txt" "Result ERROR_CODE_INVALID_POSITION"

if [ "$failed" -gt 0 ]; then
  for f in tcp unix; do echo "--- $f capture, decoded:"; grep HEADUNIT "$work/$f.txt" | cut -c1-220; done
else
  echo "--- the TCP session as tshark shows it:"
  grep HEADUNIT "$work/tcp.txt" | head -20 | cut -c1-200
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
