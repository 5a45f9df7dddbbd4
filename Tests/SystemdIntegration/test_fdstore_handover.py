#!/usr/bin/env python3
"""Level (a) of the restart handover (PROTOCOL.md section 22), with this test
playing systemd: it owns the listener, is the NOTIFY_SOCKET (receiving the
stored descriptors with SCM_RIGHTS, as systemd's fd store does), and starts
the next daemon with them in LISTEN_FDS/LISTEN_FDNAMES.

  test_fdstore_handover.py /path/to/headunitd

1. A phone and an HMI in session, a cluster subscribed to the metadata
   stream, and a connection that has sent half its Hello; SIGUSR1 with
   FDSTORE set: the daemon stores the four connections and
   a snapshot, exits 0, and no peer sees a Goodbye or EOF. The next daemon, given them back, removes them from the store,
   answers on the same connections (the HMI's request sent during the pause
   too), the cluster gets a fresh metadata snapshot, the half Hello completed
   gets its Welcome from the new process, and
   STATUS= shows the phone and its app again. SIGTERM then gives
   both a Goodbye (the daemon, not the store, now owns them).
2. SIGUSR1 without FDSTORE is a graceful stop (Goodbye, exit 0). An HMI that
   stopped reading while a phone updated a 0.9 MB list is not handed over: it
   reads what was written to it, then EOF (no Goodbye); the others carry on.
3. A stored connection with a snapshot that does not parse: Goodbye(SHUTTING_DOWN)
   saying the session could not be restored, then close; the daemon starts
   clean and serves new connections. Likewise a connection stored with no
   snapshot, and a snapshot of another format (another daemon version).
4. A phone on TCP (TLS 1.3) at the restart: its connection ends (TLS state
   cannot be stored), its session waits; on a new TLS connection
   ResumeSession restores it (the time it took is printed).
5. A maximal valid session (issue 24): four audio apps fill their stacks with
   the largest lists until the phone's templates reach
   max_phone_template_bytes (the next list is MESSAGE_TOO_LARGE), plus a
   modal; the ~17 MB snapshot is handed over and read back, every app,
   scene, stack and the modal come back, the phone carries on.
6. A snapshot over the largest the next process reads (forced with
   HEADUNITD_TEST_SNAPSHOT_MAX_BYTES): the writer stops instead, with
   Goodbye(SHUTTING_DOWN) to every peer, exit 0, nothing stored.
Prints PASS:/FAIL: lines and `N passed, N failed` (HU_ONLY=N runs only the N-th run).
"""
import array
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import huclient  # noqa: E402

RESULTS = {"passed": 0, "failed": 0}
ENVELOPE_RESULT = 5
GET_STATUS = 33
SUBSCRIBE_METADATA, METADATA_UPDATE = 63, 64


def check(name, ok, detail=""):
    RESULTS["passed" if ok else "failed"] += 1
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name, (" -- " + detail) if detail else ""), flush=True)
    return ok


class Manager(threading.Thread):
    """The NOTIFY_SOCKET: records every message and keeps the fds sent with FDSTORE=1."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.path = path
        self.messages = []
        self.store = {}  # name -> fd
        self.stopped = False
        self.lock = threading.Lock()

    def run(self):
        while not self.stopped:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(64 * 4))
            except socket.timeout:
                continue
            except OSError:
                return
            fds = []
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received = array.array("i")
                    received.frombytes(payload[:len(payload) - len(payload) % received.itemsize])
                    fds += list(received)
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            with self.lock:
                self.messages.append(fields)
                if fields.get("FDSTORE") == "1":
                    for fd in fds:
                        self.store[fields.get("FDNAME", "stored")] = fd
                elif fields.get("FDSTOREREMOVE") == "1":
                    fd = self.store.pop(fields.get("FDNAME"), None)
                    if fd is not None:
                        os.close(fd)
                else:
                    for fd in fds:
                        os.close(fd)

    def wait(self, predicate, timeout=10, since=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for fields in self.messages[since:]:
                    if predicate(fields):
                        return fields
            time.sleep(0.01)
        return None

    def close(self):
        self.stopped = True
        self.join(1)
        self.sock.close()


def start_daemon(binary, workdir, fds, names, env_extra, log):
    """fork + exec with fds at 3, 4, ... and LISTEN_PID set to the child's own pid."""
    pid = os.fork()
    if pid == 0:
        try:
            high = [os.dup(fd) for fd in fds]  # out of the way of 3.. first
            for index, fd in enumerate(high):
                os.dup2(fd, 3 + index, inheritable=True)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3 + len(fds), 1024)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LISTEN_FDS": str(len(fds)),
                   "LISTEN_PID": str(os.getpid()), "LISTEN_FDNAMES": ":".join(names),
                   "SWIFT_BACKTRACE": "enable=no"}
            env.update(env_extra)
            config = os.path.join(workdir, "config.json")
            os.execve(binary, [binary, "--config", config, "--log-level", "info"], env)
        finally:
            os._exit(127)
    return pid


def wait_exit(pid, timeout):
    """The exit code, or None after killing it at the timeout (or if already reaped)."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
    return None


def hmi_connection(path):
    conn = huclient.Connection("unix:" + path, 10)
    # Hello{min 1, max 1, role HMI, name}
    hello = huclient.field(1, 0, 1) + huclient.field(2, 0, 1) + huclient.field(3, 0, 2) + huclient.field(4, 2, b"hmi")
    conn.send(huclient.KIND_MESSAGE, huclient.field(2, 2, hello))
    envelope = conn.receive_envelope()
    assert huclient.ENVELOPE_WELCOME in envelope, sorted(envelope)
    return conn


def cluster_connection(path):
    """A cluster subscribed to the metadata stream (its first snapshot read)."""
    conn = huclient.Connection("unix:" + path, 10)
    hello = huclient.field(1, 0, 1) + huclient.field(2, 0, 1) + huclient.field(3, 0, 3) + huclient.field(4, 2, b"cluster")
    conn.send(huclient.KIND_MESSAGE, huclient.field(2, 2, hello))
    assert huclient.ENVELOPE_WELCOME in conn.receive_envelope()
    conn.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 2) + huclient.field(SUBSCRIBE_METADATA, 2, b""))
    conn.first_metadata = next_metadata(conn)
    return conn


def next_metadata(conn):
    """The next MetadataUpdate's fields (answers and other messages skipped)."""
    while True:
        envelope = conn.receive_envelope()
        if METADATA_UPDATE in envelope:
            return dict(huclient.parse_fields(envelope[METADATA_UPDATE]))


def get_status(conn, request_id):
    conn.send(huclient.KIND_MESSAGE, huclient.field(1, 0, request_id) + huclient.field(GET_STATUS, 2, b""))
    while True:
        envelope = conn.receive_envelope()
        if envelope.get(1) == request_id and ENVELOPE_RESULT in envelope:
            return dict(huclient.parse_fields(envelope[ENVELOPE_RESULT]))


def ping(conn, payload):
    conn.send(huclient.KIND_PING, payload)
    while True:
        header = conn._read(12)
        (length,) = struct.unpack(">I", header[8:12])
        body = conn._read(length)
        if header[2] == huclient.KIND_PONG and body == payload:
            return True
        if header[2] == huclient.KIND_PING:
            conn.send(huclient.KIND_PONG, body)


def goodbye_of(conn):
    """(code, reason, closed) of the daemon's Goodbye, reading without answering PINGs
    (the daemon may have closed by the time they are read)."""
    while True:
        header = conn._read(12)
        (length,) = struct.unpack(">I", header[8:12])
        body = conn._read(length)
        if header[2] != huclient.KIND_MESSAGE:
            continue
        envelope = dict(huclient.parse_fields(body))
        if huclient.ENVELOPE_GOODBYE in envelope:
            goodbye = dict(huclient.parse_fields(envelope[huclient.ENVELOPE_GOODBYE]))
            try:
                while conn.sock.recv(65536):
                    pass
                closed = True
            except OSError:
                closed = False
            return goodbye.get(1, 0), goodbye.get(2, b"").decode("utf-8", "replace"), closed


def listener(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)
    return sock


def handover_run(binary, workdir):
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    log = os.path.join(workdir, "daemon.log")
    env = {"NOTIFY_SOCKET": manager.path, "FDSTORE": "16"}
    first = start_daemon(binary, workdir, [listen.fileno()], ["unix"], env, log)
    phone = hmi = cluster = late = None
    try:
        check("first daemon ready", manager.wait(lambda f: f.get("READY") == "1") is not None, open(log).read()[-2000:])
        phone = huclient.Connection("unix:" + path, 10)
        phone.handshake("phone")
        check("the phone's apps are accepted", phone.announce_apps("Handover Phone") == 0)
        hmi = hmi_connection(path)
        cluster = cluster_connection(path)
        status = get_status(hmi, 7)
        check("the HMI is answered before the restart", status.get(1, 0) == 0, repr(status))
        # A third connection has sent only part of its Hello when the restart comes.
        hello = huclient.frame(huclient.KIND_MESSAGE, huclient.hello_envelope("late phone"))
        late = huclient.Connection("unix:" + path, 10)
        late.sock.sendall(hello[:5])
        time.sleep(0.2)
        os.kill(first, signal.SIGUSR1)
        code = wait_exit(first, 15)
        check("SIGUSR1 with FDSTORE: the daemon hands over and exits 0", code == 0, "exit %r" % code)
        with manager.lock:
            stored = dict(manager.store)
        connections = sorted(name for name in stored if name.startswith("conn-"))
        check("it stored the four connections and a snapshot", len(connections) == 4 and "snapshot" in stored, repr(sorted(stored)))
        # The pause: a request now waits in the socket for the next process.
        hmi.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 8) + huclient.field(GET_STATUS, 2, b""))
        hmi.sock.settimeout(0.3)
        try:
            early = hmi.sock.recv(1)
            check("nothing from the daemon during the pause (no Goodbye, no EOF)", False, "got %r" % early)
        except socket.timeout:
            check("nothing from the daemon during the pause (no Goodbye, no EOF)", True)
        hmi.sock.settimeout(10)
        names = ["unix"] + sorted(stored)
        fds = [listen.fileno()] + [stored[name] for name in sorted(stored)]
        before = len(manager.messages)
        second = start_daemon(binary, workdir, fds, names, env, log)
        try:
            check("second daemon ready", manager.wait(lambda f: f.get("READY") == "1", since=before) is not None)
            removed = [f.get("FDNAME") for f in manager.messages[before:] if f.get("FDSTOREREMOVE") == "1"]
            check("it removed what it took from the store", sorted(removed) == sorted(stored), repr(removed))
            # The test's copies go too: from now on the daemon alone holds the connections.
            with manager.lock:
                for name in list(manager.store):
                    os.close(manager.store.pop(name))
            while True:
                envelope = hmi.receive_envelope()
                if envelope.get(1) == 8 and ENVELOPE_RESULT in envelope:
                    break
            check("the request sent during the pause is answered on the same connection", True)
            status = get_status(hmi, 9)
            check("the HMI's connection carries on", status.get(1, 0) == 0, repr(status))
            check("the phone's connection carries on (PING answered)", ping(phone, b"after-restart"))
            snapshot = next_metadata(cluster)
            check("the cluster stays subscribed: a full snapshot of the metadata stream after the pause, its version not going back",
                  snapshot.get(2) == 1 and snapshot.get(1, 0) >= cluster.first_metadata.get(1, 0),
                  "version %r -> %r, full=%r" % (cluster.first_metadata.get(1), snapshot.get(1), snapshot.get(2)))
            late.sock.sendall(hello[5:])
            late_version, late_error = 0, ""
            try:
                late_version = 1 if huclient.ENVELOPE_WELCOME in late.receive_envelope() else 0
            except Exception as e:  # noqa: BLE001
                late_error = repr(e)
            check("the connection with half a Hello handshakes with the new process", late_version == 1, late_error)
            shown = manager.wait(lambda f: "1 phone, 1 app" in f.get("STATUS", ""), since=before)
            check("STATUS= of the new process shows the phone and its app", shown is not None,
                  repr([f for f in manager.messages[before:] if "STATUS" in f][-3:]))
            os.kill(second, signal.SIGTERM)
            goodbye = goodbye_of(phone)
            check("SIGTERM of the new process: the phone gets Goodbye(SHUTTING_DOWN) and a close", goodbye[0] == 14 and goodbye[2], repr(goodbye))
            goodbye = goodbye_of(hmi)
            check("... and the HMI too", goodbye[0] == 14 and goodbye[2], repr(goodbye))
            code = wait_exit(second, 15)
            check("the new process exits 0", code == 0, "exit %r" % code)
        finally:
            wait_exit(second, 0.1)
    finally:
        for conn in (phone, hmi, cluster, late):
            if conn:
                conn.close()
        wait_exit(first, 0.1)
        manager.close()
        listen.close()
        if RESULTS["failed"]:
            print(open(log).read()[-3000:])


# Pairing and authenticating as a TCP phone (PROTOCOL.md section 20), for
# tls_resume_run: SPAKE2 and Ed25519 from the pure-Python reference.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Security"))
import spake2_reference  # noqa: E402
import hashlib  # noqa: E402

START_PAIRING, PAIR, AUTHENTICATE, PAIR_START = 90, 91, 92, 95
LAUNCH_APP, SCENE_CONNECTED = 30, 20


def spki_of_certificate(der):
    """The SubjectPublicKeyInfo (DER, header included) of an X.509 certificate:
    what the phone pins and binds into the pairing transcript (PROTOCOL.md 20.2)."""
    def elements(data):
        i, out = 0, []
        while i < len(data):
            start = i
            i += 1
            length = data[i]
            i += 1
            if length & 0x80:
                n = length & 0x7F
                length = int.from_bytes(data[i:i + n], "big")
                i += n
            out.append((data[start], data[start:i + length], data[i:i + length]))
            i += length
        return out
    certificate = elements(der)[0][2]
    tbs = elements(certificate)[0][2]
    fields = elements(tbs)
    if fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serial, signature algorithm, issuer, validity, subject, SubjectPublicKeyInfo
    return fields[5][1]


def read_result(conn, request_id):
    while True:
        envelope = conn.receive_envelope()
        if envelope.get(1) == request_id and ENVELOPE_RESULT in envelope:
            return dict(huclient.parse_fields(envelope[ENVELOPE_RESULT]))


def tls_phone_handshake(address):
    """A TCP (TLS 1.3) phone's Hello; its Welcome's fields."""
    conn = huclient.Connection(address, 10)
    conn.send(huclient.KIND_MESSAGE, huclient.hello_envelope("tls phone"))
    envelope = conn.receive_envelope()
    assert huclient.ENVELOPE_WELCOME in envelope, sorted(envelope)
    return conn, dict(huclient.parse_fields(envelope[huclient.ENVELOPE_WELCOME]))


def tls_authenticate(conn, welcome, secret, device_id, request_id):
    """Authenticate (PROTOCOL.md 20.3): Ed25519 over "headunitd-auth-v1" ||
    Welcome.auth_challenge || Welcome.connection_id (8 bytes, big-endian)."""
    signed = b"headunitd-auth-v1" + welcome.get(11, b"") + struct.pack(">Q", welcome.get(7, 0))
    body = huclient.field(1, 2, device_id) + huclient.field(2, 2, spake2_reference.ed25519_sign(secret, signed))
    conn.send(huclient.KIND_MESSAGE, huclient.field(1, 0, request_id) + huclient.field(AUTHENTICATE, 2, body))
    return read_result(conn, request_id)


def tls_pair(hmi, address, secret, name):
    """Pairs like a phone would (PROTOCOL.md 20.2): the HMI opens a window,
    the phone runs SPAKE2 with its code (Tests/Security/spake2_reference.py),
    checks the car's confirmation against the TLS key it saw, sends Pair.
    Returns the connection, its Welcome, the device id (or None) and why."""
    hmi.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 7) + huclient.field(START_PAIRING, 2, b""))
    opened = read_result(hmi, 7)
    code = dict(huclient.parse_fields(opened.get(21, b""))).get(1, b"")
    conn, welcome = tls_phone_handshake(address)
    if not welcome.get(10, 0) or len(code) != 6:
        return conn, welcome, None, "auth_required %r, code %r" % (welcome.get(10, 0), code)
    spake = spake2_reference.SPAKE2("phone", code, os.urandom(64))
    conn.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 2) + huclient.field(PAIR_START, 2, huclient.field(1, 2, spake.message)))
    started = read_result(conn, 2)
    pairing = dict(huclient.parse_fields(started.get(21, b"")))
    car_key = spki_of_certificate(conn.sock.getpeercert(binary_form=True))
    if started.get(1, 0) != 0 or pairing.get(8) != car_key:
        return conn, welcome, None, "PairStart %r; car key seen %s" % (started, car_key.hex())
    transcript = spake2_reference.transcript_hash(spake.message, pairing.get(6, b""), car_key)
    public_key = spake2_reference.ed25519_public_key(secret)
    schedule = spake2_reference.schedule(spake.finish(pairing.get(6, b"")), transcript, public_key, name)
    if schedule["car_confirmation"] != pairing.get(7, b"").hex():
        return conn, welcome, None, "the car's confirmation does not verify"
    body = (huclient.field(2, 2, public_key) + huclient.field(3, 2, name.encode())
            + huclient.field(4, 2, bytes.fromhex(schedule["confirmation"]))
            + huclient.field(5, 2, spake2_reference.ed25519_sign(secret, bytes.fromhex(schedule["signed_bytes"]))))
    conn.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 3) + huclient.field(PAIR, 2, body))
    paired = read_result(conn, 3)
    device_id = dict(huclient.parse_fields(paired.get(21, b""))).get(4, b"")
    expected = hashlib.sha256(public_key).digest()[:16].hex().encode()
    if paired.get(1, 0) != 0 or device_id != expected:
        return conn, welcome, None, "Pair %r" % paired
    return conn, welcome, device_id, ""


def tls_resume_run(binary, workdir):
    """A paired phone on TCP (TLS 1.3), pairing and authenticating as a real
    phone does (no allowUnpairedTcp): its TLS state cannot go through the fd
    store, so its connection ends at the restart, and its session waits for
    it (PROTOCOL.md section 22). While it is away the HMI launches its app;
    it connects again, authenticates on the new process, ResumeSession finds
    its apps, and the SceneConnected produced during the restart follows the
    Result (the backlog, section 21). Prints how long the phone was without
    its session."""
    with open(os.path.join(workdir, "config.json"), "w") as f:
        f.write('{"stateDirectory": "%s"}\n' % os.path.join(workdir, "state"))
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(64)
    address = "tcp:127.0.0.1:%d" % tcp.getsockname()[1]
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    log = os.path.join(workdir, "daemon.log")
    env = {"NOTIFY_SOCKET": manager.path, "FDSTORE": "16"}
    first = start_daemon(binary, workdir, [listen.fileno(), tcp.fileno()], ["unix", "tcp"], env, log)
    second = None
    phone = again = hmi = None
    secret = os.urandom(32)
    try:
        check("TLS run: first daemon ready", manager.wait(lambda f: f.get("READY") == "1") is not None, open(log).read()[-2000:])
        hmi = hmi_connection(path)
        phone, welcome, device_id, why = tls_pair(hmi, address, secret, "TLS Phone")
        check("TLS run: the phone pairs over TLS (SPAKE2 with the code, the car's key bound)", device_id is not None, why)
        authenticated = tls_authenticate(phone, welcome, secret, device_id or b"", 4)
        check("TLS run: the paired phone authenticates", authenticated.get(1, 0) == 0, repr(authenticated))
        phone.send(huclient.KIND_MESSAGE, huclient.announce_apps_envelope("TLS Phone"))
        decisions = dict(huclient.parse_fields(read_result(phone, 1).get(10, b"")))
        token = decisions.get(2, b"")
        check("TLS run: the TLS phone's apps are accepted, with a resumption token", len(token) == 32, repr(token))
        started = time.monotonic()
        os.kill(first, signal.SIGUSR1)
        code = wait_exit(first, 15)
        check("TLS run: SIGUSR1 with FDSTORE: hands over and exits 0", code == 0, "exit %r" % code)
        with manager.lock:
            stored = dict(manager.store)
        connections = sorted(name for name in stored if name.startswith("conn-"))
        check("TLS run: the HMI is stored, the TLS phone's connection is not", len(connections) == 1 and "snapshot" in stored, repr(sorted(stored)))
        ended = ""
        try:
            phone.sock.settimeout(5)
            while True:
                phone.receive_envelope()
        except socket.timeout:
            ended = ""
        except Exception as error:  # noqa: BLE001 (EOF, TLS close_notify or reset: the connection ended)
            ended = repr(error)
        check("TLS run: the TLS phone's connection ended at the restart (no Goodbye)", ended != "",
              "%s after %.0f ms" % (ended, (time.monotonic() - started) * 1000))
        # During the restart the HMI launches the phone's app: the new process
        # serves it, and the SceneConnected it makes waits in the phone's backlog.
        launch = huclient.field(1, 2, b"com.example.systemd-test.audio")
        hmi.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 8) + huclient.field(LAUNCH_APP, 2, launch))
        names = ["unix", "tcp"] + sorted(stored)
        fds = [listen.fileno(), tcp.fileno()] + [stored[name] for name in sorted(stored)]
        before = len(manager.messages)
        second = start_daemon(binary, workdir, fds, names, env, log)
        check("TLS run: second daemon ready", manager.wait(lambda f: f.get("READY") == "1", since=before) is not None)
        with manager.lock:
            for name in list(manager.store):
                os.close(manager.store.pop(name))
        launched = read_result(hmi, 8)
        check("TLS run: the HMI's LaunchApp sent during the restart is served by the new process (OK)", launched.get(1, 0) == 0, repr(launched))
        reconnect = time.monotonic()
        again, welcome = tls_phone_handshake(address)
        car_key = spki_of_certificate(again.sock.getpeercert(binary_form=True))
        authenticated = tls_authenticate(again, welcome, secret, device_id or b"", 3)
        check("TLS run: on a new TLS connection to the new process, the phone authenticates (same car key)",
              authenticated.get(1, 0) == 0 and welcome.get(10, 0) == 1 and len(car_key) > 0, repr(authenticated))
        resume = huclient.field(1, 2, token)
        again.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 2) + huclient.field(14, 2, resume))
        result = read_result(again, 2)
        took = time.monotonic() - started
        resumed = dict(huclient.parse_fields(result.get(13, b"")))
        check("TLS run: ResumeSession restores the session (Result OK, resumed, 1+ replayed)",
              result.get(1, 0) == 0 and 13 in result and resumed.get(4, 0) >= 1, repr(result))
        replay = again.receive_envelope()
        scene = dict(huclient.parse_fields(replay.get(SCENE_CONNECTED, b"")))
        check("TLS run: the backlog made during the restart follows the Result: SceneConnected for the launched app",
              scene.get(1) == b"com.example.systemd-test.audio", repr(sorted(replay)))
        print("# TLS phone: SIGUSR1 to its session resumed on a new TLS connection: %.0f ms; connect, TLS, Hello, Authenticate and ResumeSession on the new process: %.0f ms"
              % (took * 1000, (time.monotonic() - reconnect) * 1000), flush=True)
        status = get_status(hmi, 9)
        check("TLS run: the HMI carried on across the restart", status.get(1, 0) == 0, repr(status))
        os.kill(second, signal.SIGTERM)
        code = wait_exit(second, 15)
        check("TLS run: the new process exits 0", code == 0, "exit %r" % code)
    finally:
        for conn in (phone, again, hmi):
            if conn:
                conn.close()
        wait_exit(first, 0.1)
        if second:
            wait_exit(second, 0.1)
        manager.close()
        listen.close()
        tcp.close()
        if RESULTS["failed"]:
            print(open(log).read()[-3000:])


def sigusr1_without_store_run(binary, workdir):
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    log = os.path.join(workdir, "daemon.log")
    pid = start_daemon(binary, workdir, [listen.fileno()], ["unix"], {"NOTIFY_SOCKET": manager.path}, log)
    try:
        manager.wait(lambda f: f.get("READY") == "1")
        conn = huclient.Connection("unix:" + path, 10)
        conn.handshake("phone")
        os.kill(pid, signal.SIGUSR1)
        goodbye = conn.wait_goodbye()
        code = wait_exit(pid, 15)
        check("SIGUSR1 without an fd store is a graceful stop: Goodbye(SHUTTING_DOWN), exit 0",
              goodbye[0] == 14 and code == 0 and not manager.store, "%r exit %r" % (goodbye, code))
    finally:
        manager.close()
        listen.close()


def bad_state_run(binary, workdir, snapshot, expected):
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fds, names = [listen.fileno(), theirs.fileno()], ["unix", "conn-5"]
    if snapshot is not None:
        memory = os.memfd_create("snapshot")
        os.write(memory, snapshot)
        fds.append(memory)
        names.append("snapshot")
    log = os.path.join(workdir, "daemon.log")
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    pid = start_daemon(binary, workdir, fds, names, {"NOTIFY_SOCKET": manager.path, "FDSTORE": "16"}, log)
    theirs.close()
    if snapshot is not None:
        os.close(memory)
    try:
        ours.settimeout(10)
        conn = huclient.Connection.__new__(huclient.Connection)
        conn.sock, conn.buffer = ours, b""
        code, reason, closed = conn.wait_goodbye()
        check("%s: the stored connection gets Goodbye(SHUTTING_DOWN) saying why, then a close" % expected,
              code == 14 and expected in reason and "connect again" in reason and closed, repr((code, reason, closed)))
        ok, error = True, ""
        try:
            fresh = huclient.Connection("unix:" + path, 10)
            fresh.handshake("phone")
            fresh.close()
        except Exception as e:  # noqa: BLE001
            ok, error = False, repr(e)
        check("... and the daemon starts clean and serves new connections", ok, error)
        logged = [line for line in open(log).read().splitlines() if "cannot restore" in line]
        check("... and logs why", bool(logged), open(log).read()[-1500:])
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_exit(pid, 15)
        manager.close()
        listen.close()
        ours.close()


def big_list(generation, items=1800):
    """Template{id "root", list{title, sections [{id "s", items: 1,800 of ~500 bytes}]}}, hand-encoded."""
    filler = "x" * 480
    f = huclient.field
    section = f(1, 2, b"s") + b"".join(
        f(3, 2, f(1, 2, b"i%d" % i) + f(10, 2, f(1, 2, ("%d %d %s" % (generation, i, filler)).encode()))) for i in range(items))
    return f(1, 2, b"root") + f(10, 2, f(1, 2, b"generation %d" % generation) + f(2, 2, section))


def template_request(request_id, app, scene, op_field, template):
    f = huclient.field
    return f(1, 0, request_id) + f(11, 2, f(1, 2, app) + f(2, 0, scene) + f(op_field, 2, template))


def result_code(conn, request_id):
    while True:
        envelope = conn.receive_envelope()
        if envelope.get(1) == request_id and ENVELOPE_RESULT in envelope:
            return dict(huclient.parse_fields(envelope[ENVELOPE_RESULT])).get(1, 0)


def maximal_run(binary, workdir):
    """Issue 24: a maximal valid session survives a restart. Four audio apps
    fill their stacks with the largest lists the limits allow, and a modal,
    until the phone's templates reach max_phone_template_bytes (the next one
    is refused with MESSAGE_TOO_LARGE): about 16 MiB of templates. The
    snapshot fits what the next process reads (section 22); every connection
    and every scene comes back."""
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    log = os.path.join(workdir, "daemon.log")
    env = {"NOTIFY_SOCKET": manager.path, "FDSTORE": "16"}
    first = start_daemon(binary, workdir, [listen.fileno()], ["unix"], env, log)
    second = None
    phone = hmi = None
    f = huclient.field
    try:
        check("maximal: first daemon ready", manager.wait(lambda m: m.get("READY") == "1") is not None)
        phone = huclient.Connection("unix:" + path, 30)
        phone.handshake("phone")
        apps = [b"com.example.max%d" % i for i in range(4)]
        announce = f(1, 2, b"Maximal Phone") + b"".join(
            f(2, 2, f(1, 2, app) + f(2, 2, app) + f(3, 2, b"com.apple.developer.carplay-audio")) for app in apps)
        phone.send(huclient.KIND_MESSAGE, f(1, 0, 1) + f(10, 2, announce))
        check("maximal: four apps announced", result_code(phone, 1) == 0)
        hmi = hmi_connection(path)
        scenes = {}
        for number, app in enumerate(apps):
            hmi.send(huclient.KIND_MESSAGE, f(1, 0, 10 + number) + f(30, 2, f(1, 2, app)))
            result_code(hmi, 10 + number)
        while len(scenes) < len(apps):
            envelope = phone.receive_envelope()
            if 20 in envelope:
                connected = dict(huclient.parse_fields(envelope[20]))
                scenes[connected[1]] = connected[2]
        request, accepted, refusal = 100, 0, None
        for app in apps:
            for depth in range(5):
                request += 1
                op = 10 if depth == 0 else 11
                template = big_list(depth)
                if depth > 0:
                    template = template.replace(b"root", b"pag%d" % depth, 1)  # same length: the id's length prefix stays right
                phone.send(huclient.KIND_MESSAGE, template_request(request, app, scenes[app], op, template))
                code = result_code(phone, request)
                if code == 0:
                    accepted += 1
                elif refusal is None:
                    refusal = code
            if refusal is not None:
                break
        # And a modal on the first app.
        request += 1
        alert = f(1, 2, b"alert") + f(14, 2, f(1, 2, b"Really?") + f(2, 2, f(1, 2, b"ok") + f(2, 2, b"OK")))
        phone.send(huclient.KIND_MESSAGE, template_request(request, apps[0], scenes[apps[0]], 15, alert))
        modal = result_code(phone, request)
        check("maximal: the phone holds lists up to max_phone_template_bytes, the next refused (MESSAGE_TOO_LARGE)",
              refusal == 23 and accepted >= 15, "accepted %d lists, refusal %r" % (accepted, refusal))
        status = get_status(hmi, 7)
        os.kill(first, signal.SIGUSR1)
        code = wait_exit(first, 30)
        check("maximal: SIGUSR1 hands over and exits 0", code == 0, "exit %r" % code)
        with manager.lock:
            stored = dict(manager.store)
        size = os.fstat(stored["snapshot"]).st_size if "snapshot" in stored else 0
        check("maximal: the connections and the snapshot are stored", "snapshot" in stored and len(stored) == 3,
              "%r, snapshot %d bytes" % (sorted(stored), size))
        names = ["unix"] + sorted(stored)
        fds = [listen.fileno()] + [stored[name] for name in sorted(stored)]
        before = len(manager.messages)
        second = start_daemon(binary, workdir, fds, names, env, log)
        check("maximal: second daemon ready", manager.wait(lambda m: m.get("READY") == "1", since=before, timeout=30) is not None)
        with manager.lock:
            for name in list(manager.store):
                os.close(manager.store.pop(name))
        shown = manager.wait(lambda m: "1 phone, 4 apps, 4 scenes" in m.get("STATUS", ""), since=before, timeout=30)
        check("maximal: the new process restored the session (%d bytes of snapshot): 1 phone, 4 apps, 4 scenes" % size, shown is not None,
              repr([m for m in manager.messages[before:] if "STATUS" in m][-3:]) + open(log).read()[-1500:])
        after = get_status(hmi, 9)

        def app_statuses(result):
            return [value for number, value in huclient.parse_fields(result.get(11, b"")) if number == 6]
        check("maximal: the apps' scenes, stacks and modal are the same after the restart",
              len(app_statuses(status)) == 4 and app_statuses(after) == app_statuses(status) and modal == 0,
              "modal %r, %d -> %d apps" % (modal, len(app_statuses(status)), len(app_statuses(after))))
        check("maximal: the phone's connection carries on (PING answered)", ping(phone, b"maximal"))
    finally:
        for conn in (phone, hmi):
            if conn:
                conn.close()
        if second:
            os.kill(second, signal.SIGTERM)
            wait_exit(second, 15)
        wait_exit(first, 0.1)
        manager.close()
        listen.close()


def oversized_snapshot_run(binary, workdir):
    """Section 22's fallback: should the snapshot ever be over what the next
    process reads (SnapshotBounds), the writer does not hand over: an orderly
    stop, Goodbye(SHUTTING_DOWN) to everyone, exit 0, nothing stored. Forced
    with HEADUNITD_TEST_SNAPSHOT_MAX_BYTES (it can only lower the bound)."""
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    log = os.path.join(workdir, "daemon.log")
    env = {"NOTIFY_SOCKET": manager.path, "FDSTORE": "16", "HEADUNITD_TEST_SNAPSHOT_MAX_BYTES": "64"}
    pid = start_daemon(binary, workdir, [listen.fileno()], ["unix"], env, log)
    conns = []
    try:
        manager.wait(lambda f: f.get("READY") == "1")
        phone = huclient.Connection("unix:" + path, 15)
        conns.append(phone)
        phone.handshake("phone")
        phone.announce_apps("Phone")
        hmi = hmi_connection(path)
        conns.append(hmi)
        cluster = cluster_connection(path)
        conns.append(cluster)
        os.kill(pid, signal.SIGUSR1)
        goodbyes = [goodbye_of(conn) for conn in conns]
        code = wait_exit(pid, 15)
        with manager.lock:
            stored = sorted(manager.store)
        check("a snapshot over the bound: no handover but an orderly stop, Goodbye(SHUTTING_DOWN) to every peer, then a close",
              all(g[0] == 14 and g[2] for g in goodbyes), repr(goodbyes))
        check("... exit 0 and nothing left in the fd store", code == 0 and stored == [], "exit %r, stored %r" % (code, stored))
        logged = [line for line in open(log).read().splitlines() if "over the largest a restart reads" in line]
        check("... and the daemon logs why", bool(logged), open(log).read()[-1500:])
    finally:
        for conn in conns:
            conn.close()
        wait_exit(pid, 0.1)
        manager.close()
        listen.close()


def undrained_run(binary, workdir):
    """An HMI that stopped reading cannot be handed over without losing bytes:
    it is closed (EOF, no Goodbye), the others carry on, and the next process
    lets it go."""
    with open(os.path.join(workdir, "config.json"), "w") as f:
        f.write('{"limits": {"shutdownGraceMs": 500}}\n')
    path = os.path.join(workdir, "hu.sock")
    listen = listener(path)
    manager = Manager(os.path.join(workdir, "notify.sock"))
    manager.start()
    log = os.path.join(workdir, "daemon.log")
    env = {"NOTIFY_SOCKET": manager.path, "FDSTORE": "16"}
    first = start_daemon(binary, workdir, [listen.fileno()], ["unix"], env, log)
    second = None
    conns = []
    stop = threading.Event()
    try:
        manager.wait(lambda f: f.get("READY") == "1")
        phone = huclient.Connection("unix:" + path, 20)
        conns.append(phone)
        phone.handshake("phone")
        phone.announce_apps("Phone")
        stalled = hmi_connection(path)  # reads nothing from now on
        conns.append(stalled)
        reader = hmi_connection(path)
        conns.append(reader)
        app = b"com.example.systemd-test.audio"
        reader.send(huclient.KIND_MESSAGE, huclient.field(1, 0, 3) + huclient.field(30, 2, huclient.field(1, 2, app)))
        result_code(reader, 3)
        while True:
            envelope = phone.receive_envelope()
            if 20 in envelope:
                scene = dict(huclient.parse_fields(envelope[20])).get(2, 0)
                break

        def drain():
            try:
                while not stop.is_set():
                    reader.receive_envelope()
            except Exception:  # noqa: BLE001 (the test ends)
                pass
        threading.Thread(target=drain, daemon=True).start()
        codes = []
        for generation in range(8):
            op = 10 if generation == 0 else 17  # set_root, then update in place
            phone.send(huclient.KIND_MESSAGE, template_request(10 + generation, app, scene, op, big_list(generation)))
            codes.append(result_code(phone, 10 + generation))
        check("a phone updates a 0.9 MB list 8 times while one HMI stops reading", codes == [0] * 8, repr(codes))
        os.kill(first, signal.SIGUSR1)
        code = wait_exit(first, 15)
        with manager.lock:
            stored = dict(manager.store)
        check("handover with a peer that does not read: exit 0, the others stored",
              code == 0 and sorted(stored) == ["conn-1", "conn-3", "snapshot"], "exit %r, stored %r" % (code, sorted(stored)))
        before = len(manager.messages)
        names = ["unix"] + sorted(stored)
        second = start_daemon(binary, workdir, [listen.fileno()] + [stored[n] for n in sorted(stored)], names, env, log)
        manager.wait(lambda f: f.get("READY") == "1", since=before)
        with manager.lock:
            for name in list(manager.store):
                os.close(manager.store.pop(name))
        # The stalled HMI reads at last: what was written to it, then EOF, never a Goodbye.
        frames, goodbye = 0, False
        stalled.sock.settimeout(20)
        try:
            while True:
                envelope = stalled.receive_envelope()
                frames += 1
                goodbye = goodbye or huclient.ENVELOPE_GOODBYE in envelope
        except huclient.Closed:
            pass
        except OSError:
            pass
        check("the HMI that did not read gets what was written to it, then EOF, no Goodbye", not goodbye and frames > 0,
              "%d frames, goodbye=%r" % (frames, goodbye))
        phone.send(huclient.KIND_MESSAGE, template_request(30, app, scene, 17, big_list(99, items=3)))
        check("the phone carries on with the new process", result_code(phone, 30) == 0)
        left = [line for line in open(log).read().splitlines() if "handed over" in line and "closed=1" in line]
        check("the old process logged one peer closed", bool(left), open(log).read()[-1500:])
    finally:
        stop.set()
        for conn in conns:
            conn.close()
        for pid in (first, second):
            if pid:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                wait_exit(pid, 15)
        manager.close()
        listen.close()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(sys.argv[1])
    runs = [
        lambda b, w: handover_run(b, w),
        lambda b, w: tls_resume_run(b, w),
        lambda b, w: sigusr1_without_store_run(b, w),
        lambda b, w: undrained_run(b, w),
        lambda b, w: maximal_run(b, w),
        lambda b, w: bad_state_run(b, w, b"\xff\xff not a snapshot", "could not restore"),
        lambda b, w: bad_state_run(b, w, None, "without a snapshot"),
        # DaemonSnapshot{format: 2}: a snapshot from another version of the daemon.
        lambda b, w: bad_state_run(b, w, b"\x08\x02", "snapshot format 2"),
        lambda b, w: oversized_snapshot_run(b, w),
    ]
    with tempfile.TemporaryDirectory(prefix="hu-fdstore.") as workdir:
        for number, run in enumerate(runs):
            if os.environ.get("HU_ONLY") and str(number) != os.environ["HU_ONLY"]:
                continue
            rundir = os.path.join(workdir, "run%d" % number)
            os.mkdir(rundir)
            with open(os.path.join(rundir, "config.json"), "w") as f:
                f.write("{}\n")
            run(binary, rundir)
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 0 if RESULTS["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
