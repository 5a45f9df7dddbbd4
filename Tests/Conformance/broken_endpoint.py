#!/usr/bin/env python3
"""A deliberately broken headunitd endpoint, for testing the conformance kit.

It speaks just enough of Protocol/PROTOCOL.md to be reached (frames, Hello,
PING), and breaks one rule chosen with --mode, so `headunitctl conform` must
fail and name the section:

  wrong-version   (default) Welcome.version 7 although both sides speak 1..1 (section 5)
  no-echo         Welcome with request_id 0 instead of the Hello's (section 5)
  bad-pong        PONGs carry a different payload than the PING (sections 3, 6)
  accept-all      Welcome for any version range and any role (section 5)

Python 3 standard library only. Protobuf bytes are written by hand; PROTOCOL.md
section 15 explains the encoding.

  broken_endpoint.py --unix /tmp/broken.sock [--mode wrong-version]
  broken_endpoint.py --tcp 127.0.0.1:0        # prints the port it got

Prints `listening unix PATH` / `listening tcp HOST:PORT`, then `ready`.
"""

import argparse
import os
import signal
import socket
import struct
import sys
import threading

MESSAGE, PING, PONG = 1, 2, 3


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, data):
    return varint(number << 3 | 2) + varint(len(data)) + data


def read_varint(data, offset):
    value, shift = 0, 0
    while True:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, offset


def parse_fields(data):
    """Top-level fields of a protobuf message: {number: value} (last wins)."""
    fields, offset = {}, 0
    while offset < len(data):
        key, offset = read_varint(data, offset)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, offset = read_varint(data, offset)
        elif wire == 2:
            length, offset = read_varint(data, offset)
            value = data[offset:offset + length]
            offset += length
        elif wire == 1:
            value, offset = data[offset:offset + 8], offset + 8
        elif wire == 5:
            value, offset = data[offset:offset + 4], offset + 4
        else:
            raise ValueError("wire type %d" % wire)
        fields[number] = value
    return fields


def frame(kind, payload):
    return b"HU" + struct.pack(">BBII", kind, 0, 0, len(payload)) + payload


def welcome(request_id, version):
    limits = (field_varint(1, 1048576) + field_varint(2, 5000) + field_varint(3, 15000)
              + field_varint(4, 10000) + field_varint(5, 10))
    body = (field_varint(1, version) + field_varint(2, 1) + field_varint(3, 1)
            + field_bytes(4, limits) + field_bytes(6, b"broken-endpoint") + field_varint(7, 1))
    envelope = (field_varint(1, request_id) if request_id else b"") + field_bytes(3, body)
    return frame(MESSAGE, envelope)


def serve(connection, mode):
    buffer = b""
    handshaken = False
    try:
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= 12:
                if buffer[:2] != b"HU":
                    return  # broken: no Goodbye, just gone
                kind, _flags, _channel, length = struct.unpack(">BBII", buffer[2:12])
                if length > 1048576:
                    return
                if len(buffer) < 12 + length:
                    break
                payload, buffer = buffer[12:12 + length], buffer[12 + length:]
                if kind == PING and handshaken:
                    echo = payload if mode != "bad-pong" else bytes(reversed(payload)) + b"!"
                    connection.sendall(frame(PONG, echo))
                elif kind == MESSAGE and not handshaken:
                    try:
                        envelope = parse_fields(payload)
                        hello = parse_fields(envelope.get(2, b""))
                    except (ValueError, IndexError):
                        return
                    request_id = envelope.get(1, 0)
                    if mode == "wrong-version":
                        version = 7
                    elif mode == "accept-all":
                        version = hello.get(2, 1)
                    else:
                        version = 1
                    if mode == "no-echo":
                        request_id = 0
                    connection.sendall(welcome(request_id, version))
                    handshaken = True
                # Everything else is ignored: the kit's other checks time out.
    except OSError:
        return
    finally:
        connection.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--unix", metavar="PATH")
    where.add_argument("--tcp", metavar="HOST:PORT")
    parser.add_argument("--mode", choices=["wrong-version", "no-echo", "bad-pong", "accept-all"], default="wrong-version")
    args = parser.parse_args()
    # A parent (a test runner) may have blocked these; we must stop when told.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    if args.unix:
        if os.path.exists(args.unix):
            os.unlink(args.unix)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(args.unix)
        print("listening unix %s" % args.unix)
    else:
        host, _, port = args.tcp.rpartition(":")
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host or "127.0.0.1", int(port)))
        print("listening tcp %s:%d" % server.getsockname())
    server.listen(64)
    print("ready", flush=True)
    try:
        while True:
            connection, _ = server.accept()
            threading.Thread(target=serve, args=(connection, args.mode), daemon=True).start()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        if args.unix and os.path.exists(args.unix):
            os.unlink(args.unix)


if __name__ == "__main__":
    sys.exit(main())
