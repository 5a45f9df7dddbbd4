import HeadUnitWire
import SwiftProtobuf

/// How the daemon's codec (HeadUnitWire's generated `WireMessage` code) is
/// held to swift-protobuf's: the same bytes are decoded by both, ours with
/// `init(wireBytes:)` and this module's protoc-gen-swift output with
/// `init(serializedBytes:)` discarding unknown fields (PROTOCOL.md section
/// 4.4). Both must take the bytes or both refuse them; what both take must
/// encode to the same bytes (swift-protobuf's deterministic ordering: map
/// entries sorted by key, as ours), our `wireSize` must be the length we
/// write, and what we write must decode to the value it came from.
/// The one check used by the round-trip fuzz families
/// (Sources/HeadUnitFuzz/CodecFuzz.swift) and the tests (CodecOracleTests).
/// Hand-written; the rest of this module is generated (scripts/generate-oracle.sh).
public enum CodecOracle {
    /// A round-trip family: each template kind, and the Envelope.
    public enum Kind: String, CaseIterable, Sendable {
        case list, grid
        case tabBar = "tab-bar"
        case nowPlaying = "now-playing"
        case alert
        case actionSheet = "action-sheet"
        case information
        case pointOfInterest = "point-of-interest"
        case contact, map, search
        case voiceControl = "voice-control"
        case envelope

        /// The kind's field in the `Template` oneof (templates.proto); nil for the Envelope.
        public var templateField: Int? {
            switch self {
            case .list: 10
            case .grid: 11
            case .tabBar: 12
            case .nowPlaying: 13
            case .alert: 14
            case .actionSheet: 15
            case .information: 16
            case .pointOfInterest: 17
            case .contact: 18
            case .map: 19
            case .search: 20
            case .voiceControl: 21
            case .envelope: nil
            }
        }

        /// Checks `input` as this kind's message and, for a template kind, as
        /// a `Template` holding it (its oneof member's field around the bytes).
        /// Returns whether both codecs took the bytes as the kind's message.
        @discardableResult
        public func check(_ input: [UInt8]) throws(CodecDisagreement) -> CodecOutcome {
            let outcome = try checkOwn(input)
            if let field = templateField {
                var wrapped: [UInt8] = []
                appendVarint(UInt64(field << 3 | 2), to: &wrapped)
                appendVarint(UInt64(input.count), to: &wrapped)
                wrapped += input
                let inTemplate = try CodecOracle.check(wrapped, HeadUnitWire.HUTemplate.self, HeadUnitProtobufOracle.HUTemplate.self)
                guard (inTemplate == .refusedByBoth) == (outcome == .refusedByBoth) else {
                    throw CodecDisagreement(message: "HUTemplate", what: "the kind decodes alone but not inside a Template, or the reverse", input: wrapped)
                }
            }
            return outcome
        }

        private func checkOwn(_ input: [UInt8]) throws(CodecDisagreement) -> CodecOutcome {
            switch self {
            case .list: try CodecOracle.check(input, HeadUnitWire.HUListTemplate.self, HeadUnitProtobufOracle.HUListTemplate.self)
            case .grid: try CodecOracle.check(input, HeadUnitWire.HUGridTemplate.self, HeadUnitProtobufOracle.HUGridTemplate.self)
            case .tabBar: try CodecOracle.check(input, HeadUnitWire.HUTabBarTemplate.self, HeadUnitProtobufOracle.HUTabBarTemplate.self)
            case .nowPlaying: try CodecOracle.check(input, HeadUnitWire.HUNowPlayingTemplate.self, HeadUnitProtobufOracle.HUNowPlayingTemplate.self)
            case .alert: try CodecOracle.check(input, HeadUnitWire.HUAlertTemplate.self, HeadUnitProtobufOracle.HUAlertTemplate.self)
            case .actionSheet: try CodecOracle.check(input, HeadUnitWire.HUActionSheetTemplate.self, HeadUnitProtobufOracle.HUActionSheetTemplate.self)
            case .information: try CodecOracle.check(input, HeadUnitWire.HUInformationTemplate.self, HeadUnitProtobufOracle.HUInformationTemplate.self)
            case .pointOfInterest:
                try CodecOracle.check(input, HeadUnitWire.HUPointOfInterestTemplate.self, HeadUnitProtobufOracle.HUPointOfInterestTemplate.self)
            case .contact: try CodecOracle.check(input, HeadUnitWire.HUContactTemplate.self, HeadUnitProtobufOracle.HUContactTemplate.self)
            case .map: try CodecOracle.check(input, HeadUnitWire.HUMapTemplate.self, HeadUnitProtobufOracle.HUMapTemplate.self)
            case .search: try CodecOracle.check(input, HeadUnitWire.HUSearchTemplate.self, HeadUnitProtobufOracle.HUSearchTemplate.self)
            case .voiceControl: try CodecOracle.check(input, HeadUnitWire.HUVoiceControlTemplate.self, HeadUnitProtobufOracle.HUVoiceControlTemplate.self)
            case .envelope: try CodecOracle.check(input, HeadUnitWire.HUEnvelope.self, HeadUnitProtobufOracle.HUEnvelope.self)
            }
        }
    }

    /// Decodes `input` with both codecs and compares as the type's comment says.
    public static func check<Ours: WireMessage, Oracle: SwiftProtobuf.Message>(
        _ input: [UInt8], _ ours: Ours.Type, _ oracle: Oracle.Type
    ) throws(CodecDisagreement) -> CodecOutcome {
        let name = String(describing: Ours.self)
        func disagree(_ what: String) -> CodecDisagreement { CodecDisagreement(message: name, what: what, input: input) }

        let ourResult: Result<Ours, WireDecodingError>
        do throws(WireDecodingError) { ourResult = .success(try Ours(wireBytes: input)) } catch { ourResult = .failure(error) }
        let theirResult: Result<Oracle, any Error>
        do { theirResult = .success(try Oracle(serializedBytes: input, options: decodingOptions)) } catch { theirResult = .failure(error) }

        let value: Ours
        let theirs: Oracle
        switch (ourResult, theirResult) {
        case (.failure, .failure):
            return .refusedByBoth
        case (.success, .failure(let error)):
            throw disagree("ours decodes, swift-protobuf refuses (\(error))")
        case (.failure(let error), .success):
            throw disagree("swift-protobuf decodes, ours refuses (\(error))")
        case (.success(let a), .success(let b)):
            value = a
            theirs = b
        }

        let bytes = value.wireBytes()
        let expected: [UInt8]
        do {
            expected = try theirs.serializedBytes(options: encodingOptions)
        } catch {
            throw disagree("swift-protobuf does not encode what it decoded (\(error))")
        }
        guard bytes == expected else {
            throw disagree("the encodings differ: ours \(hex(bytes)), swift-protobuf \(hex(expected))")
        }
        guard value.wireSize == bytes.count else {
            throw disagree("wireSize \(value.wireSize), but \(bytes.count) bytes written")
        }
        let again: Ours
        do throws(WireDecodingError) {
            again = try Ours(wireBytes: bytes)
        } catch {
            throw disagree("our own encoding does not decode (\(error))")
        }
        guard again.wireBytes() == bytes else {
            throw disagree("decoding our encoding and encoding again changes the bytes")
        }
        // A NaN is not equal to itself, so a value holding one is compared by its bytes (above)
        // only. Whether it holds one is asked of a second decoding: a value compared with
        // itself shares its arrays' storage, which `==` takes as equal without a look.
        let twin = try? Ours(wireBytes: input)
        if twin == value {
            guard again == value else { throw disagree("decoding our encoding gives another value") }
        }
        return .agreed(encodedBytes: bytes.count)
    }

    static let decodingOptions: BinaryDecodingOptions = {
        var options = BinaryDecodingOptions()
        options.discardUnknownFields = true  // PROTOCOL.md 4.4: unknown fields are not kept
        return options
    }()

    static let encodingOptions: BinaryEncodingOptions = {
        var options = BinaryEncodingOptions()
        options.useDeterministicOrdering = true  // map entries sorted by key, as ours
        return options
    }()

    static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}

/// What both codecs made of the bytes.
public enum CodecOutcome: Equatable, Sendable {
    case refusedByBoth
    /// Both decoded; both encodings are these many bytes (and equal).
    case agreed(encodedBytes: Int)
}

/// The codecs disagree: a finding, with the bytes that show it.
public struct CodecDisagreement: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var what: String
    public var input: [UInt8]

    public var description: String { "\(message): \(what); input (\(input.count) bytes) \(hex(input))" }
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    var text = ""
    text.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0xF)])
    }
    return text
}
