#!/usr/bin/env python3
"""Navigation banners in the browser simulator (PROTOCOL.md 19.9).

Maps guides while the Radio's list is on the main screen; the page must draw
Maps' notified maneuver as a banner at the top of the main screen (its
notification variant), and a click on it must select it: the scenario phone
(banner-scenario.json) passes only when the app hears banner_selected, and
the main screen shows Maps again without the banner.

    banner_test.py BIN_DIR [--screenshot PATH]   (BIN_DIR holds headunitd, headunitctl, headunit-sim)

Uses sim_test.py's helpers (headless Chromium through selenium).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sim_test as T  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("--screenshot", default=None)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="banner-test-")
    sock = os.path.join(work, "hu.sock")
    procs = T.Processes(work)
    driver = None
    passed = False
    try:
        procs.start("daemon", [os.path.join(args.bin, "headunitd"), "--unix-socket", sock, "--tcp", "127.0.0.1:0"])
        procs.wait_for_line("daemon", r"^ready$")
        procs.start("sim", [os.path.join(args.bin, "headunit-sim"), "--unix-socket", sock, "--port", "0"])
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
        page = T.Page(driver)
        page.wait_text("#conn-daemon", "daemon: connected")
        phone = procs.start("phone", [os.path.join(args.bin, "headunitctl"), "play", "--without-hmi", "--unix-socket", sock,
                                      os.path.join(HERE, "banner-scenario.json")])
        page.wait_css('#home [data-app-id="com.example.maps"]', "the Maps icon")
        page.click('#home [data-app-id="com.example.maps"]', "launch Maps")
        page.wait("Maps on the main screen", lambda: page.find("#main-screen").get_attribute("data-app") == "com.example.maps")
        page.click("#dock-home", "go home")
        page.wait_css('#home [data-app-id="com.example.radio"]', "the Radio icon")
        page.click('#home [data-app-id="com.example.radio"]', "launch Radio")
        page.wait_text("#main-screen", "Jazz FM")
        page.wait_text("#nav-banner", "Turn left onto High Street")
        T.check("Maps" in page.text("#nav-banner"), "the banner names the app")
        if args.screenshot:
            with open(args.screenshot, "wb") as f:
                f.write(page.find("#main-screen").screenshot_as_png)
        page.click("#nav-banner", "tap the banner")
        page.wait("Maps back on the main screen", lambda: page.find("#main-screen").get_attribute("data-app") == "com.example.maps")
        page.wait("the banner gone", lambda: not driver.find_elements("css selector", "#nav-banner"))
        phone.wait(30)
        T.check(phone.returncode == 0, "the app heard banner_selected (the scenario passed)")
        passed = True
    finally:
        if not passed and "phone" in procs.procs:
            print(procs.output("phone")[-3000:])
        if driver:
            driver.quit()
        procs.stop_all()
    print("banner_test: PASSED" if passed else "banner_test: FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
