#!/usr/bin/env bash
# Level (b) of the systemd tests: the shipped units under a real systemd running
# as PID 1 in fresh namespaces (see ns-systemd.sh; nothing of the host's systemd
# is used or touched).
#
#   test_systemd_pid1.sh /path/to/headunitd
#
# The units are used verbatim; a drop-in only points ExecStart= at the binary
# and the shipped config under test (copied into the namespace's /run, as
# PrivateTmp= hides /tmp),
# shortens WatchdogSec= to 2 s, disables core dumps and the start rate limit,
# and sends the daemon's output to a file (no journald in the namespace). The
# groups of headunitd.sysusers (headunit, which headunitd.socket's SocketGroup=
# needs, and headunit-hmi and headunit-phone, which the shipped config's access
# rules name) are added to a copy of /etc/group bind-mounted inside the namespace.
#
# Prints PASS:/FAIL: lines and `N passed, N failed`; exits non-zero on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(readlink -f "${1:?usage: $0 /path/to/headunitd}")
PY=$(python3 -c 'import sys; print(sys.executable)')
CLIENT="$HERE/huclient.py"
SOCK=/run/headunitd/headunitd.sock
TCP=127.0.0.1:7420
. "$HERE/ns-systemd.sh"

passed=0 failed=0
check() {  # check NAME CONDITION-EXIT-STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS: $1${3:+ -- $3}"
    else
        failed=$((failed + 1)); echo "FAIL: $1${3:+ -- $3}"
    fi
}
show() { ns_run systemctl show -p "$2" --value "$1"; }
wait_until() {  # wait_until SECONDS COMMAND...: polls every 0.1 s
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.1; done
}

WORK=$(mktemp -d /tmp/headunitd-pid1.XXXXXX)
cleanup() {
    ns_teardown
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the unit directory ------------------------------------------------------
U=$WORK/units
mkdir -p "$U/headunitd.service.d"
cp "$ROOT"/systemd/headunitd.service "$ROOT"/systemd/headunitd.socket "$ROOT"/systemd/headunitd-tcp.socket "$U/"
for t in sysinit basic sockets paths timers slices local-fs local-fs-pre swap umount shutdown multi-user network; do
    printf '[Unit]\nDescription=%s (test stub)\n' "$t" > "$U/$t.target"
done
cat > "$U/headunitd-test.target" <<UNIT
[Unit]
Description=headunitd systemd test
Wants=headunitd.socket headunitd-tcp.socket
After=headunitd.socket headunitd-tcp.socket
UNIT
# The shipped command line with the test's paths (and more logging for diagnosis).
exec_start=$(sed -n 's/^ExecStart=//p' "$ROOT/systemd/headunitd.service" \
    | sed -e 's|/usr/sbin/headunitd|/run/headunitd-test/headunitd|' -e 's|/etc/headunitd/|/run/headunitd-test/|')
cat > "$U/headunitd.service.d/test.conf" <<UNIT
[Unit]
StartLimitIntervalSec=0

[Service]
ExecStart=
ExecStart=$exec_start --log-level info
WatchdogSec=2s
LimitCORE=0
Environment=SWIFT_BACKTRACE=enable=no
StandardOutput=append:/run/headunitd-test/daemon.log
StandardError=append:/run/headunitd-test/daemon.log
UNIT
cp /etc/group "$WORK/group"
grep -q '^headunit:' "$WORK/group" || echo 'headunit:x:64999:' >> "$WORK/group"
grep -q '^headunit-hmi:' "$WORK/group" || echo 'headunit-hmi:x:64998:' >> "$WORK/group"
grep -q '^headunit-phone:' "$WORK/group" || echo 'headunit-phone:x:64997:' >> "$WORK/group"
cat > "$WORK/preboot.sh" <<PRE
#!/bin/sh
set -e
mount --bind '$WORK/group' /etc/group
mkdir -p /run/headunitd-test
cp '$BIN' /run/headunitd-test/headunitd
cp '$ROOT/systemd/headunitd.json' /run/headunitd-test/headunitd.json
cp '$CLIENT' /run/headunitd-test/huclient.py
chmod 755 /run/headunitd-test /run/headunitd-test/headunitd
chmod 644 /run/headunitd-test/huclient.py
PRE
chmod +x "$WORK/preboot.sh"

# --- boot --------------------------------------------------------------------
t0=$(date +%s%N)
ns_boot "$U" headunitd-test.target "$WORK/preboot.sh"
rc=$?
check "systemd boots as PID 1 in fresh namespaces" $rc "$(( ($(date +%s%N) - t0) / 1000000 )) ms"
[ $rc -eq 0 ] || { echo "0 passed, 1 failed"; exit 1; }

client() { ns_run "$PY" "$CLIENT" "$@"; }
daemon_log() { ns_run cat /run/headunitd-test/daemon.log 2>/dev/null | tail -n 20; }

[ "$(show headunitd.socket ActiveState)" = active ] && [ "$(show headunitd-tcp.socket ActiveState)" = active ] \
    && [ "$(show headunitd.service ActiveState)" = inactive ]
check "sockets listening, service not started yet" $?

perm=$(ns_run stat -c %a:%G "$SOCK" 2>&1)
[ "$perm" = 660:headunit ]
check "Unix socket is 0660 root:headunit" $? "$perm"

# The listen backlog of a listening socket is ss's Send-Q column.
backlogs() {
    echo "tcp=$(ns_run ss -ltnH 'sport = :7420' | awk '{print $3}') unix=$(ns_run ss -lxH | awk -v p="$SOCK" '$5 == p {print $4}')"
}
backlog_systemd=$(backlogs)

# --- start on the first connection ------------------------------------------
out=$(client hello "unix:$SOCK" --timeout 20 2>&1)
check "the first connection starts the service and is served" $? "$out"
[ "$(show headunitd.service ActiveState)" = active ]
check "service active (Type=notify: READY=1 received)" $? "$(show headunitd.service ActiveState)/$(show headunitd.service SubState)"
out=$(client hello "tcp:$TCP" 2>&1)
check "TCP listener served" $? "$out"
echo "$out" | grep -q 'auth_required=1'
check "the shipped config requires TCP phones to pair (PROTOCOL.md section 20; its StateDirectory= works)" $? "$out"

# The shipped access rules (PROTOCOL.md sections 10.1 and 20.5): the daemon
# sees a peer's real gid (no PrivateUsers=, which would show every other user
# as nobody), so a process running with the headunit-hmi group takes the HMI
# role and a member of the socket's group without it does not. Debian's
# python3 and a copy of the client: the test's own may live where these
# users cannot read.
hmi_gid=$(ns_run getent group headunit-hmi | cut -d: -f3)
socket_gid=$(ns_run getent group headunit | cut -d: -f3)
out=$(ns_run setpriv --reuid 64990 --regid "$hmi_gid" --groups "$socket_gid" /usr/bin/python3 /run/headunitd-test/huclient.py hello "unix:$SOCK" --role hmi 2>&1)
check "shipped rules: a process with the headunit-hmi group is welcomed as the HMI" $? "$out"
out=$(ns_run setpriv --reuid 64991 --regid "$socket_gid" --groups "$socket_gid" /usr/bin/python3 /run/headunitd-test/huclient.py hello "unix:$SOCK" --role hmi 2>&1)
echo "$out" | grep -q 'code=26 '
check "shipped rules: a member of the socket's group alone is refused the HMI role (PEER_NOT_ALLOWED)" $? "$out"

backlog_daemon=$(backlogs)
[ "$backlog_daemon" = "$backlog_systemd" ] && ! echo "$backlog_daemon" | grep -qE '=(128|256)?( |$)'
check "the daemon restored systemd's listen backlog after adopting the sockets" $? \
    "systemd: $backlog_systemd, with the daemon: $backlog_daemon"

status_text=$(show headunitd.service StatusText)
ns_run systemctl status --no-pager headunitd.service > "$WORK/status.txt" 2>&1
grep -q "Status: \"$status_text\"" "$WORK/status.txt" && [ -n "$status_text" ]
check "systemctl status shows the STATUS= text" $? "$status_text"

# --- the sandbox is really applied ------------------------------------------
pid=$(show headunitd.service MainPID)
sandbox=$(ns_run sh -c "grep -E '^(Uid|NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/$pid/status | tr -s '\t ' ' ' | tr '\n' ';'; \
    [ \"\$(readlink /proc/$pid/ns/net)\" != \"\$(readlink /proc/1/ns/net)\" ] && echo private-net")
echo "$sandbox" | grep -q 'NoNewPrivs: 1' && echo "$sandbox" | grep -q 'Seccomp: 2' \
    && echo "$sandbox" | grep -q 'CapEff: 0000000000000000' && echo "$sandbox" | grep -q 'CapBnd: 0000000000000000' \
    && echo "$sandbox" | grep -q private-net && ! echo "$sandbox" | grep -q 'Uid: 0 '
check "daemon runs unprivileged, seccomp-filtered, in its own network namespace" $? "$sandbox"

# --- no refused connection across restarts ------------------------------------
rm -f "$WORK/stop-loops"
client loop "unix:$SOCK" --until "$WORK/stop-loops" > "$WORK/loop-unix.txt" 2>&1 &
loop_unix=$!
# TCP is TLS: a connection still in its handshake at a restart ends (its TLS
# state cannot be handed over, PROTOCOL.md section 22) and the client connects
# again; none may be refused.
client loop "tcp:$TCP" --ends-ok --until "$WORK/stop-loops" > "$WORK/loop-tcp.txt" 2>&1 &
loop_tcp=$!
sleep 0.5
restarts_ok=0
for i in 1 2 3; do
    ns_run systemctl restart headunitd.service || restarts_ok=1
    sleep 0.7
done
touch "$WORK/stop-loops"
wait $loop_unix; rc_unix=$?
wait $loop_tcp; rc_tcp=$?
check "3 x systemctl restart succeed" $restarts_ok
check "Unix client looping across restarts: no refused or dropped connection" $rc_unix "$(cat "$WORK/loop-unix.txt")"
check "TCP (TLS) client looping across restarts: no refused connection" $rc_tcp "$(cat "$WORK/loop-tcp.txt")"

# --- restarts that drop nobody (fd store handover, PROTOCOL.md section 22) ---------
mkdir -p "$WORK/pb"
protoc -I "$ROOT/Protocol" --python_out "$WORK/pb" "$ROOT"/Protocol/*.proto
rm -f "$WORK/handover-ready" "$WORK/handover-go"
client hello "unix:$SOCK" > /dev/null 2>&1  # the service is up before the session starts
# Debian's python3-protobuf (the Python on PATH may be another one without it).
ns_run /usr/bin/python3 "$HERE/handover_client.py" "$WORK/pb" "unix:$SOCK" --ready "$WORK/handover-ready" --go "$WORK/handover-go" \
    > "$WORK/handover.txt" 2>&1 &
handover=$!
wait_until 20 test -e "$WORK/handover-ready"
before=$(show headunitd.service MainPID)
t0=$(date +%s%N)
ns_run systemctl restart headunitd.service
rc=$?
restart_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
after=$(show headunitd.service MainPID)
touch "$WORK/handover-go"
wait $handover
rc_client=$?
[ $rc -eq 0 ] && [ "$after" != 0 ] && [ "$after" != "$before" ] && [ "$(show headunitd.service ActiveState)" = active ]
check "systemctl restart with a session in progress: a new main process" $? "MainPID $before -> $after, $restart_ms ms"
check "the phone and the HMI keep their connections across the restart (no Goodbye, no EOF; requests under load answered, PINGs ponged, a frame split across the restart parsed; the pushed template pops and the HMI sees it)" \
    $rc_client "$(cat "$WORK/handover.txt")"
ns_run grep -q 'restored what the previous process handed over.*connections=2' /run/headunitd-test/daemon.log
check "the new process took back both connections and the snapshot" $? "$(ns_run grep -E 'handed over|restored|fd store' /run/headunitd-test/daemon.log | tail -n 4)"
fdstore=$(show headunitd.service NFileDescriptorStore)
[ "$fdstore" = 0 ]
check "nothing left in the fd store afterwards (the new process removed what it took)" $? "NFileDescriptorStore=$fdstore"

# --- a maximal valid session survives systemctl restart (issue 24) -------------
# Four apps (three icons of max_image_bytes), stacks of the largest lists up to
# max_phone_template_bytes, a modal: the largest snapshot the limits allow
# within a few per cent (section 22).
rm -f "$WORK/maximal-ready" "$WORK/maximal-go"
ns_run /usr/bin/python3 "$HERE/handover_client.py" "$WORK/pb" "unix:$SOCK" --maximal --ready "$WORK/maximal-ready" --go "$WORK/maximal-go" \
    > "$WORK/maximal.txt" 2>&1 &
maximal=$!
wait_until 120 test -e "$WORK/maximal-ready"
before=$(show headunitd.service MainPID)
t0=$(date +%s%N)
ns_run systemctl restart headunitd.service
rc=$?
restart_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
after=$(show headunitd.service MainPID)
touch "$WORK/maximal-go"
wait $maximal
rc_client=$?
snapshot=$(ns_run grep -E 'handed over|restored what' /run/headunitd-test/daemon.log | tail -n 2 | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$after" != 0 ] && [ "$after" != "$before" ]
check "systemctl restart with a maximal session: a new main process" $? "MainPID $before -> $after, $restart_ms ms"
check "a maximal valid session survives systemctl restart (every app, stack and the modal the same; no Goodbye, no EOF)" \
    $rc_client "$(cat "$WORK/maximal.txt"); $snapshot"
fdstore=$(show headunitd.service NFileDescriptorStore)
[ "$fdstore" = 0 ]
check "nothing left in the fd store after the maximal restart" $? "NFileDescriptorStore=$fdstore"

# --- watchdog ----------------------------------------------------------------
old=$(show headunitd.service MainPID)
restarts=$(show headunitd.service NRestarts)
ns_run kill -STOP "$old"
t0=$SECONDS
new_main() { local p; p=$(show headunitd.service MainPID); [ "$p" != 0 ] && [ "$p" != "$old" ] && [ "$(show headunitd.service ActiveState)" = active ]; }
wait_until 20 new_main
rc=$?
check "a SIGSTOPped daemon is killed by the watchdog and restarted" $rc \
    "after $((SECONDS - t0)) s; NRestarts $restarts -> $(show headunitd.service NRestarts); $(ns_log | grep -m1 -i 'watchdog timeout')"
ns_log | grep -qi 'headunitd.service: Watchdog timeout'
check "systemd logged the watchdog timeout" $?
out=$(client hello "unix:$SOCK" 2>&1)
check "served again after the watchdog restart" $? "$out"

# --- graceful stop -----------------------------------------------------------
rm -f "$WORK/held"
client hold "unix:$SOCK" --announce --ready "$WORK/held" > "$WORK/hold.txt" 2>&1 &
hold=$!
wait_until 10 test -e "$WORK/held"
phone_shown() { show headunitd.service StatusText | grep -qE '(^|[^0-9])[1-9][0-9]* *phone'; }
wait_until 3 phone_shown
check "systemctl status follows the daemon: the connected phone shows in STATUS" $? "$(show headunitd.service StatusText)"
ns_run systemctl stop headunitd.service 2>>"$WORK/systemctl.txt"
wait $hold
check "systemctl stop: the connected client gets Goodbye(SHUTTING_DOWN, reason) and an orderly close" $? "$(cat "$WORK/hold.txt")"
result="$(show headunitd.service Result) $(show headunitd.service ExecMainCode) $(show headunitd.service ExecMainStatus)"
[ "$result" = "success 1 0" ]   # ExecMainCode 1 = CLD_EXITED
check "systemctl stop ends with Result=success, exit status 0" $? "Result ExecMainCode ExecMainStatus: $result"
ns_run test -S "$SOCK" && [ "$(show headunitd.socket SubState)" = listening ]
check "the socket stays (path not unlinked) and listening after the stop" $?
out=$(client hello "unix:$SOCK" --timeout 20 2>&1)
check "the next connection activates the service again" $? "$out"
ns_run systemctl stop headunitd.service 2>>"$WORK/systemctl.txt"
[ "$(show headunitd.service Result)" = success ]
check "second stop: Result=success" $?

if [ $failed -gt 0 ] || [ -n "${HU_TEST_VERBOSE:-}" ]; then
    echo "--- daemon log (tail) ---"; daemon_log
    echo "--- systemd log (tail) ---"; ns_log | tail -n 30
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
