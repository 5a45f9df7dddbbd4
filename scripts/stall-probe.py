#!/usr/bin/python3
"""Worst-case event-loop stall (issue 10): how long one phone's largest valid
requests hold up everyone else.

  scripts/stall-probe.py PATH/TO/headunitd [--updates 10] [--hmis 3]

Starts the daemon on a temporary Unix socket with the default limits, then:
a phone sets the largest list the limits allow (1,800 items of ~500 bytes:
1,801 of 2,000 elements, ~0.93 MB of the 1 MiB frame) and pipelines
`--updates` updates of it; meanwhile HMIs read their screens and a probe peer
(a cluster) sends a PING every millisecond and times each PONG. Prints the
time per update and the probe's PONG latency (p50, p99, max): the max is the
worst stall another peer saw.

Needs Debian's python3-protobuf (the Python classes are generated from
Protocol/*.proto into a temporary folder with protoc).
"""
import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MESSAGE, PING, PONG = 1, 2, 3


def generate_protos(into):
    protos = [p for p in os.listdir(os.path.join(ROOT, "Protocol")) if p.endswith(".proto")]
    subprocess.run(["protoc", "-I", os.path.join(ROOT, "Protocol"), "--python_out", into] + protos, check=True)
    sys.path.insert(0, into)


class Peer:
    def __init__(self, path, pb, role, name):
        self.pb = pb
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buffer = bytearray()
        hello = pb.Envelope(request_id=1, hello=pb.Hello(min_version=1, max_version=1, role=role, name=name))
        self.send(hello)
        assert self.read_envelope().HasField("welcome")

    def send(self, envelope):
        payload = envelope.SerializeToString()
        self.sock.sendall(b"HU" + bytes([MESSAGE, 0]) + struct.pack(">II", 0, len(payload)) + payload)

    def read_frame(self):
        while True:
            if len(self.buffer) >= 12:
                length = struct.unpack(">I", self.buffer[8:12])[0]
                if len(self.buffer) >= 12 + length:
                    kind = self.buffer[2]
                    payload = bytes(self.buffer[12:12 + length])
                    del self.buffer[:12 + length]
                    return kind, payload
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("daemon closed the connection")
            self.buffer += chunk

    def read_envelope(self):
        while True:
            kind, payload = self.read_frame()
            if kind == PING:
                self.sock.sendall(b"HU" + bytes([PONG, 0]) + struct.pack(">II", 0, len(payload)) + payload)
            elif kind == MESSAGE:
                envelope = self.pb.Envelope()
                envelope.ParseFromString(payload)
                return envelope

    def result(self, request_id):
        while True:
            envelope = self.read_envelope()
            if envelope.HasField("result") and envelope.request_id == request_id:
                return envelope.result


def largest_list(pb, generation):
    filler = "x" * 480
    items = [pb.ListItem(id="i%d" % i, general=pb.GeneralItem(text="%d %d %s" % (generation, i, filler))) for i in range(1800)]
    return pb.Template(id="root", list=pb.ListTemplate(title="generation %d" % generation, sections=[pb.ListSection(id="s", items=items)]))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("daemon")
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--hmis", type=int, default=3)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="hu-stall-")
    generate_protos(work)
    import headunit_pb2 as pb
    import session_pb2
    import templates_pb2
    for module in (session_pb2, templates_pb2):
        for name in dir(module):
            if not hasattr(pb, name):
                setattr(pb, name, getattr(module, name))

    path = os.path.join(work, "hu.sock")
    log = open(os.path.join(work, "daemon.log"), "w")
    daemon = subprocess.Popen([args.daemon, "--unix-socket", path, "--no-tcp"], stdout=log, stderr=log)
    try:
        for _ in range(200):
            if os.path.exists(path):
                break
            time.sleep(0.05)
        phone = Peer(path, pb, pb.ROLE_PHONE, "phone")
        hmis = [Peer(path, pb, pb.ROLE_HMI, "hmi%d" % i) for i in range(args.hmis)]
        probe = Peer(path, pb, pb.ROLE_CLUSTER, "probe")
        app = pb.AppInfo(app_id="com.example.app", display_name="App", entitlements=["com.apple.developer.carplay-audio"])
        phone.send(pb.Envelope(request_id=2, announce_apps=pb.AnnounceApps(device_name="phone", apps=[app])))
        assert phone.result(2).code == 0
        hmis[0].send(pb.Envelope(request_id=3, launch_app=pb.LaunchApp(app_id="com.example.app")))
        assert hmis[0].result(3).code == 0
        scene = None
        while scene is None:
            envelope = phone.read_envelope()
            if envelope.HasField("scene_connected"):
                scene = envelope.scene_connected.scene_id
        phone.send(pb.Envelope(request_id=4, template_request=pb.TemplateRequest(app_id="com.example.app", scene_id=scene, set_root=largest_list(pb, 0))))
        result = phone.result(4)
        assert result.code == 0, result.message

        stop = threading.Event()

        def drain(peer):
            try:
                while not stop.is_set():
                    peer.read_envelope()
            except (EOFError, OSError):
                pass

        for hmi in hmis:
            threading.Thread(target=drain, args=(hmi,), daemon=True).start()

        latencies = []

        def probe_loop():
            sequence = 0
            while not stop.is_set():
                sequence += 1
                payload = struct.pack(">Q", sequence)
                started = time.perf_counter()
                probe.sock.sendall(b"HU" + bytes([PING, 0]) + struct.pack(">II", 0, len(payload)) + payload)
                while True:
                    kind, answer = probe.read_frame()
                    if kind == PONG and answer == payload:
                        break
                latencies.append(time.perf_counter() - started)
                time.sleep(0.001)

        prober = threading.Thread(target=probe_loop, daemon=True)
        prober.start()
        time.sleep(0.5)
        baseline = len(latencies)
        # Encode first, so the phone's own encoding does not pace the pipeline.
        requests = [pb.Envelope(request_id=100 + g, template_request=pb.TemplateRequest(
            app_id="com.example.app", scene_id=scene, update=largest_list(pb, g))) for g in range(1, args.updates + 1)]
        started = time.perf_counter()
        for envelope in requests:
            phone.send(envelope)
        for g in range(1, args.updates + 1):
            result = phone.result(100 + g)
            assert result.code == 0, result.message
        elapsed = time.perf_counter() - started
        time.sleep(0.3)
        stop.set()
        prober.join(timeout=2)
        during = latencies[baseline:]
        quiet = latencies[:baseline]
        ms = lambda s: "%.2f ms" % (s * 1000)
        print("updates: %d pipelined, %.1f ms each (%s in all)" % (args.updates, elapsed * 1000 / args.updates, ms(elapsed)))
        print("probe PONG, quiet:  p50 %s  p99 %s  max %s  (%d pings)" % (ms(percentile(quiet, 0.5)), ms(percentile(quiet, 0.99)), ms(max(quiet)), len(quiet)))
        print("probe PONG, during: p50 %s  p99 %s  max %s  (%d pings)" % (ms(percentile(during, 0.5)), ms(percentile(during, 0.99)), ms(max(during)), len(during)))
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


if __name__ == "__main__":
    main()
