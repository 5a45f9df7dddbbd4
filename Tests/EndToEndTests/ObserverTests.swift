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
}
