import HeadUnitClient
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// External Accessory sessions under load (issue 9): `megabytes` through one
/// session each way at once, checksummed at both ends, while a second session
/// on another protocol answers small round trips; beside it, the same bytes
/// through a bare Unix socket pair on this machine.
struct AccessoryBench {
    let endpoint: HeadUnitEndpoint
    let megabytes: Int
    static let bulkProtocol = "com.openmotors.performance"
    static let echoProtocol = "com.openmotors.climate"

    struct Report {
        var sessionSeconds: Double
        var rawSeconds: Double
        var intact: Bool
        var echoRTTs: [Double]
    }

    func run() async throws -> Report {
        let bulkECU = try await AccessoryPeer.connect(to: endpoint, name: "bench performance ECU")
        try await bulkECU.serve([Self.bulkProtocol])
        let echoECU = try await AccessoryPeer.connect(to: endpoint, name: "bench climate ECU")
        try await echoECU.serve([Self.echoProtocol])
        Task { for await stream in echoECU.sessions { Task { for try await bytes in stream { try await stream.write(bytes) } } } }

        let phone = try await PhoneSession.connect(to: endpoint, deviceName: "bench accessory phone")
        let apps = [("com.example.laps", Self.bulkProtocol), ("com.example.comfort", Self.echoProtocol)].map { app in
            HUAppInfo.with { $0.appID = app.0; $0.displayName = app.0; $0.entitlements = ["com.apple.developer.carplay-protocols"]; $0.accessoryProtocols = [app.1] }
        }
        _ = try await phone.announce(apps)
        let echo = try await phone.openAccessorySession(appID: "com.example.comfort", protocol: Self.echoProtocol)
        let bulk = try await phone.openAccessorySession(appID: "com.example.laps", protocol: Self.bulkProtocol)
        var accessorySide: AccessoryStream?
        for await stream in bulkECU.sessions { accessorySide = stream; break }
        guard let accessorySide else { throw Failure("the accessory got no session") }

        let total = megabytes << 20
        let clock = ContinuousClock()
        let start = clock.now
        // Meanwhile, the other session: one byte there and back every 5 ms.
        let echoing = Task { await Self.echoRoundTrips(echo, clock: clock) }
        async let phoneToCar = Self.pump(total, seed: 1, into: bulk)
        async let carToPhone = Self.pump(total, seed: 2, into: accessorySide)
        async let atAccessory = Self.drain(total, from: accessorySide)
        async let atPhone = Self.drain(total, from: bulk)
        let (sentUp, sentDown, gotUp, gotDown) = try await (phoneToCar, carToPhone, atAccessory, atPhone)
        let sessionSeconds = Self.seconds(clock.now - start)
        echoing.cancel()
        let rtts = await echoing.value
        let intact = sentUp == gotUp && sentDown == gotDown

        await phone.close()
        await bulkECU.close()
        await echoECU.close()
        return Report(sessionSeconds: sessionSeconds, rawSeconds: try Self.rawSocketPair(total), intact: intact, echoRTTs: rtts)
    }

    /// `megabytes` from the accessory to the phone through one session whose
    /// reader grants credit back every `grantBytes` (18.5's advice: 16 KiB),
    /// so tens of thousands of grants a second, far over the request rate:
    /// they must not be refused (issue 25). Returns (seconds, bytes received, intact).
    func streamWithSmallGrants(grantBytes: Int) async throws -> (Double, Int, Bool) {
        let ecu = try await AccessoryPeer.connect(to: endpoint, name: "bench grants ECU")
        try await ecu.serve([Self.bulkProtocol])
        let phone = try await PhoneSession.connect(to: endpoint, deviceName: "bench grants phone")
        _ = try await phone.announce([HUAppInfo.with {
            $0.appID = "com.example.grants"; $0.displayName = "Grants"; $0.entitlements = ["com.apple.developer.carplay-protocols"]
            $0.accessoryProtocols = [Self.bulkProtocol]
        }])
        let reader = try await phone.openAccessorySession(appID: "com.example.grants", protocol: Self.bulkProtocol)
        await reader.grant(every: grantBytes)
        var writer: AccessoryStream?
        for await stream in ecu.sessions { writer = stream; break }
        guard let writer else { throw Failure("the accessory got no session") }
        let total = megabytes << 20
        let clock = ContinuousClock()
        let start = clock.now
        async let sent = Self.pump(total, seed: 3, into: writer)
        async let got = Self.drain(total, from: reader)
        let (a, b) = try await (sent, got)
        let seconds = Self.seconds(clock.now - start)
        await phone.close()
        await ecu.close()
        return (seconds, total, a == b)
    }

    /// Writes `total` bytes in 64 KiB writes; returns their FNV-1a hash.
    static func pump(_ total: Int, seed: UInt64, into stream: AccessoryStream) async throws -> UInt64 {
        var hash = WordFNV()
        var block = [UInt8](repeating: 0, count: 64 << 10)
        var sent = 0, index: UInt64 = 0
        while sent < total {
            // Each block starts with its index and the seed: reordering or repeats change the hash.
            withUnsafeBytes(of: (index ^ seed << 48).bigEndian) { block.replaceSubrange(0..<8, with: $0) }
            block.withUnsafeBytes { hash.add($0) }
            try await stream.write(block)
            sent += block.count
            index += 1
        }
        return hash.value
    }

    static func drain(_ total: Int, from stream: AccessoryStream) async throws -> UInt64 {
        var hash = WordFNV()
        var received = 0
        for try await bytes in stream {
            bytes.withUnsafeReadableBytes { hash.add($0) }
            received += bytes.readableBytes
            if received >= total { break }
        }
        return hash.value
    }

    /// FNV-1a over the stream's 64-bit little-endian words (a partial word
    /// carried over to the next buffer, the tail byte by byte at the end):
    /// eight times fewer steps than per byte, still order-sensitive, and the
    /// same however the stream is cut into frames.
    struct WordFNV {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var carry: UInt64 = 0
        var carried = 0

        mutating func add(_ bytes: UnsafeRawBufferPointer) {
            var offset = 0
            while carried > 0, carried < 8, offset < bytes.count {
                carry |= UInt64(bytes[offset]) << (8 * UInt64(carried))
                carried += 1
                offset += 1
            }
            if carried == 8 {
                hash = (hash ^ carry) &* 0x100_0000_01b3
                carry = 0
                carried = 0
            }
            while offset + 8 <= bytes.count {
                hash = (hash ^ UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) &* 0x100_0000_01b3
                offset += 8
            }
            while offset < bytes.count {
                carry |= UInt64(bytes[offset]) << (8 * UInt64(carried))
                carried += 1
                offset += 1
            }
        }

        var value: UInt64 { carried == 0 ? hash : (hash ^ carry ^ UInt64(carried) << 56) &* 0x100_0000_01b3 }
    }

    /// Round trips (microseconds) on the echo session until cancelled.
    static func echoRoundTrips(_ echo: AccessoryStream, clock: ContinuousClock) async -> [Double] {
        var samples: [Double] = []
        var iterator = echo.makeAsyncIterator()
        var round = 0
        while !Task.isCancelled {
            let start = clock.now
            do {
                try await echo.write([UInt8(truncatingIfNeeded: round)])
                _ = try await iterator.next()
                samples.append(seconds(clock.now - start) * 1e6)
                try await Task.sleep(nanoseconds: 5_000_000)
            } catch {
                break
            }
            round += 1
        }
        return samples
    }

    /// The floor: the same bytes each way through a bare AF_UNIX socket pair, two threads.
    static func rawSocketPair(_ total: Int) throws -> Double {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw Failure("socketpair failed") }
        defer { close(fds[0]); close(fds[1]) }
        let clock = ContinuousClock()
        let start = clock.now
        var threads: [pthread_t] = []
        for (fd, write) in [(fds[0], true), (fds[1], false), (fds[1], true), (fds[0], false)] {
            let context = Unmanaged.passRetained(RawJob(fd: fd, write: write, total: total)).toOpaque()
            var thread = pthread_t()
            pthread_create(&thread, nil, { context in
                let job = Unmanaged<RawJob>.fromOpaque(context!).takeRetainedValue()
                job.run()
                return nil
            }, context)
            threads.append(thread)
        }
        for thread in threads { pthread_join(thread, nil) }
        return seconds(clock.now - start)
    }

    final class RawJob {
        let fd: Int32, write: Bool, total: Int
        init(fd: Int32, write: Bool, total: Int) { self.fd = fd; self.write = write; self.total = total }
        func run() {
            var buffer = [UInt8](repeating: 7, count: 64 << 10)
            var done = 0
            while done < total {
                let count = buffer.withUnsafeMutableBytes { raw in
                    self.write ? Glibc.write(fd, raw.baseAddress, min(raw.count, total - done)) : Glibc.read(fd, raw.baseAddress, min(raw.count, total - done))
                }
                if count <= 0 { return }
                done += count
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
