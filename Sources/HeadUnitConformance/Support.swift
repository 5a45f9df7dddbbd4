import HeadUnitWire

#if canImport(Glibc)
import Glibc
#endif

extension WireConnection {
    /// A fatal error (§2, §7, §9): Goodbye with `code` and a readable reason,
    /// then the endpoint closes its side.
    func expectFatal(_ code: HUErrorCode, after why: String) throws {
        let goodbye = try self.goodbye("Goodbye \(name(code)) after \(why)")
        try requireCode(goodbye, code, why)
        try require(!goodbye.reason.isEmpty, "a readable reason in the Goodbye (§7)", got: "an empty reason")
        let after = try expectClose("the endpoint to close after Goodbye \(name(code)) (§7)")
        if let extra = after.first {
            throw CheckFailure(expected: "nothing after the Goodbye (§7)", got: describe(extra))
        }
    }

    /// A non-fatal error (§2, §9): the next Result carries `code`; its request
    /// id is checked when given.
    @discardableResult
    func expectError(_ code: HUErrorCode, requestID: UInt32? = nil, after why: String) throws -> HUResult {
        let (id, result) = try anyResult("Result \(name(code)) after \(why)")
        try requireCode(result, code, why)
        if let requestID {
            try require(id == requestID, "the Result of \(why) with request_id \(requestID) (§4)", got: "request_id \(id)")
        }
        return result
    }

    /// The stream ends without a single MESSAGE (§2: a truncated frame is closed without an answer).
    func expectSilentClose(_ why: String) throws {
        let frames = try expectCloseFrames("the endpoint to close without an answer after \(why)")
        if let message = frames.first(where: { $0.kind == FrameKind.message.rawValue }) {
            let text = (try? decode(message)).map(describe) ?? hex(message.payload)
            throw CheckFailure(expected: "the connection closed without an answer after \(why)", got: text)
        }
    }
}

func sleepMs(_ ms: Int) {
    usleep(useconds_t(ms * 1000))
}

/// Protobuf varint, for the few hand-made payloads.
func varint(_ value: UInt64) -> [UInt8] {
    var value = value
    var out: [UInt8] = []
    repeat {
        var byte = UInt8(value & 0x7F)
        value >>= 7
        if value != 0 { byte |= 0x80 }
        out.append(byte)
    } while value != 0
    return out
}

/// A length-delimited field.
func field(_ number: UInt64, _ bytes: [UInt8]) -> [UInt8] {
    varint(number << 3 | 2) + varint(UInt64(bytes.count)) + bytes
}

/// Hello by hand (§15 shows the bytes): versions, role, name, and any extra fields.
func helloPayload(requestID: UInt32, min: UInt32 = 1, max: UInt32 = 1, role: UInt32 = 1, name: [UInt8] = Array("conformance".utf8), extra: [UInt8] = []) -> [UInt8] {
    let hello = [0x08] + varint(UInt64(min)) + [0x10] + varint(UInt64(max)) + [0x18] + varint(UInt64(role)) + field(4, name) + extra
    return [0x08] + varint(UInt64(requestID)) + field(2, hello)
}

/// A second Hello whose envelope payload is exactly `size` bytes. An
/// unknown Envelope field pads it: a client must ignore fields it does not
/// know (section 14), and strings have their own limit (section 10.3), so
/// the name cannot be the padding.
func helloEnvelope(requestID: UInt32, payloadSize size: Int) -> [UInt8]? {
    let base = helloPayload(requestID: requestID)
    var padding = max(0, size - base.count - 8)
    for _ in 0..<6 {
        let payload = base + field(999, [UInt8](repeating: 0x78, count: padding))
        if payload.count == size { return payload }
        padding += size - payload.count
        if padding < 0 { return nil }
    }
    return nil
}
