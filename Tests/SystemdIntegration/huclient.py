#!/usr/bin/env python3
"""A minimal headunitd client for the systemd black-box tests (no dependencies).

Addresses: unix:/path/to.sock or tcp:HOST:PORT (TLS 1.3, as headunitd's TCP is).

  huclient.py hello ADDR [--role hmi]    Hello as a phone (or the HMI), expect Welcome;
                                         a Goodbye instead prints its code and fails.
  huclient.py hold ADDR [--ready FILE] [--announce]
                                         Hello (and AnnounceApps), then wait for the daemon's Goodbye
                                         and the orderly close; exit 0 if the code
                                         is ERROR_CODE_SHUTTING_DOWN (14).
  huclient.py loop ADDR --until FILE     Connect + Hello + Welcome + close in a loop
                                         until FILE exists; exit 0 if no attempt was
                                         refused or dropped.

Frames: 12-byte header ("HU", kind, flags 0, channel u32 BE, length u32 BE) and
a headunit.v1.Envelope, hand-encoded: only the few fields needed here.
"""
import argparse
import errno
import os
import socket
import ssl
import struct
import sys
import time

MAGIC = b"HU"
KIND_MESSAGE, KIND_PING, KIND_PONG = 1, 2, 3
ENVELOPE_WELCOME, ENVELOPE_GOODBYE = 3, 4
ERROR_CODE_SHUTTING_DOWN = 14


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, wire_type, payload):
    key = varint((number << 3) | wire_type)
    if wire_type == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


ROLES = {"phone": 1, "hmi": 2}


def hello_envelope(name, role=1):
    # Hello{min_version:1, max_version:1, role (ROLE_PHONE by default), name}
    hello = field(1, 0, 1) + field(2, 0, 1) + field(3, 0, role) + field(4, 2, name.encode())
    return field(2, 2, hello)


def announce_apps_envelope(device_name, request_id=1):
    # Envelope{request_id, announce_apps{device_name, apps:[{app_id, display_name, entitlements}]}}
    app = (field(1, 2, b"com.example.systemd-test.audio") + field(2, 2, b"Test Audio")
           + field(3, 2, b"com.apple.developer.carplay-audio"))
    announce = field(1, 2, device_name.encode()) + field(2, 2, app)
    return field(1, 0, request_id) + field(10, 2, announce)


def frame(kind, payload):
    return MAGIC + bytes([kind, 0]) + struct.pack(">II", 0, len(payload)) + payload


def parse_fields(data):
    """Yields (number, value) for a protobuf message; value is int or bytes."""
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = read_varint(data, i)
        elif wire_type == 2:
            length, i = read_varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire_type == 1:
            value, i = data[i:i + 8], i + 8
        elif wire_type == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type %d" % wire_type)
        yield number, value


def read_varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


class Closed(Exception):
    pass


class Connection:
    def __init__(self, address, timeout):
        if address.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target = address[5:]
        elif address.startswith("tcp:"):
            host, port = address[4:].rsplit(":", 1)
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.sock = socket.socket(family, socket.SOCK_STREAM)
            target = (host.strip("[]"), int(port))
        else:
            raise SystemExit("address must be unix:PATH or tcp:HOST:PORT")
        self.sock.settimeout(timeout)
        self.sock.connect(target)
        if address.startswith("tcp:"):
            # headunitd's TCP is TLS 1.3 (PROTOCOL.md section 1); these test
            # clients do not pair (allowUnpairedTcp), so they pin no car key.
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.minimum_version = ssl.TLSVersion.TLSv1_3
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            self.sock = context.wrap_socket(self.sock)
        self.buffer = b""

    def send(self, kind, payload):
        self.sock.sendall(frame(kind, payload))

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed()
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive_envelope(self):
        """The next MESSAGE's envelope fields as a dict; answers PINGs on the way."""
        while True:
            header = self._read(12)
            if header[:2] != MAGIC:
                raise ValueError("bad magic %r" % header[:2])
            kind = header[2]
            (length,) = struct.unpack(">I", header[8:12])
            payload = self._read(length)
            if kind == KIND_PING:
                self.send(KIND_PONG, payload)
                continue
            if kind == KIND_MESSAGE:
                return dict(parse_fields(payload))

    def handshake(self, name, role=1):
        self.send(KIND_MESSAGE, hello_envelope(name, role))
        envelope = self.receive_envelope()
        if ENVELOPE_GOODBYE in envelope:
            goodbye = dict(parse_fields(envelope[ENVELOPE_GOODBYE]))
            raise ValueError("Goodbye code=%d reason=%r" % (goodbye.get(1, 0), goodbye.get(2, b"").decode("utf-8", "replace")))
        if ENVELOPE_WELCOME not in envelope:
            raise ValueError("expected Welcome, got fields %s" % sorted(envelope))
        welcome = dict(parse_fields(envelope[ENVELOPE_WELCOME]))
        self.auth_required = welcome.get(10, 0)  # Welcome.auth_required (PROTOCOL.md section 20)
        return welcome.get(1, 0)

    def announce_apps(self, device_name):
        """Makes this connection the car's phone (it then counts in STATUS=)."""
        self.send(KIND_MESSAGE, announce_apps_envelope(device_name))
        while True:
            envelope = self.receive_envelope()
            if envelope.get(1) == 1 and 5 in envelope:  # the Result of our request
                return dict(parse_fields(envelope[5])).get(1, 0)

    def wait_goodbye(self):
        """(code, reason, closed_after) of the daemon's Goodbye; skips other messages."""
        while True:
            envelope = self.receive_envelope()
            if ENVELOPE_GOODBYE in envelope:
                goodbye = dict(parse_fields(envelope[ENVELOPE_GOODBYE]))
                code = goodbye.get(1, 0)
                reason = goodbye.get(2, b"").decode("utf-8", "replace")
                try:
                    while self.sock.recv(65536):
                        pass
                    closed = True
                except OSError:
                    closed = False
                return code, reason, closed

    def close(self):
        self.sock.close()


def cmd_hello(args):
    conn = Connection(args.address, args.timeout)
    version = conn.handshake("systemd-test-hello", ROLES[args.role])
    conn.close()
    print("welcome version=%d auth_required=%d" % (version, conn.auth_required))
    return 0


def cmd_hold(args):
    conn = Connection(args.address, args.timeout)
    conn.handshake("systemd-test-hold")
    if args.announce:
        code = conn.announce_apps("systemd test phone")
        if code != 0:
            print("AnnounceApps refused with code %d" % code)
            return 1
    if args.ready:
        open(args.ready, "w").close()
    conn.sock.settimeout(args.wait)
    try:
        code, reason, closed = conn.wait_goodbye()
    except Closed:
        print("closed without Goodbye")
        return 1
    except socket.timeout:
        print("no Goodbye within %ss" % args.wait)
        return 1
    print("goodbye code=%d reason=%r orderly_close=%s" % (code, reason, closed))
    return 0 if code == ERROR_CODE_SHUTTING_DOWN and reason and closed else 1


def cmd_loop(args):
    counts = {"ok": 0, "refused": 0, "goodbye": 0, "dropped": 0, "ended": 0, "timeout": 0, "other": 0}
    started = time.monotonic()
    while not os.path.exists(args.until) and time.monotonic() - started < args.max_seconds:
        try:
            conn = Connection(args.address, args.timeout)
        except ConnectionRefusedError:
            counts["refused"] += 1
            continue
        except FileNotFoundError:
            counts["refused"] += 1  # the socket path vanished: as bad as a refusal
            continue
        except (ssl.SSLError, ConnectionResetError) as error:
            # TLS state cannot go to the next process (PROTOCOL.md section 22): a
            # TCP connection still in its TLS handshake at a restart ends, and
            # the client connects again. With --ends-ok that is expected.
            counts["ended" if args.ends_ok else "other"] += 1
            continue
        except OSError as error:
            counts["refused" if error.errno == errno.ECONNREFUSED else "other"] += 1
            continue
        try:
            conn.handshake("systemd-test-loop")
            counts["ok"] += 1
        except ValueError:
            counts["goodbye"] += 1  # accepted by a stopping daemon, told why
        except (Closed, ConnectionResetError, ssl.SSLError):
            counts["ended" if args.ends_ok else "dropped"] += 1
        except socket.timeout:
            counts["timeout"] += 1
        finally:
            conn.close()
        if args.interval:
            time.sleep(args.interval)
    print(" ".join("%s=%d" % item for item in counts.items()))
    bad = counts["refused"] + counts["dropped"] + counts["timeout"] + counts["other"]
    return 0 if bad == 0 and counts["ok"] > 0 else 1


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hello")
    p.add_argument("address")
    p.add_argument("--role", choices=sorted(ROLES), default="phone")
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("hold")
    p.add_argument("address")
    p.add_argument("--ready")
    p.add_argument("--announce", action="store_true", help="announce an app: become the car's phone")
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--wait", type=float, default=60)
    p = sub.add_parser("loop")
    p.add_argument("address")
    p.add_argument("--until", required=True)
    p.add_argument("--ends-ok", action="store_true",
                   help="TLS: a connection ended by a restart (mid-handshake) is expected; the client connects again")
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--interval", type=float, default=0.01)
    p.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    try:
        return {"hello": cmd_hello, "hold": cmd_hold, "loop": cmd_loop}[args.command](args)
    except (OSError, ValueError, Closed) as error:
        print("%s: %s: %r" % (args.command, args.address, error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
