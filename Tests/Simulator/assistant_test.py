#!/usr/bin/env python3
"""The phone's assistant and notifications in the browser simulator
(PROTOCOL.md section 27).

The MessagesApp example is the phone (its assistant runs its SiriKit-shaped
intents). In headless Chromium: its notification appears in the list and,
selected, the assistant reads Alice's message on the main screen; the voice
key opens the assistant (listening); the say box's "send a message to Jane
saying on my way" reaches the app's send handler (its stdout says so) and
the answer is drawn on the main screen; the app's "Ask Siri" row opens it to
place a call.

    assistant_test.py BIN_DIR [--screenshot PATH]   (BIN_DIR holds headunitd, headunit-sim, MessagesApp)

Uses sim_test.py's helpers.
"""
import argparse
import os
import sys
import tempfile

from selenium.webdriver.common.by import By

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sim_test as T  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("--screenshot", default=None)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="assistant-test-")
    sock = os.path.join(work, "hu.sock")
    procs = T.Processes(work)
    driver = None
    passed = False
    try:
        driver, page = T.start_browser_car(args.bin, procs, sock)
        procs.start("phone", [os.path.join(args.bin, "MessagesApp"), sock])
        procs.wait_for_line("phone", r"^notification posted$")

        # The notification: a banner over the main screen and a row of the list, sender only;
        # selected, the assistant reads it and it is marked read.
        page.wait_text("#notifications", "message from Alice")
        page.wait_text("#notification-banner", "Alice")
        T.check("See you" not in page.text("#main-screen"), "the banner names the sender, never the message")
        page.click('#notifications [data-notification-id="m1"] .open', "select Alice's notification")
        page.wait_text("#assistant", "Alice said: See you at 6")
        procs.wait_for_line("phone", r"^marked read: m1$")
        page.wait("the notification gone from the list", lambda: not driver.find_elements(By.CSS_SELECTOR, '#notifications [data-notification-id="m1"]'))
        page.wait("the session ended", lambda: "ended" in page.text("#assistant .assistant-state"))

        # The voice key: the assistant listens; the say box carries the request.
        page.click("#ctl-voice", "press the voice key")
        page.wait("the assistant listening", lambda: (page.find("#assistant") is not None
                                                      and page.find("#assistant").get_attribute("data-state") == "listening"))
        page.wait_text("#assistant", "What can I help you with?")
        box = page.find("#say-text")
        box.send_keys("send a message to Jane saying on my way")
        page.click("#say-send", "say it")
        procs.wait_for_line("phone", r"^message sent to Jane: on my way$")
        page.wait_text("#assistant", "Sent to Jane: on my way")
        T.check("send a message to Jane saying on my way" in page.text("#assistant"), "the driver's words are drawn in the exchange")
        if args.screenshot:
            with open(args.screenshot, "wb") as f:
                f.write(page.find("#main-screen").screenshot_as_png)
        page.wait("the session ended by the assistant", lambda: "ended (by_assistant)" in page.text("#assistant .assistant-state"))

        # The app's "Ask Siri" row: the assistant asks whom to call, and the app places the call.
        page.click('#home [data-app-id="com.example.messages"]', "launch Messages")
        page.click("#assistant-cell .text", "tap Ask Siri")
        page.wait_text("#assistant", "Who do you want to call?")
        page.find("#say-text").send_keys("Bob")
        page.click("#say-send", "say the name")
        procs.wait_for_line("phone", r"^calling Bob$")
        page.wait_text("#calls", "Bob")
        passed = True
    finally:
        if not passed and "phone" in procs.procs:
            print(procs.output("phone")[-3000:])
        if driver:
            driver.quit()
        procs.stop_all()
    print("assistant_test: PASSED" if passed else "assistant_test: FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
