import Foundation
import NIOCore
import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// Every vector in Protocol/vectors/vectors.json through the parser and codec:
/// the frames, the decoded envelopes, the re-encoded bytes and the outcome the
/// vector states (PROTOCOL.md's validation order, restated in `Reference`).
@Suite struct VectorTests {
    static let vectors = VectorFile.shared.vectors

    @Test func fileIsWellFormed() {
        #expect(VectorFile.shared.protocol_version == ProtocolVersion.maximum)
        #expect(VectorFile.shared.default_max_payload_bytes == 1_048_576)
        #expect(Self.vectors.count >= 40)
        #expect(Set(Self.vectors.map(\.name)).count == Self.vectors.count, "vector names are unique")
    }

    @Test(arguments: vectors)
    func parserYieldsTheStatedFrames(_ vector: Vector) throws {
        let (frames, error, rest) = Reference.parseAll(vector.buffer, maxPayload: vector.max_payload_bytes)
        try #require(frames.count == vector.frames.count)
        for (frame, expected) in zip(frames, vector.frames) {
            #expect(frame.header.kindByte == expected.kind_byte)
            #expect(frame.header.flags == expected.flags)
            #expect(frame.header.channel == expected.channel)
            #expect(frame.header.length == expected.length)
            #expect(Hex.encode(frame.payload.readableBytesView) == expected.payload_hex)
            #expect((frame.header.kind.map { "\($0)".uppercased() } ?? String(format: "0x%02x", expected.kind_byte)) == expected.kind)
        }
        #expect(error.map { Reference.name(of: $0.code) } == vector.framing_error)
        #expect((error == nil && rest > 0) == vector.incomplete)
        if error == nil && !vector.incomplete { #expect(rest == 0) }
    }

    @Test(arguments: vectors)
    func envelopesDecodeToTheStatedMessage(_ vector: Vector) throws {
        let (frames, _, _) = Reference.parseAll(vector.buffer, maxPayload: vector.max_payload_bytes)
        for (frame, expected) in zip(frames, vector.frames) {
            if expected.malformed == true {
                #expect(throws: EnvelopeCodec.DecodeError.self) { try EnvelopeCodec.decode(frame.payload) }
                continue
            }
            guard let text = expected.envelope else { continue }
            let decoded = try EnvelopeCodec.decode(frame.payload)
            let stated = try HUEnvelope(textFormatString: text)
            if expected.unknown_fields == true {
                // Unknown fields are skipped, not kept (PROTOCOL.md 4.4): the
                // message is the stated one, and it re-encodes without them.
                #expect(decoded == stated)
                var out = ByteBuffer()
                EnvelopeCodec.writeFrame(decoded, into: &out)
                #expect(Array(out.readableBytesView.dropFirst(FrameHeader.size)) == stated.wireBytes())
                continue
            } else {
                #expect(decoded == stated)
                // The JSON mapping round-trips too (what a JSON-speaking tool would see).
                #expect(try HUEnvelope(jsonString: decoded.jsonString()) == decoded)
            }
            // Re-encoding gives the same payload bytes, and the same frame when the header was clean.
            var out = ByteBuffer()
            EnvelopeCodec.writeFrame(decoded, into: &out)
            #expect(Hex.encode(out.readableBytesView.dropFirst(FrameHeader.size)) == expected.payload_hex)
            if expected.flags == 0 && expected.channel == 0 {
                var wire = ByteBuffer()
                wire.writeFrame(kind: .message, payload: frame.payload)
                #expect(out == wire)
            }
        }
    }

    @Test(arguments: vectors.filter { $0.framing_error == nil && !$0.incomplete })
    func reencodingTheFramesGivesTheSameBytes(_ vector: Vector) {
        let (frames, _, _) = Reference.parseAll(vector.buffer, maxPayload: vector.max_payload_bytes)
        var out = ByteBuffer()
        for frame in frames {
            out.writeFrameHeader(frame.header)
            out.writeImmutableBuffer(frame.payload)
        }
        #expect(out == vector.buffer)
    }

    @Test(arguments: vectors)
    func sameFramesWhateverTheReadBoundaries(_ vector: Vector) {
        let bytes = vector.bytes
        let whole = Reference.parseAll(ByteBuffer(bytes: bytes), maxPayload: vector.max_payload_bytes)
        for split in 0...bytes.count {
            let pieces = Reference.parseInPieces([Array(bytes[..<split]), Array(bytes[split...])], maxPayload: vector.max_payload_bytes)
            #expect(pieces.frames.map(Reference.wire) == whole.frames.map(Reference.wire), "split at \(split)")
            #expect(pieces.error == whole.error, "split at \(split)")
        }
        // And one byte at a time.
        let bytewise = Reference.parseInPieces(bytes.map { [$0] }, maxPayload: vector.max_payload_bytes)
        #expect(bytewise.frames.map(Reference.wire) == whole.frames.map(Reference.wire))
        #expect(bytewise.error == whole.error)
    }

    @Test(arguments: vectors.filter { $0.from == "client" })
    func outcomeIsTheStatedOne(_ vector: Vector) throws {
        let (frames, error, _) = Reference.parseAll(vector.buffer, maxPayload: vector.max_payload_bytes)
        let outcome = Reference.outcome(frames: frames, framingError: error, vector: vector)
        #expect(Reference.name(of: outcome.code) == vector.expect.code)
        #expect(outcome.fatal == vector.expect.fatal)
        if !outcome.fatal && outcome.code != .ok {
            #expect(outcome.requestID == (vector.expect.request_id ?? 0))
        }
        if outcome.code != .ok {
            // Fatal errors arrive in Goodbye (then close), the others in a Result.
            #expect(vector.expect.reply == (outcome.fatal ? "Goodbye" : "Result"))
        }
    }

    @Test(arguments: vectors.filter { $0.from == "daemon" })
    func daemonFramesAreClean(_ vector: Vector) throws {
        #expect(vector.framing_error == nil && !vector.incomplete)
        for frame in vector.frames {
            // DATA frames carry session bytes on their session's channel; everything else is a clean MESSAGE.
            if frame.kind == "DATA" {
                #expect(frame.flags == 0 && frame.channel != 0 && frame.envelope == nil)
            } else {
                #expect(frame.flags == 0 && frame.channel == 0 && frame.envelope != nil)
            }
        }
    }
}

/// PROTOCOL.md's rules restated independently of the daemon's state machine,
/// to check that the vectors say what the document says.
enum Reference {
    static let knownFieldsOnly: TextFormatEncodingOptions = {
        var options = TextFormatEncodingOptions()
        options.printUnknownFields = false
        return options
    }()

    static func name(of code: HUErrorCode) -> String {
        var result = HUResult()
        result.code = code
        // Text format names the enum value: `code: ERROR_CODE_...`.
        let text = result.textFormatString().trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "ERROR_CODE_OK" : String(text.dropFirst("code: ".count))
    }

    static func wire(_ frame: Frame) -> [UInt8] {
        var out = ByteBuffer()
        out.writeFrameHeader(frame.header)
        out.writeImmutableBuffer(frame.payload)
        return Array(out.readableBytesView)
    }

    /// Parses until the parser needs more bytes or gives up. `rest` is what is left unread.
    static func parseAll(_ buffer: ByteBuffer, maxPayload: UInt32) -> (frames: [Frame], error: FramingError?, rest: Int) {
        var buffer = buffer
        var frames: [Frame] = []
        do {
            while let frame = try FrameParser.parse(&buffer, maxPayload: maxPayload) { frames.append(frame) }
        } catch {
            return (frames, error, buffer.readableBytes)
        }
        return (frames, nil, buffer.readableBytes)
    }

    /// As a decoder sees a stream: each piece appended to what is left, then parsed.
    static func parseInPieces(_ pieces: [[UInt8]], maxPayload: UInt32) -> (frames: [Frame], error: FramingError?) {
        var buffer = ByteBuffer()
        var frames: [Frame] = []
        for piece in pieces {
            buffer.writeBytes(piece)
            do {
                while let frame = try FrameParser.parse(&buffer, maxPayload: maxPayload) { frames.append(frame) }
            } catch {
                return (frames, error)
            }
        }
        return (frames, nil)
    }

    struct Outcome {
        var code: HUErrorCode
        var fatal: Bool
        var requestID: UInt32 = 0
    }

    /// The first error the frames provoke, in PROTOCOL.md's validation order.
    static func outcome(frames: [Frame], framingError: FramingError?, vector: Vector) -> Outcome {
        for frame in frames {
            let outcome = vector.state == "handshake" ? handshake(frame, transport: vector.transport) : established(frame)
            if outcome.code != .ok { return outcome }
        }
        if let framingError { return Outcome(code: framingError.code, fatal: true) }
        return Outcome(code: .ok, fatal: false)
    }

    static func handshake(_ frame: Frame, transport: String) -> Outcome {
        guard frame.header.kind == .message, frame.header.flags == 0, frame.header.channel == 0,
            let envelope = try? EnvelopeCodec.decode(frame.payload),
            case .hello(let hello) = envelope.body
        else { return Outcome(code: .handshakeRequired, fatal: true) }
        guard ProtocolVersion.negotiate(clientMin: hello.minVersion, clientMax: hello.maxVersion) != nil else {
            return Outcome(code: .noCommonVersion, fatal: true)
        }
        switch hello.role {
        case .phone: break
        case .hmi, .cluster, .accessory:
            if transport == "tcp" { return Outcome(code: .roleNotAllowed, fatal: true) }
        case .unspecified, .UNRECOGNIZED:
            return Outcome(code: .roleNotAllowed, fatal: true)
        }
        return Outcome(code: .ok, fatal: false)
    }

    static func established(_ frame: Frame) -> Outcome {
        guard let kind = frame.header.kind else { return Outcome(code: .unknownFrameKind, fatal: false) }
        guard frame.header.flags == 0 else { return Outcome(code: .reservedFlags, fatal: false) }
        if kind != .data && kind != .video && kind != .media && frame.header.channel != 0 { return Outcome(code: .reservedFlags, fatal: false) }
        switch kind {
        case .ping:
            return Outcome(code: frame.payload.readableBytes <= FrameHeader.maxPingPayload ? .ok : .malformedPayload, fatal: false)
        case .pong:
            return Outcome(code: .ok, fatal: false)
        case .data, .media:
            // A vector's state has no External Accessory session or audio stream open (the sender is a phone).
            return Outcome(code: .notConnected, fatal: false)
        case .video:
            // A vector's sender is a phone with no scene: a frame is bad, or on no stream (section 25.4).
            if case .failure = VideoFrameHeader.parse(frame.payload) { return Outcome(code: .badVideoFrame, fatal: false) }
            return Outcome(code: .unknownVideoStream, fatal: false)
        case .message:
            guard let envelope = try? EnvelopeCodec.decode(frame.payload) else {
                return Outcome(code: .malformedPayload, fatal: false)
            }
            switch envelope.body {
            case nil: return Outcome(code: .unknownMessage, fatal: false, requestID: envelope.requestID)
            case .hello: return Outcome(code: .alreadyHandshaken, fatal: false, requestID: envelope.requestID)
            default: return Outcome(code: .ok, fatal: false)
            }
        }
    }
}
