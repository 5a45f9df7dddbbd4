#!/usr/bin/env python3
"""Glass-to-glass latency of base-view video in the browser simulator (issue 28, item 5).

    scripts/video-glass.py BIN_DIR [--seconds 15] [--fps 30] [--cpu-throttle 2]

BIN_DIR holds headunitd, headunitctl and headunit-sim (a release build:
.build-release/release). Starts a daemon on a temporary socket, the
simulator, headless Chromium (as Tests/Simulator/sim_test.py does) and
`headunitctl test-pattern`, launches the pattern app on the main screen, the
dashboard and the cluster, then for --seconds reads each pane's frame counter
back from the pixels the page shows: on every animation frame of the page, the
pane's canvas (the video Worker's OffscreenCanvas) is drawn into a scratch
canvas (scaled back to the stream's pixels) and the 16 counter blocks along the top-left (16 px each, white = 1,
`headunitctl test-pattern`) are read. The app's draw time of each frame number
comes from the frames' headers (the app stamps CLOCK_MONOTONIC; the simulator
turns it into Unix time on the same machine): latency = when the page first
showed frame N - when the app drew frame N. Prints p50/p90/p99/max per pane,
frames shown vs drawn, and the page's sampling interval (the resolution).

--cpu-throttle N slows the page N times (Chrome's CPU throttling: a 2x slower
HMI) to see what a slow car screen gets: fewer, newer frames, none queued.
--screens main streams the main window alone. --watch runs `headunitctl watch`
beside the page (a second HMI) and prints its per-window rate and bytes.
--maps PATH streams the MapsApp example instead (no counter to read: the
Worker's own numbers and the watch's bytes only).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the browser test
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "Simulator"))
from sim_test import Page, Processes  # noqa: E402  (the browser test's process and page helpers)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

PANES = [("SCREEN_MAIN", "#video-main", "main"), ("SCREEN_DASHBOARD", "#video-dashboard", "dashboard"),
         ("SCREEN_INSTRUMENT_CLUSTER", "#video-instrument_cluster", "cluster")]

# Runs in the page: every animation frame, read each pane's counter from its pixels.
SAMPLE = """
const [panes, seconds] = arguments;
const scratch = document.createElement('canvas');
scratch.width = 256; scratch.height = 16;
const x = scratch.getContext('2d', {willReadFrequently: true});
x.imageSmoothingEnabled = false;
const out = {}, ticks = [];
for (const [screen, selector] of panes) out[screen] = [];
const end = performance.now() + seconds * 1000;
return new Promise((resolve) => {
  function tick() {
    ticks.push(performance.now());
    for (const [screen, selector] of panes) {
      const c = document.querySelector(selector), st = window.simVideo[screen];
      if (!c || c.width < 128 || !st.width) continue;
      // The counter's 16 px blocks in the stream's pixels; the canvas may hold the window at half that.
      const k = c.width / st.width;
      x.drawImage(c, 0, 0, 256 * k, 16 * k, 0, 0, 256, 16);
      const d = x.getImageData(0, 0, 256, 16).data;
      const t = Date.now();
      let n = 0, unsure = 0;
      for (let bit = 0; bit < 16; bit++) {
        const i = (8 * 256 + bit * 16 + 8) * 4;
        const y = 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2];
        if (y > 150) n |= 1 << bit; else if (y > 60) unsure++;
      }
      out[screen].push([t, unsure ? -1 : n]);
    }
    if (performance.now() < end) requestAnimationFrame(tick); else resolve();
  }
  requestAnimationFrame(tick);
}).then(async () => {
  const times = {};
  for (const [screen] of panes) times[screen] = (await window.simVideo.drawTimes(screen)).times;
  const gaps = ticks.slice(1).map((t, i) => t - ticks[i]);
  return {samples: out, times, gaps, stats: window.simVideo};
});
"""


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int((len(s) - 1) * q))] if s else float("nan")


def dist(values):
    return f"p50 {pct(values, .5):.0f} / p90 {pct(values, .9):.0f} / p99 {pct(values, .99):.0f} / max {pct(values, 1):.0f} ms ({len(values)})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--cpu-throttle", type=float, default=1)
    parser.add_argument("--query", default="", help="appended to the page's URL, e.g. ?renderer=2d")
    parser.add_argument("--screens", choices=["all", "main"], default="all")
    parser.add_argument("--watch", action="store_true")
    parser.add_argument("--maps", default=None, help="the MapsApp binary to stream instead of the test pattern")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="hu-glass-")
    procs = Processes(work)
    sock = os.path.join(work, "headunitd.sock")
    driver = None
    try:
        procs.start("daemon", [os.path.join(args.bin, "headunitd"), "--unix-socket", sock, "--no-tcp"])
        procs.wait_for_line("daemon", r"^ready$")
        procs.start("sim", [os.path.join(args.bin, "headunit-sim"), "--unix-socket", sock, "--port", "0"])
        url = procs.wait_for_line("sim", r"open (http://\S+)").group(1)
        options = Options()
        for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1800,1250",
                     "--force-device-scale-factor=1", "--autoplay-policy=no-user-gesture-required"]:
            options.add_argument(flag)
        for binary in ["/usr/bin/chromium", "/usr/bin/chromium-browser"]:
            if os.path.exists(binary):
                options.binary_location = binary
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
        driver.set_script_timeout(args.seconds + 30)
        driver.get(url + args.query)
        page = Page(driver)
        page.wait_text("#conn-daemon", "daemon: connected")
        if args.maps:
            procs.start("phone", [args.maps, sock])
            app = "com.example.maps"
        else:
            procs.start("phone", [os.path.join(args.bin, "headunitctl"), "test-pattern", "--unix-socket", sock, "--fps", str(args.fps)])
            app = "com.example.pattern"
        procs.wait_for_line("phone", r"^connected")
        page.click(f'#home [data-app-id="{app}"]', "launch the app")
        panes = PANES if args.screens == "all" else PANES[:1]
        if args.screens == "all":
            page.click("#dashboard-launch", "show it on the dashboard")
            page.click("#cluster-launch", "show it on the cluster")
        if args.watch:
            procs.start("watch", [os.path.join(args.bin, "headunitctl"), "watch", "--brief", "--unix-socket", sock])
        for screen, _, name in panes:
            page.wait(f"the {name} draws frames", lambda: (driver.execute_script(
                "return (window.simVideo[arguments[0]] || {}).drawn || 0", screen) >= (2 if args.maps else 30)), timeout=60)
        if args.maps:
            # A still map sends a frame when it changes: start guidance so the car moves (as sim_test.py does).
            page.click('#main-screen [data-button-id="routes"]', "press the map's routes button")
            page.click('[data-trip-id="home"]', "press Go")
            page.wait_css("#main-screen .guidance-card", "guidance started")
        if args.cpu_throttle > 1:
            driver.execute_cdp_cmd("Emulation.setCPUThrottlingRate", {"rate": args.cpu_throttle})
        time.sleep(2)
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        r = driver.execute_script(SAMPLE, [[s, c] for s, c, _ in panes], args.seconds)
        print(f"machine: {os.cpu_count()} CPUs, load average {load}; {'MapsApp' if args.maps else f'test pattern at {args.fps} fps'}, {len(panes)} window(s),"
              f" {args.seconds:.0f} s, CPU throttle {args.cpu_throttle}x, page {url + args.query}")
        print(f"page's animation frames (the sampling resolution): interval {dist(r['gaps'])}")
        if args.watch:
            lines = [l for l in procs.output("watch").splitlines() if l.startswith("video SCREEN") or l.startswith("video screen") or l.startswith("video ")]
            for l in lines[-3 * len(panes):]:
                print("  watch: " + l)
        for screen, _, name in panes:
            st = r["stats"][screen]
            if args.maps:
                print(f"{name}: Worker: {st.get('fps', 0):.1f} fps, latency app draw -> drawn p50 {st.get('latencyMs') or 0:.0f} / p99 {st.get('latencyP99Ms') or 0:.0f} ms"
                      f" (last 90 frames), {st.get('decoded')} decoded, {st.get('drawn')} drawn, {st.get('dropped')} dropped, {st.get('keyframesAsked')} keyframes asked")
                continue
            times = {int(k): v for k, v in r["times"][screen].items()}
            first = {}
            ages = []
            unreadable = 0
            for t, n in r["samples"][screen]:
                if n < 0 or n not in times:
                    unreadable += 1
                    continue
                first.setdefault(n, t)
                ages.append(t - times[n])
            shown = sorted(first)
            latency = [first[n] - times[n] for n in shown]
            drawn = shown[-1] - shown[0] + 1 if shown else 0  # the app numbers every frame it draws
            print(f"{name}: glass-to-glass (app draw -> first shown) {dist(latency)}")
            print(f"  age of the picture shown at each animation frame {dist(ages)}")
            print(f"  frames shown {len(shown)} of {drawn} drawn by the app in that span; {unreadable} samples unreadable;"
                  f" Worker: {st.get('decoded')} decoded, {st.get('drawn')} drawn, {st.get('superseded')} superseded,"
                  f" {st.get('dropped')} dropped, {st.get('keyframesAsked')} keyframes asked, {st.get('errors')} errors,"
                  f" fps {st.get('fps', 0):.1f}, app-to-simulator p50 {st.get('toSimMs') or 0:.0f} ms")
    finally:
        if driver:
            driver.quit()
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
