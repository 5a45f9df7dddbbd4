import NIOCore

/// The kinds of frame. The byte travels in the header; see PROTOCOL.md "Framing".
public enum FrameKind: UInt8, Sendable, CaseIterable {
    /// Payload is one protobuf `HUEnvelope`.
    case message = 0x01
    /// Liveness probe; payload (at most 64 bytes) is echoed in the PONG.
    case ping = 0x02
    case pong = 0x03
    /// Raw bytes of an External Accessory session; `channel` names the session.
    case data = 0x04
    /// Audio (PROTOCOL.md section 24): `channel` names the stream; the payload
    /// is a u64 BE timestamp in microseconds, then one unit of the stream's codec.
    case media = 0x05
    /// One H.264 access unit of an app's base view (PROTOCOL.md section 25);
    /// `channel` names the scene. The payload starts with a `VideoFrameHeader`.
    case video = 0x06
}

/// The fixed 12-byte header in front of every payload:
/// magic "HU" (2), kind (1), flags (1), channel (u32 BE), payload length (u32 BE).
public struct FrameHeader: Sendable, Equatable {
    public static let size = 12
    public static let magic: UInt16 = 0x4855  // "HU"
    public static let maxPingPayload = 64

    /// Raw kind byte, kept as received so an unknown kind can be reported and skipped.
    public var kindByte: UInt8
    public var flags: UInt8
    public var channel: UInt32
    public var length: UInt32

    public var kind: FrameKind? { FrameKind(rawValue: kindByte) }

    public init(kind: FrameKind, flags: UInt8 = 0, channel: UInt32 = 0, length: UInt32) {
        self.kindByte = kind.rawValue
        self.flags = flags
        self.channel = channel
        self.length = length
    }

    public init(kindByte: UInt8, flags: UInt8, channel: UInt32, length: UInt32) {
        self.kindByte = kindByte
        self.flags = flags
        self.channel = channel
        self.length = length
    }
}

/// One frame as received: the header and its payload (a slice, never copied).
public struct Frame: Sendable {
    public var header: FrameHeader
    public var payload: ByteBuffer
    /// The frame as it was read, header then payload (a slice of the same
    /// read, never copied), when it came from the decoder: a relay can pass
    /// it on whole, with no header to build (DATA keeps its channel, 18.5).
    public var wire: ByteBuffer?
    /// The payload was over the maximum (`header.length` says by how much)
    /// and is skipped as it arrives, never held: `payload` is only, for a
    /// MESSAGE, its first bytes (at most `FrameAssembler.oversizedPrefix`),
    /// else empty, so the receiver can refuse the frame alone (PROTOCOL.md
    /// section 2, step 3).
    public var isOversized: Bool

    public init(header: FrameHeader, payload: ByteBuffer, wire: ByteBuffer? = nil, isOversized: Bool = false) {
        self.header = header
        self.payload = payload
        self.wire = wire
        self.isOversized = isOversized
    }

    public init(kind: FrameKind, channel: UInt32 = 0, payload: ByteBuffer) {
        self.header = FrameHeader(kind: kind, channel: channel, length: UInt32(payload.readableBytes))
        self.payload = payload
        self.isOversized = false
    }
}

/// Framing errors. Each one ends the byte stream: after it the decoder cannot
/// know where the next frame starts, so the connection is closed with a reason.
public enum FramingError: Error, Equatable, Sendable {
    case badMagic(UInt16)
    case frameTooLarge(length: UInt32, maximum: UInt32)

    public var code: HUErrorCode {
        switch self {
        case .badMagic: return .badMagic
        case .frameTooLarge: return .frameTooLarge
        }
    }

    public var reason: String {
        switch self {
        case .badMagic(let got):
            return "frame header must start with 0x4855 (\"HU\"), got 0x\(String(got, radix: 16))"
        case .frameTooLarge(let length, let maximum):
            return "frame payload of \(length) bytes exceeds the maximum of \(maximum)"
        }
    }
}

public enum FrameParser {
    /// Reads one frame from the front of `buffer` when it is all there.
    /// The header is validated before anything is allocated for the payload.
    /// Returns nil (and consumes nothing) when more bytes are needed.
    public static func parse(_ buffer: inout ByteBuffer, maxPayload: UInt32) throws(FramingError) -> Frame? {
        guard buffer.readableBytes >= FrameHeader.size else { return nil }
        let start = buffer.readerIndex
        guard let magic = buffer.getInteger(at: start, as: UInt16.self),
            let kind = buffer.getInteger(at: start + 2, as: UInt8.self),
            let flags = buffer.getInteger(at: start + 3, as: UInt8.self),
            let channel = buffer.getInteger(at: start + 4, as: UInt32.self),
            let length = buffer.getInteger(at: start + 8, as: UInt32.self)
        else { return nil }
        guard magic == FrameHeader.magic else { throw .badMagic(magic) }
        guard length <= maxPayload else { throw .frameTooLarge(length: length, maximum: maxPayload) }
        guard buffer.readableBytes >= FrameHeader.size + Int(length) else { return nil }
        let wire = buffer.readSlice(length: FrameHeader.size + Int(length))!
        let payload = wire.getSlice(at: wire.readerIndex + FrameHeader.size, length: Int(length))!
        return Frame(header: FrameHeader(kindByte: kind, flags: flags, channel: channel, length: length), payload: payload, wire: wire)
    }

    /// Whether `buffer` holds a partial frame (used to report a truncated frame at EOF).
    public static func hasPartialFrame(_ buffer: ByteBuffer) -> Bool {
        buffer.readableBytes > 0
    }
}

extension ByteBuffer {
    /// Appends a header and payload.
    public mutating func writeFrame(kind: FrameKind, channel: UInt32 = 0, flags: UInt8 = 0, payload: ByteBuffer) {
        writeFrameHeader(FrameHeader(kind: kind, flags: flags, channel: channel, length: UInt32(payload.readableBytes)))
        var payload = payload
        writeBuffer(&payload)
    }

    /// Appends a header and payload, the payload as raw bytes (a frame the
    /// codec's `WireWriter` wrote).
    public mutating func writeFrame(kind: FrameKind, channel: UInt32 = 0, flags: UInt8 = 0, payload: UnsafeRawBufferPointer) {
        writeFrameHeader(FrameHeader(kind: kind, flags: flags, channel: channel, length: UInt32(payload.count)))
        writeBytes(payload)
    }

    /// The 12 header bytes in one write (five `writeInteger`s, each checking
    /// capacity and uniqueness, cost ~1,200 instructions per frame).
    public mutating func writeFrameHeader(_ header: FrameHeader) {
        writeWithUnsafeMutableBytes(minimumWritableBytes: FrameHeader.size) { raw in
            header.store(to: raw.baseAddress!)
            return FrameHeader.size
        }
    }
}

extension FrameHeader {
    /// The header's 12 bytes, written at `raw` (which has room for them).
    func store(to raw: UnsafeMutableRawPointer) {
        raw.storeBytes(of: FrameHeader.magic.bigEndian, toByteOffset: 0, as: UInt16.self)
        raw.storeBytes(of: kindByte, toByteOffset: 2, as: UInt8.self)
        raw.storeBytes(of: flags, toByteOffset: 3, as: UInt8.self)
        raw.storeBytes(of: channel.bigEndian, toByteOffset: 4, as: UInt32.self)
        raw.storeBytes(of: length.bigEndian, toByteOffset: 8, as: UInt32.self)
    }
}

/// Bytes in as they were read, whole frames out: what a connection reads
/// (the daemon's `ConnectionHandler` directly, clients through
/// `FrameDecoder`). Framing errors are thrown; after one the stream cannot
/// be resynchronised.
///
/// Complete frames are slices of the buffer they were read into, never
/// copied. A frame that a read cuts in two is taken out of that buffer into
/// `partial` and completed from the next read: so a new read is never
/// appended to (copied into) a buffer whose earlier frames are still held
/// elsewhere (DATA relayed to another peer, section 18.4): only the frame cut
/// in two is copied, once.
///
/// With `skipOversizedUpTo` (the daemon), a frame over the maximum whose
/// header is otherwise valid (a known kind, flags 0) and whose length is at
/// most that bound is not fatal: it comes out as soon as its header is in
/// (a MESSAGE's with its first bytes: `Frame.isOversized`), and the rest of
/// its payload is dropped as it arrives, never buffered (PROTOCOL.md section 2).
public struct FrameAssembler: Sendable {
    public let maxPayload: UInt32
    /// The longest oversized frame skipped rather than fatal (0: none is).
    /// The daemon sets it once the peer joined: before, every oversized
    /// header is fatal, decided on the header alone.
    public var skipOversizedUpTo: UInt32
    /// How much of an oversized MESSAGE's payload comes out with it: enough
    /// for an envelope's leading `request_id` (a tag and a 5-byte varint).
    public static let oversizedPrefix = 16
    /// The start of a frame an earlier read ended inside (its header may be
    /// incomplete too). Its capacity grows with what arrives, from at most one
    /// 64 KiB frame: a header alone does not reserve a large frame's memory.
    private var partial: ByteBuffer?
    /// Bytes of an oversized frame's payload still to drop as they arrive.
    public private(set) var skipping = 0
    static let initialPartialCapacity = 64 << 10 + FrameHeader.size

    public init(maxPayload: UInt32, skipOversizedUpTo: UInt32 = 0) {
        self.maxPayload = maxPayload
        self.skipOversizedUpTo = skipOversizedUpTo
    }

    /// The next whole frame from `buffer`, or nil once `buffer` is used up:
    /// what it held of a frame not complete yet is then kept for the next read.
    public mutating func next(from buffer: inout ByteBuffer, allocator: ByteBufferAllocator) throws(FramingError) -> Frame? {
        if skipping > 0 {
            let dropped = min(skipping, buffer.readableBytes)
            buffer.moveReaderIndex(forwardBy: dropped)
            skipping -= dropped
            if skipping > 0 { return nil }
        }
        if partial != nil { return try completePartial(from: &buffer) }
        if let frame = try take(&buffer) { return frame }
        if buffer.readableBytes > 0 {
            // What is there of the next frame comes out; the read's buffer is left empty and dropped.
            var start = allocator.buffer(capacity: try capacity(for: buffer, have: buffer.readableBytes))
            start.writeBuffer(&buffer)
            partial = start
        }
        return nil
    }

    /// The bytes of a frame begun and not complete, taken out (the stream
    /// ended, or the connection goes to the next process); nil when none.
    public mutating func takePartial() -> ByteBuffer? {
        defer { partial = nil }
        return partial
    }

    /// The frame at the front of `buffer` once all of it the assembler needs
    /// is there (an oversized frame: its header, a MESSAGE's first bytes); nil, with
    /// nothing consumed, while more bytes are needed.
    private mutating func take(_ buffer: inout ByteBuffer) throws(FramingError) -> Frame? {
        // The header is read once: `measure` checks it as `FrameParser.parse` does.
        guard let (size, header) = try measure(buffer), buffer.readableBytes >= size else { return nil }
        let wire = buffer.readSlice(length: size)!
        let payload = wire.getSlice(at: wire.readerIndex + FrameHeader.size, length: size - FrameHeader.size)!
        guard header.length <= maxPayload else {
            skipping = Int(header.length) - payload.readableBytes
            return Frame(header: header, payload: payload, isOversized: true)
        }
        return Frame(header: header, payload: payload, wire: wire)
    }

    /// Adds what `buffer` has of the partial frame; the frame once complete.
    private mutating func completePartial(from buffer: inout ByteBuffer) throws(FramingError) -> Frame? {
        guard var start = partial, buffer.readableBytes > 0 else { return nil }
        partial = nil  // uniquely referenced while it grows
        if start.readableBytes < FrameHeader.size {
            var header = buffer.readSlice(length: min(FrameHeader.size - start.readableBytes, buffer.readableBytes))!
            start.writeBuffer(&header)
        }
        if let size = try measure(start)?.size {
            var rest = buffer.readSlice(length: min(size - start.readableBytes, buffer.readableBytes))!
            let needed = start.readableBytes + rest.readableBytes
            if start.writableBytes < rest.readableBytes {
                start.reserveCapacity(minimumWritableBytes: min(size, max(needed, 2 * start.readableBytes)) - start.readableBytes)
            }
            start.writeBuffer(&rest)
            if start.readableBytes == size {
                return try take(&start)
            }
        }
        partial = start
        return nil
    }

    /// The capacity for a partial frame of which `have` bytes are there now.
    private func capacity(for buffer: ByteBuffer, have: Int) throws(FramingError) -> Int {
        guard let size = try measure(buffer)?.size else { return FrameHeader.size }
        return min(size, max(Self.initialPartialCapacity, 2 * have))
    }

    /// The header at the front of `buffer`, once its 12 bytes are there
    /// (checked as `FrameParser.parse` does, and the bound for oversized
    /// frames), and how many bytes the assembler gathers for it: header and
    /// payload, or for an oversized frame it skips, the header (a MESSAGE's
    /// with `oversizedPrefix` bytes).
    func measure(_ buffer: ByteBuffer) throws(FramingError) -> (size: Int, header: FrameHeader)? {
        let start = buffer.readerIndex
        guard buffer.readableBytes >= FrameHeader.size,
            let magic = buffer.getInteger(at: start, as: UInt16.self),
            let kind = buffer.getInteger(at: start + 2, as: UInt8.self),
            let flags = buffer.getInteger(at: start + 3, as: UInt8.self),
            let channel = buffer.getInteger(at: start + 4, as: UInt32.self),
            let length = buffer.getInteger(at: start + 8, as: UInt32.self)
        else { return nil }
        guard magic == FrameHeader.magic else { throw .badMagic(magic) }
        let header = FrameHeader(kindByte: kind, flags: flags, channel: channel, length: length)
        guard length > maxPayload else { return (FrameHeader.size + Int(length), header) }
        // Only a header that is otherwise sound says where the next frame starts.
        guard length <= skipOversizedUpTo, header.kind != nil, flags == 0 else {
            throw .frameTooLarge(length: length, maximum: maxPayload)
        }
        // A MESSAGE waits for its first bytes (an answer carries its request id);
        // any other kind is decided on its header alone.
        return (FrameHeader.size + (header.kind == .message ? min(Int(length), Self.oversizedPrefix) : 0), header)
    }
}

/// NIO decoder for clients (`FrameAssembler` behind NIO's
/// `ByteToMessageHandler`): bytes in, `Frame`s out. Framing errors are
/// thrown to the pipeline.
public struct FrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = Frame
    private var assembler: FrameAssembler
    public var maxPayload: UInt32 { assembler.maxPayload }

    public init(maxPayload: UInt32) {
        assembler = FrameAssembler(maxPayload: maxPayload)
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let frame = try assembler.next(from: &buffer, allocator: context.channel.allocator) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(frame))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        // `decode` took whatever was left into the assembler's partial frame.
        if let start = assembler.takePartial() {
            if seenEOF {
                // A frame cut short by the peer closing: nothing to deliver, nothing to keep.
                context.fireErrorCaught(TruncatedFrame(bytes: start.readableBytes))
            } else {
                // The decoder was taken out mid-stream: the start of the next
                // frame is handed on, not lost.
                context.fireErrorCaught(UndecodedBytes(bytes: start))
            }
        }
        return .needMoreData
    }
}

/// Raised when the decoder is removed from a live connection holding the
/// first bytes of a frame (a restart handover): they belong to the stream.
public struct UndecodedBytes: Error, Sendable {
    public let bytes: ByteBuffer
}

/// Raised when the stream ends in the middle of a frame.
public struct TruncatedFrame: Error, Sendable {
    public let bytes: Int
}
