import HeadUnitSecurity
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One frame as read off the wire by the raw test client.
public struct RawFrame: Sendable, Equatable {
    public var kind: UInt8
    public var flags: UInt8
    public var channel: UInt32
    public var payload: [UInt8]

    public init(kind: UInt8, flags: UInt8, channel: UInt32, payload: [UInt8]) {
        self.kind = kind
        self.flags = flags
        self.channel = channel
        self.payload = payload
    }
}

public enum RawClientError: Error, CustomStringConvertible {
    case system(String, CInt)
    case timedOut(String)
    case closed(String)
    case unexpected(String)

    public var description: String {
        switch self {
        case .system(let what, let code): return "\(what): \(String(cString: strerror(code)))"
        case .timedOut(let what): return "timed out waiting for \(what)"
        case .closed(let what): return "connection closed while waiting for \(what)"
        case .unexpected(let what): return "unexpected: \(what)"
        }
    }
}

/// A deliberately dumb blocking POSIX client that can send any bytes at all
/// (garbage, bad headers, half frames) and read frames back with a timeout.
/// For black-box tests of the daemon over real sockets: the tests' one raw
/// protocol client (helpers such as RecordingPeer and ScreenFollower wrap it).
public final class RawSocketClient {
    public let fd: CInt
    /// TCP (TLS): the key the car presented in the TLS handshake.
    public private(set) var carPublicKey: [UInt8] = []
    private var inbox: [UInt8] = []
    public private(set) var sawEOF = false

    private init(fd: CInt) {
        self.fd = fd
    }

    deinit { close() }

    private var isClosed = false
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = Glibc.close(fd)
    }

    // MARK: - Connecting

    public static func unix(_ path: String) throws -> RawSocketClient {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawClientError.system("socket", errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            _ = Glibc.close(fd)
            throw RawClientError.system("connect \(path)", code)
        }
        return RawSocketClient(fd: fd)
    }

    /// The daemon's TCP listener speaks TLS 1.3 only: the raw frames go
    /// through a real TLS connection (TLSBridge), `from` a given local address
    /// when set (per-source pairing limits).
    public static func tcp(
        host: String = "127.0.0.1", port: Int, from source: String? = nil, pinnedCarKey: [UInt8]? = nil, serverName: String? = nil,
        timeoutMs: Int = 5_000
    ) throws -> RawSocketClient {
        let connection = try TLSBridge.connect(
            host: host, port: port, pinnedCarKey: pinnedCarKey, serverName: serverName, from: source, timeoutMs: timeoutMs)
        let client = RawSocketClient(fd: connection.fd)
        client.carPublicKey = connection.carPublicKey
        return client
    }

    /// A plain TCP connection, no TLS: what an attacker or an old client
    /// sends; `from` another 127.x.y.z on loopback, so tests can play several
    /// hosts of a network.
    public static func plainTCP(host: String = "127.0.0.1", port: Int, from source: String? = nil) throws -> RawSocketClient {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawClientError.system("socket", errno) }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            guard inet_pton(AF_INET, source, &local.sin_addr) == 1 else {
                _ = Glibc.close(fd)
                throw RawClientError.unexpected("bad IPv4 address \(source)")
            }
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let code = errno
                _ = Glibc.close(fd)
                throw RawClientError.system("bind \(source)", code)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw RawClientError.unexpected("bad IPv4 address \(host)") }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            _ = Glibc.close(fd)
            throw RawClientError.system("connect \(host):\(port)", code)
        }
        var one: CInt = 1
        _ = setsockopt(fd, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
        return RawSocketClient(fd: fd)
    }

    // MARK: - Sending

    /// Sends bytes as they are. Never raises SIGPIPE: a closed peer is an error.
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw RawClientError.system("send", errno)
            }
            offset += sent
        }
    }

    public static func frameBytes(kind: UInt8, flags: UInt8 = 0, channel: UInt32 = 0, payload: [UInt8], length: UInt32? = nil) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kindByte: kind, flags: flags, channel: channel, length: length ?? UInt32(payload.count)))
        buffer.writeBytes(payload)
        return Array(buffer.readableBytesView)
    }

    public func sendFrame(kind: UInt8, flags: UInt8 = 0, channel: UInt32 = 0, payload: [UInt8] = []) throws {
        try send(Self.frameBytes(kind: kind, flags: flags, channel: channel, payload: payload))
    }

    public func sendFrame(_ kind: FrameKind, flags: UInt8 = 0, channel: UInt32 = 0, payload: [UInt8] = []) throws {
        try sendFrame(kind: kind.rawValue, flags: flags, channel: channel, payload: payload)
    }

    public static func envelopeBytes(_ envelope: HUEnvelope) -> [UInt8] {
        Array(EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator()).readableBytesView)
    }

    public func send(_ envelope: HUEnvelope) throws {
        try send(Self.envelopeBytes(envelope))
    }

    public func send(_ body: HUEnvelope.OneOf_Body, requestID: UInt32 = 0) throws {
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = body
        try send(envelope)
    }

    public static func hello(role: HURole, name: String = "e2e", minVersion: UInt32 = 1, maxVersion: UInt32 = 1) -> HUEnvelope.OneOf_Body {
        var hello = HUHello()
        hello.role = role
        hello.name = name
        hello.minVersion = minVersion
        hello.maxVersion = maxVersion
        return .hello(hello)
    }

    /// Sends Hello and waits for Welcome.
    @discardableResult
    public func handshake(role: HURole, name: String = "e2e", timeout: Double = 30) throws -> HUWelcome {
        try send(Self.hello(role: role, name: name))
        let envelope = try readEnvelope(timeout: timeout)
        guard case .welcome(let welcome) = envelope.body else {
            throw RawClientError.unexpected("expected Welcome, got \(envelope)")
        }
        return welcome
    }

    // MARK: - Receiving

    /// Waits up to `timeout` seconds for more bytes. False on EOF.
    private func fill(timeout: Double, what: String) throws -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, CInt(max(0, timeout * 1000)))
        if ready < 0 {
            if errno == EINTR { return try fill(timeout: timeout, what: what) }
            throw RawClientError.system("poll", errno)
        }
        if ready == 0 { throw RawClientError.timedOut(what) }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 {
            if errno == ECONNRESET { sawEOF = true; return false }
            throw RawClientError.system("recv", errno)
        }
        if count == 0 { sawEOF = true; return false }
        inbox.append(contentsOf: chunk[0..<count])
        return true
    }

    /// The next frame, or nil when the daemon closed the connection first.
    public func readFrame(timeout: Double = 30) throws -> RawFrame? {
        let deadline = Self.now() + timeout
        while true {
            if inbox.count >= FrameHeader.size {
                let magic = UInt16(inbox[0]) << 8 | UInt16(inbox[1])
                guard magic == FrameHeader.magic else { throw RawClientError.unexpected("daemon sent bad magic \(magic)") }
                let length = Int(inbox[8]) << 24 | Int(inbox[9]) << 16 | Int(inbox[10]) << 8 | Int(inbox[11])
                if inbox.count >= FrameHeader.size + length {
                    let channel = UInt32(inbox[4]) << 24 | UInt32(inbox[5]) << 16 | UInt32(inbox[6]) << 8 | UInt32(inbox[7])
                    let frame = RawFrame(kind: inbox[2], flags: inbox[3], channel: channel, payload: Array(inbox[12..<(12 + length)]))
                    inbox.removeFirst(FrameHeader.size + length)
                    return frame
                }
            }
            if sawEOF { return nil }
            let left = deadline - Self.now()
            if left <= 0 { throw RawClientError.timedOut("a frame") }
            if try !fill(timeout: left, what: "a frame") {
                if inbox.isEmpty { return nil }
            }
        }
    }

    /// The next envelope; PING and PONG frames in between are skipped.
    public func readEnvelope(timeout: Double = 30) throws -> HUEnvelope {
        let deadline = Self.now() + timeout
        while true {
            guard let frame = try readFrame(timeout: max(0, deadline - Self.now())) else {
                throw RawClientError.closed("an envelope")
            }
            switch FrameKind(rawValue: frame.kind) {
            case .message:
                return try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
            case .ping, .pong:
                continue
            case .video, .media:
                // A watched screen's base view (section 25), the car's output to
                // a watcher (24.7): tests of video and audio read frames themselves.
                continue
            case .data, .none:
                throw RawClientError.unexpected("frame kind \(frame.kind)")
            }
        }
    }

    /// Reads until a Result arrives (skipping other envelopes) and returns it.
    public func readResult(timeout: Double = 30) throws -> (requestID: UInt32, result: HUResult) {
        let deadline = Self.now() + timeout
        while true {
            let envelope = try readEnvelope(timeout: max(0, deadline - Self.now()))
            switch envelope.body {
            case .result(let result): return (envelope.requestID, result)
            case .goodbye(let goodbye): throw RawClientError.unexpected("Goodbye \(goodbye.code): \(goodbye.reason)")
            default: continue
            }
        }
    }

    /// Reads until Goodbye (skipping other envelopes), then checks the daemon closes.
    public func readGoodbye(timeout: Double = 30) throws -> HUGoodbye {
        let deadline = Self.now() + timeout
        while true {
            let envelope = try readEnvelope(timeout: max(0, deadline - Self.now()))
            if case .goodbye(let goodbye) = envelope.body {
                return goodbye
            }
        }
    }

    /// Discards whatever arrives until the daemon closes; false on timeout.
    public func waitForClose(timeout: Double = 30) -> Bool {
        let deadline = Self.now() + timeout
        do {
            while try readFrame(timeout: max(0, deadline - Self.now())) != nil {}
            return true
        } catch RawClientError.timedOut {
            return false
        } catch {
            // Anything else (reset, garbage) also means the connection is gone or unusable.
            return true
        }
    }

    /// PING with a payload, and the matching PONG back: proves the connection (and daemon) serve.
    public func pingRoundTrip(_ payload: [UInt8] = [1, 2, 3, 4], timeout: Double = 30) throws -> Bool {
        try sendFrame(.ping, payload: payload)
        let deadline = Self.now() + timeout
        while true {
            guard let frame = try readFrame(timeout: max(0, deadline - Self.now())) else { return false }
            if frame.kind == FrameKind.pong.rawValue, frame.payload == payload { return true }
        }
    }

    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
