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
import sys
import tempfile
import time


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
        driver, page = T.start_browser_car(args.bin, procs, sock)
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
