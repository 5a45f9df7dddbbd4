import Foundation
import HeadUnitSecurity
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Issue 23's flood with a release client (`--flood-probe`): the HMI's PING
/// round trip on the Unix socket, first alone, then while 8 unauthenticated
/// TLS connections from 8 addresses flood PINGs, PONGs and `Pair`
/// (reconnecting each time they are cut off), against a spawned daemon that
/// requires pairing. `AdmissionSocketTests` runs the same attack from the
/// debug test process, whose own TLS handshakes (BoringSSL unoptimised) load
/// the 2 cores; here the flooders are release code too.
struct FloodProbe {
    var binary: String
    var seconds: Double
    var port: Int

    func run() throws {
        var template = Array("/tmp/headunit-flood.XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template) else { throw Failure("mkdtemp failed") }
        let directory = String(cString: dir)
        let configPath = directory + "/flood-config.json"
        // Pairing required (no allowUnpairedTcp): every flooder stays unauthenticated.
        try "{\"stateDirectory\": \"\(directory)/state\"}\n".write(toFile: configPath, atomically: true, encoding: .utf8)
        let daemon = try SpawnedDaemon.start(
            binary: binary, arguments: ["--unix-socket", "{socket}", "--tcp", "127.0.0.1:\(port)", "--config", configPath])
        defer { daemon.stop() }
        var hmi: FrameSocket?
        for _ in 0..<100 where hmi == nil {
            hmi = try? FrameSocket(unixPath: daemon.socketPath)
            if hmi == nil { usleep(50_000) }
        }
        guard let hmi else { throw Failure("the daemon's socket did not appear (log: \(daemon.logPath))") }
        var hello = HUHello()
        hello.minVersion = 1
        hello.maxVersion = 1
        hello.role = .hmi
        hello.name = "flood-probe"
        var envelope = HUEnvelope()
        envelope.requestID = 1
        envelope.body = .hello(hello)
        try hmi.send(kind: FrameKind.message.rawValue, payload: Self.payload(envelope))
        _ = try hmi.waitFor(kind: FrameKind.message.rawValue, payload: nil)
        usleep(300_000)  // the TCP listener

        // The flood: Hello, then 200 frames of PING, PONG and Pair, in one write.
        func frame(_ kind: UInt8, _ payload: [UInt8]) -> [UInt8] {
            [0x48, 0x55, kind, 0, 0, 0, 0, 0] + withUnsafeBytes(of: UInt32(payload.count).bigEndian) { Array($0) } + payload
        }
        var phoneHello = HUEnvelope()
        phoneHello.requestID = 1
        var helloBody = HUHello()
        helloBody.minVersion = 1
        helloBody.maxVersion = 1
        helloBody.role = .phone
        helloBody.name = "flood"
        phoneHello.body = .hello(helloBody)
        var pair = HUEnvelope()
        pair.requestID = 2
        var pairBody = HUPair()
        pairBody.publicKey = Data(repeating: 7, count: 32)
        pairBody.deviceName = "flood"
        pair.body = .pair(pairBody)
        let pairBytes = frame(FrameKind.message.rawValue, Self.payload(pair))
        var burst = frame(FrameKind.message.rawValue, Self.payload(phoneHello))
        for index in 0..<200 {
            switch index % 3 {
            case 0: burst += frame(FrameKind.ping.rawValue, [1, 2, 3, 4])
            case 1: burst += frame(FrameKind.pong.rawValue, [1, 2, 3, 4])
            default: burst += pairBytes
            }
        }
        let flood = burst

        let idle = try probe(hmi, count: 200)
        let stop = FloodStopFlag()
        let connects = FloodCounter()
        var threads: [Thread] = []
        for index in 0..<8 {
            let thread = Thread { [port] in
                // The attacker's own TLS work runs on another host in a car; here it
                // shares the 2 cores, so it runs at the lowest priority and the cores go
                // to the daemon (which handles every flooding connection) and the probe.
                // (On Linux a nice value is per thread: `who` 0 is this thread alone.)
                setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                while !stop.isSet {
                    guard let connection = try? TLSBridge.connect(host: "127.0.0.1", port: port, from: "127.0.0.\(2 + index)", timeoutMs: 1_000)
                    else { continue }
                    connects.add()
                    _ = flood.withUnsafeBytes { write(connection.fd, $0.baseAddress, $0.count) }
                    // Read until the car closes it (cut off at its 9th frame).
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    var poller = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
                    while poll(&poller, 1, 1_000) == 1, read(connection.fd, &buffer, buffer.count) > 0 {}
                    close(connection.fd)
                }
            }
            thread.start()
            threads.append(thread)
        }
        usleep(500_000)
        let started = Date()
        let flooded = try probe(hmi, count: 400)
        let elapsed = Date().timeIntervalSince(started)
        stop.set()
        usleep(1_200_000)
        func ms(_ sorted: [Double], _ p: Double) -> String { String(format: "%.2f", sorted[Int(Double(sorted.count - 1) * p)] * 1000) }
        print("flood probe (release daemon and flooders, the flooders at nice 19): \(connects.value) connects in \(String(format: "%.1f", elapsed + 0.5)) s")
        print("  HMI PING idle:    p50 \(ms(idle, 0.5)) ms, p99 \(ms(idle, 0.99)) ms")
        print("  HMI PING flooded: p50 \(ms(flooded, 0.5)) ms, p99 \(ms(flooded, 0.99)) ms")
    }

    static func payload(_ envelope: HUEnvelope) -> [UInt8] {
        let frame = EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator())
        return frame.getBytes(at: frame.readerIndex + FrameHeader.size, length: frame.readableBytes - FrameHeader.size) ?? []
    }

    /// `count` PING round trips 5 ms apart, sorted, in seconds.
    func probe(_ hmi: FrameSocket, count: Int) throws -> [Double] {
        var samples: [Double] = []
        for index in 0..<count {
            let payload = withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
            let start = monotonicNanoseconds()
            try hmi.send(kind: FrameKind.ping.rawValue, payload: payload)
            _ = try hmi.waitFor(kind: FrameKind.pong.rawValue, payload: payload)
            samples.append(Double(monotonicNanoseconds() - start) / 1e9)
            usleep(5_000)
        }
        return samples.sorted()
    }
}

final class FloodStopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

final class FloodCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add() { lock.withLock { count += 1 } }
}

/// A blocking Unix socket that reads whole frames and answers the daemon's PINGs.
final class FrameSocket {
    let fd: CInt
    private var inbox: [UInt8] = []

    init(unixPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in unixPath.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw Failure("connect \(unixPath): errno \(errno)")
        }
    }

    deinit { close(fd) }

    func send(kind: UInt8, payload: [UInt8]) throws {
        let bytes = [0x48, 0x55, kind, 0, 0, 0, 0, 0] + withUnsafeBytes(of: UInt32(payload.count).bigEndian) { Array($0) } + payload
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { throw Failure("write: errno \(errno)") }
            offset += written
        }
    }

    /// Reads frames until one of `kind` (with `payload`, if given); answers PINGs on the way.
    func waitFor(kind: UInt8, payload: [UInt8]?) throws -> [UInt8] {
        while true {
            while inbox.count >= 12 {
                let length = inbox[8..<12].reduce(0) { $0 << 8 | Int($1) }
                guard inbox.count >= 12 + length else { break }
                let frameKind = inbox[2]
                let body = Array(inbox[12..<(12 + length)])
                inbox.removeFirst(12 + length)
                if frameKind == FrameKind.ping.rawValue, kind != FrameKind.ping.rawValue { try send(kind: FrameKind.pong.rawValue, payload: body) }
                if frameKind == kind, payload == nil || payload! == body { return body }
            }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { throw Failure("the daemon closed the HMI") }
            inbox += buffer[0..<count]
        }
    }
}
