#!/usr/bin/env python3
"""Start-to-READY of one or more daemon binaries, socket-activated as systemd
starts them (issue 30, item 4).

  scripts/start-to-ready.py BIN [BIN ...] [--runs 25] [--args "--config FILE"]

Each run hands the daemon a listening Unix socket as fd 3 (LISTEN_FDS=1,
LISTEN_PID its own pid) and a NOTIFY_SOCKET, and measures the wall time from
exec until READY=1 arrives, and the daemon's own CPU time until then (the sum
of /proc/PID/task/*/schedstat, read at READY). The binaries take turns, so a
noisy machine slows each alike. Prints the median and minimum of each, and
the idle RSS one second after READY (median of five runs).
"""
import argparse
import glob
import os
import shlex
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from footprint import rss_kib, start_activated, wait_ready  # noqa: E402


def cpu_ms(pid):
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e6


def one_start(binary, extra, tmp, n, measure_rss):
    proc, listener, ns, t0 = start_activated(
        [binary] + extra, os.path.join(tmp, f"a{n}.sock"), os.path.join(tmp, f"n{n}.sock"))
    try:
        ready = wait_ready(ns, t0)
        cpu = cpu_ms(proc.pid)
        rss = None
        if measure_rss:
            time.sleep(1)
            rss = rss_kib(proc.pid)
        return ready, cpu, rss
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        ns.close()
        listener.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--args", default="", help="the daemon's arguments (socket activation needs none)")
    args = ap.parse_args()
    extra = shlex.split(args.args)
    results = {b: ([], [], []) for b in args.binaries}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for i, binary in enumerate(args.binaries):
                ready, cpu, rss = one_start(binary, extra, tmp, f"{run}-{i}", measure_rss=run < 5)
                results[binary][0].append(ready)
                results[binary][1].append(cpu)
                if rss is not None:
                    results[binary][2].append(rss)
    print(f"| binary | start-to-READY median / min | CPU until READY median / min | idle RSS (median of {min(5, args.runs)}) |")
    print("|---|---|---|---|")
    for binary, (ready, cpu, rss) in results.items():
        print(f"| {binary} | {statistics.median(ready):.1f} / {min(ready):.1f} ms"
              f" | {statistics.median(cpu):.1f} / {min(cpu):.1f} ms"
              f" | {statistics.median(rss) / 1024:.1f} MiB |")


if __name__ == "__main__":
    main()
