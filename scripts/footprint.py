#!/usr/bin/env python3
"""The daemon's footprint, as reported in BENCHMARKS.md (issue 14).

  scripts/footprint.py --daemon BIN --ctl HEADUNITCTL [--echo NIOEchoServer] [--runs 3]

For the daemon: file size, NEEDED shared libraries (objdump -p), the shared
objects it actually maps (/proc/PID/maps), start-to-READY (exec until READY=1
arrives on NOTIFY_SOCKET), binding its socket itself and socket-activated
(a listener passed in LISTEN_FDS, as systemd does; also until the first
connection, headunitctl status, is served), VmRSS idle (1 s after READY), VmRSS after a phone
session (`headunitctl play scenarios/quickstart.json`) with one phone
(holding, apps announced) and one HMI (`headunitctl watch`) connected.
For the echo server: VmRSS idle and with one client connected (bytes echoed).
Prints one table row per run and the median.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HUCLIENT = os.path.join(ROOT, "Tests", "SystemdIntegration", "huclient.py")
SCENARIO = os.path.join(ROOT, "scenarios", "quickstart.json")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def mapped_objects(pid):
    objs = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and ".so" in parts[5]:
                objs.add(parts[5])
    return sorted(objs)


def needed(binary):
    out = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True).stdout
    return [l.split()[1] for l in out.splitlines() if l.strip().startswith("NEEDED")]


def wait_connectable(path, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{path} not connectable")


def notify_socket(path):
    """The NOTIFY_SOCKET the daemon reports to, as systemd's would be."""
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(30)
    return ns


def wait_ready(ns, t0):
    """Milliseconds from t0 until READY=1 arrives on ns."""
    while True:
        if "READY=1" in ns.recv(4096).decode().split("\n"):
            return (time.monotonic() - t0) * 1000


def start_activated(command, sock, notify):
    """Starts `command` (the daemon and its arguments) socket-activated as
    systemd does: a listener bound to `sock` handed over as fd 3
    (LISTEN_FDS=1, LISTEN_FDNAMES=unix, LISTEN_PID the daemon's own pid) and
    NOTIFY_SOCKET at `notify`. Returns (proc, listener, notify socket, t0)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock)
    listener.listen(128)
    ns = notify_socket(notify)
    env = dict(os.environ, NOTIFY_SOCKET=notify, LISTEN_FDS="1", LISTEN_FDNAMES="unix")
    fd = listener.fileno()
    t0 = time.monotonic()
    # sh sets LISTEN_PID to its own pid, which exec hands to the daemon.
    proc = subprocess.Popen(["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"'] + command, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: os.set_inheritable(3, True) if fd == 3 else os.dup2(fd, 3),
                            close_fds=False)
    return proc, listener, ns, t0


def activated_ready_ms(args, tmp):
    """Start-to-READY under socket activation (`start_activated`), so the
    daemon adopts the listener instead of binding; then the first connection
    is served (a status request)."""
    sock = os.path.join(tmp, "activated.sock")
    proc, listener, ns, t0 = start_activated([args.daemon], sock, os.path.join(tmp, "notify-activated.sock"))
    try:
        ready_ms = wait_ready(ns, t0)
        subprocess.run([args.ctl, "status", "--unix-socket", sock], check=True,
                       stdout=subprocess.DEVNULL, timeout=30)
        served_ms = (time.monotonic() - t0) * 1000
        return ready_ms, served_ms
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        ns.close()
        listener.close()


def daemon_run(args, tmp):
    sock = os.path.join(tmp, "hu.sock")
    notify = os.path.join(tmp, "notify.sock")
    ns = notify_socket(notify)
    env = dict(os.environ, NOTIFY_SOCKET=notify)
    env.pop("LISTEN_FDS", None)
    t0 = time.monotonic()
    proc = subprocess.Popen([args.daemon, "--unix-socket", sock, "--no-tcp"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ready_ms = wait_ready(ns, t0)
        time.sleep(1)
        idle = rss_kib(proc.pid)
        maps = mapped_objects(proc.pid)
        subprocess.run([args.ctl, "play", "--unix-socket", sock, SCENARIO], check=True,
                       stdout=subprocess.DEVNULL, timeout=60)
        hmi = subprocess.Popen([args.ctl, "watch", "--unix-socket", sock],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ready_file = os.path.join(tmp, "held")
        phone = subprocess.Popen([sys.executable, HUCLIENT, "hold", f"unix:{sock}", "--announce",
                                  "--ready", ready_file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not os.path.exists(ready_file) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        connected = rss_kib(proc.pid)
        for p in (hmi, phone):
            p.kill()
            p.wait()
        return ready_ms, idle, connected, maps
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        ns.close()
        os.unlink(notify)


def echo_run(args, tmp):
    sock = os.path.join(tmp, "echo.sock")
    proc = subprocess.Popen([args.echo, sock], stdout=subprocess.DEVNULL)
    try:
        wait_connectable(sock)
        time.sleep(1)
        idle = rss_kib(proc.pid)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sock)
        for _ in range(100):
            c.sendall(b"x" * 512)
            got = 0
            while got < 512:
                got += len(c.recv(4096))
        time.sleep(0.5)
        connected = rss_kib(proc.pid)
        maps = mapped_objects(proc.pid)
        c.close()
        return idle, connected, maps
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def mib(kib):
    return f"{kib / 1024:.1f} MiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--echo")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for b in [args.daemon, args.ctl] + ([args.echo] if args.echo else []):
        print(f"{b}: {os.path.getsize(b) / 1048576:.1f} MiB on disk, NEEDED {' '.join(needed(b))}")
    rows = []
    maps = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="headunitd-footprint.") as tmp:
            ready_ms, idle, connected, maps = daemon_run(args, tmp)
            act_ready, act_served = activated_ready_ms(args, tmp)
            row = [ready_ms, idle, connected, act_ready, act_served]
            if args.echo:
                e_idle, e_conn, e_maps = echo_run(args, tmp)
                row += [e_idle, e_conn]
            tail = f"; echo RSS idle {mib(row[5])}, one client {mib(row[6])}" if args.echo else ""
            rows.append(row)
            print(f"run {i + 1}: start-to-READY {ready_ms:.0f} ms (socket-activated {act_ready:.0f} ms, "
                  f"first connection served at {act_served:.0f} ms), daemon RSS idle {mib(idle)}, "
                  f"phone+HMI {mib(connected)}" + tail)
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"median: start-to-READY {med[0]:.0f} ms (socket-activated {med[3]:.0f} ms, first connection served at "
          f"{med[4]:.0f} ms), daemon RSS idle {mib(med[1])}, phone+HMI {mib(med[2])}"
          + (f"; echo RSS idle {mib(med[5])}, one client {mib(med[6])}" if args.echo else ""))
    print("daemon maps: " + " ".join(os.path.basename(m) for m in maps))
    if args.echo:
        print("echo maps: " + " ".join(os.path.basename(m) for m in e_maps))


if __name__ == "__main__":
    main()
