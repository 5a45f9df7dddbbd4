#!/usr/bin/env python3
"""Level (a) of the systemd tests: headunitd under systemd-socket-activate.

  test_socket_activate.py /path/to/headunitd

NOTIFY_SOCKET is a datagram socket this test reads; the daemon gets it, a
WATCHDOG_USEC and a JOURNAL_STREAM matching its stderr through -E (the tool
passes on nothing else). Checks: the connection that triggers the start is
served, READY=1 comes once and only when both listeners accept, STATUS= is
live, watchdog pings at half the interval even with a peer that never reads,
SIGTERM gives STOPPING=1, a Goodbye (SHUTTING_DOWN, with reason) and an orderly
close to every client, exit 0, the socket path left in place; an unexpected fd
is refused with a log line; logs carry <N> priority prefixes and are quiet by
default. Prints PASS:/FAIL: lines and `N passed, N failed`.
"""
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import huclient  # noqa: E402

WATCHDOG_USEC = 2_000_000
RESULTS = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    RESULTS["passed" if ok else "failed"] += 1
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name, (" -- " + detail) if detail else ""), flush=True)
    return ok


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class NotifyListener(threading.Thread):
    """Records every sd_notify datagram with its arrival time."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []  # (monotonic time, {key: value})
        self.lock = threading.Lock()
        self.stopped = False

    def run(self):
        while not self.stopped:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            with self.lock:
                self.messages.append((time.monotonic(), fields))

    def with_key(self, key, since=0.0):
        with self.lock:
            return [(t, f) for t, f in self.messages if key in f and t >= since]

    def wait_for(self, key, timeout, since=0.0, predicate=lambda value: True):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, f in self.with_key(key, since):
                if predicate(f[key]):
                    return t, f
            time.sleep(0.01)
        return None

    def close(self):
        self.stopped = True
        self.join(1)
        self.sock.close()


class Daemon:
    def __init__(self, binary, workdir, names, extra_listen=(), log_level=None):
        self.unix_path = os.path.join(workdir, "headunitd.sock")
        self.tcp_port = free_port()
        self.notify = NotifyListener(os.path.join(workdir, "notify-%d.sock" % time.monotonic_ns()))
        self.notify.start()
        read_end, write_end = os.pipe()
        st = os.fstat(write_end)
        args = ["systemd-socket-activate",
                "-l", self.unix_path, "-l", "127.0.0.1:%d" % self.tcp_port]
        for extra in extra_listen:
            args += ["-l", extra]
        args += ["--fdname=" + ":".join(names),
                 "-E", "NOTIFY_SOCKET",
                 "-E", "WATCHDOG_USEC=%d" % WATCHDOG_USEC,
                 "-E", "JOURNAL_STREAM=%d:%d" % (st.st_dev, st.st_ino),
                 "-E", "SWIFT_BACKTRACE=enable=no",
                 binary]
        # Its TCP phones do not pair (PROTOCOL.md section 20): this test is about
        # systemd, and with pairing on they would be closed with AUTH_REQUIRED.
        config = os.path.join(workdir, "config.json")
        with open(config, "w") as f:
            f.write('{"allowUnpairedTcp": true}\n')
        args += ["--config", config]
        if log_level:
            args += ["--log-level", log_level]
        env = dict(os.environ, NOTIFY_SOCKET=self.notify.sock.getsockname())
        # stderr (the log) is checked; stdout carries the daemon's "listening"/"ready" lines.
        out_read, out_write = os.pipe()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out_write, stderr=write_end,
                                     env=env, cwd=workdir)
        os.close(write_end)
        os.close(out_write)
        self.lines = []
        self.stdout_lines = []
        self.reader = threading.Thread(target=self._read_logs, args=(read_end, self.lines), daemon=True)
        self.reader.start()
        self.stdout_reader = threading.Thread(target=self._read_logs, args=(out_read, self.stdout_lines), daemon=True)
        self.stdout_reader.start()
        # systemd-socket-activate listens before it execs the daemon on the first connection.
        deadline = time.monotonic() + 10
        while not os.path.exists(self.unix_path) and time.monotonic() < deadline:
            time.sleep(0.01)

    @staticmethod
    def _read_logs(fd, lines):
        with os.fdopen(fd, "r", errors="replace") as stream:
            for line in stream:
                lines.append(line.rstrip("\n"))

    def daemon_lines(self):
        # systemd-socket-activate's own messages come before the exec.
        tool = re.compile(r"^(Listening on|Communication attempt|Execing|Received|Accepted)")
        return [line for line in self.lines if not tool.match(line)]

    def unix(self):
        return "unix:" + self.unix_path

    def tcp(self):
        return "tcp:127.0.0.1:%d" % self.tcp_port

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.reader.join(2)
            self.stdout_reader.join(2)
            self.notify.close()


def backlogs(d):
    """The listen backlog (ss's Send-Q column) of the TCP and Unix listeners."""
    def column(args, match):
        try:
            out = subprocess.run(["ss", "-lH"] + args, capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        for line in out.splitlines():
            fields = line.split()
            if "LISTEN" in fields and match(fields):
                at = fields.index("LISTEN")  # [Netid] State Recv-Q Send-Q Local ...
                return fields[at + 2]
        return None
    tcp = column(["-tn", "sport = :%d" % d.tcp_port], lambda f: True)
    unix = column(["-x"], lambda f: d.unix_path in f)
    return "tcp=%s unix=%s" % (tcp, unix)


def handshake(address, timeout=5.0):
    conn = huclient.Connection(address, timeout)
    conn.handshake("systemd-test")
    return conn


def try_handshake(address, timeout=5.0):
    try:
        handshake(address, timeout).close()
        return True, ""
    except Exception as error:  # noqa: BLE001 - any failure is the finding
        return False, repr(error)


class Holder(threading.Thread):
    """A connected phone that waits for the daemon's Goodbye."""

    def __init__(self, conn):
        super().__init__(daemon=True)
        self.conn = conn
        self.result = None

    def run(self):
        self.conn.sock.settimeout(30)
        try:
            self.result = self.conn.wait_goodbye()
        except Exception as error:  # noqa: BLE001
            self.result = error


class SlowPeer(threading.Thread):
    """Says Hello, then floods PINGs and never reads a PONG."""

    def __init__(self, address, seconds):
        super().__init__(daemon=True)
        self.address, self.seconds = address, seconds
        self.sent = 0
        self.cut_off = False

    def run(self):
        try:
            conn = handshake(self.address)
        except Exception:  # noqa: BLE001
            return
        conn.sock.setblocking(False)
        ping = huclient.frame(huclient.KIND_PING, b"x" * 64)
        burst = ping * 256
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            try:
                self.sent += conn.sock.send(burst)
            except BlockingIOError:
                time.sleep(0.005)
            except OSError:
                self.cut_off = True
                break
        conn.close()


def max_gap(times):
    return max((b - a for a, b in zip(times, times[1:])), default=float("inf"))


def main_run(binary, workdir):
    print("# run 1: unix + tcp, watchdog %d us, log level info" % WATCHDOG_USEC, flush=True)
    d = Daemon(binary, workdir, ["unix", "tcp"], log_level="info")
    try:
        before = backlogs(d)
        started = time.monotonic()
        # This connection makes systemd-socket-activate exec the daemon: it waits in
        # the kernel's queue meanwhile and must be served, not refused.
        try:
            first = handshake(d.unix(), timeout=20)
            check("first connection (the one that starts the daemon) is served", True,
                  "%.0f ms" % ((time.monotonic() - started) * 1000))
        except Exception as error:  # noqa: BLE001
            first = None
            check("first connection (the one that starts the daemon) is served", False, repr(error))

        ready = d.notify.wait_for("READY", 20)
        if not check("READY=1 sent", ready is not None, "messages: %r" % d.notify.messages[:5]):
            return
        ok_unix, e1 = try_handshake(d.unix(), 2)
        ok_tcp, e2 = try_handshake(d.tcp(), 2)
        check("at READY both listeners accept and answer Hello", ok_unix and ok_tcp, e1 + e2)
        after = backlogs(d)
        check("the daemon restored the listen backlog after adopting the sockets",
              after == before and "None" not in after and "=128" not in after and "=256" not in after,
              "before: %s, with the daemon: %s" % (before, after))
        adopted = [line for line in d.daemon_lines() if "adopted" in line]
        check("the daemon adopted the activated sockets (log)", bool(adopted), "log: %r" % d.daemon_lines()[:10])

        if first:
            try:
                code = first.announce_apps("systemd test phone")
                check("the first phone announces its app", code == 0, "Result code %d" % code)
            except Exception as error:  # noqa: BLE001
                check("the first phone announces its app", False, repr(error))
        holders = [Holder(first)] if first else []
        try:
            holders.append(Holder(handshake(d.tcp())))
            holders.append(Holder(handshake(d.unix())))
        except Exception as error:  # noqa: BLE001
            check("two more phones connect", False, repr(error))
        for h in holders:
            h.start()

        statuses = d.notify.with_key("STATUS")
        check("STATUS= sent", bool(statuses), "%r" % statuses)
        # The car has one phone at a time (the one that announced its apps).
        live = d.notify.wait_for("STATUS", 3, predicate=lambda v: re.search(r"\b[1-9]\d*\b\D{0,12}phone", v) is not None)
        check("STATUS= is live (shows the connected phone)", live is not None,
              "statuses: %r" % [f["STATUS"] for _, f in d.notify.with_key("STATUS")][-5:])

        # Watchdog cadence over 4 intervals of idle.
        window = time.monotonic()
        time.sleep(4.2 * WATCHDOG_USEC / 2e6)
        pings = [t for t, _ in d.notify.with_key("WATCHDOG", since=window)]
        intervals = [b - a for a, b in zip(pings, pings[1:])]
        half = WATCHDOG_USEC / 2e6
        median = statistics.median(intervals) if intervals else 0
        check("watchdog pings at half of WATCHDOG_USEC",
              len(intervals) >= 3 and 0.7 * half <= median <= 1.3 * half,
              "%d pings, median interval %.3f s (want ~%.3f)" % (len(pings), median, half))
        check("watchdog never late", pings and max_gap(pings) < 0.9 * WATCHDOG_USEC / 1e6,
              "max gap %.3f s" % max_gap(pings))

        # A peer that never reads must not starve the pings.
        flood_seconds = 4.2 * WATCHDOG_USEC / 2e6
        slow = SlowPeer(d.unix(), flood_seconds)
        window = time.monotonic()
        slow.start()
        slow.join(10)
        # The daemon may cut the peer off early (slow consumer): count the pings
        # over the whole window (plus one interval) all the same: room for three or more.
        time.sleep(max(0.0, window + flood_seconds + WATCHDOG_USEC / 2e6 - time.monotonic()))
        pings = [t for t, _ in d.notify.with_key("WATCHDOG", since=window)]
        check("watchdog keeps pinging while a peer never reads",
              len(pings) >= 3 and max_gap(pings) < 0.9 * WATCHDOG_USEC / 1e6,
              "%d pings, max gap %.3f s, peer sent %d bytes, cut off: %s" % (len(pings), max_gap(pings), slow.sent, slow.cut_off))
        ok, error = try_handshake(d.unix(), 2)
        check("daemon still serves after the slow peer", ok, error)

        # Graceful stop.
        stop_at = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        code = d.stop(15)
        elapsed = time.monotonic() - stop_at
        check("SIGTERM: STOPPING=1 sent", bool(d.notify.with_key("STOPPING", since=stop_at)))
        check("SIGTERM: exit status 0 within 10 s", code == 0 and elapsed < 10, "status %r after %.2f s" % (code, elapsed))
        for h in holders:
            h.join(5)
        results = [h.result for h in holders]
        good = [r for r in results if isinstance(r, tuple) and r[0] == huclient.ERROR_CODE_SHUTTING_DOWN and r[1] and r[2]]
        check("SIGTERM: every client got Goodbye(SHUTTING_DOWN, reason) and an orderly close",
              holders and len(good) == len(holders), "%r" % results)
        check("the activated socket path is not unlinked", os.path.exists(d.unix_path))
        lines = d.daemon_lines()
        unprefixed = [line for line in lines if not re.match(r"^<[0-7]>", line)]
        check("with JOURNAL_STREAM every log line has a <N> priority prefix", lines and not unprefixed,
              "unprefixed: %r" % unprefixed[:5])
    finally:
        d.stop(5)


def refusal_run(binary, workdir):
    print("# run 2: an unexpected fd, default (quiet) log level", flush=True)
    extra = os.path.join(workdir, "bogus.sock")
    d = Daemon(binary, workdir, ["unix", "tcp", "bogus"], extra_listen=[extra])
    try:
        ok, error = try_handshake(d.unix(), 20)
        check("serves with an unexpected fd among the activated ones", ok, error)
        ok, error = try_handshake(d.tcp(), 5)
        check("... on tcp too", ok, error)
        time.sleep(0.2)
        refusal = [line for line in d.daemon_lines() if "bogus" in line and "refus" in line.lower()]
        check("the unexpected fd is refused with a clear log line", bool(refusal), "log: %r" % d.daemon_lines()[:10])
        code = d.stop(15)
        check("clean exit", code == 0, "status %r" % code)
        lines = d.daemon_lines()
        check("quiet by default (a start, 2 connections, a stop: at most 6 lines)", len(lines) <= 6,
              "%d lines: %r" % (len(lines), lines[:10]))
    finally:
        d.stop(5)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="headunitd-sa.") as workdir:
        for number, run in enumerate([main_run, refusal_run]):
            rundir = os.path.join(workdir, "run%d" % number)
            os.mkdir(rundir)
            run(binary, rundir)
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 0 if RESULTS["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
