#!/usr/bin/env python3
"""The web simulator in a real browser (headless Chromium driven by selenium).

Starts headunitd on a private socket, headunit-sim on a free port and a
scenario phone (`headunitctl play --without-hmi Tests/Simulator/scenario.json`)
whose expect steps pass only when the page delivered the driver's input: every
launch, tap and press below is a click in the page. Checks that the templates
render (texts in the DOM), that the screenshots of the main screen, dashboard
and cluster are not blank, that the RadioApp example (BIN_DIR/RadioApp) hears
the Now Playing screen's transport buttons and the keyboard's media keys
(remote commands, PROTOCOL.md section 23), that the page plays the car's
output while the RadioApp streams its tone (WebAudio: the page's
AnalyserNode receives non-silent samples, PROTOCOL.md section 24.7) and shows
the audio focus (the radio app owns the main audio), that the log pane shows the protocol, that the
page reports the phone dropping and the daemon restarting and reconnects, and
that a phone's base-view video (H.264, PROTOCOL.md section 25) is decoded in
the page's video Worker (WebCodecs, OffscreenCanvas) into the main screen's, the dashboard's and the cluster's
canvases under the car's overlays, non-blank and moving, and still drawn
while the page's own thread is blocked (video_phase: a test pattern), and that the MapsApp example's map shows its roads, route and
car there, changing after a zoom or a pan pressed in the page (maps_video_phase), and that the
MessagesApp example's incoming call (PROTOCOL.md section 26) shows as a banner whose Answer,
Mute and End reach the app's CXProviderDelegate (calls_phase).

    sim_test.py BIN_DIR [--screenshots DIR]    (BIN_DIR holds headunitd, headunitctl, headunit-sim)

Exits non-zero on the first failure, with the scenario's and the page's output.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 20


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print("ok   " + what, flush=True)


# ---------------------------------------------------------------- screenshots

def png_pixels(data):
    """Decodes an 8-bit, non-interlaced RGB/RGBA PNG (what Chromium writes): (width, height, bpp, rows)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Failure("screenshot is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or color not in (2, 6) or interlace:
                raise Failure(f"unexpected PNG format (depth {depth}, color {color}, interlace {interlace})")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def check_not_blank(png, what, path):
    with open(path, "wb") as f:
        f.write(png)
    width, height, bpp, rows = png_pixels(png)
    counts = {}
    for y in range(0, height, 2):
        row = rows[y]
        for x in range(0, width * bpp, 2 * bpp):
            key = row[x:x + 3]
            counts[key] = counts.get(key, 0) + 1
    total = sum(counts.values())
    dominant = max(counts.values())
    share = 1 - dominant / total
    check(width > 100 and height > 100 and len(counts) >= 8 and share >= 0.02,
          f"screenshot of {what} is not blank ({width}x{height}, {len(counts)} colours, {share:.0%} off the background) -> {path}")


# ---------------------------------------------------------------- video

# A grid of pixels read back from a screen's canvas (the decoded picture itself):
# how many distinct colours, the share that is not near-black, and the values.
# The canvases belong to the page's video Worker (OffscreenCanvas): their pixels are read
# by drawing the canvas (the picture the page shows) into a scratch one.
CANVAS_PIXELS = """
function canvasPixels(c) {
  const s = document.createElement('canvas');
  s.width = c.width; s.height = c.height;
  const x = s.getContext('2d');
  x.drawImage(c, 0, 0);
  return x.getImageData(0, 0, c.width, c.height).data;
}
"""

SAMPLE_CANVAS = CANVAS_PIXELS + """
const c = document.querySelector(arguments[0]);
if (!c || c.width < 16) return null;
const data = canvasPixels(c);
const px = [], colours = new Set();
let lit = 0;
for (let gy = 0; gy < 24; gy++) for (let gx = 0; gx < 32; gx++) {
  const x = Math.floor((gx + 0.5) * c.width / 32), y = Math.floor((gy + 0.5) * c.height / 24), i = (y * c.width + x) * 4;
  const rgb = [data[i], data[i + 1], data[i + 2]];
  px.push(rgb);
  colours.add(rgb.map(v => v >> 4).join(','));
  if (rgb[0] + rgb[1] + rgb[2] > 60) lit++;
}
return {width: c.width, height: c.height, colours: colours.size, lit: lit / px.length, px};
"""

VIDEO_PANES = [("SCREEN_MAIN", "#video-main", "#main-screen", "main"),
               ("SCREEN_DASHBOARD", "#video-dashboard", "#dashboard", "dashboard"),
               ("SCREEN_INSTRUMENT_CLUSTER", "#video-instrument_cluster", "#cluster", "cluster")]


def video_phase(page, driver, procs, args, sock, shots):
    """A phone streams each scene window; the page shows it in all three panes."""
    procs.start("video-phone", [os.path.join(args.bin, "headunitctl"), "test-pattern", "--unix-socket", sock, "--fps", "30"])
    procs.wait_for_line("video-phone", r"^connected")
    app = "com.example.pattern"
    page.click(f'#home [data-app-id="{app}"]', "launch the streaming navigation app by clicking its icon")
    page.click("#dashboard-launch", "show it on the dashboard (the dashboard's button)")
    page.click("#cluster-launch", "show it on the instrument cluster (the cluster's button)")
    for screen, canvas, pane, name in VIDEO_PANES:
        page.wait(f"the {name} decodes video frames (WebCodecs)", lambda: (driver.execute_script(
            "return (window.simVideo[arguments[0]] || {}).decoded || 0", screen) >= 10), timeout=30)
        page.wait_css(f"{pane} {canvas}", f"the {name}'s canvas in its pane")
    check(page.find("#main-screen.has-video #video-main") is not None and page.find("#main-screen .map-buttons") is not None,
          "the main screen draws the map buttons over the video")
    first = {screen: driver.execute_script(SAMPLE_CANVAS, canvas) for screen, canvas, _, _ in VIDEO_PANES}
    for screen, canvas, pane, name in VIDEO_PANES:
        b = driver.execute_script(SAMPLE_CANVAS, canvas)
        check(b and b["colours"] >= 6 and b["lit"] > 0.3,
              f"the {name}'s decoded picture is not blank ({b and b['width']}x{b and b['height']}, {b and b['colours']} colours, {b and round(b['lit'] * 100)}% lit)")
        # The bar sweeps across: a few sampled pixels change as it passes them.
        page.wait(f"the {name}'s picture changes from frame to frame", lambda: changed_pixels(
            first[screen], driver.execute_script(SAMPLE_CANVAS, canvas)) >= 3, timeout=10)
    stream = driver.execute_script("return V.streams.SCREEN_MAIN")
    main = driver.execute_script("const c = document.querySelector('#video-main'); return [c.offsetWidth, c.offsetHeight]")
    check(main == [stream["window"]["widthPt"], stream["window"]["heightPt"]],
          f"the main screen's video fills the window the car gave the app ({main} pt for a {stream['window']['widthPt']}x{stream['window']['heightPt']} window)")
    time.sleep(2)  # two seconds of steady streaming for the numbers below
    report_video(page, driver)
    # Off the page's thread: a page busy for a second (its own redraws, a long task) holds no frame back.
    def drawn_while_blocked():
        return driver.execute_script("""
            const start = Date.now();
            while (Date.now() - start < 1000) { /* the page's thread is busy */ }
            const end = Date.now();
            return window.simVideo.drawTimes('SCREEN_MAIN').then((a) => a.drawn.filter((t) => t > start + 100 && t < end - 100).length);""")
    # A floor, not a rate (6-11 in loaded debug runs, one run with a CI beside drew 1): drawing that
    # waits for the page's thread draws none in every try, so the best of three tries must draw some.
    tries = []
    while len(tries) < 3 and (not tries or max(tries) < 2):
        tries.append(drawn_while_blocked())
    check(max(tries) >= 2, f"the main screen's Worker drew {tries} frames in the 0.8 s the page's thread was blocked (best of {len(tries)})")
    check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (video)", os.path.join(shots, "main-video.png"))
    check_not_blank(page.find("#dashboard").screenshot_as_png, "the dashboard (video)", os.path.join(shots, "dashboard-video.png"))
    check_not_blank(page.find("#cluster").screenshot_as_png, "the instrument cluster (video)", os.path.join(shots, "cluster-video.png"))
    # The decoder loses sync (as after an error): the page asks for a keyframe and is drawing again at once.
    decoded, asked = driver.execute_script(
        "const p = V.panes.SCREEN_MAIN; resetDecoder(p); return [window.simVideo.SCREEN_MAIN.decoded, window.simVideo.SCREEN_MAIN.keyframesAsked]")
    page.wait("the main screen decodes again after a decoder reset, from a keyframe it asked for", lambda: driver.execute_script(
        "const v = window.simVideo.SCREEN_MAIN; return v.keyframesAsked > arguments[1] && v.decoded > arguments[0] + 5", decoded, asked), timeout=10)
    procs.stop("video-phone")


# Pixels of a canvas near each of some colours (within `tolerance` per channel: the codec is lossy).
# Counts are in the stream's pixels: the Worker draws a 2x window at the page's 1x size.
COUNT_COLOURS = CANVAS_PIXELS + """
const c = document.querySelector(arguments[0]), targets = arguments[1], tol = arguments[2], st = window.simVideo[arguments[3]];
if (!c || c.width < 16) return null;
const data = canvasPixels(c), scale = (st.width * st.height) / (c.width * c.height);
const counts = targets.map(() => 0);
for (let i = 0; i < data.length; i += 8) {
  for (let t = 0; t < targets.length; t++) {
    const [r, g, b] = targets[t];
    if (Math.abs(data[i] - r) <= tol && Math.abs(data[i + 1] - g) <= tol && Math.abs(data[i + 2] - b) <= tol) counts[t]++;
  }
}
return counts.map((n) => Math.round(n * scale));
"""

# MapsApp's night palette (Examples/MapsApp/MapRenderer.swift), 0-255.
MAP_NIGHT = {"route": (77, 163, 255), "car": (217, 51, 38), "street": (61, 71, 87), "primary road": (107, 102, 77),
             "motorway": (140, 97, 56), "background": (27, 35, 48)}


def audio_phase(page, driver):
    """The car's output in the page (PROTOCOL.md 24.7): the RadioApp plays its tone;
    the page's WebAudio graph hears it and the focus line names the radio app."""
    page.wait_text("#audio-focus", "com.example.radio")
    page.wait("the focus display says the radio app owns the main audio",
              lambda: page.find('#audio-focus[data-owner="com.example.radio"]') is not None)
    check("main audio" in page.text("#np-audio") and "com.example.radio" in page.text("#np-audio"),
          "the Now Playing screen shows the audio focus: " + page.text("#np-audio"))
    page.wait("the page's AudioContext runs", lambda: driver.execute_script("return window.simAudio.state") == "running")
    levels = []

    def loud():
        levels.append(driver.execute_script("return window.simAudio.level()"))
        return levels[-1] > 0.05

    page.wait("the page's AnalyserNode receives the radio's tone (non-silent samples)", loud)
    stats = driver.execute_script("return {chunks: window.simAudio.chunks, played: window.simAudio.played, dropped: window.simAudio.dropped}")
    check(stats["played"] > 10, f"the page played the car's output: RMS {levels[-1]:.3f}, {stats}")


def changed_pixels(a, b):
    return sum(1 for p, q in zip(a["px"], b["px"]) if sum(abs(x - y) for x, y in zip(p, q)) > 40)


def wait_for_change(page, driver, canvas, before, what, timeout=10):
    return page.wait(what, lambda: changed_pixels(before, driver.execute_script(SAMPLE_CANVAS, canvas)) >= 20, timeout)


def maps_video_phase(page, driver, procs, args, sock, shots):
    """The MapsApp example (CarPlayKit, cairo) streams its map; the page shows roads, the route and
    the car in all three panes, and a zoom or pan pressed in the page changes the next frames."""
    procs.start("maps", [os.path.join(args.bin, "MapsApp"), sock])
    procs.wait_for_line("maps", r"^connected$")
    page.click('#home [data-app-id="com.example.maps"]', "launch the MapsApp example by clicking its icon")
    page.click("#dashboard-launch", "show Maps on the dashboard (the dashboard's button)")
    page.click("#cluster-launch", "show Maps on the instrument cluster (the cluster's button)")
    procs.wait_for_line("maps", r"video: streaming main")
    for screen, canvas, pane, name in VIDEO_PANES:
        page.wait(f"the {name} decodes the map (WebCodecs)", lambda: (driver.execute_script(
            "return (window.simVideo[arguments[0]] || {}).decoded || 0", screen) >= 2), timeout=30)
        page.wait_css(f"{pane} {canvas}", f"the {name}'s canvas in its pane")
    time.sleep(1)
    names = list(MAP_NIGHT)
    for screen, canvas, pane, name in VIDEO_PANES:
        counts = dict(zip(names, driver.execute_script(COUNT_COLOURS, canvas, [MAP_NIGHT[n] for n in names], 28, screen)))
        roads = counts["street"] + counts["primary road"] + counts["motorway"]
        check(counts["route"] >= 50 and counts["car"] >= 10 and roads >= 200 and counts["background"] >= 200,
              f"the {name} shows the map: roads, the route and the car in their night colours ({counts})")
    # Zoom and pan from the page: the app draws again and the next frames differ.
    before = driver.execute_script(SAMPLE_CANVAS, "#video-main")
    page.click('#main-screen [data-button-id="zoom-in"]', "press the map's zoom-in button")
    procs.wait_for_line("maps", r"^zoom: ")
    wait_for_change(page, driver, "#video-main", before, "the main screen's map changes after the zoom")
    page.click('#main-screen [data-button-id="pan"]', "press the map's pan button")
    page.wait_css("#pan-pad", "the panning controls over the video")
    before = driver.execute_script(SAMPLE_CANVAS, "#video-main")
    page.click("#pan-pad button:nth-of-type(4)", "pan right")
    procs.wait_for_line("maps", r"^pan ")
    wait_for_change(page, driver, "#video-main", before, "the main screen's map changes after the pan")
    check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (map video, panning)", os.path.join(shots, "main-map-panning.png"))
    page.click("#pan-pad button:nth-of-type(3)", "leave panning")
    # Guidance: the car's guidance card over the app's map, the car moving in every window.
    page.click('#main-screen [data-button-id="routes"]', "press the map's routes button")
    page.wait_css("#previews", "the trip previews over the map video")
    page.click('[data-trip-id="home"]', "press Go")
    page.wait_css("#main-screen .guidance-card", "the guidance card over the map video")
    # The maneuver is spoken (a voicePrompt session): the focus line shows the prompt and the page hears it.
    procs.wait_for_line("maps", r"prompt spoken")
    try:
        page.wait("the audio focus display showed the Maps prompt", lambda: any(
            "prompt: " in line for line in driver.execute_script("return window.simAudio.focusLog")))
    except Failure:
        print("focus lines shown: %r" % driver.execute_script("return window.simAudio.focusLog"), flush=True)
        raise
    page.wait("the page's AnalyserNode heard the prompt while it played", lambda: driver.execute_script("return window.simAudio.promptPeak") > 0.01)
    before = {screen: driver.execute_script(SAMPLE_CANVAS, canvas) for screen, canvas, _, _ in VIDEO_PANES}
    for screen, canvas, pane, name in VIDEO_PANES:
        wait_for_change(page, driver, canvas, before[screen], f"the {name}'s map moves with the car")
    time.sleep(2)
    report_video(page, driver)
    check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (map video, guidance)", os.path.join(shots, "main-map-video.png"))
    check_not_blank(page.find("#dashboard").screenshot_as_png, "the dashboard (map video)", os.path.join(shots, "dashboard-map-video.png"))
    check_not_blank(page.find("#cluster").screenshot_as_png, "the instrument cluster (map video)", os.path.join(shots, "cluster-map-video.png"))
    driver.save_screenshot(os.path.join(shots, "page-map-video.png"))
    procs.stop("maps")


def calls_phase(page, driver, procs, args, sock, shots):
    """Calls (PROTOCOL.md section 26): the MessagesApp example reports an incoming
    call; the page's banner shows it ringing with Answer and Decline, Answer reaches
    the app's CXProviderDelegate and the call turns active with Mute and Hold, Mute
    and End do too, and the banner goes away."""
    procs.start("messages", [os.path.join(args.bin, "MessagesApp"), sock, "--incoming-call", "Ada Lovelace"])
    procs.wait_for_line("messages", r"^ringing: Ada Lovelace$")
    page.wait_text("#calls .call.ringing .call-who", "Ada Lovelace")
    page.wait_text("#calls .call-state", "incoming")
    check(page.find("#calls .call-answer") is not None and page.find("#calls .call-end") is not None,
          "a ringing call offers Answer and Decline")
    check(page.find("#calls .call-mute") is None, "a ringing call offers no Mute (the car would refuse it)")
    check_not_blank(page.find("#main-screen").screenshot_as_png, "the call banner (ringing)", os.path.join(shots, "call-ringing.png"))
    page.click("#calls .call-answer", "press Answer")
    procs.wait_for_line("messages", r"^answered$")
    page.wait_css("#calls .call.active", "the call is active once the app fulfilled the answer")
    page.wait_text("#call-status", "answer: done")
    page.click("#calls .call-mute", "press Mute")
    procs.wait_for_line("messages", r"^muted$")
    page.wait_text("#calls .call-state", "muted")
    page.wait_text("#calls .call-mute", "Unmute")
    check_not_blank(page.find("#main-screen").screenshot_as_png, "the call banner (active, muted)", os.path.join(shots, "call-active.png"))
    page.click("#calls .call-end", "press End")
    procs.wait_for_line("messages", r"^ended$")
    page.wait("the banner goes away when the call ended", lambda: page.find("#calls") is None)
    procs.stop("messages")


def report_video(page, driver):
    """Prints and checks each pane's decoder numbers."""
    for screen, canvas, pane, name in VIDEO_PANES:
        st = driver.execute_script("return window.simVideo[arguments[0]]", screen)
        print(f"     {name}: {st['width']}x{st['height']} {st['codec']}, {st['fps']:.1f} fps, latency p50 {st['latencyMs'] or 0:.0f} ms"
              f" p99 {st.get('latencyP99Ms') or 0:.0f} ms (from the {st['latencySource']}; app to simulator p50 {st.get('toSimMs') or 0:.0f} ms,"
              f" arrival in the page to decoded p50 {st.get('decoderMs') or 0:.0f} ms),"
              f" {st['decoded']} decoded, {st.get('drawn', 0)} drawn, {st.get('superseded', 0)} decoded but superseded, {st['dropped']} dropped,"
              f" {st['keyframesAsked']} keyframes asked, {st['errors']} decoder errors", flush=True)
        check(st["errors"] == 0, f"the {name}'s decoder reported no error ({st.get('lastError', '')})")
        # A floor only (a busy CI machine decodes three streams in software); the numbers are printed above.
        check(st["fps"] >= 2, f"the {name} shows at least 2 fps ({st['fps']:.1f})")
        check(page.text(f"{pane} .video-stats").endswith(f"{st['width']}×{st['height']}"), f"the {name} shows its fps and latency ({page.text(pane + ' .video-stats')})")


# ---------------------------------------------------------------- processes

class Processes:
    def __init__(self, work):
        self.work, self.procs = work, {}

    def start(self, name, args):
        out = open(os.path.join(self.work, name + ".out"), "w")
        self.procs[name] = (subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), out)
        return self.procs[name][0]

    def output(self, name):
        with open(os.path.join(self.work, name + ".out")) as f:
            return f.read()

    def wait_for_line(self, name, pattern, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.output(name), re.M)
            if m:
                return m
            if self.procs[name][0].poll() is not None:
                break
            time.sleep(0.1)
        raise Failure(f"{name} did not print /{pattern}/:\n" + self.output(name))

    def stop(self, name):
        proc, out = self.procs.pop(name)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name)


def start_browser_car(bin_dir, procs, sock):
    """headunitd on `sock`, headunit-sim beside it and headless Chromium on its
    page, connected: the driver (quit it when done) and the Page. For the
    tests of one feature each (banner_test.py, assistant_test.py)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    procs.start("daemon", [os.path.join(bin_dir, "headunitd"), "--unix-socket", sock, "--tcp", "127.0.0.1:0"])
    procs.wait_for_line("daemon", r"^ready$")
    procs.start("sim", [os.path.join(bin_dir, "headunit-sim"), "--unix-socket", sock, "--port", "0"])
    url = procs.wait_for_line("sim", r"open (http://\S+)").group(1)
    options = Options()
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1800,1250",
                 "--force-device-scale-factor=1"]:
        options.add_argument(flag)
    for binary in ["/usr/bin/chromium", "/usr/bin/chromium-browser"]:
        if os.path.exists(binary):
            options.binary_location = binary
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.get(url)
    page = Page(driver)
    page.wait_text("#conn-daemon", "daemon: connected")
    return driver, page


# ---------------------------------------------------------------- the page

class Page:
    def __init__(self, driver):
        self.d = driver

    def wait(self, what, condition, timeout=TIMEOUT):
        try:
            result = WebDriverWait(self.d, timeout, poll_frequency=0.1).until(lambda d: condition())
        except Exception:
            raise Failure(f"timed out waiting for {what}")
        print("ok   " + what, flush=True)
        return result

    def find(self, css):
        found = self.d.find_elements(By.CSS_SELECTOR, css)
        return found[0] if found else None

    def wait_css(self, css, what=None, timeout=TIMEOUT):
        return self.wait(what or f"`{css}` in the page", lambda: self.find(css), timeout)

    def text(self, css):
        # The page redraws on every update: an element found may be gone when read (stale); read again.
        for _ in range(5):
            el = self.find(css)
            try:
                # textContent, not .text: CSS may upper-case what the DOM holds.
                return (el.get_attribute("textContent") or "") if el else ""
            except Exception:
                continue
        return ""

    def wait_text(self, css, text, timeout=TIMEOUT):
        return self.wait(f"'{text}' in {css}", lambda: text in self.text(css), timeout)

    def click(self, css, what=None):
        # The page redraws on every update: find the element again until a click lands.
        def attempt():
            el = self.find(css)
            if not el:
                return False
            try:
                el.click()
                return True
            except Exception:
                return False
        self.wait(what or f"click on `{css}`", attempt)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("--screenshots", default=None, help="where to keep the screenshots (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--video-source", choices=["pattern", "maps", "both"], default="both",
                        help="the phone streaming base-view video: headunitctl test-pattern, the MapsApp example (BIN_DIR/MapsApp), or one after the other")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="hu-sim-")
    shots = args.screenshots or os.path.join(work, "screenshots")
    os.makedirs(shots, exist_ok=True)
    sock = os.path.join(work, "hu.sock")
    procs = Processes(work)
    driver = None
    status = 1
    try:
        daemon_args = [os.path.join(args.bin, "headunitd"), "--unix-socket", sock, "--tcp", "127.0.0.1:0"]
        procs.start("daemon", daemon_args)
        procs.wait_for_line("daemon", r"^ready$")
        procs.start("sim", [os.path.join(args.bin, "headunit-sim"), "--unix-socket", sock, "--port", "0"])
        url = procs.wait_for_line("sim", r"open (http://\S+)").group(1)
        print("simulator at " + url, flush=True)

        options = Options()
        for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1800,1250",
                     "--force-device-scale-factor=1", "--autoplay-policy=no-user-gesture-required"]:
            options.add_argument(flag)
        for binary in ["/usr/bin/chromium", "/usr/bin/chromium-browser"]:
            if os.path.exists(binary):
                options.binary_location = binary
        driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        driver.get(url)
        page = Page(driver)
        page.wait_text("#conn-page", "connected")
        page.wait_text("#conn-daemon", "daemon: connected")

        # The phone arrives: its apps on the home screen.
        procs.start("phone", [os.path.join(args.bin, "headunitctl"), "play", "--without-hmi", "--unix-socket", sock,
                              os.path.join(HERE, "scenario.json")])
        page.wait_text("#conn-phone", "Test iPhone")
        page.wait_css('#home [data-app-id="com.example.radio"]', "the Radio icon on the home screen")
        check_not_blank(page.find("#main-screen").screenshot_as_png, "the home screen", os.path.join(shots, "home.png"))
        page.click('#home [data-app-id="com.example.radio"]', "launch Radio by clicking its icon")

        # A list with a section; a click is an HmiInput, the spinner shows until the app completes.
        page.wait_css('#template[data-template-id="library"]', "the Radio's list template")
        page.wait_text("#main-screen", "Recently played")
        page.wait_text("#main-screen", "Jazz FM")
        page.wait_text("#nav-title", "Library")
        check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (list)", os.path.join(shots, "main-list.png"))
        page.click('[data-item-id="station-2"]', "tap Classic Rock")
        page.wait_css('[data-spinner="station-2"]', "the spinner on Classic Rock while the app handles it")
        check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (spinner)", os.path.join(shots, "main-spinner.png"))

        # The app got the selection (its expect step passed) and pushed a grid.
        page.wait_css('#template[data-template-id="genre-grid"]', "the grid pushed after the selection completed")
        check("item_selected" in procs.output("phone"), "the phone received the selection (item_selected in its output)")
        page.wait_text("#main-screen", "Rock")
        page.click('[data-button-id="rock"]', "press Rock")
        page.wait_text("#log", "pressButton")
        page.click("#back", "the back button")
        page.wait_css('#template[data-template-id="library"]', "back on the list after the pop")
        check(driver.execute_script("return document.querySelectorAll('[data-focus]:focus-visible').length") == 0,
              "no knob-focus ring after touches (clicks)")

        # An alert as a modal.
        page.wait_css("#modal", "the alert presented as a modal")
        page.wait_text("#modal", "Sign in on your iPhone")
        page.click('#modal [data-button-id="ok"]', "press OK on the alert")
        page.wait(f"the alert dismissed", lambda: page.find("#modal") is None)

        # Now playing on the main screen, the dashboard and the cluster.
        page.wait_css("#now-playing", "the now-playing template")
        page.wait_text("#now-playing", "Blue in Green")
        page.wait_text("#now-playing", "Miles Davis")
        page.wait_text("#cluster", "Blue in Green")
        page.wait_text("#dashboard", "Blue in Green")
        check(driver.execute_script("return document.querySelector('#main-screen').textContent.split('Blue in Green').length - 1") == 1,
              "the title shown once on Now Playing (the bar names the app)")
        check(driver.execute_script("const a = document.querySelector('#now-playing .img'); return !!a && (!!a.querySelector('img') || a.classList.contains('no-artwork'))"),
              "Now Playing draws the artwork or a placeholder, never an empty square")
        check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (now playing)", os.path.join(shots, "main-nowplaying.png"))
        small = driver.execute_script("return [...document.querySelectorAll('#now-playing .np-buttons .btn')].filter(b => b.offsetWidth < 44 || b.offsetHeight < 44).map(b => b.dataset.buttonId)")
        check(driver.execute_script("return document.querySelectorAll('#now-playing .np-buttons .btn').length") > 0 and small == [],
              f"Now Playing's buttons (shuffle, repeat...) are touch targets of at least 44x44 px, smaller: {small}")

        # The knob: arrow keys move the focus, Enter selects (the shuffle button).
        page.find("#main-screen").click()
        keys = lambda key: ActionChains(driver).send_keys(key).perform()  # to the focused element, as a knob would
        for _ in range(12):
            keys(Keys.ARROW_DOWN)
            if driver.execute_script("return document.activeElement && document.activeElement.dataset.buttonId") == "shuffle":
                break
        check(driver.execute_script("return document.activeElement.dataset.buttonId") == "shuffle",
              "the arrow keys move the focus to the shuffle button")
        check(driver.execute_script("return document.activeElement.matches(':focus-visible')"),
              "the knob-focus ring shows in knob mode (keys)")
        keys(Keys.ENTER)
        page.wait_text("#log", "nowPlayingButton")

        # Navigation: home, launch Maps, trip previews, start; the cluster shows the maneuvers.
        page.click("#dock-home", "the home button")
        page.click('#home [data-app-id="com.example.maps"]', "launch Maps by clicking its icon")
        page.wait_css("#previews", "the trip previews over the map")
        page.wait_text("#previews", "Via the ring road")
        page.click('[data-trip-id="work"]', "press Drive")
        page.wait_text("#cluster", "Turn right onto Main Street")
        page.wait_text("#cluster", "lane guidance")
        page.wait_text("#cluster", "Trip: 11.8 km")
        page.wait_text("#dashboard", "Right onto Main St")  # the dashboard's own short variant
        page.wait_text("#main-screen", "Turn right onto Main Street")  # the main screen has room for the long one
        page.wait_text("#cluster", "<1 min")  # 40 s to the turn
        page.wait_text("#cluster", "Guidance: ACTIVE · Maps")  # the display name, not the bundle id
        page.wait_text("#dashboard", "Guidance: ACTIVE · Maps")
        # The lanes drawn from the lane guidance the maneuver links, on all three panes: three lanes, the
        # preferred (right) one shaded with its right-turn arrow lit, the not-good one with none lit.
        for pane in ("#cluster", "#dashboard", "#main-screen"):
            page.wait_css(pane + ' .lane-row[data-lane-guidance-id="main-st"]', "the lanes on " + pane)
            statuses = driver.execute_script("return [...document.querySelectorAll(arguments[0] + ' .lane-row .lane')].map(l => l.dataset.laneStatus)", pane)
            check(statuses == ["not-good", "good", "preferred"], f"{pane}: lanes left to right as sent, got {statuses}")
            lit = driver.execute_script("return [...document.querySelectorAll(arguments[0] + ' .lane-row .lane')].map(l => l.querySelectorAll('.lane-arrow.lit').length)", pane)
            check(lit == [0, 1, 1], f"{pane}: the highlighted direction lit on the good and preferred lanes only, got {lit}")
        check(driver.execute_script("return document.querySelector('#cluster .lane.preferred .lane-arrow.lit').textContent") == "↱",
              "the preferred lane's lit arrow turns right (its 90-degree angle)")
        page.wait_text("#main-screen", "Use the right lane for Main Street")
        page.wait_text("#main-screen", "On Station Road")
        lanes = driver.execute_script("const b = document.querySelector('#cluster .lanes .img'); return b && [b.offsetWidth, b.offsetHeight]")
        check(lanes == [120, 18], f"the 240x36 lane strip drawn at laneGuidance's 120x18 points (TEMPLATES.md), got {lanes}")
        check(driver.execute_script("const b = document.querySelector('#cluster .lanes .img'); return b.title.startsWith('asset ') && b.scrollHeight <= b.clientHeight"),
              "the lane strip's asset name stays on one line inside it (and whole in its tooltip), not wrapped and cut")
        page.wait_text("#cluster", "ACTIVE")
        time.sleep(0.3)
        check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (map with guidance)", os.path.join(shots, "main-map.png"))
        check_not_blank(page.find("#dashboard").screenshot_as_png, "the dashboard", os.path.join(shots, "dashboard.png"))
        check_not_blank(page.find("#cluster").screenshot_as_png, "the instrument cluster", os.path.join(shots, "cluster.png"))

        # Car controls, each a SetVehicleState: day, right-hand drive (page side), driving.
        page.click("#ctl-night", "switch to day")
        page.wait("the main screen drawn light", lambda: "light" in page.find("#main-screen").get_attribute("class"))
        page.wait_text("#ctl-result", "SetVehicleState: OK")
        page.click("#ctl-rhd", "right-hand drive")
        page.wait("the layout mirrored", lambda: "rhd" in page.find("#main-screen").get_attribute("class"))
        driver.save_screenshot(os.path.join(shots, "page-day-rhd.png"))
        page.click("#ctl-rhd", "left-hand drive again")
        page.click("#ctl-night", "back to night")
        page.wait("the main screen drawn dark", lambda: "light" not in page.find("#main-screen").get_attribute("class"))
        page.click("#ctl-driving", "driving")
        page.wait("the log shows SetVehicleState with driving", lambda: '"driving": true' in driver.execute_script(
            "return Array.from(document.querySelectorAll('#log pre')).map(e => e.textContent).join('\\n')"))
        page.click("#ctl-driving", "parked")
        driver.save_screenshot(os.path.join(shots, "page.png"))
        check_not_blank(driver.get_screenshot_as_png(), "the whole page", os.path.join(shots, "page.png"))

        # The last input; then the phone drops and the page says so.
        page.click('[data-button-id="recenter"]', "press the map's recenter button")
        page.wait_text("#banner", "No phone connected", timeout=30)
        proc = procs.procs["phone"][0]
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            raise Failure("the scenario phone did not finish:\n" + procs.output("phone"))
        phone_out = procs.output("phone")
        if proc.returncode != 0 or "scenario PASSED" not in phone_out:
            raise Failure(f"the scenario phone failed (exit {proc.returncode})")
        check(re.search(r"scenario PASSED: \d+ passed, 0 skipped, 0 failed", phone_out) is not None,
              "the scenario phone passed with nothing skipped: every launch, tap and press reached the app")

        # The RadioApp example (CarPlayKit, MPRemoteCommandCenter) as the phone: the Now Playing
        # screen draws its transport controls; a click and the keyboard's media keys run its handlers.
        procs.start("radio", [os.path.join(args.bin, "RadioApp"), sock])
        procs.wait_for_line("radio", r"^connected$")
        page.click('#home [data-app-id="com.example.radio"]', "launch the RadioApp example")
        page.click('[data-item-id="jazz"]', "tap Jazz FM")
        page.wait_text("#now-playing", "Jazz FM")
        page.wait_css('#np-transport [data-command="REMOTE_COMMAND_TOGGLE_PLAY_PAUSE"]', "the play/pause transport button")
        page.wait("skip forward drawn disabled (the app disabled it)", lambda: page.find(
            '#np-transport [data-command="REMOTE_COMMAND_SKIP_FORWARD"][disabled]') is not None)
        page.click('#np-transport [data-command="REMOTE_COMMAND_TOGGLE_PLAY_PAUSE"]', "press the play/pause transport button")
        procs.wait_for_line("radio", r"^pause$")
        page.wait_text("#now-playing", "paused")
        page.wait_text("#np-status", "toggle_play_pause: success")
        media_key = lambda key: driver.execute_script(
            "document.dispatchEvent(new KeyboardEvent('keydown', {key: arguments[0], bubbles: true}))", key)
        media_key("MediaTrackNext")
        procs.wait_for_line("radio", r"^tuned to News 24$")
        page.wait_text("#now-playing", "News 24")
        page.wait_text("#now-playing", "playing")
        audio_phase(page, driver)
        check_not_blank(page.find("#main-screen").screenshot_as_png, "the main screen (transport controls)", os.path.join(shots, "main-transport.png"))
        media_key("MediaPlayPause")
        page.wait_text("#now-playing", "paused")
        media_key("MediaTrackPrevious")
        procs.wait_for_line("radio", r"^tuned to Jazz FM$")
        page.wait_text("#now-playing", "Jazz FM")
        # Killed without a Goodbye: the car keeps its apps for resume_grace_ms; the restart below ends them.
        procs.stop("radio")

        # The log pane shows decoded messages both ways.
        for name in ["launchApp", "hmiInput", "screenUpdate", "homeScreen", "metadataUpdate", "navigationInput", "setVehicleState",
                     "sendRemoteCommand", "carButton"]:
            page.wait_text("#log", name)

        # Base-view video: a moving test pattern (decoder recovery, frames that change), then the MapsApp's map.
        if args.video_source in ("pattern", "both"):
            video_phase(page, driver, procs, args, sock, shots)
        if args.video_source in ("maps", "both"):
            maps_video_phase(page, driver, procs, args, sock, shots)

        # Calls: the MessagesApp example's incoming call on the page's banner, answered, muted and ended there.
        calls_phase(page, driver, procs, args, sock, shots)

        # The daemon restarts: the page says so and reconnects by itself.
        procs.stop("daemon")
        page.wait_text("#banner", "headunitd is not reachable")
        page.wait_text("#conn-daemon", "reconnecting")
        procs.start("daemon", daemon_args)
        procs.wait_for_line("daemon", r"^ready$")
        page.wait_text("#conn-daemon", "daemon: connected", timeout=30)
        page.wait("the banner now says no phone", lambda: "No phone connected" in page.text("#banner"))

        # Every template of TEMPLATES.md: the category scenarios play (with their own HMI)
        # while the page watches; each screen they reach is drawn without a page error.
        repo = os.path.dirname(os.path.dirname(HERE))
        for name in ["audio", "communication", "navigation", "parking", "quick-ordering", "driving-task"]:
            proc = procs.start("play-" + name, [os.path.join(args.bin, "headunitctl"), "play", "--unix-socket", sock,
                                                os.path.join(repo, "scenarios", name + ".json")])
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                raise Failure(f"scenarios/{name}.json did not finish")
            check(proc.returncode == 0, f"scenarios/{name}.json played while the page watched")
            procs.stop("play-" + name)
        page.wait_text("#conn-daemon", "daemon: connected")
        rendered = driver.execute_script("return window.simRendered")
        kinds = ["list", "grid", "tabBar", "nowPlaying", "alert", "actionSheet", "information", "pointOfInterest",
                 "contact", "map", "search", "voiceControl"]
        missing = [k for k in kinds if not rendered.get(k)]
        check(not missing, f"the page drew every template kind ({', '.join(f'{k} x{rendered.get(k, 0)}' for k in kinds)})"
              + (f"; never drawn: {missing}" if missing else ""))
        errors = driver.execute_script("return window.simErrors")
        check(not errors, f"no script error in the page ({errors})")
        status = 0
        print("simulator browser test passed", flush=True)
    except Failure as failure:
        print(f"FAIL {failure}", flush=True)
        for name in ["phone", "sim", "daemon"]:
            path = os.path.join(work, name + ".out")
            if os.path.exists(path):
                print(f"---- {name} output (last 60 lines)")
                print("".join(open(path).readlines()[-60:]))
        if driver:
            driver.save_screenshot(os.path.join(shots, "failure.png"))
            print(f"page at the failure: {os.path.join(shots, 'failure.png')}")
            for entry in driver.get_log("browser") if hasattr(driver, "get_log") else []:
                print("browser: ", entry)
    finally:
        if driver:
            driver.quit()
        procs.stop_all()
        if not args.keep and not args.screenshots and status == 0:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
