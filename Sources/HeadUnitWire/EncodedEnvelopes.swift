/// Envelopes encoded for one peer, in order, kept in one array as the
/// MESSAGE frames they go out in: each a 12-byte frame header, then the
/// envelope's bytes. A push's four lifecycle events are one allocation and
/// one `CarEffect`, not four of each, and the server writes them whole,
/// in one copy, after checking each frame's length (section 10.4).
public struct EncodedEnvelopes: Sendable, Equatable {
    /// The frames, back to back.
    public private(set) var frames: [UInt8] = []

    public init() {}

    public var isEmpty: Bool { frames.isEmpty }

    /// Room for `count` envelopes of `bytes` in all, and their frame headers.
    public mutating func reserveCapacity(envelopeBytes bytes: Int, count: Int) {
        frames.reserveCapacity(bytes + count * FrameHeader.size)
    }

    /// Appends one envelope of `size` bytes, which `write` writes (`ByteWriter`).
    mutating func append(measured size: Int, _ write: (inout ByteWriter) -> Void) {
        ByteWriter.append(FrameHeader.size + size, to: &frames) { writer in
            writer.frameHeader(FrameHeader(kind: .message, length: UInt32(size)))
            write(&writer)
        }
    }

    /// The longest envelope's length (0 when there is none).
    public var longestEnvelope: Int {
        var longest = 0
        forEachLength { longest = max(longest, $1) }
        return longest
    }

    /// Each envelope's bytes, in order.
    public func forEach(_ body: (ArraySlice<UInt8>) throws -> Void) rethrows {
        try forEachLength { start, length in try body(frames[start..<(start + length)]) }
    }

    /// Each envelope's start in `frames` and its length, from its frame header.
    private func forEachLength(_ body: (_ start: Int, _ length: Int) throws -> Void) rethrows {
        var at = 0
        while at < frames.count {
            var length = 0
            for index in 8..<12 { length = length << 8 | Int(frames[at + index]) }
            try body(at + FrameHeader.size, length)
            at += FrameHeader.size + length
        }
    }

    /// The envelopes' bytes, in order (for tests and checks).
    public var envelopes: [[UInt8]] {
        var all: [[UInt8]] = []
        forEach { all.append(Array($0)) }
        return all
    }
}
