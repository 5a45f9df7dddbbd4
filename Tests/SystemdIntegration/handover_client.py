#!/usr/bin/env python3
"""A phone and an HMI in session across `systemctl restart` (PROTOCOL.md section 22).

  handover_client.py PB_DIR unix:/path.sock --ready FILE --go FILE

PB_DIR holds the Python classes protoc generated from Protocol/*.proto.
The phone announces an audio app, the HMI launches it, the phone sets a list
as root and pushes a second list; the HMI sees it. Then the HMI sends GetStatus
requests without pause and the phone replaces its pushed list in place, one
update after another, and pings (the load), the phone writes the
first half of a PING frame, and FILE `--ready` is created: the caller restarts
the daemon and creates `--go`. Then the half frame is completed (its PONG must
come), the load stops, and the phone pops its template: the result must be OK
and the HMI must see the root list again. Throughout, neither connection may
see a Goodbye or EOF, every request must be answered, and every PING ponged.
Exit 0 and "OK ..." on success; a reason and exit 1 otherwise.

  handover_client.py PB_DIR unix:/path.sock --maximal --ready FILE --go FILE

A maximal valid session instead (issue 24): the phone announces four audio
apps, three of them with icons of max_image_bytes (256 KiB); the HMI launches
them; the phone fills their stacks with the largest lists (1,800 items of
~500 bytes) until the phone's templates reach max_phone_template_bytes (the
next list is refused: MESSAGE_TOO_LARGE naming it) and presents an alert. The
HMI's GetStatus (every app, scene, stack and modal) is kept, `--ready`
created; after `--go`, GetStatus must be the same, both peers must still be
answered (PINGs ponged), the HMI must get the home screen's icons again when
it asks, and neither may have seen a Goodbye or EOF.
"""
import os
import socket
import struct
import sys
import threading
import time
import zlib

MESSAGE, PING, PONG = 1, 2, 3
APP = "com.example.handover.audio"


def header(kind, length):
    return b"HU" + bytes([kind, 0]) + struct.pack(">II", 0, length)


class Peer:
    def __init__(self, path, pb, role, name):
        self.pb = pb
        self.name = name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.lock = threading.Condition()
        self.envelopes = []
        self.pongs = []
        self.failure = None
        self.send_lock = threading.Lock()
        self.send(pb.Envelope(request_id=1, hello=pb.Hello(min_version=1, max_version=1, role=role, name=name)))
        threading.Thread(target=self.reader, daemon=True).start()
        self.wait(lambda e: e.HasField("welcome"), "Welcome")

    def raw(self, data):
        with self.send_lock:
            self.sock.sendall(data)

    def send(self, envelope):
        payload = envelope.SerializeToString()
        self.raw(header(MESSAGE, len(payload)) + payload)

    def reader(self):
        buffer = bytearray()
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise EOFError("EOF from the daemon")
                buffer += chunk
                while len(buffer) >= 12:
                    length = struct.unpack(">I", buffer[8:12])[0]
                    if len(buffer) < 12 + length:
                        break
                    kind, payload = buffer[2], bytes(buffer[12:12 + length])
                    del buffer[:12 + length]
                    if kind == PING:
                        self.raw(header(PONG, len(payload)) + payload)
                    elif kind == PONG:
                        with self.lock:
                            self.pongs.append(payload)
                            self.lock.notify_all()
                    elif kind == MESSAGE:
                        envelope = self.pb.Envelope()
                        envelope.ParseFromString(payload)
                        with self.lock:
                            if envelope.HasField("goodbye"):
                                self.failure = "Goodbye(%d, %s)" % (envelope.goodbye.code, envelope.goodbye.reason)
                            self.envelopes.append(envelope)
                            self.lock.notify_all()
        except Exception as error:  # EOF, reset
            with self.lock:
                self.failure = self.failure or str(error) or type(error).__name__
                self.lock.notify_all()

    def wait(self, predicate, what, timeout=10):
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for envelope in self.envelopes:
                    if predicate(envelope):
                        self.envelopes.remove(envelope)
                        return envelope
                if self.failure:
                    raise SystemExit("FAIL %s: %s while waiting for %s" % (self.name, self.failure, what))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit("FAIL %s: no %s within %d s" % (self.name, what, timeout))
                self.lock.wait(left)

    def result(self, request_id, what):
        envelope = self.wait(lambda e: e.HasField("result") and e.request_id == request_id, what)
        if envelope.result.code != 0:
            raise SystemExit("FAIL %s: %s refused: %d %s" % (self.name, what, envelope.result.code, envelope.result.message))
        return envelope.result

    def wait_pong(self, payload, timeout=10):
        deadline = time.monotonic() + timeout
        with self.lock:
            while payload not in self.pongs:
                if self.failure:
                    raise SystemExit("FAIL %s: %s while waiting for a PONG" % (self.name, self.failure))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit("FAIL %s: no PONG within %d s" % (self.name, timeout))
                self.lock.wait(left)


def top_id(update):
    return update.full.top.id if update.HasField("full") else update.diff.template_id


def wait_for_go(ready, go):
    open(ready, "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit("FAIL: no --go file within 60 s")
        time.sleep(0.05)


def png(side, size, seed):
    """A PNG of `size` bytes: signature, an IHDR of side x side (the car reads
    the size from it, section 12.6), then filler (the car never decodes it)."""
    ihdr = b"IHDR" + struct.pack(">II", side, side) + bytes([8, 6, 0, 0, 0])
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    filler = bytes((seed * 131 + i * 7) & 0xFF for i in range(256))
    return data + (filler * (size // 256 + 1))[:size - len(data)]


def maximal(pb, path, ready, go):
    """The largest session the limits allow, across the restart."""
    phone = Peer(path, pb, pb.ROLE_PHONE, "phone")
    hmi = Peer(path, pb, pb.ROLE_HMI, "hmi")
    apps = ["com.example.maximal%d" % i for i in range(4)]
    infos = [pb.AppInfo(app_id=app, display_name="Maximal %d" % i, entitlements=["com.apple.developer.carplay-audio"])
             for i, app in enumerate(apps)]
    for i in range(3):
        infos[i].icon.png = png(120, 256 << 10, i)
    phone.send(pb.Envelope(request_id=2, announce_apps=pb.AnnounceApps(device_name="Maximal Phone", apps=infos)))
    decisions = phone.result(2, "AnnounceApps").app_decisions.decisions
    if not all(d.accepted for d in decisions):
        raise SystemExit("FAIL: apps refused: %s" % [(d.app_id, d.reason) for d in decisions if not d.accepted])
    scenes = {}
    for i, app in enumerate(apps):
        hmi.send(pb.Envelope(request_id=10 + i, launch_app=pb.LaunchApp(app_id=app)))
        hmi.result(10 + i, "LaunchApp %s" % app)
        connected = phone.wait(lambda e: e.HasField("scene_connected") and e.scene_connected.app_id == app, "SceneConnected %s" % app)
        scenes[app] = connected.scene_connected.scene_id

    filler = "x" * 480

    def largest_list(template_id, generation):
        items = [pb.ListItem(id="i%d" % i, general=pb.GeneralItem(text="%d %d %s" % (generation, i, filler))) for i in range(1800)]
        return pb.Template(id=template_id, list=pb.ListTemplate(title="generation %d" % generation, sections=[pb.ListSection(id="s", items=items)]))

    request, accepted, refusal = 100, 0, None
    for app in apps:
        for depth in range(5):
            request += 1
            template = largest_list("root" if depth == 0 else "page%d" % depth, depth)
            op = {"set_root": template} if depth == 0 else {"push": template}
            phone.send(pb.Envelope(request_id=request, template_request=pb.TemplateRequest(app_id=app, scene_id=scenes[app], **op)))
            result = phone.wait(lambda e: e.HasField("result") and e.request_id == request, "answer %d" % request, timeout=30).result
            if result.code == 0:
                accepted += 1
            else:
                refusal = result
                break
        if refusal is not None:
            break
    if refusal is None or refusal.code != 23 or refusal.limit != "max_phone_template_bytes":
        raise SystemExit("FAIL: the lists were not refused at max_phone_template_bytes: %d accepted, %r" % (accepted, refusal))
    last = app
    request += 1
    alert = pb.Template(id="alert", alert=pb.AlertTemplate(title_variants=["Really?"], actions=[pb.TextButton(id="ok", title="OK")]))
    phone.send(pb.Envelope(request_id=request, template_request=pb.TemplateRequest(app_id=last, scene_id=scenes[last], present=alert)))
    phone.result(request, "present the alert")

    def status(request_id):
        hmi.send(pb.Envelope(request_id=request_id, get_status=pb.GetStatus()))
        return hmi.result(request_id, "GetStatus").status

    before = status(20)
    stacks = sum(len(scene.stack) for app in before.app for scene in app.scene)
    presented = [scene.presented for app in before.app for scene in app.scene if scene.presented]
    if len(before.app) != 4 or presented != ["alert"] or stacks != accepted:
        raise SystemExit("FAIL: before the restart: %d apps, %d templates on stacks (%d accepted), modals %r" % (len(before.app), stacks, accepted, presented))
    wait_for_go(ready, go)
    after = status(21)
    if list(after.app) != list(before.app):
        raise SystemExit("FAIL: apps, scenes, stacks or the modal changed across the restart:\n%s\n-- after --\n%s" % (before.app, after.app))
    for peer, payload in ((phone, b"maximal phone"), (hmi, b"maximal hmi")):
        peer.raw(header(PING, len(payload)) + payload)
        peer.wait_pong(payload)
    # The icons: a new HMI gets the home screen, its images by ref (section 12.6), each of them sent.
    late = Peer(path, pb, pb.ROLE_HMI, "late hmi")
    home = late.wait(lambda e: e.HasField("home_screen"), "the home screen", timeout=30).home_screen
    refs = {icon.icon.ref for icon in home.icons if icon.icon.ref}
    images = set()
    while len(images) < len(refs):
        data = late.wait(lambda e: e.HasField("image_data"), "ImageData for the icons", timeout=30).image_data
        images.add(data.ref)
    if len(home.icons) != 4 or len(refs) != 3 or not refs <= images:
        raise SystemExit("FAIL: the new HMI's home screen: %d icons, %d refs, %d images" % (len(home.icons), len(refs), len(images)))
    for peer in (phone, hmi, late):
        if peer.failure:
            raise SystemExit("FAIL %s: %s" % (peer.name, peer.failure))
    print("OK: maximal session kept: 4 apps (3 icons of 256 KiB), %d lists of ~0.9 MB, the next refused (%s), a modal; "
          "the same apps, scenes, stacks and modal after the restart; no Goodbye" % (accepted, refusal.message))


def main():
    pb_dir, address = sys.argv[1], sys.argv[2]
    ready = sys.argv[sys.argv.index("--ready") + 1]
    go = sys.argv[sys.argv.index("--go") + 1]
    sys.path.insert(0, pb_dir)
    import headunit_pb2 as pb
    import session_pb2
    import templates_pb2
    for module in (session_pb2, templates_pb2):
        for name in dir(module):
            if not hasattr(pb, name):
                setattr(pb, name, getattr(module, name))
    path = address.split(":", 1)[1]
    if "--maximal" in sys.argv:
        maximal(pb, path, ready, go)
        return

    phone = Peer(path, pb, pb.ROLE_PHONE, "phone")
    hmi = Peer(path, pb, pb.ROLE_HMI, "hmi")
    app = pb.AppInfo(app_id=APP, display_name="Handover", entitlements=["com.apple.developer.carplay-audio"])
    phone.send(pb.Envelope(request_id=2, announce_apps=pb.AnnounceApps(device_name="phone", apps=[app])))
    phone.result(2, "AnnounceApps")
    hmi.send(pb.Envelope(request_id=3, launch_app=pb.LaunchApp(app_id=APP)))
    hmi.result(3, "LaunchApp")
    scene = phone.wait(lambda e: e.HasField("scene_connected"), "SceneConnected").scene_connected.scene_id

    def list_template(template_id, title):
        items = [pb.ListItem(id="%s-%d" % (template_id, i), general=pb.GeneralItem(text="%s %d" % (title, i))) for i in range(3)]
        return pb.Template(id=template_id, list=pb.ListTemplate(title=title, sections=[pb.ListSection(id="s", items=items)]))

    def on_main(template_id):
        return lambda e: e.HasField("screen_update") and e.screen_update.screen == pb.SCREEN_MAIN and top_id(e.screen_update) == template_id

    phone.send(pb.Envelope(request_id=4, template_request=pb.TemplateRequest(app_id=APP, scene_id=scene, set_root=list_template("root", "Root"))))
    phone.result(4, "set_root")
    hmi.wait(on_main("root"), "the root list on the main screen")
    phone.send(pb.Envelope(request_id=5, template_request=pb.TemplateRequest(app_id=APP, scene_id=scene, push=list_template("detail", "Detail"))))
    phone.result(5, "push")
    hmi.wait(on_main("detail"), "the pushed list on the main screen")

    # The load: GetStatus after GetStatus from the HMI, each answer awaited, and PINGs from the phone.
    stop = threading.Event()
    counts = {"status": 0, "pings": 0}
    errors = []

    def hmi_load():
        request = 1000
        try:
            while not stop.is_set():
                request += 1
                hmi.send(pb.Envelope(request_id=request, get_status=pb.GetStatus()))
                hmi.result(request, "GetStatus %d" % request)
                counts["status"] += 1
        except SystemExit as failure:
            errors.append(str(failure))

    def phone_pings():
        sequence = 0
        try:
            while not stop.is_set():
                sequence += 1
                payload = b"load" + struct.pack(">Q", sequence)
                phone.raw(header(PING, len(payload)) + payload)
                phone.wait_pong(payload)
                counts["pings"] += 1
                time.sleep(0.005)
        except SystemExit as failure:
            errors.append(str(failure))

    def phone_updates():
        # Template operations under load: the pushed list replaced in place, again and again.
        request = 5000
        try:
            while not stop.is_set():
                request += 1
                updated = list_template("detail", "Detail %d" % request)
                phone.send(pb.Envelope(request_id=request, template_request=pb.TemplateRequest(app_id=APP, scene_id=scene, update=updated)))
                phone.result(request, "update %d" % request)
                counts["updates"] += 1
        except SystemExit as failure:
            errors.append(str(failure))

    counts["updates"] = 0
    loaders = [threading.Thread(target=hmi_load), threading.Thread(target=phone_pings), threading.Thread(target=phone_updates)]
    for thread in loaders:
        thread.start()
    time.sleep(0.3)
    # Half a frame on a third connection-free path: the phone's own socket, while the pinger waits.
    split = b"split-frame"
    whole = header(PING, len(split)) + split
    with phone.send_lock:
        phone.sock.sendall(whole[:7])
        open(ready, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: no --go file within 60 s")
            time.sleep(0.05)
        phone.sock.sendall(whole[7:])
    phone.wait_pong(split)
    time.sleep(0.3)
    stop.set()
    for thread in loaders:
        thread.join(timeout=15)
    if errors:
        raise SystemExit(errors[0])
    phone.send(pb.Envelope(request_id=6, template_request=pb.TemplateRequest(app_id=APP, scene_id=scene, pop=pb.PopTemplate())))
    phone.result(6, "pop after the restart")
    hmi.wait(on_main("root"), "the root list again after the pop")
    for peer in (phone, hmi):
        if peer.failure:
            raise SystemExit("FAIL %s: %s" % (peer.name, peer.failure))
    print("OK: same connections; %d GetStatus, %d template updates answered and %d PINGs ponged under load; split PING ponged; pop shown on the HMI"
          % (counts["status"], counts["updates"], counts["pings"]))


if __name__ == "__main__":
    main()
