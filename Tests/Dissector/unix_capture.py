#!/usr/bin/env python3
"""Records headunitd traffic on a Unix socket as a pcap Wireshark can read.

Unix sockets cannot be captured like a network interface. This proxy listens
on LISTEN (a Unix socket path), forwards every connection to the daemon's
socket DAEMON, and writes what passes both ways into OUT.pcap as a synthetic
TCP stream per connection (127.0.0.2:<40000+n> <-> 127.0.0.1:7420, with real
sequence numbers), so Protocol/headunit.lua decodes it like a TCP capture.

  unix_capture.py --listen /tmp/hu-capture.sock --daemon /run/headunitd/headunitd.sock --out hu.pcap
  headunitctl --unix-socket /tmp/hu-capture.sock status     # any client, pointed at the proxy
  tshark -X lua_script:Protocol/headunit.lua -r hu.pcap

Stops on SIGINT/SIGTERM (the pcap is complete after every packet). Python 3 stdlib only.
"""
import argparse
import os
import selectors
import signal
import socket
import struct
import sys
import time

DAEMON_PORT = 7420


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class Pcap:
    def __init__(self, path):
        self.file = open(path, "wb")
        # Global header: LINKTYPE_RAW (101): IPv4 packets without a link layer.
        self.file.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
        self.file.flush()

    def packet(self, src, dst, sport, dport, seq, ack, flags, payload=b""):
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
        pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
        tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp + payload)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        data = ip + tcp + payload
        now = time.time()
        self.file.write(struct.pack("<IIII", int(now), int((now % 1) * 1e6), len(data), len(data)) + data)
        self.file.flush()


class Stream:
    """One proxied connection as a TCP conversation in the pcap."""
    CLIENT, DAEMON = "127.0.0.2", "127.0.0.1"

    def __init__(self, pcap, number):
        self.pcap, self.port = pcap, 40000 + number
        self.seq = {True: 1000, False: 5000}  # from client, from daemon
        self.closed = False
        pcap.packet(self.CLIENT, self.DAEMON, self.port, DAEMON_PORT, 999, 0, 0x02)
        pcap.packet(self.DAEMON, self.CLIENT, DAEMON_PORT, self.port, 4999, 1000, 0x12)
        pcap.packet(self.CLIENT, self.DAEMON, self.port, DAEMON_PORT, 1000, 5000, 0x10)

    def data(self, from_client, payload):
        # Split into segments the size loopback TCP would use.
        for start in range(0, len(payload), 32768):
            chunk = payload[start:start + 32768]
            src, dst = (self.CLIENT, self.DAEMON) if from_client else (self.DAEMON, self.CLIENT)
            sport, dport = (self.port, DAEMON_PORT) if from_client else (DAEMON_PORT, self.port)
            self.pcap.packet(src, dst, sport, dport, self.seq[from_client], self.seq[not from_client], 0x18, chunk)
            self.seq[from_client] += len(chunk)

    def close(self):
        if self.closed:  # both sides may report the end in one select() round
            return
        self.closed = True
        self.pcap.packet(self.CLIENT, self.DAEMON, self.port, DAEMON_PORT, self.seq[True], self.seq[False], 0x11)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    pcap = Pcap(args.out)
    if os.path.exists(args.listen):
        os.unlink(args.listen)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(args.listen)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    count = 0
    try:
        while True:
            for key, _ in selector.select():
                if key.data is None:
                    client, _ = listener.accept()
                    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        upstream.connect(args.daemon)
                    except OSError as error:
                        print(f"unix_capture: cannot reach {args.daemon}: {error}", file=sys.stderr)
                        upstream.close()
                        client.close()
                        continue
                    count += 1
                    stream = Stream(pcap, count)
                    selector.register(client, selectors.EVENT_READ, (upstream, stream, True))
                    selector.register(upstream, selectors.EVENT_READ, (client, stream, False))
                    continue
                peer, stream, from_client = key.data
                try:
                    data = key.fileobj.recv(65536)
                    if data:
                        stream.data(from_client, data)
                        peer.sendall(data)
                        continue
                except OSError:
                    # A side that reset or vanished ends this connection only,
                    # not the proxy (a peer may close while data is in flight).
                    pass
                for s in (key.fileobj, peer):
                    try:
                        selector.unregister(s)
                    except (KeyError, ValueError):
                        pass
                    s.close()
                stream.close()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        if os.path.exists(args.listen):
            os.unlink(args.listen)


if __name__ == "__main__":
    main()
