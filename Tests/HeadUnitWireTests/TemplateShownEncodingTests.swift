import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// The car encodes a template request's OK answer from its values
/// (`TemplateShownAnswer.envelope`); the bytes must be swift-protobuf's for
/// the same envelope, byte for byte, for every value a field can take.
@Suite struct TemplateShownEncodingTests {
    static let strings = ["", "a", "list-1", "café 🚗", String(repeating: "x", count: 127), String(repeating: "y", count: 300)]
    static let numbers: [UInt32] = [0, 1, 127, 128, 16_383, 16_384, UInt32.max]

    @Test func theBytesAreSwiftProtobufsForEveryValue() throws {
        for templateID in Self.strings {
            for requestID in Self.numbers {
                for depth in Self.numbers {
                    for (shown, total) in [(0, 0), (12, 12), (12, 300), (UInt32.max, UInt32.max), (0, 5)] as [(UInt32, UInt32)] {
                        let answer = TemplateShownAnswer(templateID: templateID, depth: depth, itemsShown: shown, itemsTotal: total)
                        var envelope = HUEnvelope()
                        envelope.requestID = requestID
                        envelope.result = answer.result
                        let expected: [UInt8] = try envelope.serializedBytes()
                        #expect(answer.envelope(requestID: requestID) == expected, "\(requestID) \(templateID) \(depth) \(shown) \(total)")
                    }
                }
            }
        }
    }

    @Test func theyDecodeToTheAnswer() throws {
        let bytes = TemplateShownAnswer(templateID: "t", depth: 3, itemsShown: 12, itemsTotal: 40).envelope(requestID: 9)
        let envelope = try HUEnvelope(serializedBytes: bytes)
        #expect(envelope.requestID == 9)
        #expect(envelope.result.code == .ok)
        #expect(envelope.result.templateShown.templateID == "t" && envelope.result.templateShown.depth == 3)
        #expect(envelope.result.templateShown.itemsShown == 12 && envelope.result.templateShown.itemsTotal == 40)
    }
}
