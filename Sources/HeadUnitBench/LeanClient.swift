import HeadUnitWire
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// The load client that is not the bottleneck (issue 30): one thread, one
/// non-blocking socket, `poll`, every request frame encoded before the clock
/// starts. A request is its pre-encoded envelope body with the request id
/// put in front (protobuf fields may come in any order, and a message is the
/// concatenation of its fields, so `08 <varint id>` + body is the same
/// envelope the SDK would send, field order aside). An answer is recognized
/// by its first field, the request id, without decoding the rest; a `Result`
/// (body field 5) with a non-zero code counts as an error. Everything else
/// (the app's lifecycle events) is skipped by its header's length.
///
/// The same frames go to the floor (which echoes each one: the echo carries
/// the same request id) and to the daemon (which answers it), so the ratio
/// compares the servers. The SDK's per-request work (envelope encoding,
/// decoding every frame, futures, its event mailbox) is not on this path.
/// Setup (Hello, announcing the app, launching it from an HMI, the root
/// template) goes through the full codec: it is not measured.
final class LeanClient {
    private let fd: Int32
    /// Bytes read and not yet consumed: `input[inputStart..<inputEnd]`.
    private var input: UnsafeMutableRawBufferPointer
    private var inputStart = 0, inputEnd = 0
    private var nextRequestID: UInt32 = 10

    private init(fd: Int32) {
        self.fd = fd
        self.input = .allocate(byteCount: 4 << 20, alignment: 8)
    }

    deinit {
        close(fd)
        input.deallocate()
    }

    static func connect(unixPath: String) throws -> LeanClient {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(unixPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { close(fd); throw Failure("socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.enumerated() { raw[i] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        guard connected else { let e = errno; close(fd); throw Failure("connect \(unixPath): errno \(e)") }
        // Non-blocking: the measured loop writes and reads in one thread; waits are `poll`s.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return LeanClient(fd: fd)
    }

    // MARK: setup (full codec, not measured)

    /// The body of an envelope without its request id: what the measured loop sends, the id put in front.
    static func body(_ body: HUEnvelope.OneOf_Body) -> [UInt8] {
        var envelope = HUEnvelope()
        envelope.body = body
        let frame = EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator())
        return frame.getBytes(at: frame.readerIndex + FrameHeader.size, length: frame.readableBytes - FrameHeader.size) ?? []
    }

    /// Sends `body` with a fresh request id and returns the answer's envelope
    /// (frames before it are decoded and passed to `other`).
    func call(_ body: HUEnvelope.OneOf_Body, other: (HUEnvelope) -> Void = { _ in }) throws -> HUEnvelope {
        let id = nextRequestID
        nextRequestID += 1
        var envelope = HUEnvelope()
        envelope.requestID = id
        envelope.body = body
        let frame = EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator())
        try frame.withUnsafeReadableBytes { try writeAll($0) }
        while true {
            let received = try readEnvelope()
            if received.requestID == id { return received }
            other(received)
        }
    }

    /// The next MESSAGE frame, decoded (PINGs answered on the way).
    func readEnvelope() throws -> HUEnvelope {
        while true {
            let (kind, start, length) = try nextFrame(blocking: true)!
            if kind == FrameKind.ping.rawValue { try pong(start: start, length: length); continue }
            guard kind == FrameKind.message.rawValue else { continue }
            var buffer = ByteBufferAllocator().buffer(capacity: length)
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: input[start..<start + length]))
            return try EnvelopeCodec.decode(buffer)
        }
    }

    func hello(role: HURole, name: String) throws {
        var hello = HUHello()
        hello.minVersion = ProtocolVersion.minimum
        hello.maxVersion = ProtocolVersion.maximum
        hello.role = role
        hello.name = name
        let answer = try call(.hello(hello))
        guard case .welcome = answer.body else { throw Failure("no Welcome: \(answer)") }
    }

    /// On the daemon: announce `app`, launch it from a throwaway HMI, wait
    /// for its scene and set its root template. Returns the scene id.
    func setUpApp(_ app: HUAppInfo, unixPath: String, root: HUTemplate) throws -> UInt32 {
        var announce = HUAnnounceApps()
        announce.deviceName = "lean-phone"
        announce.apps = [app]
        let decided = try call(.announceApps(announce))
        guard decided.result.code == .ok, decided.result.appDecisions.decisions.first?.accepted == true else {
            throw Failure("the daemon refused the lean client's app: \(decided)")
        }
        let hmi = try LeanClient.connect(unixPath: unixPath)
        try hmi.hello(role: .hmi, name: "lean-setup-hmi")
        var launch = HULaunchApp()
        launch.appID = app.appID
        let launched = try hmi.call(.launchApp(launch))
        guard launched.result.code == .ok else { throw Failure("launch refused: \(launched)") }
        var scene: UInt32?
        while scene == nil {
            let event = try readEnvelope()
            if case .sceneConnected(let connected) = event.body, connected.appID == app.appID { scene = connected.sceneID }
        }
        var request = HUTemplateRequest()
        request.appID = app.appID
        request.sceneID = scene!
        request.op = .setRoot(root)
        let set = try call(.templateRequest(request))
        guard set.result.code == .ok else { throw Failure("setRoot refused: \(set)") }
        return scene!
    }

    // MARK: the measured loop

    /// Sends `bodies[i % bodies.count]` for i = 0, 1, ... keeping `window`
    /// requests in flight, until `count` are answered or `seconds` pass.
    /// Returns each request's round trip in nanoseconds (in send order) and the errors.
    func run(bodies: [[UInt8]], window: Int, count: Int?, seconds: Double?) throws -> (samples: [Int64], elapsed: Double, errors: Int) {
        // Every request frame ready before the clock starts: header, `08 <id>`, body.
        // Ids are patched in place (5-byte maximal varint space reserved; the
        // frame is re-headed with its real length per send).
        let maxFrame = (bodies.map(\.count).max() ?? 0) + FrameHeader.size + 6
        // The last `pongRoom` bytes take PONGs only (queued after what is being written, see below).
        let pongRoom = 4096
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: maxFrame * window * 2 + pongRoom, alignment: 8)
        defer { output.deallocate() }
        var outputStart = 0, outputEnd = 0
        let ringSize = 1 << 16
        var sentAt = [Int64](repeating: 0, count: ringSize)
        var samples: [Int64] = []
        samples.reserveCapacity(count ?? 1 << 20)
        var sent = 0, answered = 0, errors = 0
        let firstID = nextRequestID
        let started = monotonicNanoseconds()
        let deadline = seconds.map { started + Int64($0 * 1e9) }
        var sending = true

        func appendRequest(_ index: Int) {
            let body = bodies[index % bodies.count]
            let id = firstID &+ UInt32(truncatingIfNeeded: index)
            var cursor = outputEnd + FrameHeader.size
            output[cursor] = 0x08
            cursor += 1
            var v = id
            while v >= 0x80 { output[cursor] = UInt8(v & 0x7f) | 0x80; v >>= 7; cursor += 1 }
            output[cursor] = UInt8(v)
            cursor += 1
            body.withUnsafeBytes { output.baseAddress!.advanced(by: cursor).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            cursor += body.count
            let length = UInt32(cursor - outputEnd - FrameHeader.size)
            let header: [UInt8] = [0x48, 0x55, FrameKind.message.rawValue, 0, 0, 0, 0, 0,
                                   UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
            for i in 0..<FrameHeader.size { output[outputEnd + i] = header[i] }
            outputEnd = cursor
        }

        while true {
            // Top the window up.
            if sending {
                if let count, sent >= count { sending = false }
                if let deadline, monotonicNanoseconds() >= deadline { sending = false }
            }
            if sending && sent - answered < window {
                if outputStart == outputEnd { outputStart = 0; outputEnd = 0 }
                let now = monotonicNanoseconds()
                while sent - answered < window && outputEnd + maxFrame <= output.count - pongRoom && (count.map { sent < $0 } ?? true) {
                    appendRequest(sent)
                    sentAt[sent & (ringSize - 1)] = now
                    sent += 1
                }
            }
            if !sending && answered == sent { break }
            var wrote = false
            if outputStart < outputEnd {
                let n = write(fd, output.baseAddress! + outputStart, outputEnd - outputStart)
                if n > 0 { outputStart += n; wrote = true } else if n < 0 && errno != EAGAIN && errno != EINTR { throw Failure("write: errno \(errno)") }
            }
            // Answers: the first field of each MESSAGE frame is its request id.
            // Wait for one only when nothing is left to write; then take what is there.
            var block = outputStart == outputEnd && sent > answered
            var progress = wrote
            while let (kind, start, length) = try nextFrame(blocking: block) {
                block = false
                progress = true
                if kind == FrameKind.ping.rawValue {
                    // Queued after what is being written: a request frame may be half written (a
                    // large list), and a PONG written at once would land inside it.
                    let pong = FrameHeader.size + length
                    if outputEnd + pong <= output.count {
                        let header: [UInt8] = [0x48, 0x55, FrameKind.pong.rawValue, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(length)]
                        for i in 0..<FrameHeader.size { output[outputEnd + i] = header[i] }
                        for i in 0..<length { output[outputEnd + FrameHeader.size + i] = input[start + i] }
                        outputEnd += pong
                    }
                    continue
                }
                guard kind == FrameKind.message.rawValue, length > 1, input[start] == 0x08 else { continue }
                var cursor = start + 1
                let id = UInt32(truncatingIfNeeded: readVarint(&cursor))
                guard id != 0 else { continue }
                let index = Int(id &- firstID)
                guard index >= 0 && index < sent else { continue }
                // A Result (field 5, length-delimited) whose code (its field 1) is set is an error.
                if cursor + 2 < start + length && input[cursor] == 0x2a {
                    cursor += 1
                    _ = readVarint(&cursor)
                    if cursor < start + length && input[cursor] == 0x08 {
                        cursor += 1
                        if readVarint(&cursor) != 0 { errors += 1 }
                    }
                }
                samples.append(monotonicNanoseconds() - sentAt[index & (ringSize - 1)])
                answered += 1
            }
            // Neither side could move (the server reads slower than we write): wait for either.
            if !progress && outputStart < outputEnd { try waitFor(Int16(POLLIN | POLLOUT)) }
        }
        nextRequestID = firstID &+ UInt32(truncatingIfNeeded: sent)
        return (samples, Double(monotonicNanoseconds() - started) / 1e9, errors)
    }

    private func readVarint(_ cursor: inout Int) -> UInt64 {
        var value: UInt64 = 0, shift: UInt64 = 0
        while cursor < inputEnd && shift < 64 {
            let byte = input[cursor]
            cursor += 1
            value |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { break }
            shift += 7
        }
        return value
    }

    private func pong(start: Int, length: Int) throws {
        var frame: [UInt8] = [0x48, 0x55, FrameKind.pong.rawValue, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(length)]
        frame += input[start..<start + length]
        try frame.withUnsafeBytes { try writeAll($0) }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN { try waitFor(Int16(POLLOUT)); continue }
            throw Failure("write: errno \(errno)")
        }
    }

    private func waitFor(_ events: Int16) throws {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        let n = poll(&entry, 1, -1)
        if n < 0 && errno != EINTR { throw Failure("poll: errno \(errno)") }
    }

    /// The next whole frame in `input` as (kind, payload start, payload length),
    /// reading more when needed: blocking, or nil when nothing whole is there.
    /// The frame's bytes stay valid until the next call.
    private func nextFrame(blocking: Bool) throws -> (UInt8, Int, Int)? {
        while true {
            let available = inputEnd - inputStart
            if available >= FrameHeader.size {
                let length = Int(input[inputStart + 8]) << 24 | Int(input[inputStart + 9]) << 16 | Int(input[inputStart + 10]) << 8 | Int(input[inputStart + 11])
                guard input[inputStart] == 0x48, input[inputStart + 1] == 0x55, length + FrameHeader.size <= input.count else {
                    throw Failure("bad frame from the server")
                }
                if available >= FrameHeader.size + length {
                    let kind = input[inputStart + 2]
                    let start = inputStart + FrameHeader.size
                    inputStart += FrameHeader.size + length
                    return (kind, start, length)
                }
            }
            // Room for more: move what is left to the front (frames already returned are done with).
            if inputStart > 0 && (inputEnd == input.count || inputStart == inputEnd || inputStart > input.count / 2) {
                let rest = inputEnd - inputStart
                if rest > 0 { input.baseAddress!.copyMemory(from: input.baseAddress! + inputStart, byteCount: rest) }
                inputStart = 0
                inputEnd = rest
            }
            let n = read(fd, input.baseAddress! + inputEnd, input.count - inputEnd)
            if n > 0 { inputEnd += n; continue }
            if n == 0 { throw Failure("the server closed the connection") }
            if errno == EINTR { continue }
            guard errno == EAGAIN else { throw Failure("read: errno \(errno)") }
            if !blocking { return nil }
            try waitFor(Int16(POLLIN))
        }
    }
}

func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// CPU time of the calling thread, microseconds.
func threadCPUMicroseconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return Double(now.tv_sec) * 1e6 + Double(now.tv_nsec) / 1e3
}

/// What the lean client measured against one server.
struct LeanResult {
    var rttP50: Double, rttP99: Double, rttP999: Double
    var rttCount: Int
    /// Server CPU (user + system, /proc/PID/stat) per request: the RTT run, then the pipelined run.
    var serverCPU: Double?, pipelinedServerCPU: Double?
    /// The lean client's own thread CPU per request over the RTT run.
    var clientCPU: Double
    var pipelinedPerSecond: Double
    var pipelinedP50: Double, pipelinedP99: Double
    var errors: Int
}

extension HeadUnitBench {
    /// The lean client against the server on `unixPath` (pid `serverPID`):
    /// `warmup` then `requests` push/pop round trips, one at a time, then
    /// `seconds` of `inFlight` pipelined updates of the root list. With
    /// `daemon` it sets up its own app first ("com.example.lean"); against
    /// the floor the same frames are echoed. Runs on a thread of its own.
    func measureLean(unixPath: String, serverPID: pid_t, daemon: Bool) async throws -> LeanResult {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        defer { pool.shutdownGracefully { _ in } }
        let (warmup, requests, items, inFlight, seconds) = (self.warmup & ~1, max(2, self.requests & ~1), self.items, self.inFlight, self.seconds)
        let root = HeadUnitBench.listTemplate(id: "root", items: items, tag: 0)
        let pushedTemplate = HeadUnitBench.listTemplate(id: "pushed", items: items, tag: 1)
        let variants = (0..<items).map { HeadUnitBench.listTemplate(id: "root", items: items, tag: $0) }
        return try await pool.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.any()) { () throws -> LeanResult in
            let client = try LeanClient.connect(unixPath: unixPath)
            try client.hello(role: .phone, name: "lean-phone")
            let appID = "com.example.lean"
            var scene: UInt32 = 1
            if daemon {
                var app = HUAppInfo()
                app.appID = appID
                app.displayName = "Lean"
                app.entitlements = ["com.apple.developer.carplay-audio"]
                scene = try client.setUpApp(app, unixPath: unixPath, root: root)
            }
            func request(_ op: HUTemplateRequest.OneOf_Op) -> [UInt8] {
                var request = HUTemplateRequest()
                request.appID = appID
                request.sceneID = scene
                request.op = op
                return LeanClient.body(.templateRequest(request))
            }
            let pushPop = [request(.push(pushedTemplate)), request(.pop(HUPopTemplate()))]
            let updates = variants.map { request(.update($0)) }

            var errors = try client.run(bodies: pushPop, window: 1, count: warmup, seconds: nil).errors
            let serverBefore = readCPUMicroseconds(pid: serverPID), clientBefore = threadCPUMicroseconds()
            let rtt = try client.run(bodies: pushPop, window: 1, count: requests, seconds: nil)
            let serverAfter = readCPUMicroseconds(pid: serverPID), clientAfter = threadCPUMicroseconds()
            errors += rtt.errors
            let pipelinedBefore = readCPUMicroseconds(pid: serverPID)
            let pipelined = try client.run(bodies: updates, window: inFlight, count: nil, seconds: seconds)
            let pipelinedAfter = readCPUMicroseconds(pid: serverPID)
            errors += pipelined.errors

            func percentile(_ sorted: [Int64], _ p: Double) -> Double {
                sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
            }
            let rttSorted = rtt.samples.sorted(), pipelinedSorted = pipelined.samples.sorted()
            var serverCPU: Double?, pipelinedServerCPU: Double?
            if let serverBefore, let serverAfter { serverCPU = (serverAfter - serverBefore) / Double(rtt.samples.count) }
            if let pipelinedBefore, let pipelinedAfter, !pipelined.samples.isEmpty {
                pipelinedServerCPU = (pipelinedAfter - pipelinedBefore) / Double(pipelined.samples.count)
            }
            return LeanResult(
                rttP50: percentile(rttSorted, 0.5), rttP99: percentile(rttSorted, 0.99), rttP999: percentile(rttSorted, 0.999),
                rttCount: rttSorted.count, serverCPU: serverCPU, pipelinedServerCPU: pipelinedServerCPU,
                clientCPU: (clientAfter - clientBefore) / Double(rtt.samples.count),
                pipelinedPerSecond: Double(pipelined.samples.count) / pipelined.elapsed,
                pipelinedP50: percentile(pipelinedSorted, 0.5), pipelinedP99: percentile(pipelinedSorted, 0.99), errors: errors)
        }.get()
    }

    /// The lean client's table: floor, daemon and the ratios with issue 30's targets.
    func printLean(floor: LeanResult?, daemon: LeanResult) {
        print("")
        print("lean client (one thread, poll, pre-encoded frames; issue 30): floor / headunitd / ratio, same run")
        print(row("measure", "floor / headunitd / ratio"))
        print(row(String(repeating: "-", count: 44), String(repeating: "-", count: 30)))
        func ratio(_ a: Double?, _ b: Double?) -> String {
            guard let a, let b, b > 0 else { return "-" }
            return format1(a / b) + "x"
        }
        func us(_ value: Double?) -> String { value.map { format1($0) + " us" } ?? "-" }
        func line(_ name: String, _ f: Double?, _ d: Double?, _ target: String) {
            print(row(name, "\(us(f)) / \(us(d)) / \(ratio(d, f))\(target.isEmpty ? "" : "  (target \(target))")"))
        }
        line("RTT p50 (push/pop, \(items) items)", floor?.rttP50, daemon.rttP50, "<= 2x")
        line("RTT p99", floor?.rttP99, daemon.rttP99, "<= 3x")
        line("RTT p999", floor?.rttP999, daemon.rttP999, "")
        line("server CPU per push/pop request", floor?.serverCPU, daemon.serverCPU, "<= 3x")
        line("server CPU per pipelined update", floor?.pipelinedServerCPU, daemon.pipelinedServerCPU, "")
        line("client CPU per request (its thread)", floor?.clientCPU, daemon.clientCPU, "")
        let share = floor.map { $0.pipelinedPerSecond > 0 ? "\(Int((daemon.pipelinedPerSecond / $0.pipelinedPerSecond * 100).rounded()))%" : "-" } ?? "-"
        print(row("pipelined msgs/s (\(inFlight) in flight)", "\(floor.map { "\(Int($0.pipelinedPerSecond))" } ?? "-") / \(Int(daemon.pipelinedPerSecond)) / \(share)  (target >= 25%)"))
        line("pipelined round trip p50", floor?.pipelinedP50, daemon.pipelinedP50, "")
        line("pipelined round trip p99", floor?.pipelinedP99, daemon.pipelinedP99, "")
        print(row("errors (floor / headunitd)", "\(floor?.errors ?? 0) / \(daemon.errors)"))
        print(row("requests measured (RTT)", "\(daemon.rttCount)"))
    }
}
