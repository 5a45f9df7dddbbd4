# shellcheck shell=bash
# Boots a real systemd as PID 1 in fresh namespaces, for the level-b tests.
# Sourced by test-systemd-pid1.sh. Functions:
#   ns_boot UNIT_DIR TARGET [PREBOOT]
#                             start it (waits until the target is reached);
#                             PREBOOT, a script, runs inside the namespace first
#                             (e.g. to bind-mount test files over /etc)
#   ns_run CMD...             run a command inside (systemctl, the test client...)
#   ns_teardown               SIGKILL its PID 1, wait, remove its cgroup subtree
#
# Nothing of the host is touched: the namespace gets its own pid, mount, net, uts,
# ipc and cgroup namespaces, a tmpfs /run, a read-only sysfs and /proc/sys (PID 1
# would otherwise raise fs.nr_open and fs.file-max on the host), a cgroup2 mount
# rooted at a cgroup created for the test, and a unit search path holding only
# the test's units (SYSTEMD_UNIT_PATH) with no generators. Everything mounted
# lives in the namespace's mount table and vanishes with it.

NS_PID=            # PID 1 of the namespace, as the host sees it
NS_UNSHARE_PID=
NS_CGROUP=         # the host-side cgroup directory the namespace is rooted at
NS_STATE_DIR=
NS_CONSOLE_PID=    # the pty reader that copies the namespace's console to a file

_ns_cgroup2_mount() {
    findmnt -n -t cgroup2 -o TARGET | head -n1
}

ns_boot() {
    local unit_dir=$1 target=$2 preboot=${3:-true}
    NS_STATE_DIR=$(mktemp -d /tmp/headunitd-ns.XXXXXX)
    local cg2 self
    cg2=$(_ns_cgroup2_mount)
    if [ -z "$cg2" ]; then
        echo "ns_boot: no cgroup2 hierarchy mounted on this host" >&2
        return 1
    fi
    self=$(sed -n 's/^0:://p' /proc/self/cgroup)
    NS_CGROUP="$cg2${self%/}/headunitd-test-$$-$RANDOM"
    mkdir "$NS_CGROUP" || return 1

    mkdir -p "$NS_STATE_DIR/empty"
    _ns_private_tmp_dirs > "$NS_STATE_DIR/private-tmp.before"
    : > "$NS_STATE_DIR/console.log"
    python3 -c '
import os, sys, tty
master, slave = os.openpty()
tty.setraw(slave)
print(os.ttyname(slave), flush=True)
sys.stdout.close()
with open(sys.argv[1], "ab", buffering=0) as log:
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        log.write(data)
' "$NS_STATE_DIR/console.log" > "$NS_STATE_DIR/console.tty" &
    NS_CONSOLE_PID=$!
    local console i
    for i in $(seq 1 50); do
        console=$(cat "$NS_STATE_DIR/console.tty" 2>/dev/null)
        [ -n "$console" ] && break
        sleep 0.02
    done
    [ -c "$console" ] || { echo "ns_boot: no pty for the console" >&2; return 1; }
    cat > "$NS_STATE_DIR/init.sh" <<INIT
#!/bin/sh
set -e
# Runs as PID 1 of the new pid namespace, before exec'ing systemd.
mount --make-rprivate /
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
# StateDirectory= (DynamicUser: /var/lib/private/NAME and a /var/lib/NAME
# link) must not land on the host's disk.
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /var/lib
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs /sys
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
# In a container PID 1 logs to /dev/console (it must be a tty): give it a pty
# whose other side goes to our log file, not the host's console.
mount --bind '$console' /dev/console
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount --bind -o ro /proc/sysrq-trigger /proc/sysrq-trigger 2>/dev/null || true
hostname headunitd-test
'$preboot'
export container=headunitd-test SYSTEMD_LOG_COLOR=0
export SYSTEMD_UNIT_PATH='$unit_dir'
export SYSTEMD_GENERATOR_PATH='$NS_STATE_DIR/empty'
export SYSTEMD_ENVIRONMENT_GENERATOR_PATH='$NS_STATE_DIR/empty'
exec /lib/systemd/systemd --system --unit='$target' --log-target=console --log-level=info --show-status=no
INIT
    chmod +x "$NS_STATE_DIR/init.sh"
    # The subshell moves itself into the test cgroup first, so the new cgroup
    # namespace (and systemd's whole tree) is rooted there.
    ( echo $BASHPID > "$NS_CGROUP/cgroup.procs" &&
      exec unshare --pid --fork --mount --net --uts --ipc --cgroup --mount-proc \
          "$NS_STATE_DIR/init.sh" ) </dev/null >"$NS_STATE_DIR/systemd.log" 2>&1 &
    NS_UNSHARE_PID=$!
    local i
    for i in $(seq 1 100); do
        NS_PID=$(cat /proc/$NS_UNSHARE_PID/task/$NS_UNSHARE_PID/children 2>/dev/null | awk '{print $1}')
        [ -n "$NS_PID" ] && [ "$(cat /proc/$NS_PID/comm 2>/dev/null)" = systemd ] && break
        NS_PID=
        sleep 0.05
    done
    if [ -z "$NS_PID" ]; then
        echo "ns_boot: systemd did not start; its log:" >&2
        ns_log >&2
        return 1
    fi
    # Wait until the manager answers on its private bus and the boot job is done.
    for i in $(seq 1 200); do
        state=$(ns_run systemctl is-system-running 2>/dev/null)
        case $state in running|degraded) return 0 ;; esac
        sleep 0.05
    done
    echo "ns_boot: systemd did not finish booting (state: ${state:-none}); its log:" >&2
    ns_log >&2
    return 1
}

ns_run() {
    nsenter --target "$NS_PID" --pid --mount --net --uts --ipc --cgroup -- "$@"
}

ns_log() {
    cat "$NS_STATE_DIR/systemd.log" "$NS_STATE_DIR/console.log"
}

_ns_private_tmp_dirs() {
    ls -d /tmp/systemd-private-* /var/tmp/systemd-private-* 2>/dev/null | sort
}

ns_teardown() {
    if [ -n "$NS_PID" ] && kill -0 "$NS_PID" 2>/dev/null; then
        # Stop the services first: PrivateTmp= directories live in the host's
        # /tmp and /var/tmp (the namespace shares the file system) and systemd
        # removes them when a service stops, not when it is killed.
        ns_run timeout 20 sh -c 'units=$(systemctl list-units --type=service,socket --state=active --plain --no-legend | cut -d" " -f1); [ -z "$units" ] || systemctl stop $units' >/dev/null 2>&1
        kill -KILL "$NS_PID" 2>/dev/null
    fi
    if [ -n "$NS_UNSHARE_PID" ]; then
        wait "$NS_UNSHARE_PID" 2>/dev/null
    fi
    if [ -n "$NS_CGROUP" ] && [ -d "$NS_CGROUP" ]; then
        local i
        for i in $(seq 1 50); do
            # Depth first: a cgroup can only be removed once its children are.
            find "$NS_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$NS_CGROUP" ] || break
            sleep 0.1
        done
        [ -d "$NS_CGROUP" ] && echo "ns_teardown: could not remove $NS_CGROUP" >&2
    fi
    if [ -n "$NS_CONSOLE_PID" ]; then
        kill "$NS_CONSOLE_PID" 2>/dev/null
        wait "$NS_CONSOLE_PID" 2>/dev/null
    fi
    if [ -n "$NS_STATE_DIR" ] && [ -f "$NS_STATE_DIR/private-tmp.before" ]; then
        # Whatever PrivateTmp= directory a killed service still left.
        _ns_private_tmp_dirs | comm -13 "$NS_STATE_DIR/private-tmp.before" - | xargs -r rm -rf
    fi
    [ -n "$NS_STATE_DIR" ] && rm -rf "$NS_STATE_DIR"
    NS_PID= NS_UNSHARE_PID= NS_CGROUP= NS_STATE_DIR= NS_CONSOLE_PID=
}
