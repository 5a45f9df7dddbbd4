import CFuzzMain
import HeadUnitCore
import HeadUnitWire
import NIOCore
import SwiftProtobuf

/// libFuzzer entry. Each input is used two ways:
/// 1. as a byte stream for the frame parser, parsed whole and again in two
///    pieces split where the input's first byte says (the results must agree),
///    with the default maximum and a tiny one;
/// 2. as one Envelope payload, as if it arrived in a MESSAGE frame.
/// Every Envelope that decodes is re-encoded and decoded again (the bytes must
/// be stable), and small ones also go through the text and JSON forms.
/// 3. The stream's frames then drive a whole car session (SessionFuzz.swift).
/// Any disagreement is a crash, which libFuzzer keeps as a reproducer;
/// `HeadUnitFuzz crash-file` replays it outside fuzz builds.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    // Round-trip families against swift-protobuf, HEADUNIT_FUZZ_FAMILY=codec-<kind> (CodecFuzz.swift).
    if let kind = CodecFuzz.selected {
        CodecFuzz.run(kind, bytes)
        return 0
    }
    // One target per message family (FamilyFuzz.swift), chosen by HEADUNIT_FUZZ_FAMILY.
    if FuzzFamily.selected != .stream {
        FuzzFamily.selected.run(bytes)
        return 0
    }
    let input = ByteBuffer(bytes: bytes)

    let whole = FuzzChecks.parseStream(input, maxPayload: 1 << 20)
    if size > 0 {
        let split = Int(bytes[0]) % (size + 1)
        let pieces = FuzzChecks.parseInTwo(input, at: split, maxPayload: 1 << 20)
        FuzzChecks.expectSameFrames(whole, pieces, "split at \(split)")
    }
    // A small maximum reaches FRAME_TOO_LARGE without megabyte inputs.
    _ = FuzzChecks.parseStream(input, maxPayload: 16)

    for frame in whole.frames where frame.header.kind == .message {
        FuzzChecks.envelope(frame.payload)
    }
    FuzzChecks.envelope(input)

    SessionFuzz.run(whole.frames)
    return 0
}

enum FuzzChecks {
    struct Parsed {
        var frames: [Frame]
        var error: FramingError?
    }

    static func parseStream(_ input: ByteBuffer, maxPayload: UInt32) -> Parsed {
        var buffer = input
        var frames: [Frame] = []
        do {
            while let frame = try FrameParser.parse(&buffer, maxPayload: maxPayload) {
                check(frame.payload.readableBytes == Int(frame.header.length), "payload length matches the header")
                check(frame.header.length <= maxPayload, "no frame over the maximum")
                frames.append(frame)
            }
        } catch {
            return Parsed(frames: frames, error: error)
        }
        // The parser stops only when it needs more: less than a header, or a partial payload.
        if buffer.readableBytes >= FrameHeader.size {
            let length = buffer.getInteger(at: buffer.readerIndex + 8, as: UInt32.self)!
            check(buffer.readableBytes < FrameHeader.size + Int(length), "parser stopped before a whole frame")
        }
        return Parsed(frames: frames, error: nil)
    }

    static func parseInTwo(_ input: ByteBuffer, at split: Int, maxPayload: UInt32) -> Parsed {
        var buffer = input.getSlice(at: input.readerIndex, length: split)!
        var frames: [Frame] = []
        do {
            while let frame = try FrameParser.parse(&buffer, maxPayload: maxPayload) { frames.append(frame) }
            buffer.writeImmutableBuffer(input.getSlice(at: input.readerIndex + split, length: input.readableBytes - split)!)
            while let frame = try FrameParser.parse(&buffer, maxPayload: maxPayload) { frames.append(frame) }
        } catch {
            return Parsed(frames: frames, error: error)
        }
        return Parsed(frames: frames, error: nil)
    }

    static func expectSameFrames(_ a: Parsed, _ b: Parsed, _ context: @autoclosure () -> String) {
        check(a.error == b.error, "same framing error, \(context())")
        check(a.frames.count == b.frames.count, "same frame count, \(context())")
        for (x, y) in zip(a.frames, b.frames) {
            check(x.header == y.header && x.payload == y.payload, "same frames, \(context())")
        }
    }

    /// Decode; for what decodes: binary, text and JSON round trips.
    static func envelope(_ payload: ByteBuffer) {
        guard let decoded = try? EnvelopeCodec.decode(payload) else { return }

        // Binary: encode, frame, parse, decode, encode again: the same bytes both times.
        var framed = ByteBuffer()
        EnvelopeCodec.writeFrame(decoded, into: &framed)
        let encoded = framed.getSlice(at: framed.readerIndex + FrameHeader.size, length: framed.readableBytes - FrameHeader.size)!
        let frame: Frame?
        do {
            frame = try FrameParser.parse(&framed, maxPayload: .max)
        } catch {
            fail("re-encoded envelope does not frame: \(error)")
        }
        guard let frame, frame.header.kind == .message, framed.readableBytes == 0 else {
            fail("re-encoded envelope is not exactly one MESSAGE frame")
        }
        let again: HUEnvelope
        do {
            again = try EnvelopeCodec.decode(frame.payload)
        } catch {
            fail("re-encoded envelope does not decode: \(error)")
        }
        check(again.requestID == decoded.requestID && (again.body == nil) == (decoded.body == nil), "request id and body survive")
        var reencoded = ByteBuffer()
        EnvelopeCodec.writeFrame(again, into: &reencoded)
        reencoded.moveReaderIndex(forwardBy: FrameHeader.size)
        check(reencoded == encoded, "binary round trip is stable")

        // Text and JSON cost more; small envelopes cover their code paths.
        guard payload.readableBytes <= 2048 else { return }
        var textOptions = TextFormatEncodingOptions()
        textOptions.printUnknownFields = false  // the text form cannot carry them back
        let text = decoded.textFormatString(options: textOptions)
        do {
            let fromText = try HUEnvelope(textFormatString: text)
            check(fromText.textFormatString(options: textOptions) == text, "text round trip is stable")
        } catch {
            fail("own text form does not parse: \(error)\n\(text)")
        }
        let json: String
        do {
            json = try decoded.jsonString()
        } catch {
            // The JSON mapping refuses some values the binary form carries (e.g. out-of-range
            // timestamps); not the case in this schema, but not a wire bug either.
            return
        }
        do {
            let fromJSON = try HUEnvelope(jsonString: json)
            check(try fromJSON.jsonString() == json, "JSON round trip is stable")
        } catch {
            fail("own JSON form does not parse: \(error)\n\(json)")
        }
    }

    static func check(_ condition: @autoclosure () throws -> Bool, _ what: @autoclosure () -> String) {
        let holds: Bool
        do { holds = try condition() } catch { holds = false }
        if !holds { fail(what()) }
    }

    static func fail(_ what: String) -> Never {
        fatalError("fuzz check failed: \(what)")
    }
}
