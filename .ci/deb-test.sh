#!/usr/bin/env bash
# The Debian package on a root without the Swift toolchain (issue 14):
#
#   .ci/deb-test.sh [path/to/headunitd_VERSION_ARCH.deb]
#
# Without an argument it builds the package (scripts/build-deb.sh --no-lintian).
# Needs root (namespaces, mounts, cgroups) and a cgroup2 hierarchy, like level
# (b) of .ci/systemd-tests.sh, whose ns-systemd.sh it reuses. Inside fresh
# pid/mount/net/uts/ipc/cgroup namespaces:
#   - an overlay of the host's root with a tmpfs upper layer (nothing written
#     reaches the host) in which /opt/swift does not exist (an overlay whiteout),
#     pivot_root'ed into;
#   - `dpkg -i` there before systemd runs (as in a chroot or an image build:
#     the maintainer scripts must enable but not start anything);
#   - then the real systemd boots as PID 1 (sockets.target) and the checks run:
#     sockets enabled and listening, no toolchain library mapped, activation
#     on the first connection, a phone session end to end with the packaged
#     headunitctl (Unix and TCP), `systemctl restart` refusing no connection and
#     serving a new session, an upgrade (dpkg -i again) restarting the daemon
#     but not the sockets, `apt-get remove` (conffile kept) and `apt-get purge`
#     (nothing left but the headunit group, which Debian keeps).
# Prints PASS:/FAIL: lines and `N passed, N failed`; exits non-zero on failure.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
started=$SECONDS
passed=0 failed=0
check() {  # check NAME STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS: $1${3:+ -- $3}"
    else
        failed=$((failed + 1)); echo "FAIL: $1${3:+ -- $3}"
    fi
}
finish() {
    echo "deb test took $((SECONDS - started)) s"
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}
if [ "$(id -u)" -ne 0 ]; then
    check "needs root (unshare, mount, pivot_root, cgroups)" 1
    finish
fi

DEB=${1:-}
if [ -z "$DEB" ]; then
    DEB=$(scripts/build-deb.sh --no-lintian 2>/tmp/headunitd-build-deb.log)
    status=$?
    DEB=$(printf '%s\n' "$DEB" | tail -n 1)
    [ $status -eq 0 ] && [ -f "$DEB" ] || status=1
    check "scripts/build-deb.sh builds the package" $status "$DEB"
    [ $status -eq 0 ] || { tail -n 30 /tmp/headunitd-build-deb.log; finish; }
fi
DEB=$(readlink -f "$DEB")
[ -f "$DEB" ] || { check "package $DEB exists" 1; finish; }

. "$ROOT/Tests/SystemdIntegration/ns-systemd.sh"
WORK=$(mktemp -d /tmp/headunitd-debtest.XXXXXX)
cleanup() {
    ns_teardown
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What the package may leave after a purge is compared with this list, taken
# in the new root before the install.
SNAP='find /etc /usr /lib /var/lib/dpkg/info /var/lib/systemd -xdev 2>/dev/null | grep -v -e "^/etc/ld.so.cache$" | sort'

# Phase 1, as in a chroot or an image build: in a mount and pid namespace, an
# overlay of the host's root (tmpfs upper layer, nothing reaches the host) in
# which /opt/swift does not exist (an overlay whiteout), with an empty /run (no
# systemd running): `dpkg -i` there. The upper layer is kept for phase 2.
cat > "$WORK/phase1.sh" <<PHASE1
#!/bin/sh
set -e
mount --make-rprivate /
O='$WORK/ovl' R='$WORK/root'
mkdir -p \$O \$R
mount -t tmpfs -o mode=755 tmpfs \$O
mkdir -p \$O/upper/opt \$O/work
mknod \$O/upper/opt/swift c 0 0
mount -t overlay overlay -o lowerdir=/,upperdir=\$O/upper,workdir=\$O/work \$R
mount --rbind /dev \$R/dev
mount -t proc proc \$R/proc
mount -t tmpfs -o mode=755 tmpfs \$R/run
mount -t tmpfs -o mode=1777 tmpfs \$R/tmp
# The host is a container image whose policy-rc.d (exit 101) forbids every
# service action; a board's root has none, so neither has this one.
rm -f \$R/usr/sbin/policy-rc.d
mkdir -p \$R/root/debtest
cp '$DEB' \$R/root/debtest/headunitd.deb
chroot \$R sh -c '$SNAP > /root/debtest/before.txt
    dpkg -i /root/debtest/headunitd.deb > /root/debtest/dpkg-i.log 2>&1; echo \$? > /root/debtest/dpkg-i.rc'
cp -a \$O/upper '$WORK/upper'
PHASE1
chmod +x "$WORK/phase1.sh"
unshare --mount --pid --fork --mount-proc "$WORK/phase1.sh" > "$WORK/phase1.log" 2>&1
check "phase 1: overlay root without /opt/swift, dpkg -i with no systemd running" $? "$(tail -n 3 "$WORK/phase1.log" | tr '\n' ' ')"
[ -d "$WORK/upper" ] || finish

# Phase 2 (ns-systemd.sh's PREBOOT, after its /run, /sys, cgroup2 and console
# mounts, before systemd is exec'ed): the same root (phase 1's upper layer
# copied into a tmpfs), pivot_root'ed into; then the real systemd boots in it.
cat > "$WORK/preboot.sh" <<PRE
#!/bin/sh
set -e
O=/run/debtest-ovl R=/run/debtest-root
mkdir -p \$O \$R
mount -t tmpfs -o mode=755 tmpfs \$O
cp -a '$WORK/upper' \$O/upper
mkdir \$O/work
mount -t overlay overlay -o lowerdir=/,upperdir=\$O/upper,workdir=\$O/work \$R
mount --rbind /proc \$R/proc
mount --rbind /sys \$R/sys
mount --rbind /dev \$R/dev
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs \$R/run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs \$R/tmp
mkdir \$R/run/oldroot
cd \$R
pivot_root . run/oldroot
cd /
umount -l /run/oldroot
rmdir /run/oldroot
PRE
chmod +x "$WORK/preboot.sh"

t0=$(date +%s%N)
ns_boot "/etc/systemd/system:/run/systemd/system:/lib/systemd/system" sockets.target "$WORK/preboot.sh"
rc=$?
check "phase 2: the same root, systemd boots as PID 1 in fresh namespaces" $rc "$(( ($(date +%s%N) - t0) / 1000000 )) ms"
[ $rc -eq 0 ] || finish

show() { ns_run systemctl show -p "$2" --value "$1"; }
wait_until() {  # wait_until SECONDS COMMAND...: polls every 0.1 s
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.1; done
}
ctl() { ns_run timeout 60 headunitctl "$@"; }
SOCK=/run/headunitd/headunitd.sock

# --- the install, done before systemd ran -------------------------------------
ns_run test ! -e /opt/swift && ! ns_run sh -c 'command -v swift' >/dev/null
check "no /opt/swift and no swift in the root" $?
[ "$(ns_run cat /root/debtest/dpkg-i.rc)" = 0 ] && ! ns_run grep -qiE 'error|warning' /root/debtest/dpkg-i.log
check "dpkg -i without a running systemd: exit 0, no error or warning" $? "$(ns_run cat /root/debtest/dpkg-i.log | tr '\n' ' ' | cut -c1-400)"
ns_run getent group headunit >/dev/null
check "sysusers: the headunit group exists" $?
out=$(ns_run sh -c 'ldd /usr/sbin/headunitd; ldd /usr/bin/headunitctl' 2>&1)
! echo "$out" | grep -qiE 'swift|Foundation|dispatch|icu|not found'
check "packaged binaries need no toolchain library (ldd)" $? "$(echo "$out" | awk '{print $1}' | sort -u | tr '\n' ' ')"

# --- after boot: sockets enabled and listening, service not started -----------
en="$(ns_run systemctl is-enabled headunitd.socket headunitd-tcp.socket headunitd.service 2>&1 | tr '\n' ' ')"
[ "$en" = "enabled enabled indirect " ] || [ "$en" = "enabled enabled disabled " ]
check "sockets enabled by the package (service: socket-activated only)" $? "$en"
[ "$(show headunitd.socket ActiveState)" = active ] && [ "$(show headunitd-tcp.socket ActiveState)" = active ] \
    && [ "$(show headunitd.service ActiveState)" = inactive ]
check "at boot: both sockets listening, daemon not started" $? \
    "$(show headunitd.socket ActiveState) $(show headunitd-tcp.socket ActiveState) $(show headunitd.service ActiveState)"
perm=$(ns_run stat -c %a:%U:%G "$SOCK" 2>&1)
[ "$perm" = 660:root:headunit ]
check "Unix socket 0660 root:headunit" $? "$perm"

# --- socket activation on the first connection --------------------------------
out=$(ctl status 2>&1)
check "first connection (headunitctl status, packaged) starts the daemon and is served" $? "$(echo "$out" | head -n 2 | tr '\n' ' ')"
# READY=1 is a datagram systemd reads when it gets to it: the daemon may
# serve the first connection (the activated listener already accepts)
# before systemd has marked the unit active, on a loaded machine by a while.
service_active() { [ "$(show headunitd.service ActiveState)" = active ]; }
wait_until 10 service_active
check "service active (READY=1)" $? "$(show headunitd.service ActiveState) $(show headunitd.service SubState)"
pid=$(show headunitd.service MainPID)
maps=$(ns_run sh -c "awk '\$6 ~ /\\.so/ {print \$6}' /proc/$pid/maps | sort -u" 2>&1)
! echo "$maps" | grep -qiE 'swift|Foundation|dispatch|icu'
check "the running daemon maps no toolchain library" $? "$(echo "$maps" | xargs -n1 basename 2>/dev/null | tr '\n' ' ')"

# --- a phone session end to end -----------------------------------------------
out=$(ctl play /usr/share/doc/headunitd/examples/quickstart.json 2>&1)
check "phone session end to end over the Unix socket (headunitctl play quickstart)" $? "$(echo "$out" | tail -n 1)"
# TCP phones must pair (the packaged configuration keeps allowUnpairedTcp off).
out=$(ctl play --tcp 127.0.0.1:7420 /usr/share/doc/headunitd/examples/quickstart.json 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "paired"
check "an unpaired phone on TCP cannot play: the car asks for a paired key (the packaged default)" $? "$(echo "$out" | tail -n 1)"
code=$(ctl pair 2>&1 | sed -n 's/^pairing code \([0-9]*\).*/\1/p')
out=$(ctl pair-phone --tcp 127.0.0.1:7420 --code "${code:-none}" 2>&1)
check "pairing: headunitctl pair on the car, pair-phone on the phone" $? "$(echo "$out" | tail -n 1)"
out=$(ctl play --tcp 127.0.0.1:7420 /usr/share/doc/headunitd/examples/quickstart.json 2>&1)
check "phone session end to end over TCP (paired, authenticated)" $? "$(echo "$out" | tail -n 1)"

# --- restart: no refused connection, then a new session -------------------------
old=$(show headunitd.service MainPID)
ns_run sh -c 'i=0; fails=0; while [ ! -e /run/debtest-stop ]; do timeout 20 headunitctl status >/dev/null 2>&1 || fails=$((fails+1)); i=$((i+1)); done; echo "$i $fails"' > "$WORK/loop.txt" 2>&1 &
loop=$!
sleep 1
ns_run systemctl restart headunitd.service
rc=$?
sleep 1
ns_run touch /run/debtest-stop
wait $loop
read -r tries fails < "$WORK/loop.txt"
new=$(show headunitd.service MainPID)
[ $rc -eq 0 ] && [ "$new" != "$old" ] && [ "$new" != 0 ]
check "systemctl restart: a new daemon process" $? "MainPID $old -> $new"
[ "${fails:-1}" = 0 ] && [ "${tries:-0}" -gt 0 ]
check "clients connecting across the restart: none refused or failed" $? "${tries:-?} connections, ${fails:-?} failed"
out=$(ctl play /usr/share/doc/headunitd/examples/quickstart.json 2>&1)
check "a new phone session after the restart" $? "$(echo "$out" | tail -n 1)"

# --- upgrade (same version reinstalled: postinst configure with the old version) -
sock_since=$(show headunitd.socket ActiveEnterTimestampMonotonic)
old=$(show headunitd.service MainPID)
out=$(ns_run dpkg -i /root/debtest/headunitd.deb 2>&1)
rc=$?
new=$(show headunitd.service MainPID)
[ $rc -eq 0 ] && [ "$new" != "$old" ] && [ "$new" != 0 ] && [ "$(show headunitd.service ActiveState)" = active ]
check "upgrade with systemd running: the daemon is restarted (try-restart)" $? "MainPID $old -> $new"
[ "$(show headunitd.socket ActiveEnterTimestampMonotonic)" = "$sock_since" ] && [ "$(show headunitd.socket ActiveState)" = active ]
check "upgrade: the sockets are not restarted (listeners kept)" $?
out=$(ctl play /usr/share/doc/headunitd/examples/quickstart.json 2>&1)
check "a phone session after the upgrade" $? "$(echo "$out" | tail -n 1)"

# --- remove, purge ---------------------------------------------------------------
out=$(ns_run apt-get remove -y -q headunitd 2>&1)
check "apt-get remove" $? "$(echo "$out" | tail -n 1)"
gone=0
for u in headunitd.service headunitd.socket headunitd-tcp.socket; do
    [ "$(show $u ActiveState)" = inactive ] || gone=1
done
ns_run test ! -e /usr/sbin/headunitd -a ! -e /usr/bin/headunitctl -a ! -e /lib/systemd/system/headunitd.service -a ! -e "$SOCK" || gone=1
check "after remove: units stopped, binaries, units and the socket gone" $gone
ns_run test -f /etc/headunitd/headunitd.json
check "after remove: the conffile stays (policy: only purge removes it)" $?
ns_run test -d /var/lib/private/headunitd
check "after remove: the state directory stays (only purge removes it)" $?
out=$(ns_run apt-get purge -y -q headunitd 2>&1)
check "apt-get purge" $? "$(echo "$out" | tail -n 1)"
ns_run sh -c "$SNAP" > "$WORK/after.txt"
ns_run cat /root/debtest/before.txt > "$WORK/before.txt"
# New paths after the purge: none may be the package's (other services that ran
# meanwhile, e.g. logind started by apt's D-Bus hook, leave their own).
new_paths=$(comm -13 "$WORK/before.txt" "$WORK/after.txt")
leftover=$(echo "$new_paths" | grep -i -e headunit -e '^/var/lib/dpkg/info/' | tr '\n' ' ')
[ -z "${leftover// /}" ]
check "after purge: no file of the package left (/etc, /usr, /var/lib/systemd, dpkg info)" $? \
    "${leftover:-none}; other new paths: $(echo "$new_paths" | tr '\n' ' ' | cut -c1-200)"
ns_run test ! -e /var/lib/private/headunitd -a ! -e /var/lib/headunitd
check "after purge: the state directory (paired phones' keys) is gone" $?
ns_run test ! -e /run/headunitd/headunitd.sock
check "after purge: no socket left (/run/headunitd itself is tmpfiles' and goes at reboot)" $?
ns_run sh -c '! dpkg -s headunitd >/dev/null 2>&1'
check "after purge: dpkg knows no headunitd" $?
ns_run getent group headunit >/dev/null
check "after purge: the headunit group stays (Debian does not remove system groups)" $?

if [ $failed -gt 0 ] || [ -n "${HU_TEST_VERBOSE:-}" ]; then
    echo "--- systemctl status ---"
    ns_run systemctl status --no-pager -n 20 headunitd.service headunitd.socket 2>&1 | tail -n 40
    echo "--- headunitd's journal (tail) ---"
    ns_run journalctl --no-pager -n 40 -u headunitd.service -u headunitd.socket -u headunitd-tcp.socket 2>/dev/null || ns_log | tail -n 40
    echo "--- journal / console (tail) ---"
    ns_run journalctl --no-pager -n 20 2>/dev/null || ns_log | tail -n 20
fi
finish
