#!/usr/bin/env python3
"""Hand-made TCP traffic for the dissector test (.ci/dissector-test.sh).

  wire_cases.py PORT

Against a headunitd listening on 127.0.0.1:PORT, on separate connections:
  - a Hello sent in two writes (the header cut after 5 bytes): one frame
    across two TCP segments;
  - two PINGs in one write: two frames in one segment;
  - a PING cut after 7 bytes, then its rest and a second PING in one write:
    a reassembled frame and a whole one in the same segment;
  - after a Hello, one malformed header each: flags set, a channel on a
    MESSAGE, an unknown kind, a length over 1 MiB, a PING payload over 64
    bytes, bytes without the "HU" magic. Each must show as an expert info.
Frames are encoded by hand (PROTOCOL.md sections 2-4, the Hello of section
15), so this needs only the Python 3 standard library.
"""
import socket
import ssl
import struct
import sys
import time

PORT = int(sys.argv[1])
PAUSE = 0.3  # long enough for loopback TCP to send what was written as its own segment


def frame(kind, payload=b"", flags=0, channel=0, length=None):
    size = len(payload) if length is None else length
    return b"HU" + bytes([kind, flags]) + struct.pack(">II", channel, size) + payload


def hello(name):
    # Envelope{request_id 1, hello{min_version 1, max_version 1, role ROLE_PHONE, name}}
    name = name.encode()
    body = b"\x08\x01\x10\x01\x18\x01\x22" + bytes([len(name)]) + name
    return frame(1, b"\x08\x01\x12" + bytes([len(body)]) + body)


def connect():
    # headunitd's TCP is TLS 1.3 (PROTOCOL.md section 1). Each write below is
    # one TLS record; the daemon's key log lets tshark decrypt them.
    s = socket.create_connection(("127.0.0.1", PORT))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(5)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # an unpaired test client: it pins nothing
    return context.wrap_socket(s)


def writes(s, *pieces):
    for piece in pieces:
        s.sendall(piece)
        time.sleep(PAUSE)


def drain(s):
    try:
        s.settimeout(0.2)
        while s.recv(65536):
            pass
    except OSError:
        pass


def ping(data):
    return frame(2, data)


# One frame over two segments; two frames in one segment.
s = connect()
h = hello("Alice's iPhone")
writes(s, h[:5], h[5:], ping(b"\x01\x02") + ping(b"\x03\x04"))
# The end of a reassembled frame and a whole frame in one segment.
a, b = ping(b"\x05\x06"), ping(b"\x07\x08")
writes(s, a[:7], a[7:] + b)
drain(s)
s.close()

# Header errors, each on its own connection after a good Hello (so the
# heuristic has already recognised the stream); the daemon closes after each.
bad = [
    frame(2, b"\x09", flags=0x80),                  # RESERVED_FLAGS
    frame(1, b"\x08\x07", channel=5),               # channel on a MESSAGE
    frame(9, b"\x00"),                              # UNKNOWN_FRAME_KIND
    frame(1, b"\x00" * 16, length=2 * 1024 * 1024),  # FRAME_TOO_LARGE
    ping(bytes(range(100))),                        # PING payload over 64 bytes
    b"XY\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",  # BAD_MAGIC
]
for data in bad:
    s = connect()
    writes(s, hello("Broken iPhone"))
    try:
        writes(s, data)
    except OSError:
        pass  # the daemon may already have closed; the bytes were captured or the check says so
    drain(s)
    s.close()
