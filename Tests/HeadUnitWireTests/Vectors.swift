import Foundation
import NIOCore
import Testing

/// Protocol/vectors/vectors.json, as described in Protocol/vectors/README.md.
/// Read from the source tree (its one copy) rather than a bundled resource.
struct VectorFile: Decodable {
    var protocol_version: UInt32
    var default_max_payload_bytes: UInt32
    var vectors: [Vector]

    static let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // HeadUnitWireTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root
        .appendingPathComponent("Protocol/vectors/vectors.json")

    static let shared: VectorFile = {
        do {
            return try JSONDecoder().decode(VectorFile.self, from: Data(contentsOf: url))
        } catch {
            fatalError("cannot read \(url.path): \(error)")
        }
    }()
}

struct Vector: Decodable, CustomTestStringConvertible {
    struct ExpectedFrame: Decodable {
        var kind: String
        var kind_byte: UInt8
        var flags: UInt8
        var channel: UInt32
        var length: UInt32
        var payload_hex: String
        /// The decoded Envelope in protobuf text format (MESSAGE frames that decode).
        var envelope: String?
        var malformed: Bool?
        var unknown_fields: Bool?
    }

    struct Expectation: Decodable {
        var code: String
        var fatal: Bool
        var reply: String
        var request_id: UInt32?
    }

    var name: String
    var description: String
    var from: String
    var state: String
    var transport: String
    var max_payload_bytes: UInt32
    var hex: String
    var frames: [ExpectedFrame]
    var framing_error: String?
    var incomplete: Bool
    var expect: Expectation

    var bytes: [UInt8] { Hex.decode(hex) }
    var buffer: ByteBuffer { ByteBuffer(bytes: bytes) }
    var testDescription: String { name }
}

enum Hex {
    /// Hex digits to bytes; spaces and the "|" between frames are ignored.
    static func decode(_ text: String) -> [UInt8] {
        let digits = text.unicodeScalars.filter { $0 != " " && $0 != "|" }.map { UInt8(ascii: $0) }
        precondition(digits.count % 2 == 0, "odd number of hex digits")
        func value(_ c: UInt8) -> UInt8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: preconditionFailure("not a hex digit: \(c)")
            }
        }
        return stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }

    static func encode<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}
