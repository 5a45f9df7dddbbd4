import NIOCore

/// Encoding and decoding of the envelope carried by MESSAGE frames, with the
/// one codec (`WireMessage`, generated from the .proto files).
public enum EnvelopeCodec {
    public enum DecodeError: Error, Sendable {
        /// The payload is not a valid `HUEnvelope` (PROTOCOL.md section 4.4).
        case malformed(WireDecodingError)
    }

    public static func decode(_ payload: ByteBuffer) throws(DecodeError) -> HUEnvelope {
        do {
            // Read in place from the slice: no copy of the payload bytes.
            return try HUEnvelope(wire: payload)
        } catch {
            throw .malformed(error)
        }
    }

    /// Serializes an envelope as one MESSAGE frame appended to `buffer`.
    public static func writeFrame(_ envelope: HUEnvelope, into buffer: inout ByteBuffer) {
        var writer = WireWriter()
        writeFrame(envelope, into: &buffer, using: &writer)
    }

    /// As `writeFrame(_:into:)`, encoding in `writer` (emptied first): a
    /// writer kept for frame after frame, so a frame allocates nothing.
    public static func writeFrame(_ envelope: HUEnvelope, into buffer: inout ByteBuffer, using writer: inout WireWriter) {
        writer.reuse(keepingAtMost: 64 * 1024)
        envelope.encode(to: &writer)
        writer.withBytes { buffer.writeFrame(kind: .message, payload: $0) }
    }

    /// `envelope` as one MESSAGE frame, in a buffer allocated once at its size.
    public static func frame(_ envelope: HUEnvelope, allocator: ByteBufferAllocator) -> ByteBuffer {
        var writer = WireWriter()
        return frame(envelope, allocator: allocator, using: &writer)
    }

    /// As `frame(_:allocator:)`, encoding in `writer` (emptied first; see
    /// `writeFrame(_:into:using:)`).
    public static func frame(_ envelope: HUEnvelope, allocator: ByteBufferAllocator, using writer: inout WireWriter) -> ByteBuffer {
        writer.reuse(keepingAtMost: 64 * 1024)
        envelope.encode(to: &writer)
        return writer.withBytes { payload in
            var buffer = allocator.buffer(capacity: FrameHeader.size + payload.count)
            buffer.writeFrame(kind: .message, payload: payload)
            return buffer
        }
    }
}

/// The protocol versions this build speaks. A client offers a range; the
/// highest version in both ranges is chosen.
public enum ProtocolVersion {
    public static let minimum: UInt32 = 1
    public static let maximum: UInt32 = 1

    /// The highest version in both ranges, or nil when they do not overlap.
    public static func negotiate(clientMin: UInt32, clientMax: UInt32) -> UInt32? {
        let low = max(clientMin, minimum)
        let high = min(clientMax, maximum)
        return low <= high ? high : nil
    }
}
