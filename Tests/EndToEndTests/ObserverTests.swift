import Crypto
import Foundation
import HeadUnitWire
import NIOCore
import Testing

/// Issue 24's observers: backpressure (PROTOCOL.md section 10.2), images sent
/// once (12.6), catch-up from the shared encoding (10.5) and what counts as a
/// gap (12.3), over real sockets against the real daemon.
@Suite("Observers and backpressure")
struct ObserverTests {
    // MARK: - Backpressure (section 10.2)

    /// "A peer that reads is never cut for pipelining valid requests": 3,000
    /// GetStatus pipelined at once (each answer ~20 kB, 60 MB in all, far over
    /// `max_outbound_bytes`) are all answered, in order, while the client
    /// reads; the daemon stops reading the requests while answers wait above
    /// the high-water mark instead. Also with `max_outbound_bytes` 65536. The
    /// request rate is raised: this is about answers in flight, not 10.2's rate.
    @Test(arguments: [UInt64(0), 65536])
    func aPeerThatReadsIsNeverCutForPipelining(maxOutboundBytes: UInt64) async throws {
        try await onOwnThread {
            var limits: [String: UInt64] = ["maxRequestsPerSecond": 1_000_000]
            if maxOutboundBytes > 0 { limits["maxOutboundBytes"] = maxOutboundBytes }
            let daemon = try TestDaemon.launch(limits: limits)
            defer { _ = try? daemon.terminate() }
            // Twenty peers with 1,000-byte names make each status answer ~20 kB.
            var named: [RawSocketClient] = []
            for index in 0..<20 {
                let peer = try daemon.connectUnix()
                try peer.handshake(role: .hmi, name: String(repeating: "n", count: 996) + String(format: "%04d", index))
                named.append(peer)
            }
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            let count = 3000
            var requests: [UInt8] = []
            for id in 1...count {
                requests += RawSocketClient.envelopeBytes(HUEnvelope.with { $0.requestID = UInt32(id); $0.getStatus = HUGetStatus() })
            }
            try hmi.send(requests)
            var answered = 0
            var largest = 0
            while answered < count {
                guard let frame = try hmi.readFrame(timeout: 60) else {
                    Issue.record("closed after \(answered) answers\n\(daemon.log.split(separator: "\n").suffix(10).joined(separator: "\n"))")
                    return
                }
                guard frame.kind == FrameKind.message.rawValue else { continue }
                let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                switch envelope.body {
                case .result(let result):
                    answered += 1
                    #expect(envelope.requestID == UInt32(answered))
                    #expect(result.code == .ok, "\(result.code): \(result.message)")
                    largest = max(largest, frame.payload.count)
                case .goodbye(let goodbye):
                    Issue.record("cut off after \(answered) answers: Goodbye \(goodbye.code) \(goodbye.reason)")
                    return
                default:
                    continue
                }
            }
            #expect(largest > 20_000)
            #expect(try hmi.pingRoundTrip())
            _ = named
        }
    }

    // MARK: - Images once (section 12.6)

    /// A PNG of exactly `bytes` bytes: a valid header (signature, IHDR with
    /// its CRC) for `side` x `side` pixels, then filler that makes each one
    /// distinct (the car reads only the header).
    static func png(side: UInt32, bytes: Int, seed: Int) -> [UInt8] {
        func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)] }
        func crc32(_ data: [UInt8]) -> UInt32 {
            var crc: UInt32 = 0xffff_ffff
            for byte in data {
                crc ^= UInt32(byte)
                for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1 }
            }
            return ~crc
        }
        let ihdr = Array("IHDR".utf8) + be(side) + be(side) + [8, 6, 0, 0, 0]
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be(13) + ihdr + be(crc32(ihdr))
        var filler = UInt32(truncatingIfNeeded: seed &* 2_654_435_761)
        while png.count < bytes {
            filler = filler &* 1_664_525 &+ 1_013_904_223
            png.append(UInt8(filler >> 24))
        }
        return png
    }

    static func hex(_ digest: some Sequence<UInt8>) -> String {
        digest.map { String(format: "%02x", $0) }.joined()
    }

    /// Issue 24's bullet: 64 valid icons of the maximum size (256 KiB each,
    /// 16 MiB in all) used to make a HomeScreen over the frame maximum, dropped
    /// in silence. Now a new HMI gets each icon once as ImageData (before the
    /// HomeScreen that shows it) and a HomeScreen of a few kilobytes naming
    /// them by ref; an HMI connected throughout gets them too. GetImage asks
    /// for one again; an unknown ref is UNKNOWN_IMAGE; an app may not send a ref.
    @Test func sixtyFourIconsOfTheMaximumSizeReachANewHMI() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["maxApps": 65])
            defer { _ = try? daemon.terminate() }
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let early = try daemon.connectUnix()
            try early.handshake(role: .hmi)
            let maxImage = 262_144
            var expected: [String: String] = [:]  // app id -> ref
            var pngs: [String: [UInt8]] = [:]
            // An image given by ref by an app is refused (refs are the car's, for its HMIs).
            var byRef = RequestErrorTests.app("com.example.byref")
            byRef.icon = HUImage.with { $0.ref = String(repeating: "a", count: 64); $0.widthPx = 120; $0.heightPx = 120 }
            let (_, refused) = try RequestErrorTests.announce(phone, [byRef], requestID: 99)
            #expect(refused.appDecisions.decisions.first?.accepted == false, "\(refused)")
            #expect(refused.appDecisions.decisions.first?.code == .invalidArgument, "\(refused)")
            // Three icons per AnnounceApps: 64 in one would be over the 1 MiB frame maximum.
            var request: UInt32 = 1
            for first in stride(from: 0, to: 64, by: 3) {
                let apps = (first..<min(first + 3, 64)).map { index -> HUAppInfo in
                    var app = RequestErrorTests.app(String(format: "com.example.app%02d", index))
                    let png = Self.png(side: 120, bytes: maxImage, seed: index)
                    app.icon = HUImage.with { $0.png = Data(png) }
                    expected[app.appID] = Self.hex(SHA256.hash(data: png))
                    pngs[expected[app.appID]!] = png
                    return app
                }
                let (_, result) = try RequestErrorTests.announce(phone, apps, requestID: request)
                request += 1
                #expect(result.code == .ok, "\(result.code): \(result.message)")
                #expect(result.appDecisions.decisions.allSatisfy { $0.accepted })
            }
            // A new HMI: every image once, before the home screen that shows it.
            for hmi in [try daemon.connectUnix(), early] {
                if hmi !== early { try hmi.handshake(role: .hmi) }
                var received: Set<String> = []
                var home: HUHomeScreen?
                var largest = 0
                while home?.icons.count != 64 {
                    guard let frame = try hmi.readFrame(timeout: 30) else { Issue.record("closed"); return }
                    guard frame.kind == FrameKind.message.rawValue else { continue }
                    largest = max(largest, frame.payload.count)
                    let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                    switch envelope.body {
                    case .imageData(let data):
                        #expect(received.insert(data.ref).inserted, "image \(data.ref) sent twice")
                        #expect(Self.hex(SHA256.hash(data: data.png)) == data.ref)
                        #expect(Array(data.png) == pngs[data.ref])
                    case .homeScreen(let screen):
                        for icon in screen.icons {
                            guard case .ref(let ref) = icon.icon.source else { Issue.record("icon \(icon.appID) not by ref"); continue }
                            #expect(ref == expected[icon.appID])
                            #expect(received.contains(ref), "home screen shows \(ref) before its ImageData")
                            #expect(icon.icon.widthPx == 0 || icon.icon.widthPx == 120)
                        }
                        #expect(frame.payload.count < 16_384, "home screen of \(frame.payload.count) bytes")
                        home = screen
                    case .goodbye(let goodbye):
                        Issue.record("Goodbye \(goodbye.code): \(goodbye.reason)")
                        return
                    default:
                        continue
                    }
                }
                #expect(received == Set(expected.values))
                #expect(largest <= 1_048_576)
            }

            // GetImage: the bytes again; an unknown ref is UNKNOWN_IMAGE.
            let ref = expected["com.example.app07"]!
            try early.send(.getImage(HUGetImage.with { $0.ref = ref }), requestID: 500)
            let (id, again) = try early.readResult(timeout: 10)
            #expect(id == 500)
            #expect(again.code == .ok)
            #expect(again.imageData.ref == ref && Array(again.imageData.png) == pngs[ref])
            try early.send(.getImage(HUGetImage.with { $0.ref = String(repeating: "0", count: 64) }), requestID: 501)
            let (_, unknown) = try early.readResult(timeout: 10)
            #expect(unknown.code == .unknownImage)
            // Only an HMI asks for images.
            try phone.send(.getImage(HUGetImage.with { $0.ref = ref }), requestID: 502)
            #expect(try phone.readResult(timeout: 10).result.code == .notForRole)
        }
    }
}
