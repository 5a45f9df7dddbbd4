import NIOCore
import SwiftProtobuf

/// Encoding and decoding of the protobuf envelope carried by MESSAGE frames.
public enum EnvelopeCodec {
    public enum DecodeError: Error, Sendable {
        /// The payload is not a valid protobuf `HUEnvelope`.
        case malformed(String)
    }

    public static func decode(_ payload: ByteBuffer) throws(DecodeError) -> HUEnvelope {
        do {
            // Contiguous view of the slice; no copy of the payload bytes.
            return try payload.withUnsafeReadableBytes { raw in
                try HUEnvelope(serializedBytes: raw)
            }
        } catch {
            throw .malformed("\(error)")
        }
    }

    /// Serializes an envelope as one MESSAGE frame appended to `buffer`.
    public static func writeFrame(_ envelope: HUEnvelope, into buffer: inout ByteBuffer) {
        writeFrame(into: &buffer) { try LinearEncoder.encode(envelope, into: &$0) }
    }

    private static func writeFrame(into buffer: inout ByteBuffer, payload: (inout ByteBuffer) throws -> Int) {
        // The header goes first with a zero length, set once the payload is in:
        // the payload is encoded straight into the buffer, with no copy.
        let headerIndex = buffer.writerIndex
        buffer.writeFrameHeader(FrameHeader(kind: .message, length: 0))
        let length: Int
        do {
            length = try payload(&buffer)
        } catch {
            // Serializing a well-formed proto3 message in memory cannot fail.
            preconditionFailure("envelope serialization failed: \(error)")
        }
        buffer.setInteger(UInt32(length), at: headerIndex + FrameHeader.size - 4)
    }

    /// `envelope` as one MESSAGE frame, in a buffer allocated once at its
    /// size (it is encoded first).
    public static func frame(_ envelope: HUEnvelope, allocator: ByteBufferAllocator) -> ByteBuffer {
        sized(allocator) { try LinearEncoder.withEncoding(envelope, $0) }
    }

    /// `frame` with the screen's top template already encoded (nil: encoded here).
    public static func frame(_ envelope: HUEnvelope, renderedTop: [UInt8]?, allocator: ByteBufferAllocator) -> ByteBuffer {
        guard let renderedTop else { return frame(envelope, allocator: allocator) }
        return sized(allocator) { try LinearEncoder.withEncoding(envelope, renderedTop: renderedTop, $0) }
    }

    /// The frame of the payload `encode` lends: header and payload in one
    /// buffer of their size.
    private static func sized(
        _ allocator: ByteBufferAllocator, _ encode: ((UnsafeRawBufferPointer) -> ByteBuffer) throws -> ByteBuffer
    ) -> ByteBuffer {
        do {
            return try encode { payload in
                var buffer = allocator.buffer(capacity: FrameHeader.size + payload.count)
                buffer.writeFrameHeader(FrameHeader(kind: .message, length: UInt32(payload.count)))
                buffer.writeBytes(payload)
                return buffer
            }
        } catch {
            // Serializing a well-formed proto3 message in memory cannot fail.
            preconditionFailure("envelope serialization failed: \(error)")
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
