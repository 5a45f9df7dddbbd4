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

/// One frame as it came off the wire.
public struct WireFrame: Sendable {
    public var kind: UInt8
    public var flags: UInt8
    public var channel: UInt32
    public var payload: [UInt8]
}

/// A blocking POSIX stream socket that can send any bytes at all (bad headers,
/// half frames) and reads frames back with short time-outs. Everything the kit
/// knows about the endpoint comes through here: no SDK, no assumptions.
///
/// Envelopes that arrive while a check waits for something else are kept in a
/// backlog, so answers and events may interleave as PROTOCOL.md §4 allows.
public final class WireConnection {
    public let endpoint: ConformanceEndpoint
    let fd: CInt
    let timeoutMs: Int
    private var inbox: [UInt8] = []
    private(set) var sawEOF = false
    private var isClosed = false

    /// Answer the endpoint's PINGs with PONGs while reading (PROTOCOL.md §6).
    var answerPings = true
    /// PING payloads received from the endpoint.
    private(set) var pingsReceived: [[UInt8]] = []
    /// Envelopes read but not yet taken by a check.
    var backlog: [HUEnvelope] = []
    /// Every envelope received, in order (for order checks).
    private(set) var received: [HUEnvelope] = []
    /// Set once a Goodbye was sent or received: nothing more may be sent (§7).
    private(set) var goodbyeSeen = false
    private var nextRequestID: UInt32 = 1
    /// ScreenUpdate.sequence per screen (§12.3), and the gaps found.
    private var lastSequence: [Int: UInt64] = [:]
    private(set) var sequenceProblems: [String] = []
    /// The metadata stream as this connection applied it, one state per update (§19.5).
    var metadataStates: [HUMetadataState] = []
    /// Set by checks of §24 and §25: MEDIA and VIDEO frames are kept in
    /// `streamFrames` instead of failing the read (no other check expects them).
    var keepsStreamFrames = false
    /// MEDIA and VIDEO frames not yet taken, oldest first; at most `maxStreamFrames`
    /// (the oldest dropped), since a watcher of the car's output gets 50 a second.
    private(set) var streamFrames: [WireFrame] = []
    static let maxStreamFrames = 512
    var label: String

    init(endpoint: ConformanceEndpoint, fd: CInt, timeoutMs: Int, label: String) {
        self.endpoint = endpoint
        self.fd = fd
        self.timeoutMs = timeoutMs
        self.label = label
    }

    /// The car's TLS key as this connection saw it (a `tls:` endpoint); pairing binds it (§20.2).
    var carPublicKey: [UInt8] = []

    deinit { close() }

    // MARK: - Connecting

    public static func connect(_ endpoint: ConformanceEndpoint, timeoutMs: Int, label: String = "client") throws -> WireConnection {
        switch endpoint {
        case .unix(let path):
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw CheckFailure("socket: \(errnoText())") }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
                _ = systemClose(fd)
                throw CheckFailure("socket path too long: \(path)")
            }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard result == 0 else {
                let text = errnoText()
                _ = systemClose(fd)
                throw CheckFailure("cannot connect to \(endpoint): \(text)")
            }
            return WireConnection(endpoint: endpoint, fd: fd, timeoutMs: timeoutMs, label: label)
        case .tls(let host, let port):
            // A real TLS 1.3 client (NIOSSL), whose plaintext end the checks
            // read and write like any socket: they still see only frames.
            do {
                let bridged = try TLSBridge.connect(host: host, port: port, timeoutMs: timeoutMs)
                let connection = WireConnection(endpoint: endpoint, fd: bridged.fd, timeoutMs: timeoutMs, label: label)
                connection.carPublicKey = bridged.carPublicKey
                return connection
            } catch {
                throw CheckFailure("cannot connect to \(endpoint): \(error)")
            }
        case .tcp(let host, let port):
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
                throw CheckFailure("cannot resolve \(host)")
            }
            defer { freeaddrinfo(list) }
            var lastError = "no address"
            var info: UnsafeMutablePointer<addrinfo>? = first
            while let current = info {
                let fd = socket(current.pointee.ai_family, current.pointee.ai_socktype, current.pointee.ai_protocol)
                if fd >= 0 {
                    if Glibc.connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 {
                        var one: CInt = 1
                        _ = setsockopt(fd, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
                        return WireConnection(endpoint: endpoint, fd: fd, timeoutMs: timeoutMs, label: label)
                    }
                    lastError = errnoText()
                    _ = systemClose(fd)
                }
                info = current.pointee.ai_next
            }
            throw CheckFailure("cannot connect to \(endpoint): \(lastError)")
        }
    }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = systemClose(fd)
    }

    /// Half-close: the endpoint sees the stream end, we can still read.
    func shutdownWrite() {
        _ = shutdown(fd, Int32(SHUT_WR))
    }

    // MARK: - Sending

    /// Sends bytes as they are. A peer that is gone is an error, never SIGPIPE.
    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw CheckFailure("\(label): send failed: \(errnoText())")
            }
            offset += sent
        }
    }

    static func frameBytes(kind: UInt8, flags: UInt8 = 0, channel: UInt32 = 0, payload: [UInt8], length: UInt32? = nil) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kindByte: kind, flags: flags, channel: channel, length: length ?? UInt32(payload.count)))
        buffer.writeBytes(payload)
        return Array(buffer.readableBytesView)
    }

    static func envelopeBytes(_ envelope: HUEnvelope) -> [UInt8] {
        Array(EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator()).readableBytesView)
    }

    static func envelope(_ body: HUEnvelope.OneOf_Body?, requestID: UInt32) -> HUEnvelope {
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = body
        return envelope
    }

    func sendFrame(kind: UInt8, flags: UInt8 = 0, channel: UInt32 = 0, payload: [UInt8] = []) throws {
        try send(Self.frameBytes(kind: kind, flags: flags, channel: channel, payload: payload))
    }

    func sendFrame(_ kind: FrameKind, flags: UInt8 = 0, channel: UInt32 = 0, payload: [UInt8] = []) throws {
        try sendFrame(kind: kind.rawValue, flags: flags, channel: channel, payload: payload)
    }

    func send(_ body: HUEnvelope.OneOf_Body, requestID: UInt32) throws {
        try send(Self.envelopeBytes(Self.envelope(body, requestID: requestID)))
        if case .goodbye = body { goodbyeSeen = true }
    }

    /// A fresh request id (a counter from 1, as §4 suggests), skipping ones a check used by hand.
    func newRequestID() -> UInt32 {
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    /// Sends a request and waits for the Result that echoes its id.
    @discardableResult
    func request(_ body: HUEnvelope.OneOf_Body, _ what: String, timeoutMs: Int? = nil) throws -> HUResult {
        let id = newRequestID()
        try send(body, requestID: id)
        return try result(for: id, what, timeoutMs: timeoutMs)
    }

    // MARK: - Receiving

    static func nowMs() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) * 1000 + Double(ts.tv_nsec) / 1e6
    }

    /// Waits up to `ms` for more bytes; false on timeout. Sets sawEOF at the end of the stream.
    private func fill(ms: Double) throws -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var ready: CInt
        repeat {
            ready = poll(&pfd, 1, CInt(max(0, ms.rounded(.up))))
        } while ready < 0 && errno == EINTR
        if ready < 0 { throw CheckFailure("\(label): poll failed: \(errnoText())") }
        if ready == 0 { return false }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count <= 0 {
            // A reset is the end of the stream too.
            sawEOF = true
            return true
        }
        inbox.append(contentsOf: chunk[0..<count])
        return true
    }

    /// The next frame; nil when the endpoint closed the stream first; throws
    /// "no answer within N ms" after `timeoutMs` (default: the kit's time-out).
    func readFrame(_ what: String, timeoutMs: Int? = nil) throws -> WireFrame? {
        let limit = Double(timeoutMs ?? self.timeoutMs)
        let deadline = Self.nowMs() + limit
        while true {
            if inbox.count >= FrameHeader.size {
                guard inbox[0] == 0x48, inbox[1] == 0x55 else {
                    throw CheckFailure("\(label): the endpoint sent a frame without the \"HU\" magic (§2): \(hex(Array(inbox.prefix(12))))")
                }
                let length = Int(inbox[8]) << 24 | Int(inbox[9]) << 16 | Int(inbox[10]) << 8 | Int(inbox[11])
                if inbox.count >= FrameHeader.size + length {
                    let channel = UInt32(inbox[4]) << 24 | UInt32(inbox[5]) << 16 | UInt32(inbox[6]) << 8 | UInt32(inbox[7])
                    let frame = WireFrame(kind: inbox[2], flags: inbox[3], channel: channel, payload: Array(inbox[12..<(12 + length)]))
                    inbox.removeFirst(FrameHeader.size + length)
                    return frame
                }
            }
            if sawEOF { return nil }
            let left = deadline - Self.nowMs()
            let filled = left > 0 ? try fill(ms: left) : false
            if !filled {
                throw CheckFailure("\(label): no answer within \(Int(limit)) ms (waiting for \(what))")
            }
        }
    }

    /// Decodes a MESSAGE frame; the endpoint's own frames must be well formed.
    func decode(_ frame: WireFrame) throws -> HUEnvelope {
        do {
            return try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
        } catch {
            throw CheckFailure("\(label): the endpoint sent a MESSAGE that is not an Envelope (§3): \(hex(frame.payload))")
        }
    }

    /// Reads the next envelope off the wire (not the backlog); PINGs are answered,
    /// PONGs skipped. Throws on EOF and on time-out.
    func readEnvelope(_ what: String, timeoutMs: Int? = nil) throws -> HUEnvelope {
        let limit = timeoutMs ?? self.timeoutMs
        let deadline = Self.nowMs() + Double(limit)
        while true {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            guard left > 0, let frame = try readFrame(what, timeoutMs: left) else {
                if sawEOF && inbox.count < FrameHeader.size {
                    throw CheckFailure("\(label): connection closed while waiting for \(what)")
                }
                throw CheckFailure("\(label): no answer within \(limit) ms (waiting for \(what))")
            }
            switch frame.kind {
            case FrameKind.message.rawValue:
                let envelope = try decode(frame)
                note(envelope)
                return envelope
            case FrameKind.ping.rawValue:
                pingsReceived.append(frame.payload)
                if answerPings && !goodbyeSeen { try? sendFrame(.pong, payload: frame.payload) }
            case FrameKind.pong.rawValue:
                continue
            case FrameKind.media.rawValue where keepsStreamFrames, FrameKind.video.rawValue where keepsStreamFrames:
                keep(frame)
            default:
                throw CheckFailure("\(label): the endpoint sent a frame of kind 0x\(String(frame.kind, radix: 16)) while waiting for \(what)")
            }
        }
    }

    private func keep(_ frame: WireFrame) {
        if streamFrames.count >= Self.maxStreamFrames { streamFrames.removeFirst() }
        streamFrames.append(frame)
    }

    /// Takes the first kept MEDIA or VIDEO frame (then the wire's) for which
    /// `match` is true; envelopes read meanwhile go to the backlog.
    func takeStreamFrame(_ what: String, timeoutMs: Int? = nil, _ match: (WireFrame) -> Bool) throws -> WireFrame {
        keepsStreamFrames = true
        let limit = timeoutMs ?? self.timeoutMs
        let deadline = Self.nowMs() + Double(limit)
        while true {
            if let index = streamFrames.firstIndex(where: match) {
                return streamFrames.remove(at: index)
            }
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            if left <= 0 { throw CheckFailure("\(label): no answer within \(limit) ms (waiting for \(what))") }
            guard let frame = try readFrame(what, timeoutMs: left) else {
                throw CheckFailure("\(label): connection closed while waiting for \(what)")
            }
            switch frame.kind {
            case FrameKind.media.rawValue, FrameKind.video.rawValue:
                keep(frame)
            case FrameKind.message.rawValue:
                let envelope = try decode(frame)
                note(envelope)
                if case .goodbye(let goodbye) = envelope.body {
                    throw CheckFailure(expected: what, got: "Goodbye \(name(goodbye.code)) \"\(goodbye.reason)\" on \(label)")
                }
                backlog.append(envelope)
            case FrameKind.ping.rawValue:
                pingsReceived.append(frame.payload)
                if answerPings && !goodbyeSeen { try? sendFrame(.pong, payload: frame.payload) }
            default:
                continue
            }
        }
    }

    /// Forgets the kept MEDIA and VIDEO frames (a check about to count new ones).
    func dropStreamFrames() { streamFrames = [] }

    private func note(_ envelope: HUEnvelope) {
        received.append(envelope)
        if case .goodbye = envelope.body { goodbyeSeen = true }
        if case .screenUpdate(let update) = envelope.body {
            let screen = update.screen.rawValue
            if let last = lastSequence[screen], let problem = Self.sequenceProblem(update, after: last) {
                sequenceProblems.append(problem)
            }
            lastSequence[screen] = update.sequence
        }
    }

    /// §12.3: "a `full` may skip numbers ... **a `full` after skipped numbers is not a gap**"; "Every other
    /// update (`diff`, `spinner_started`, `spinner_stopped`) carries the number after the one before it on
    /// that screen". So a `full` must be above the last number (in order), anything else exactly one above.
    public static func sequenceProblem(_ update: HUScreenUpdate, after last: UInt64) -> String? {
        if case .full? = update.change {
            return update.sequence > last ? nil : "\(update.screen) full at sequence \(update.sequence) after \(last) (out of order)"
        }
        return update.sequence == last &+ 1 ? nil : "\(update.screen) \(changeName(update)) at sequence \(update.sequence) after \(last) (a gap)"
    }

    static func changeName(_ update: HUScreenUpdate) -> String {
        switch update.change {
        case .full?: return "full"
        case .diff?: return "diff"
        case .spinnerStarted?: return "spinner_started"
        case .spinnerStopped?: return "spinner_stopped"
        case nil: return "an update without change"
        }
    }

    /// Takes the first envelope (from the backlog, then the wire) for which
    /// `match` returns a value; everything else stays in the backlog.
    /// A Goodbye while waiting fails the check unless `match` takes it.
    func take<T>(_ what: String, timeoutMs: Int? = nil, _ match: (HUEnvelope) -> T?) throws -> T {
        if let index = backlog.firstIndex(where: { match($0) != nil }) {
            return match(backlog.remove(at: index))!
        }
        let limit = timeoutMs ?? self.timeoutMs
        let deadline = Self.nowMs() + Double(limit)
        while true {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            if left <= 0 { throw CheckFailure("\(label): no answer within \(limit) ms (waiting for \(what))") }
            let envelope: HUEnvelope
            do {
                envelope = try readEnvelope(what, timeoutMs: left)
            } catch let failure as CheckFailure {
                if failure.description.firstRange(of: "no answer within") != nil {
                    throw CheckFailure("\(label): no answer within \(limit) ms (waiting for \(what))")
                }
                throw failure
            }
            if let value = match(envelope) { return value }
            if case .goodbye(let goodbye) = envelope.body {
                throw CheckFailure(expected: what, got: "Goodbye \(name(goodbye.code)) \"\(goodbye.reason)\" on \(label)")
            }
            backlog.append(envelope)
        }
    }

    /// The Result answering request `id` (§4: the request_id is echoed).
    func result(for id: UInt32, _ what: String, timeoutMs: Int? = nil) throws -> HUResult {
        try take("the Result of \(what) (request \(id))", timeoutMs: timeoutMs) { envelope in
            if case .result(let result) = envelope.body, envelope.requestID == id { return result }
            return nil
        }
    }

    /// The next Result, whatever its request id: (request_id, Result).
    func anyResult(_ what: String, timeoutMs: Int? = nil) throws -> (UInt32, HUResult) {
        try take(what, timeoutMs: timeoutMs) { envelope in
            if case .result(let result) = envelope.body { return (envelope.requestID, result) }
            return nil
        }
    }

    /// The Goodbye the endpoint sends before closing (§7).
    func goodbye(_ what: String, timeoutMs: Int? = nil) throws -> HUGoodbye {
        try take(what, timeoutMs: timeoutMs) { envelope in
            if case .goodbye(let goodbye) = envelope.body { return goodbye }
            return nil
        }
    }

    /// Reads until the endpoint closes. Returns the frames that arrived
    /// meanwhile (PINGs not answered: we are leaving); fails when the stream
    /// is still open after the time-out.
    @discardableResult
    func expectCloseFrames(_ what: String, timeoutMs: Int? = nil) throws -> [WireFrame] {
        let limit = timeoutMs ?? self.timeoutMs
        let deadline = Self.nowMs() + Double(limit)
        var seen: [WireFrame] = []
        while true {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            if left <= 0 { throw CheckFailure(expected: what, got: "the connection still open after \(limit) ms") }
            let frame: WireFrame?
            do {
                frame = try readFrame(what, timeoutMs: left)
            } catch let failure as CheckFailure where failure.description.firstRange(of: "no answer within") != nil {
                throw CheckFailure(expected: what, got: "the connection still open after \(limit) ms")
            }
            guard let frame else { return seen }
            if frame.kind == FrameKind.message.rawValue, let envelope = try? decode(frame) { note(envelope) }
            seen.append(frame)
        }
    }

    /// As expectCloseFrames, keeping the envelopes.
    @discardableResult
    func expectClose(_ what: String, timeoutMs: Int? = nil) throws -> [HUEnvelope] {
        try expectCloseFrames(what, timeoutMs: timeoutMs).compactMap { frame in
            frame.kind == FrameKind.message.rawValue ? try? decode(frame) : nil
        }
    }

    /// Reads for `ms` and returns what arrived (envelopes); used where nothing may arrive.
    func quietPeriod(ms: Int) throws -> [HUEnvelope] {
        let deadline = Self.nowMs() + Double(ms)
        var seen: [HUEnvelope] = []
        while true {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            if left <= 0 { return seen }
            do {
                guard let frame = try readFrame("nothing", timeoutMs: left) else { return seen }
                if frame.kind == FrameKind.message.rawValue {
                    let envelope = try decode(frame)
                    note(envelope)
                    seen.append(envelope)
                } else if frame.kind == FrameKind.ping.rawValue {
                    pingsReceived.append(frame.payload)
                    if answerPings && !goodbyeSeen { try? sendFrame(.pong, payload: frame.payload) }
                } else if keepsStreamFrames && (frame.kind == FrameKind.media.rawValue || frame.kind == FrameKind.video.rawValue) {
                    keep(frame)
                }
            } catch let failure as CheckFailure where failure.description.firstRange(of: "no answer within") != nil {
                return seen
            }
        }
    }

    /// PING with `payload`, then the PONG carrying the same bytes (§3, §6).
    /// Results and other envelopes before it go to the backlog.
    func pingRoundTrip(_ payload: [UInt8], _ what: String) throws {
        try sendFrame(.ping, payload: payload)
        let limit = Double(timeoutMs)
        let deadline = Self.nowMs() + limit
        while true {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            guard left > 0, let frame = try readFrame(what, timeoutMs: left) else {
                throw CheckFailure(expected: what, got: sawEOF ? "the connection closed" : "no PONG within \(Int(limit)) ms")
            }
            switch frame.kind {
            case FrameKind.pong.rawValue:
                if frame.payload == payload { return }
                throw CheckFailure(expected: "\(what): PONG \(hex(payload))", got: "PONG \(hex(frame.payload))")
            case FrameKind.ping.rawValue:
                pingsReceived.append(frame.payload)
                if answerPings { try sendFrame(.pong, payload: frame.payload) }
            case FrameKind.message.rawValue:
                let envelope = try decode(frame)
                note(envelope)
                if case .goodbye(let goodbye) = envelope.body {
                    throw CheckFailure(expected: what, got: "Goodbye \(name(goodbye.code)) \"\(goodbye.reason)\"")
                }
                backlog.append(envelope)
            case FrameKind.media.rawValue where keepsStreamFrames, FrameKind.video.rawValue where keepsStreamFrames:
                keep(frame)
            default:
                throw CheckFailure(expected: what, got: "a frame of kind 0x\(String(frame.kind, radix: 16))")
            }
        }
    }

    /// The connection still serves: a PING is answered (§6).
    func requireAlive(_ why: String) throws {
        try pingRoundTrip([0xC0, 0x4F, 0x0A], "the connection to go on after \(why) (PING answered)")
    }

    /// Orderly close (§7): Goodbye OK, then wait for the endpoint to close its side.
    func leave() {
        if isClosed { return }
        if !goodbyeSeen && !sawEOF {
            var goodbye = HUGoodbye()
            goodbye.code = .ok
            goodbye.reason = "conformance check done"
            try? send(.goodbye(goodbye), requestID: 0)
        }
        shutdownWrite()
        if !sawEOF { _ = try? expectClose("close", timeoutMs: max(timeoutMs, 1000)) }
        close()
    }
}

func errnoText() -> String { String(cString: strerror(errno)) }

func systemClose(_ fd: CInt) -> CInt { Glibc.close(fd) }

func hex(_ bytes: [UInt8]) -> String {
    if bytes.isEmpty { return "(empty)" }
    let shown = bytes.prefix(48).map { byte -> String in
        let text = String(byte, radix: 16)
        return text.count == 1 ? "0" + text : text
    }.joined(separator: " ")
    return bytes.count > 48 ? shown + " ... (\(bytes.count) bytes)" : shown
}
