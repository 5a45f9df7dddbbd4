import NIOCore

/// The 16 bytes in front of every VIDEO frame's H.264 access unit
/// (PROTOCOL.md section 25.3). The daemon reads them to route and to keep
/// each viewer's decoder fed from a keyframe; it never touches the H.264 bytes.
///
///     0-7   timestamp_us  u64 BE: when the app drew the frame (its monotonic clock)
///     8-11  frame_number  u32 BE: 1, 2, 3... per stream; a gap is a frame the app skipped
///     12    flags         bit 0: keyframe (an IDR access unit, SPS and PPS in front)
///     13-15 reserved      0
///     16-   one access unit, H.264 Annex B (starts with 00 00 01 or 00 00 00 01)
public struct VideoFrameHeader: Sendable, Equatable {
    public static let size = 16
    public static let keyframeFlag: UInt8 = 0x01

    public var timestampMicroseconds: UInt64
    public var frameNumber: UInt32
    public var isKeyframe: Bool

    public init(timestampMicroseconds: UInt64, frameNumber: UInt32, isKeyframe: Bool) {
        self.timestampMicroseconds = timestampMicroseconds
        self.frameNumber = frameNumber
        self.isKeyframe = isKeyframe
    }

    /// Why a payload is not a VIDEO frame (`BAD_VIDEO_FRAME`).
    public struct Problem: Error, Equatable, Sendable {
        public var reason: String
    }

    /// Checks the header and that an Annex B start code follows it (the
    /// cheapest proof that the bytes are an access unit, not something else).
    public static func parse(_ payload: ByteBuffer) -> Result<VideoFrameHeader, Problem> {
        let start = payload.readerIndex
        guard payload.readableBytes >= size + 3,
            let timestamp = payload.getInteger(at: start, as: UInt64.self),
            let number = payload.getInteger(at: start + 8, as: UInt32.self),
            let flags = payload.getInteger(at: start + 12, as: UInt8.self),
            let reserved = payload.getBytes(at: start + 13, length: 3),
            let lead = payload.getBytes(at: start + size, length: min(4, payload.readableBytes - size))
        else {
            return .failure(Problem(reason: "payload of \(payload.readableBytes) bytes is shorter than the 16-byte video header and a start code"))
        }
        guard flags & ~keyframeFlag == 0, reserved == [0, 0, 0] else {
            return .failure(Problem(reason: "reserved bits of the video header are set (flags 0x\(String(flags, radix: 16)))"))
        }
        guard number != 0 else {
            return .failure(Problem(reason: "frame_number 0 (streams count from 1)"))
        }
        let annexB = lead.starts(with: [0, 0, 1]) || lead.starts(with: [0, 0, 0, 1])
        guard annexB else {
            return .failure(Problem(reason: "the access unit does not start with an Annex B start code (00 00 01)"))
        }
        return .success(VideoFrameHeader(timestampMicroseconds: timestamp, frameNumber: number, isKeyframe: flags & keyframeFlag != 0))
    }

    /// Writes the 16 header bytes (the app's side; tests).
    public func write(into buffer: inout ByteBuffer) {
        buffer.writeInteger(timestampMicroseconds)
        buffer.writeInteger(frameNumber)
        buffer.writeInteger(isKeyframe ? Self.keyframeFlag : 0)
        buffer.writeBytes([0, 0, 0])
    }
}
