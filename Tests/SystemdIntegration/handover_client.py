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
"""
import os
import socket
import struct
import sys
import threading
import time

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
