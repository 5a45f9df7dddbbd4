#!/usr/bin/env python3
"""Regenerates Protocol/vectors/vectors.json, the protocol's test vectors.

The payload bytes come from protoc (`protoc --encode`), not from the Swift
code under test, so the vectors are an independent check of the Swift codec.
Needs python3 and protoc (Debian protobuf-compiler). CI does not run this: the
generated vectors.json is committed, and the Swift tests read it.

    python3 Protocol/vectors/generate.py          # rewrite vectors.json
    python3 Protocol/vectors/generate.py --check  # fail if it is out of date

Format of vectors.json: see Protocol/vectors/README.md.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL = os.path.dirname(HERE)
OUT = os.path.join(HERE, "vectors.json")
MAX = 1048576

KINDS = {0x01: "MESSAGE", 0x02: "PING", 0x03: "PONG", 0x04: "DATA", 0x05: "MEDIA", 0x06: "VIDEO"}


def encode(text):
    """Binary protobuf of a headunit.v1.Envelope given in text format."""
    return subprocess.run(
        ["protoc", "--encode=headunit.v1.Envelope", "-I", PROTOCOL, os.path.join(PROTOCOL, "headunit.proto")],
        input=text.encode(), capture_output=True, check=True,
    ).stdout


def header(kind, length, flags=0, channel=0):
    return bytes([0x48, 0x55, kind, flags]) + channel.to_bytes(4, "big") + length.to_bytes(4, "big")


def spaced(header_bytes, payload=b""):
    """Hex with the header fields apart: magic kind flags channel length payload."""
    h = header_bytes.hex()
    parts = [h[0:4], h[4:6], h[6:8], h[8:16], h[16:24]] if len(header_bytes) == 12 else [h]
    if payload:
        parts.append(payload.hex())
    return " ".join(p for p in parts if p)


class Frame:
    """One frame the parser is expected to yield."""

    def __init__(self, kind, payload=b"", flags=0, channel=0, envelope=None, malformed=False, unknown_fields=False):
        self.kind, self.payload, self.flags, self.channel = kind, payload, flags, channel
        self.envelope, self.malformed, self.unknown_fields = envelope, malformed, unknown_fields

    def wire(self):
        return header(self.kind, len(self.payload), self.flags, self.channel) + self.payload

    def hex(self):
        return spaced(header(self.kind, len(self.payload), self.flags, self.channel), self.payload)

    def json(self):
        out = {
            "kind": KINDS.get(self.kind, "0x%02x" % self.kind),
            "kind_byte": self.kind,
            "flags": self.flags,
            "channel": self.channel,
            "length": len(self.payload),
            "payload_hex": self.payload.hex(),
        }
        if self.envelope is not None:
            out["envelope"] = self.envelope
        if self.malformed:
            out["malformed"] = True
        if self.unknown_fields:
            out["unknown_fields"] = True
        return out


def message(text, **kw):
    text = " ".join(text.split())
    return Frame(0x01, encode(text), envelope=text, **kw)


VECTORS = []


def vector(name, description, frames, expect, sender="client", state="established", transport="any",
           framing_error=None, trailing=b"", raw=None, max_payload=MAX, role=None, given=(), ids=None):
    """frames: what the parser yields, in order. trailing: bytes after them
    (a framing error's trigger, or an incomplete frame). raw: the whole input
    when it is not just frames + trailing."""
    data = raw if raw is not None else b"".join(f.wire() for f in frames) + trailing
    if raw is None:
        pieces = [f.hex() for f in frames]
        if trailing:
            looks_like_header = len(trailing) >= 12 and trailing[:2] == b"HU"
            pieces.append(spaced(trailing[:12], trailing[12:]) if looks_like_header else trailing.hex())
        hexs = " | ".join(pieces)
    else:
        hexs = data.hex()
    assert bytes.fromhex(hexs.replace(" ", "").replace("|", "")) == data, name
    v = {
        "name": name,
        "description": description,
        "from": sender,
        "state": state,
        "transport": transport,
        "max_payload_bytes": max_payload,
        "hex": hexs,
        "frames": [f.json() for f in frames],
    }
    if framing_error:
        v["framing_error"] = framing_error
    # Bytes left in the buffer when the input ends: a frame cut short.
    v["incomplete"] = framing_error is None and len(data) > sum(len(f.wire()) for f in frames)
    v["expect"] = expect
    if sender == "client" and state == "established":
        # Who sends the bytes, and what the car must have seen first (README: "Preconditions").
        v["role"] = role or "phone"
        v["given"] = [{"by": by, "envelope": " ".join(text.split())} for by, text in given]
        if ids:
            v["ids"] = ids
    VECTORS.append(v)


# Preconditions (README "Preconditions"): requests other connections (or the
# sender) make first, each answered OK. Ids the daemon chooses are written as
# the vector's values and stand for the daemon's (the "ids" key).
RADIO = [("phone", '''announce_apps { device_name: "Alice's iPhone"
    apps { app_id: "com.example.radio" display_name: "Radio" entitlements: "com.apple.developer.carplay-audio" } }''')]
RADIO_LAUNCHED = RADIO + [("hmi", 'launch_app { app_id: "com.example.radio" kind: SCENE_KIND_MAIN }')]
RADIO_ROOT = RADIO_LAUNCHED + [("phone", '''template_request { app_id: "com.example.radio" scene_id: 1
    set_root { id: "root" list { title: "Radio" sections { id: "s1"
        items { id: "jazz" general { text: "Jazz FM" } } items { id: "news" general { text: "News 24" } } } } } }''')]
RADIO_PUSHED = RADIO_ROOT + [("phone", '''template_request { app_id: "com.example.radio" scene_id: 1
    push { id: "more" list { title: "More" sections { id: "s1" items { id: "talk" general { text: "Talk" } } } } } }''')]
RADIO_ALERT = RADIO_ROOT + [("phone", '''template_request { app_id: "com.example.radio" scene_id: 1
    present { id: "alert" alert { title_variants: "Station offline" actions { id: "ok" title: "OK" } } } }''')]
RADIO_SELECTED = RADIO_ROOT + [("hmi", 'hmi_input { template_id: "root" select_item { item_id: "jazz" } }')]
SERVED = [("accessory", 'serve_protocols { protocols: "com.openmotors.performance" }')]
TRACKLAPS = SERVED + [("phone", '''announce_apps { device_name: "Alice's iPhone" apps { app_id: "com.openmotors.tracklaps"
    display_name: "Track Laps" entitlements: "com.apple.developer.carplay-protocols" accessory_protocols: "com.openmotors.performance" } }''')]
OPENING = TRACKLAPS + [("phone", 'open_session { app_id: "com.openmotors.tracklaps" protocol: "com.openmotors.performance" }')]
OPEN = OPENING + [("accessory", 'answer_session { channel: 1 accept: true }')]
MAPS = [("phone", '''announce_apps { device_name: "Alice's iPhone"
    apps { app_id: "com.example.maps" display_name: "Maps" entitlements: "com.apple.developer.carplay-maps" } }'''),
        ("hmi", 'launch_app { app_id: "com.example.maps" kind: SCENE_KIND_MAIN }'),
        ("phone", 'template_request { app_id: "com.example.maps" scene_id: 1 set_root { id: "map" map { } } }')]
MAPS_PREVIEWS = MAPS + [("phone", '''navigation_request { app_id: "com.example.maps" show_trip_previews {
    trips { id: "home" destination { name: "Home" } route_choices { id: "fast" summary_variants: "Ring road" } } } }''')]
MAPS_GUIDING = MAPS + [("phone", '''navigation_request { app_id: "com.example.maps" start {
    trip { id: "home" route_choices { id: "fast" summary_variants: "Ring road" } } } }''')]
MAPS_MANEUVER = MAPS_GUIDING + [("phone", '''navigation_request { app_id: "com.example.maps" update_maneuvers {
    maneuvers { id: "m1" instruction_variants: "Turn right" estimates { distance_remaining_m: 800 time_remaining_s: 90 } } } }''')]
MAPS_CLUSTER = MAPS + [("hmi", 'launch_app { app_id: "com.example.maps" kind: SCENE_KIND_INSTRUMENT_CLUSTER }')]


def ok(reply):
    return {"code": "ERROR_CODE_OK", "fatal": False, "reply": reply}


def err(code, fatal, request_id=0):
    e = {"code": "ERROR_CODE_" + code, "fatal": fatal, "reply": "Goodbye" if fatal else "Result"}
    if not fatal:
        e["request_id"] = request_id
    return e


# ------------------------------------------------------------------ valid: handshake

vector("hello-phone-v1",
       "A phone's Hello speaking exactly version 1; answered by Welcome{version 1} with request_id 1.",
       [message('request_id: 1 hello { min_version: 1 max_version: 1 role: ROLE_PHONE name: "Alice\'s iPhone" }')],
       ok("Welcome"), state="handshake")

vector("hello-phone-range-1-3",
       "A newer phone offering versions 1..3: the range includes 1, so the daemon answers Welcome{version 1}.",
       [message('request_id: 1 hello { min_version: 1 max_version: 3 role: ROLE_PHONE name: "future phone" }')],
       ok("Welcome"), state="handshake")

vector("hello-hmi-unix",
       "The car's HMI on the Unix socket.",
       [message('request_id: 1 hello { min_version: 1 max_version: 1 role: ROLE_HMI name: "hmi" }')],
       ok("Welcome"), state="handshake", transport="unix")

vector("welcome",
       "The daemon's answer to hello-phone-v1: version, its own range, limits, vehicle, connection id.",
       [message('''request_id: 1 welcome {
           version: 1 daemon_min_version: 1 daemon_max_version: 1
           limits { max_payload_bytes: 1048576 heartbeat_interval_ms: 5000 heartbeat_timeout_ms: 15000
                    completion_timeout_ms: 10000 max_errors_per_second: 10 }
           vehicle { manufacturer: "Example" model: "Roadster"
                     main_display { width_pt: 800 height_pt: 480 scale: 2 }
                     inputs: INPUT_KIND_TOUCH_HIGH_LATENCY inputs: INPUT_KIND_ROTARY_KNOB
                     max_list_items_while_driving: 12 }
           daemon_name: "headunitd" connection_id: 7 }''')],
       ok("nothing"), sender="daemon")

# Built by hand: protoc cannot encode a field the schema lacks.
_hello = encode('request_id: 1 hello { min_version: 1 max_version: 1 role: ROLE_PHONE name: "Alice\'s iPhone" }')
assert _hello[2] == 0x12 and _hello[3] == len(_hello) - 4
_inner = _hello[4:] + bytes([15 << 3 | 0, 7])
_payload = _hello[:3] + bytes([len(_inner)]) + _inner
vector("hello-with-unknown-field",
       "A Hello from a newer client carrying a field this version does not know (Hello field 15, varint 7: "
       "bytes 78 07 at the end). Unknown fields are ignored: it is answered as hello-phone-v1. Decoders that "
       "keep unknown fields re-encode the same bytes.",
       [Frame(0x01, _payload, envelope='request_id: 1 hello { min_version: 1 max_version: 1 role: ROLE_PHONE name: "Alice\'s iPhone" }',
              unknown_fields=True)],
       ok("Welcome"), state="handshake")

# ------------------------------------------------------------------ valid: control

vector("result-ok",
       "Success for request 2. Result{code OK} has every field at its default, so the Result is empty (2a 00).",
       [message('request_id: 2 result { }')], ok("nothing"), sender="daemon")

vector("result-limit-exceeded",
       "A refused request: which limit was hit and its value for this car.",
       [message('request_id: 3 result { code: ERROR_CODE_LIMIT_EXCEEDED message: "list has 20 items, the car shows at most 12 while driving" '
                'limit: "list.items" limit_value: 12 }')],
       ok("nothing"), sender="daemon")

vector("result-non-fatal-error-event",
       "A non-fatal protocol error about a frame that had no request id (request_id 0).",
       [message('result { code: ERROR_CODE_UNKNOWN_FRAME_KIND message: "unknown frame kind 0x7; frame skipped" }')],
       ok("nothing"), sender="daemon")

vector("goodbye-heartbeat-timeout",
       "The daemon's last frame before it closes a silent connection.",
       [message('goodbye { code: ERROR_CODE_HEARTBEAT_TIMEOUT reason: "nothing received for 15000 ms (limit 15000 ms)" }')],
       ok("nothing"), sender="daemon")

vector("goodbye-from-client",
       "A client leaving in order: the daemon closes without answering.",
       [message('goodbye { reason: "user disconnected" }')], ok("nothing"))

vector("ping",
       "A PING with an 8-byte payload (the daemon sends its monotonic clock); answered by a PONG with the same payload.",
       [Frame(0x02, bytes.fromhex("0000000000001388"))], ok("PONG"))

vector("pong",
       "The answer to the PING above.",
       [Frame(0x03, bytes.fromhex("0000000000001388"))], ok("nothing"))

vector("ping-empty",
       "A PING without payload; answered by an empty PONG.",
       [Frame(0x02, b"")], ok("PONG"))

vector("ping-64-bytes",
       "A PING with the largest allowed payload (64 bytes).",
       [Frame(0x02, bytes(range(64)))], ok("PONG"))

vector("ping-then-message",
       "Two frames in one read: both are parsed, in order.",
       [Frame(0x02, b"\x01\x02"), message('request_id: 9 get_status { }')], ok("PONG"), role="hmi", transport="unix")

# ------------------------------------------------------------------ valid: phone session

vector("announce-apps-one-audio-app",
       "A phone announces one audio app.",
       [message('''request_id: 2 announce_apps { device_name: "Alice's iPhone"
           apps { app_id: "com.example.radio" display_name: "Radio" entitlements: "com.apple.developer.carplay-audio" } }''')],
       ok("Result"))

vector("result-app-decisions",
       "The answer to announce-apps-one-audio-app: the app is accepted as an audio app.",
       [message('request_id: 2 result { app_decisions { decisions { app_id: "com.example.radio" accepted: true category: CATEGORY_AUDIO } } }')],
       ok("nothing"), sender="daemon")

vector("launch-app",
       "The HMI launches the app's main scene.",
       [message('request_id: 4 launch_app { app_id: "com.example.radio" kind: SCENE_KIND_MAIN }')],
       ok("Result"), transport="unix", role="hmi", given=RADIO)

vector("scene-connected",
       "Event to the phone: the app's main scene is connected (request_id 0).",
       [message('''scene_connected { app_id: "com.example.radio" scene_id: 1 kind: SCENE_KIND_MAIN
           window { width_pt: 800 height_pt: 480 scale: 2 } content_style: CONTENT_STYLE_DARK
           vehicle_state { content_style: CONTENT_STYLE_DARK }
           max_stack_depth: 5 max_list_items: 0 max_tabs: 4 }''')],
       ok("nothing"), sender="daemon")

vector("template-set-root-list-2-items",
       "The app sets its root template: a list with one section of two items.",
       [message('''request_id: 5 template_request { app_id: "com.example.radio" scene_id: 1
           set_root { id: "root" list { title: "Radio" sections { id: "s1"
               items { id: "jazz" general { text: "Jazz FM" detail_text: "Smooth" } }
               items { id: "news" general { text: "News 24" accessory: ACCESSORY_TYPE_DISCLOSURE_INDICATOR } } } } } }''')],
       ok("Result"), given=RADIO_LAUNCHED, ids={"scene_id": 1})

vector("result-template-shown",
       "The answer to the set_root above.",
       [message('request_id: 5 result { template_shown { template_id: "root" depth: 1 items_shown: 2 items_total: 2 } }')],
       ok("nothing"), sender="daemon")

vector("hmi-input-select-item",
       "The driver taps the first item of the list on screen.",
       [message('request_id: 6 hmi_input { template_id: "root" select_item { item_id: "jazz" } }')],
       ok("Result"), transport="unix", role="hmi", given=RADIO_ROOT, ids={"scene_id": 1})

vector("app-event-item-selected",
       "Event to the phone: the item was selected; event_id 42 is non-zero, so the car shows a spinner "
       "and waits for CompleteEvent.",
       [message('app_event { app_id: "com.example.radio" scene_id: 1 event_id: 42 template_id: "root" item_selected { item_id: "jazz" } }')],
       ok("nothing"), sender="daemon")

vector("complete-event",
       "The app completes event 42 (the spinner stops).",
       [message('request_id: 7 complete_event { app_id: "com.example.radio" event_id: 42 }')],
       ok("Result"), given=RADIO_SELECTED, ids={"scene_id": 1, "event_id": 42})

vector("template-pop",
       "Pop the top template.",
       [message('request_id: 8 template_request { app_id: "com.example.radio" scene_id: 1 animated: true pop { } }')],
       ok("Result"), given=RADIO_PUSHED, ids={"scene_id": 1})

vector("template-present-alert",
       "Present an alert over the stack.",
       [message('''request_id: 10 template_request { app_id: "com.example.radio" scene_id: 1
           present { id: "alert" alert { title_variants: "Station offline" actions { id: "ok" title: "OK" } } } }''')],
       ok("Result"), given=RADIO_ROOT, ids={"scene_id": 1})

vector("template-dismiss",
       "Dismiss the presented alert.",
       [message('request_id: 11 template_request { app_id: "com.example.radio" scene_id: 1 dismiss { } }')],
       ok("Result"), given=RADIO_ALERT, ids={"scene_id": 1})

vector("app-closed",
       "The phone says the app went away; its scenes end. Sent with request_id 0: still a request, "
       "so it is answered with a Result carrying request_id 0 (PROTOCOL.md section 4).",
       [message('app_closed { app_id: "com.example.radio" }')], ok("Result"), given=RADIO_LAUNCHED)

# ------------------------------------------------------------------ valid: HMI

vector("home-screen",
       "Event to the HMI: the icons to show.",
       [message('''home_screen { icons { app_id: "com.example.radio" display_name: "Radio" category: CATEGORY_AUDIO running: true }
           now_playing_app_id: "com.example.radio" device_name: "Alice's iPhone" }''')],
       ok("nothing"), sender="daemon")

vector("screen-update-spinner-started",
       "Event to the HMI: a spinner on the selected item, sequence 3 of the main screen.",
       [message('screen_update { screen: SCREEN_MAIN sequence: 3 spinner_started { event_id: 42 template_id: "root" item_id: "jazz" } }')],
       ok("nothing"), sender="daemon")

vector("screen-update-full",
       "Event to the HMI: the whole main screen.",
       [message('''screen_update { screen: SCREEN_MAIN sequence: 1 full { screen: SCREEN_MAIN app_id: "com.example.radio" scene_id: 1
           stack: "root" top { id: "root" list { title: "Radio" sections { id: "s1" items { id: "jazz" general { text: "Jazz FM" } } } } }
           items_shown: 1 items_total: 1 content_style: CONTENT_STYLE_DARK } }''')],
       ok("nothing"), sender="daemon")

vector("get-status",
       "A car component asks for the daemon's status.",
       [message('request_id: 12 get_status { }')], ok("Result"), transport="unix", role="hmi")

# ------------------------------------------------------------------ valid: External Accessory sessions

vector("accessory-serve-protocols",
       "An accessory peer serves the vehicle's performance protocol.",
       [message('request_id: 30 serve_protocols { protocols: "com.openmotors.performance" }')],
       ok("Result"), transport="unix", role="accessory")

vector("announce-automaker-app",
       "An automaker app (carplay-protocols) speaking the performance protocol.",
       [message('''request_id: 31 announce_apps { device_name: "Alice's iPhone" apps { app_id: "com.openmotors.tracklaps"
           display_name: "Track Laps" entitlements: "com.apple.developer.carplay-protocols"
           accessory_protocols: "com.openmotors.performance" } }''')],
       ok("Result"), given=SERVED)

vector("accessory-availability",
       "Event to the phone: the app's matched protocols and whether a peer serves each now.",
       [message('accessory_availability { app_id: "com.openmotors.tracklaps" protocols { protocol: "com.openmotors.performance" available: true } }')],
       ok("nothing"), sender="daemon")

vector("open-session",
       "The app asks for a session; answered with Result{accessory_session{channel}}.",
       [message('request_id: 32 open_session { app_id: "com.openmotors.tracklaps" protocol: "com.openmotors.performance" }')],
       ok("Result"), given=TRACKLAPS)

vector("result-accessory-session",
       "The answer to open-session: the channel the car chose.",
       [message('request_id: 32 result { accessory_session { channel: 1 protocol: "com.openmotors.performance" } }')],
       ok("nothing"), sender="daemon")

vector("session-requested",
       "Event to the accessory: which app wants which protocol, on which channel, and its initial credit.",
       [message('session_requested { channel: 1 app_id: "com.openmotors.tracklaps" protocol: "com.openmotors.performance" initial_credit: 65536 }')],
       ok("nothing"), sender="daemon")

vector("answer-session",
       "The accessory accepts the session on channel 1.",
       [message('request_id: 33 answer_session { channel: 1 accept: true }')],
       ok("Result"), transport="unix", role="accessory", given=OPENING, ids={"channel": 1})

vector("session-opened",
       "Event to the phone: the session is open; the app may send 65536 bytes.",
       [message('session_opened { app_id: "com.openmotors.tracklaps" channel: 1 protocol: "com.openmotors.performance" initial_credit: 65536 }')],
       ok("nothing"), sender="daemon")

vector("data-frame-to-phone",
       "Session bytes from the car on channel 1 (an accessory's 4 bytes passed on unchanged).",
       [Frame(0x04, b"\x01\x02\x03\x04", channel=1)], ok("nothing"), sender="daemon")

vector("session-credit",
       "The receiver grants 65536 more bytes on channel 1: one-way, not answered when accepted.",
       [message('session_credit { channel: 1 bytes: 65536 }')], ok("nothing"), given=OPEN, ids={"channel": 1})

vector("close-session",
       "The app ends its session.",
       [message('request_id: 34 close_session { channel: 1 detail: "lap done" }')], ok("Result"), given=OPEN, ids={"channel": 1})

vector("session-closed",
       "Event to the other side: the session on channel 1 ended, and why.",
       [message('''session_closed { app_id: "com.openmotors.tracklaps" channel: 1 protocol: "com.openmotors.performance"
           reason: SESSION_CLOSE_REASON_CLOSED_BY_APP detail: "lap done" }''')],
       ok("nothing"), sender="daemon")

# ------------------------------------------------------------------ invalid: framing (fatal)

vector("bad-magic-http",
       "Someone speaks HTTP at the socket: the first two bytes are not \"HU\".",
       [], err("BAD_MAGIC", True), framing_error="ERROR_CODE_BAD_MAGIC", trailing=b"GET / HTTP/1.1\r\n")

vector("bad-magic-after-a-frame",
       "A good PING then a header with swapped magic (55 48): the PING is served, then the connection is closed.",
       [Frame(0x02, b"")], err("BAD_MAGIC", True), framing_error="ERROR_CODE_BAD_MAGIC",
       trailing=bytes.fromhex("5548 02 00 00000000 00000000".replace(" ", "")))

vector("length-over-max",
       "A header announcing 4194305 bytes, past 4 times the default maximum: fatal from the header alone, "
       "before any payload arrives. (A frame over the maximum but within 4 times it, with a known kind and "
       "flags 0, is refused alone after the handshake, its bytes skipped: PROTOCOL.md section 2, step 3; "
       "the socket test FrameLimitSocketTests shows it.)",
       [], err("FRAME_TOO_LARGE", True), framing_error="ERROR_CODE_FRAME_TOO_LARGE",
       trailing=header(0x01, 4 * MAX + 1))

vector("length-max-u32",
       "A header announcing 0xffffffff bytes.",
       [], err("FRAME_TOO_LARGE", True), framing_error="ERROR_CODE_FRAME_TOO_LARGE",
       trailing=header(0x01, 0xFFFFFFFF))

vector("length-over-small-max",
       "With max_payload_bytes 4096 (configured), a 16385-byte frame (past 4 times the maximum) is fatal (the "
       "4096-byte PONG before it is fine). 4096, not less: the daemon must still fit its Welcome in a frame to "
       "reach this state.",
       [Frame(0x03, bytes(4096))], err("FRAME_TOO_LARGE", True), framing_error="ERROR_CODE_FRAME_TOO_LARGE",
       trailing=header(0x03, 4 * 4096 + 1) + bytes(17), max_payload=4096)

vector("bad-magic-before-length",
       "Bad magic and an oversized length: magic is checked first.",
       [], err("BAD_MAGIC", True), framing_error="ERROR_CODE_BAD_MAGIC",
       trailing=bytes.fromhex("0000 01 00 00000000 ffffffff".replace(" ", "")))

# ------------------------------------------------------------------ invalid: incomplete input

vector("truncated-header",
       "The stream ends 7 bytes into a header. The parser waits for more; at end of stream there is no frame "
       "and nothing to answer (the peer is gone).",
       [], {"code": "ERROR_CODE_OK", "fatal": False, "reply": "nothing"}, trailing=header(0x01, 26)[:7])

vector("truncated-payload",
       "A header announcing 26 payload bytes followed by only 4.",
       [], {"code": "ERROR_CODE_OK", "fatal": False, "reply": "nothing"},
       trailing=header(0x01, 26) + bytes.fromhex("08011216"))

# ------------------------------------------------------------------ invalid: non-fatal

vector("unknown-kind-then-ping",
       "A frame of unknown kind 0x07 (3-byte payload) is skipped with a Result UNKNOWN_FRAME_KIND; "
       "the PING after it is still served.",
       [Frame(0x07, b"abc"), Frame(0x02, b"")], err("UNKNOWN_FRAME_KIND", False))

vector("unknown-kind-zero",
       "Kind 0x00 is not a kind.",
       [Frame(0x00, b"")], err("UNKNOWN_FRAME_KIND", False))

vector("nonzero-flags",
       "A MESSAGE frame with flags 0x80: skipped with RESERVED_FLAGS.",
       [Frame(0x01, encode("request_id: 9 get_status { }"), flags=0x80, envelope="request_id: 9 get_status { }")],
       err("RESERVED_FLAGS", False))

vector("nonzero-channel-on-message",
       "A MESSAGE frame with channel 5 (only DATA frames have a channel): skipped with RESERVED_FLAGS.",
       [Frame(0x01, encode("request_id: 9 get_status { }"), channel=5, envelope="request_id: 9 get_status { }")],
       err("RESERVED_FLAGS", False))

vector("ping-65-bytes",
       "A PING payload over 64 bytes: not echoed, MALFORMED_PAYLOAD.",
       [Frame(0x02, bytes(65))], err("MALFORMED_PAYLOAD", False))

vector("data-frame-channel-3",
       "A DATA frame from a phone on channel 3 with no External Accessory session open on it (a vector's state "
       "has none): NOT_CONNECTED, counted by the flood limit. (From the HMI or cluster it would be NOT_FOR_ROLE.)",
       [Frame(0x04, b"\x00\x01\x02\x03", channel=3)], err("NOT_CONNECTED", False))

# MEDIA (section 24.4): a u64 BE timestamp in microseconds, then one unit of the stream's codec.
MEDIA_PCM = (20000).to_bytes(8, "big") + bytes.fromhex("0100ff7f")  # one stereo s16le sample frame
vector("media-frame-no-stream",
       "A MEDIA frame from a phone on channel 5 (timestamp 20000 us, one stereo PCM sample frame) with no audio "
       "stream open there (a vector's state has none): NOT_CONNECTED, request_id 0 (section 24.4, check 2). "
       "(From an HMI, cluster or accessory it would be NOT_FOR_ROLE, check 1.)",
       [Frame(0x05, MEDIA_PCM, channel=5)], err("NOT_CONNECTED", False))

# VIDEO (section 25.3): timestamp_us (u64 BE), frame_number (u32 BE), flags (bit 0: keyframe), 3 reserved
# bytes, then one H.264 access unit in Annex B (a start code first; the daemon never reads past it).
def video_payload(frame_number, flags=1, reserved=b"\x00\x00\x00", unit=bytes.fromhex("0000000165888400")):
    return (1000000).to_bytes(8, "big") + frame_number.to_bytes(4, "big") + bytes([flags]) + reserved + unit

vector("video-frame-unknown-stream",
       "A well-formed VIDEO keyframe (frame 1, an IDR slice after its start code) from a phone on channel 7, which "
       "is no connected scene of a navigation app of this phone (a vector's state has none): UNKNOWN_VIDEO_STREAM, "
       "request_id 0 (section 25.4, check 4).",
       [Frame(0x06, video_payload(1), channel=7)], err("UNKNOWN_VIDEO_STREAM", False))

vector("video-frame-number-zero",
       "A VIDEO frame whose frame_number is 0 (they count from 1): BAD_VIDEO_FRAME, request_id 0, decided from the "
       "header before the channel is looked at (section 25.4, check 3 before 4).",
       [Frame(0x06, video_payload(0), channel=7)], err("BAD_VIDEO_FRAME", False))

vector("video-frame-reserved-bits",
       "A VIDEO frame with a reserved header byte set: BAD_VIDEO_FRAME, request_id 0 (section 25.3: reserved 0).",
       [Frame(0x06, video_payload(1, reserved=b"\x00\x01\x00"), channel=7)], err("BAD_VIDEO_FRAME", False))

vector("undecodable-payload-bad-wire-type",
       "A MESSAGE payload that is not protobuf: 0xff is field 31 with wire type 7, which does not exist.",
       [Frame(0x01, bytes.fromhex("ffffff"), malformed=True)], err("MALFORMED_PAYLOAD", False))

vector("undecodable-payload-truncated-field",
       "A MESSAGE payload whose Hello field announces 5 bytes but only 2 follow.",
       [Frame(0x01, bytes.fromhex("12050801"), malformed=True)], err("MALFORMED_PAYLOAD", False))

vector("undecodable-payload-bad-utf8",
       "A Hello whose name is not UTF-8 (proto3 strings must be).",
       [Frame(0x01, bytes.fromhex("12042202c328"), malformed=True)], err("MALFORMED_PAYLOAD", False))

vector("empty-envelope",
       "A MESSAGE frame with a zero-length payload: a valid, empty Envelope with no body: UNKNOWN_MESSAGE.",
       [Frame(0x01, b"", envelope="")], err("UNKNOWN_MESSAGE", False))

vector("envelope-without-body",
       "An Envelope with request_id 5 and no body: UNKNOWN_MESSAGE, answered with request_id 5.",
       [message("request_id: 5")], err("UNKNOWN_MESSAGE", False, request_id=5))

vector("envelope-unknown-body",
       "An Envelope whose body is field 99, unknown to version 1 (from a newer client): its body decodes as "
       "absent, so UNKNOWN_MESSAGE, answered with the request id 6. Not fatal.",
       [Frame(0x01, bytes.fromhex("0806" "9a0600"), envelope="request_id: 6", unknown_fields=True)],
       err("UNKNOWN_MESSAGE", False, request_id=6))

vector("second-hello",
       "A Hello on a connection that already has a Welcome: ALREADY_HANDSHAKEN, not fatal.",
       [message('request_id: 3 hello { min_version: 1 max_version: 1 role: ROLE_PHONE name: "again" }')],
       err("ALREADY_HANDSHAKEN", False, request_id=3))

# ------------------------------------------------------------------ invalid: handshake (fatal)

vector("handshake-no-common-version",
       "A client that speaks only versions 2..3: NO_COMMON_VERSION.",
       [message('request_id: 1 hello { min_version: 2 max_version: 3 role: ROLE_PHONE name: "too new" }')],
       err("NO_COMMON_VERSION", True), state="handshake")

vector("handshake-inverted-range",
       "A Hello with min_version 3 above max_version 1: the range is empty, NO_COMMON_VERSION.",
       [message('request_id: 1 hello { min_version: 3 max_version: 1 role: ROLE_PHONE name: "confused" }')],
       err("NO_COMMON_VERSION", True), state="handshake")

vector("handshake-version-zero",
       "A Hello without versions (0..0): NO_COMMON_VERSION.",
       [message('request_id: 1 hello { role: ROLE_PHONE name: "no versions" }')],
       err("NO_COMMON_VERSION", True), state="handshake")

vector("handshake-hmi-over-tcp",
       "A car role (HMI) over TCP: ROLE_NOT_ALLOWED.",
       [message('request_id: 1 hello { min_version: 1 max_version: 1 role: ROLE_HMI name: "hmi" }')],
       err("ROLE_NOT_ALLOWED", True), state="handshake", transport="tcp")

vector("handshake-role-unspecified",
       "A Hello without a role: ROLE_NOT_ALLOWED.",
       [message('request_id: 1 hello { min_version: 1 max_version: 1 name: "nobody" }')],
       err("ROLE_NOT_ALLOWED", True), state="handshake")

vector("handshake-bad-magic",
       "Garbage as the very first bytes: the header check comes before the handshake check, so "
       "BAD_MAGIC (fatal), not HANDSHAKE_REQUIRED (PROTOCOL.md section 2, steps 2 and 5).",
       [], err("BAD_MAGIC", True), state="handshake", framing_error="ERROR_CODE_BAD_MAGIC",
       trailing=b"SSH-2.0-OpenSSH_9.2\r\n")

vector("handshake-length-over-max",
       "A MESSAGE header announcing more than the maximum as the first frame: FRAME_TOO_LARGE "
       "(fatal), decided from the header before the handshake check.",
       [], err("FRAME_TOO_LARGE", True), state="handshake", framing_error="ERROR_CODE_FRAME_TOO_LARGE",
       trailing=header(0x01, MAX + 1))

vector("handshake-ping-first",
       "A PING before Hello: HANDSHAKE_REQUIRED (the first frame must be a MESSAGE carrying Hello).",
       [Frame(0x02, b"")], err("HANDSHAKE_REQUIRED", True), state="handshake")

vector("handshake-request-first",
       "A request before Hello: HANDSHAKE_REQUIRED.",
       [message('request_id: 1 get_status { }')], err("HANDSHAKE_REQUIRED", True), state="handshake")

# ------------------------------------------------------------------ navigation and the metadata stream (PROTOCOL.md section 16)

vector("navigation-show-trip-previews",
       "A navigation app shows one trip with two route choices (variants longest first) and a custom start title.",
       [message('''request_id: 20 navigation_request { app_id: "com.example.maps" show_trip_previews {
           trips { id: "home" destination { name: "Home" }
               route_choices { id: "fast" summary_variants: "Via the ring road" summary_variants: "Ring road"
                               estimates { distance_remaining_m: 12000 time_remaining_s: 1200 } }
               route_choices { id: "scenic" summary_variants: "Along the river" } }
           texts { start_button_title: "Drive" } } }''')],
       ok("Result"), given=MAPS, ids={"scene_id": 1})

vector("navigation-input-start-trip",
       "The HMI starts the previewed route (the app is told with NavigationEvent.trip_started).",
       [message('request_id: 21 navigation_input { app_id: "com.example.maps" start_trip { trip_id: "home" route_choice_id: "fast" } }')],
       ok("Result"), transport="unix", role="hmi", given=MAPS_PREVIEWS, ids={"scene_id": 1})

vector("navigation-event-trip-started",
       "Event to the phone: the driver pressed start on trip home, route fast.",
       [message('navigation_event { app_id: "com.example.maps" scene_id: 1 trip_started { trip_id: "home" route_choice_id: "fast" } }')],
       ok("nothing"), sender="daemon")

vector("navigation-start",
       "The app starts guidance for the trip, on route fast.",
       [message('''request_id: 22 navigation_request { app_id: "com.example.maps" start {
           trip { id: "home" route_choices { id: "fast" summary_variants: "Ring road" } } route_choice_id: "fast" } }''')],
       ok("Result"), given=MAPS, ids={"scene_id": 1})

vector("navigation-pause-loading",
       "The app pauses guidance while it computes the route.",
       [message('request_id: 23 navigation_request { app_id: "com.example.maps" pause { reason: PAUSE_REASON_LOADING description: "Loading route" } }')],
       ok("Result"), given=MAPS_GUIDING, ids={"scene_id": 1})

vector("navigation-update-maneuvers-lane-guidance",
       "The next maneuver (symbol, light and dark, a junction image, estimates) and lane guidance as a symbol-only "
       "second maneuver with no instructions.",
       [message('''request_id: 24 navigation_request { app_id: "com.example.maps" update_maneuvers {
           maneuvers { id: "m1" symbol { asset: "turn-right" width_px: 100 height_px: 100 }
               dark_symbol { asset: "turn-right-dark" width_px: 100 height_px: 100 }
               instruction_variants: "Turn right onto Main Street" instruction_variants: "Turn right"
               junction_image { asset: "junction-12" width_px: 280 height_px: 200 }
               estimates { distance_remaining_m: 800 time_remaining_s: 90 } }
           maneuvers { id: "lanes" symbol { asset: "lanes-2-of-3" width_px: 240 height_px: 36 }
               display_style: MANEUVER_DISPLAY_STYLE_SYMBOL_ONLY } } }''')],
       ok("Result"), given=MAPS_GUIDING, ids={"scene_id": 1})

MAPS_LANES = MAPS_GUIDING + [("phone", '''navigation_request { app_id: "com.example.maps" add_lane_guidances {
    lane_guidances { id: "exit-12" lanes { status: LANE_STATUS_NOT_GOOD angles_deg: 0 }
        lanes { status: LANE_STATUS_PREFERRED highlighted_angle_deg: 45 angles_deg: 0 } instruction_variants: "Right lane" } } }''')]

vector("navigation-add-lane-guidances",
       "The app adds lane guidance to its session (PROTOCOL.md 19.2): two lanes, left to right; the left one "
       "goes straight on only (not good), the right one is preferred with its 45-degree exit lit and also goes straight.",
       [message('''request_id: 40 navigation_request { app_id: "com.example.maps" add_lane_guidances {
           lane_guidances { id: "exit-12"
               lanes { status: LANE_STATUS_NOT_GOOD angles_deg: 0 }
               lanes { status: LANE_STATUS_PREFERRED highlighted_angle_deg: 45 angles_deg: 0 }
               instruction_variants: "Keep right for exit 12" instruction_variants: "Right lane" } } }''')],
       ok("Result"), given=MAPS_GUIDING, ids={"scene_id": 1})

vector("navigation-update-maneuvers-linked-lane-guidance",
       "A maneuver that says what a cluster draws itself (iOS 17.4): an off-ramp on the right at exit 12, a junction "
       "with the exit at 45 degrees and the road on at 0, and the lane guidance it links (added before).",
       [message('''request_id: 41 navigation_request { app_id: "com.example.maps" update_maneuvers {
           maneuvers { id: "m1" instruction_variants: "Take exit 12" maneuver_type: MANEUVER_TYPE_HIGHWAY_OFF_RAMP_RIGHT
               junction_type: JUNCTION_TYPE_INTERSECTION traffic_side: TRAFFIC_SIDE_RIGHT
               junction_exit_angle_deg: 45 junction_element_angles_deg: 0 highway_exit_label: "12"
               linked_lane_guidance_id: "exit-12" road_following_variants: "Ring road" } } }''')],
       ok("Result"), given=MAPS_LANES, ids={"scene_id": 1})

vector("result-lane-guidance-unknown",
       "The answer to set_current_lane_guidance naming a lane guidance the app never added: UNKNOWN_ITEM "
       "(PROTOCOL.md 16.13), not fatal.",
       [message('''request_id: 42 result { code: ERROR_CODE_UNKNOWN_ITEM
           message: "lane guidance 'exit-13' was not added to the session (add_lane_guidances)" }''')],
       ok("nothing"), sender="daemon")

vector("result-lane-angle-out-of-range",
       "The answer to add_lane_guidances with a lane's highlighted angle of 200 degrees: INVALID_ARGUMENT with "
       "limit navigation.angle, limit_value 180 (angles are -180...180).",
       [message('''request_id: 43 result { code: ERROR_CODE_INVALID_ARGUMENT
           message: "lane guidance 'bad' lane 0 highlighted angle: 200.0 is not an angle from -180 to 180 degrees"
           limit: "navigation.angle" limit_value: 180 }''')],
       ok("nothing"), sender="daemon")

vector("metadata-update-lane-guidance",
       "A change of the maneuvers section: the maneuver, the lane guidance drawn (the current one, which it also "
       "links), the road the car is on and the maneuver state.",
       [message('''metadata_update { version: 9 state { maneuvers {
           maneuvers { id: "m1" instruction_variants: "Take exit 12" maneuver_type: MANEUVER_TYPE_HIGHWAY_OFF_RAMP_RIGHT
               linked_lane_guidance_id: "exit-12" }
           lane_guidances { id: "exit-12" lanes { status: LANE_STATUS_NOT_GOOD angles_deg: 0 }
               lanes { status: LANE_STATUS_PREFERRED highlighted_angle_deg: 45 angles_deg: 0 } instruction_variants: "Right lane" }
           current_lane_guidance_id: "exit-12" current_road_name_variants: "Ring road" maneuver_state: MANEUVER_STATE_PREPARE } } }''')],
       ok("nothing"), sender="daemon")

CHAT = [("phone", '''announce_apps { device_name: "Alice's iPhone"
    apps { app_id: "com.example.chat" display_name: "Chat" entitlements: "com.apple.developer.carplay-communication" } }''')]

vector("call-report-new-incoming",
       "A communication app reports a new incoming call (PROTOCOL.md 26.3, CXProvider.reportNewIncomingCall): "
       "the car shows it ringing on the HMI's home screen.",
       [message('''request_id: 50 call_report { app_id: "com.example.chat" call_uuid: "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11"
           kind: CALL_REPORT_KIND_NEW_INCOMING description { remote_handle { type: CALL_HANDLE_TYPE_PHONE_NUMBER value: "+15550100" }
               localized_caller_name: "Ada" supports_holding: true } }''')],
       ok("Result"), given=CHAT)

vector("call-request-start",
       "The app asks to place a call (PROTOCOL.md 26.4, CXCallController.request(CXTransaction(CXStartCallAction))): "
       "answered with the action's id, then the car sends it back as a CallActionEvent to perform.",
       [message('''request_id: 51 call_request { app_id: "com.example.chat" action { kind: CALL_ACTION_KIND_START
           call_uuid: "0b7d1e52-3c4a-4f7b-8e21-9c0d5a6b7f22" handle { type: CALL_HANDLE_TYPE_PHONE_NUMBER value: "+15550199" } } }''')],
       ok("Result"), given=CHAT)

vector("result-unknown-call",
       "The answer to a report on a call the app never reported or started (call_report OUTGOING_CONNECTED for "
       "an unknown UUID): UNKNOWN_CALL (PROTOCOL.md 26.3), not fatal.",
       [message('''request_id: 52 result { code: ERROR_CODE_UNKNOWN_CALL
           message: "'com.example.chat' has no call 0b7d1e52-3c4a-4f7b-8e21-9c0d5a6b7f22" }''')],
       ok("nothing"), sender="daemon")

vector("result-duplicate-call",
       "The answer to a second new call with the UUID of one the car holds (compared case-insensitively): DUPLICATE_CALL.",
       [message('''request_id: 53 result { code: ERROR_CODE_DUPLICATE_CALL
           message: "call 6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11 exists already (of 'com.example.chat')" }''')],
       ok("nothing"), sender="daemon")

vector("result-too-many-calls",
       "The answer to a new call past max_calls (2): TOO_MANY_CALLS with limit calls.max (PROTOCOL.md 26.7).",
       [message('''request_id: 54 result { code: ERROR_CODE_TOO_MANY_CALLS
           message: "the car holds 2 calls, at most 2" limit: "calls.max" limit_value: 2 }''')],
       ok("nothing"), sender="daemon")

vector("result-wrong-call-state",
       "The answer to the driver's mute on a call that still rings (PROTOCOL.md 26.5): WRONG_CALL_STATE; nothing reaches the app.",
       [message('''request_id: 55 result { code: ERROR_CODE_WRONG_CALL_STATE
           message: "a ringing call is not muted; answer it first" }''')],
       ok("nothing"), sender="daemon")

vector("call-action-event-answer",
       "The car asks the app to perform the driver's answer (PROTOCOL.md 26.5, CXProviderDelegate.provider(_:perform:)): "
       "the app answers CallActionAnswer{action_id 7, fulfilled} and the HMI's request is answered then.",
       [message('''call_action_event { app_id: "com.example.chat" action_id: 7 action { kind: CALL_ACTION_KIND_ANSWER
           call_uuid: "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11" } from_car: true }''')],
       ok("nothing"), sender="daemon")

vector("home-screen-call-ringing",
       "The HMI's home screen while a call rings (PROTOCOL.md 26.7): the call, who it is from, and the buttons the car accepts now.",
       [message('''home_screen { device_name: "Alice's iPhone" phone_link: PHONE_LINK_CONNECTED
           calls { app_id: "com.example.chat" app_display_name: "Chat" call_uuid: "6f1c3c2e-8a55-4b1e-9a0f-2d4c6b8e0a11"
               phase: CALL_PHASE_RINGING description { remote_handle { type: CALL_HANDLE_TYPE_PHONE_NUMBER value: "+15550100" }
                   localized_caller_name: "Ada" }
               available_actions: CALL_ACTION_KIND_ANSWER available_actions: CALL_ACTION_KIND_END } }''')],
       ok("nothing"), sender="daemon")

vector("navigation-update-estimates",
       "New estimates for maneuver m1 (shown only when significant: another minute or another 10 m below 1 km).",
       [message('request_id: 25 navigation_request { app_id: "com.example.maps" update_estimates { maneuver_id: "m1" estimates { distance_remaining_m: 300 time_remaining_s: 30 } } }')],
       ok("Result"), given=MAPS_MANEUVER, ids={"scene_id": 1})

vector("navigation-show-alert",
       "A navigation alert with one action that the car dismisses after 10 s.",
       [message('''request_id: 26 navigation_request { app_id: "com.example.maps" show_alert { id: "closure"
           title_variants: "Road closed ahead" subtitle_variants: "Main Street"
           actions { id: "avoid" title: "Avoid" } duration_ms: 10000 } }''')],
       ok("Result"), given=MAPS, ids={"scene_id": 1})

vector("navigation-event-alert-dismissed-timeout",
       "Event to the phone: the alert's duration ran out.",
       [message('navigation_event { app_id: "com.example.maps" scene_id: 1 alert_dismissed { alert_id: "closure" reason: ALERT_DISMISS_REASON_TIMEOUT } }')],
       ok("nothing"), sender="daemon")

vector("navigation-event-cancelled-native",
       "Event to the phone: the car's own navigation started guidance, so the app's session was cancelled.",
       [message('''navigation_event { app_id: "com.example.maps" scene_id: 1 navigation_cancelled {
           reason: NAVIGATION_END_REASON_NATIVE_NAVIGATION detail: "the car's navigation started guidance" } }''')],
       ok("nothing"), sender="daemon")

vector("result-navigation-cancelled-by-car",
       "The answer to a maneuver update after the car cancelled guidance.",
       [message('''request_id: 27 result { code: ERROR_CODE_NAVIGATION_CANCELLED_BY_CAR
           message: "the car cancelled guidance; start a new session to guide again" }''')],
       ok("nothing"), sender="daemon")

vector("subscribe-metadata",
       "A cluster subscribes to the metadata stream: Result, then MetadataUpdate{full}, then changes.",
       [message('request_id: 2 subscribe_metadata { }')], ok("Result"), transport="unix", role="cluster")

vector("metadata-update-full",
       "The first update a subscriber gets: every section, full set. Empty sections are present and empty.",
       [message('''metadata_update { version: 7 full: true state {
           guidance { state: GUIDANCE_STATE_ACTIVE app_id: "com.example.maps" trip { id: "home" } route_choice_id: "fast" session: 1 }
           maneuvers { maneuvers { id: "m1" instruction_variants: "Turn right" estimates { distance_remaining_m: 800 time_remaining_s: 90 } } }
           trip_estimates { estimates { distance_remaining_m: 12000 time_remaining_s: 1200 } present: true }
           alert { } now_playing { app_id: "com.example.radio" title: "Song" artist: "Artist" elapsed_seconds: 12 duration_seconds: 200 playback_rate: 1 }
           display { content_style: CONTENT_STYLE_DARK } previews { } cluster { app_id: "com.example.maps" }
           audio { main_owner: AUDIO_OWNER_PHONE app_id: "com.example.radio" prompt_style: PROMPT_STYLE_NORMAL }
           phone { link: PHONE_LINK_CONNECTED device_name: "Alice's iPhone" } } }''')],
       ok("nothing"), sender="daemon")

vector("metadata-update-change",
       "A change: only the sections present changed (here guidance is paused for rerouting); the others stay.",
       [message('''metadata_update { version: 8 state { guidance { state: GUIDANCE_STATE_PAUSED app_id: "com.example.maps"
           trip { id: "home" } route_choice_id: "fast" pause_reason: PAUSE_REASON_REROUTING pause_description: "Rerouting" session: 1 } } }''')],
       ok("nothing"), sender="daemon")

vector("cluster-input-zoom-in",
       "The cluster asks the navigation app to zoom in (NavigationEvent.cluster_input to its cluster scene).",
       [message('request_id: 3 cluster_input { zoom_in: true }')], ok("Result"), transport="unix", role="cluster",
       given=MAPS_CLUSTER, ids={"scene_id": 1})


def render():
    doc = {
        "about": "headunitd protocol test vectors; format in Protocol/vectors/README.md; "
                 "regenerate with python3 Protocol/vectors/generate.py",
        "protocol_version": 1,
        "default_max_payload_bytes": MAX,
        "vectors": VECTORS,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    names = [v["name"] for v in VECTORS]
    assert len(names) == len(set(names)), "duplicate vector names"
    text = render()
    if "--check" in sys.argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit("vectors.json is out of date: run python3 Protocol/vectors/generate.py")
        print("vectors.json is up to date (%d vectors)" % len(VECTORS))
    else:
        with open(OUT, "w", encoding="utf-8") as f:
            f.write(text)
        print("wrote %s (%d vectors)" % (OUT, len(VECTORS)))
