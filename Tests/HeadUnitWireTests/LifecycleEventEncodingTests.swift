import NIOCore
import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// The car encodes its template lifecycle events from their values
/// (`LifecycleEventEncoding`); the bytes must be swift-protobuf's for the
/// same envelope, byte for byte, for every value a field can take.
@Suite struct LifecycleEventEncodingTests {
    static let strings = ["", "a", "list-1", "café 🚗", String(repeating: "x", count: 127), String(repeating: "y", count: 300)]
    static let sceneIDs: [UInt32] = [0, 1, 127, 128, 16_383, 16_384, UInt32.max]
    static let phases: [HULifecyclePhase] = HULifecyclePhase.allCases + [.UNRECOGNIZED(42), .UNRECOGNIZED(200_000)]

    /// swift-protobuf's bytes for the event built as messages.
    static func reference(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) throws -> [UInt8] {
        var envelope = HUEnvelope()
        envelope.body = LifecycleEventEncoding.body(appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated)
        return try envelope.serializedBytes()
    }

    @Test func theBytesAreSwiftProtobufsForEveryValue() throws {
        for appID in Self.strings {
            for templateID in Self.strings {
                for sceneID in Self.sceneIDs {
                    for phase in Self.phases {
                        for animated in [false, true] {
                            let encoded = LifecycleEventEncoding.envelope(
                                appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated)
                            let expected = try Self.reference(
                                appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated)
                            #expect(encoded == expected, "\(appID) \(sceneID) \(templateID) \(phase) \(animated)")
                            #expect(encoded.count == LifecycleEventEncoding.size(
                                LifecycleEventEncoding.SceneFields(appID: appID, sceneID: sceneID),
                                templateID: templateID, phase: phase, animated: animated))
                        }
                    }
                }
            }
        }
    }

    @Test func theyDecodeToTheEvent() throws {
        let bytes = LifecycleEventEncoding.envelope(appID: "app", sceneID: 7, templateID: "t", phase: .didAppear, animated: true)
        let envelope = try HUEnvelope(serializedBytes: bytes)
        #expect(envelope.requestID == 0)
        #expect(envelope.appEvent.appID == "app" && envelope.appEvent.sceneID == 7 && envelope.appEvent.templateID == "t")
        #expect(envelope.appEvent.lifecycle.phase == .didAppear && envelope.appEvent.lifecycle.animated)
    }

    /// A batch (`EncodedEnvelopes`) gives back each envelope as appended, in
    /// order, whatever their lengths (a length's every byte is used), each in
    /// the MESSAGE frame the server writes.
    @Test func aBatchGivesBackEachEnvelopeInOrder() throws {
        let envelopes: [[UInt8]] = [[], [1], Array(repeating: 7, count: 255), Array(repeating: 8, count: 256),
                                    (0..<70_000).map { UInt8(truncatingIfNeeded: $0) }, [9, 9]]
        var batch = EncodedEnvelopes()
        #expect(batch.isEmpty && batch.envelopes.isEmpty)
        for envelope in envelopes { batch.append(measured: envelope.count) { $0.bytes(envelope) } }
        #expect(!batch.isEmpty)
        #expect(batch.envelopes == envelopes)
        #expect(batch.frames.count == envelopes.reduce(0) { $0 + FrameHeader.size + $1.count })
        #expect(batch.longestEnvelope == 70_000)
        // Each a MESSAGE frame, as the server writes it.
        var frames = ByteBuffer(bytes: batch.frames)
        for envelope in envelopes {
            let frame = try #require(try FrameParser.parse(&frames, maxPayload: 1 << 20))
            #expect(frame.header.kind == .message && frame.header.channel == 0 && frame.header.flags == 0)
            #expect(Array(frame.payload.readableBytesView) == envelope)
        }
        #expect(frames.readableBytes == 0)
        // A transition's events share one encoding of the scene's fields.
        let fields = LifecycleEventEncoding.SceneFields(appID: "com.example.app", sceneID: 300)
        let events: [(String, HULifecyclePhase)] = [("a", .willDisappear), ("b", .willAppear), ("a", .didDisappear), ("b", .didAppear)]
        var lifecycle = EncodedEnvelopes()
        for (id, phase) in events {
            LifecycleEventEncoding.append(fields, templateID: id, phase: phase, animated: true, to: &lifecycle)
        }
        #expect(lifecycle.envelopes == events.map {
            LifecycleEventEncoding.envelope(appID: "com.example.app", sceneID: 300, templateID: $0.0, phase: $0.1, animated: true)
        })
    }
}
