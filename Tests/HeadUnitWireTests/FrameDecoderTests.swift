import NIOCore
import NIOEmbedded
import Testing
@testable import HeadUnitWire

/// FrameDecoder in a real (embedded) pipeline behind NIO's ByteToMessageHandler.
@Suite struct FrameDecoderTests {
    /// Records what reaches the end of the pipeline.
    // @unchecked: used inside an EmbeddedChannel on the test's own thread only.
    final class Sink: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = Frame
        var frames: [Frame] = []
        var errors: [any Error] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { frames.append(unwrapInboundIn(data)) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
    }

    static func pipeline(maxPayload: UInt32 = 1024) throws -> (EmbeddedChannel, Sink) {
        let sink = Sink()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maxPayload: maxPayload)))
        try channel.pipeline.syncOperations.addHandler(sink)
        return (channel, sink)
    }

    static func frame(_ kind: FrameKind, _ payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeFrame(kind: kind, payload: ByteBuffer(bytes: payload))
        return buffer
    }

    @Test func framesArriveWhateverTheChunking() throws {
        var stream = Self.frame(.ping, [1, 2, 3])
        var second = Self.frame(.message, [0x08, 0x01])
        stream.writeBuffer(&second)
        let bytes = Array(stream.readableBytesView)
        for chunk in 1...bytes.count {
            let (channel, sink) = try Self.pipeline()
            for start in stride(from: 0, to: bytes.count, by: chunk) {
                try channel.writeInbound(ByteBuffer(bytes: bytes[start..<min(start + chunk, bytes.count)]))
            }
            #expect(sink.frames.map(\.header.kind) == [.ping, .message], "chunk \(chunk)")
            #expect(sink.frames.map { Array($0.payload.readableBytesView) } == [[1, 2, 3], [0x08, 0x01]])
            #expect(sink.errors.isEmpty)
            #expect(try channel.finish().isClean)
        }
    }

    @Test func decodeLastDeliversWholeFramesThenReportsTheTruncatedOne() throws {
        let (channel, sink) = try Self.pipeline()
        var stream = Self.frame(.ping, [7])
        let truncated = Self.frame(.message, [0x08, 0x01, 0x12, 0x00])
        stream.writeImmutableBuffer(truncated.getSlice(at: 0, length: 14)!)
        try channel.writeInbound(stream)
        #expect(sink.frames.count == 1)
        // The peer closes: decodeLast runs with 14 bytes of a 16-byte frame left.
        _ = try channel.finish()
        #expect(sink.frames.count == 1)
        let error = try #require(sink.errors.first as? TruncatedFrame)
        #expect(error.bytes == 14)
    }

    @Test func decodeLastWithAHalfHeader() throws {
        let (channel, sink) = try Self.pipeline()
        try channel.writeInbound(ByteBuffer(bytes: [0x48, 0x55, 0x01]))
        _ = try channel.finish()
        #expect(sink.frames.isEmpty)
        #expect((sink.errors.first as? TruncatedFrame)?.bytes == 3)
    }

    @Test func decodeLastWithNothingLeftIsQuiet() throws {
        let (channel, sink) = try Self.pipeline()
        try channel.writeInbound(Self.frame(.pong, []))
        _ = try channel.finish()
        #expect(sink.frames.count == 1)
        #expect(sink.errors.isEmpty)
    }

    @Test func framingErrorsReachThePipeline() throws {
        let (channel, sink) = try Self.pipeline(maxPayload: 8)
        var buffer = Self.frame(.ping, [1])
        buffer.writeFrameHeader(FrameHeader(kind: .message, length: 9))
        try channel.writeInbound(buffer)
        #expect(sink.frames.count == 1, "the frame before the bad header is delivered")
        #expect(sink.errors.first as? FramingError == .frameTooLarge(length: 9, maximum: 8))
        _ = try? channel.finish()
    }

    @Test func badMagicReachesThePipeline() throws {
        let (channel, sink) = try Self.pipeline()
        try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
        #expect(sink.frames.isEmpty)
        #expect(sink.errors.first as? FramingError == .badMagic(0x4745))
        _ = try? channel.finish()
    }

    /// Large DATA frames (over the 64 KiB a partial frame starts with), cut
    /// by reads anywhere, come out whole and in order (issue 25).
    @Test func largeFramesCutAnywhereComeOutWhole() throws {
        let payloads: [[UInt8]] = [200_000, 70_000, 3, 65_536, 0, 131_072].enumerated().map { index, count in
            (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
        }
        var stream = ByteBuffer()
        for (index, payload) in payloads.enumerated() {
            stream.writeFrame(kind: .data, channel: UInt32(index + 1), payload: ByteBuffer(bytes: payload))
        }
        let bytes = Array(stream.readableBytesView)
        for chunk in [1_000, 4_096, 65_535, 65_548, 100_003, 262_144, bytes.count] {
            let (channel, sink) = try Self.pipeline(maxPayload: 1 << 20)
            for start in stride(from: 0, to: bytes.count, by: chunk) {
                try channel.writeInbound(ByteBuffer(bytes: bytes[start..<min(start + chunk, bytes.count)]))
            }
            #expect(sink.frames.map(\.header.channel) == Array(1...UInt32(payloads.count)), "chunk \(chunk)")
            #expect(sink.frames.map { Array($0.payload.readableBytesView) } == payloads, "chunk \(chunk)")
            #expect(sink.errors.isEmpty)
            #expect(try channel.finish().isClean)
        }
    }

    /// Frames whole in a read are slices of that read's buffer, even after a
    /// frame cut in two by the read before: NIO does not append the new read
    /// to (copy it into) the buffer holding the earlier frames, so relayed
    /// DATA is never copied in the daemon (issue 25, PROTOCOL.md 18.4).
    @Test func framesWholeInAReadAreNotCopiedAfterAFrameCutInTwo() throws {
        let (channel, sink) = try Self.pipeline(maxPayload: 1 << 20)
        let payload = [UInt8](repeating: 0xA5, count: 50_000)
        var first = ByteBuffer()
        first.writeFrame(kind: .data, channel: 1, payload: ByteBuffer(bytes: payload))
        var cut = ByteBuffer()
        cut.writeFrame(kind: .data, channel: 2, payload: ByteBuffer(bytes: payload))
        first.writeImmutableBuffer(cut.getSlice(at: 0, length: 30_000)!)
        try channel.writeInbound(first)
        var second = cut.getSlice(at: 30_000, length: cut.readableBytes - 30_000)!
        let wholeAt = second.readableBytes
        for channelID in UInt32(3)...4 { second.writeFrame(kind: .data, channel: channelID, payload: ByteBuffer(bytes: payload)) }
        let secondBase = second.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress!) }
        try channel.writeInbound(second)
        #expect(sink.frames.map(\.header.channel) == [1, 2, 3, 4])
        #expect(sink.frames.allSatisfy { Array($0.payload.readableBytesView) == payload })
        // Frames 3 and 4 point into the second read's own bytes.
        for (index, frame) in sink.frames.suffix(2).enumerated() {
            let at = frame.payload.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress!) }
            #expect(at == secondBase + UInt(wholeAt + index * (FrameHeader.size + payload.count) + FrameHeader.size))
        }
        #expect(try channel.finish().isClean)
    }

    /// Taken out mid-stream (a restart handover, PROTOCOL.md section 22), the
    /// decoder hands over exactly the bytes of the frame it had begun.
    @Test func removedMidFrameItHandsOverThePartialFrame() throws {
        let (channel, sink) = try Self.pipeline(maxPayload: 1 << 20)
        var stream = Self.frame(.ping, [9])
        var big = ByteBuffer()
        big.writeFrame(kind: .data, channel: 5, payload: ByteBuffer(repeating: 7, count: 100_000))
        let begun = big.getSlice(at: 0, length: 80_000)!
        stream.writeImmutableBuffer(begun.getSlice(at: 0, length: 40_000)!)
        try channel.writeInbound(stream)
        try channel.writeInbound(begun.getSlice(at: 40_000, length: 40_000)!)
        let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<FrameDecoder>.self)
        let removed = channel.pipeline.syncOperations.removeHandler(decoder)
        channel.embeddedEventLoop.run()
        #expect(throws: Never.self) { try removed.wait() }
        #expect(sink.frames.count == 1)
        let undecoded = try #require(sink.errors.first as? UndecodedBytes)
        #expect(undecoded.bytes == begun)
        _ = try? channel.finish()
    }

    /// The daemon's connections cut frames with the assembler alone (no
    /// decoder in front): frames whole in a read come out as they are, and for
    /// a restart handover `takePartial` gives exactly the bytes of the frame
    /// begun, once; the next frames, completed from there, come out whole.
    @Test func theAssemblerHandsOverExactlyTheFrameBegun() throws {
        var assembler = FrameAssembler(maxPayload: 1 << 20)
        let allocator = ByteBufferAllocator()
        var stream = Self.frame(.ping, [9])
        var big = ByteBuffer()
        big.writeFrame(kind: .data, channel: 5, payload: ByteBuffer(repeating: 7, count: 100_000))
        let begun = big.getSlice(at: 0, length: 80_000)!
        stream.writeImmutableBuffer(begun.getSlice(at: 0, length: 40_000)!)
        #expect(try assembler.next(from: &stream, allocator: allocator)?.header.kind == .ping)
        #expect(try assembler.next(from: &stream, allocator: allocator) == nil)
        var rest = begun.getSlice(at: 40_000, length: 40_000)!
        #expect(try assembler.next(from: &rest, allocator: allocator) == nil)
        #expect(stream.readableBytes == 0 && rest.readableBytes == 0)
        #expect(assembler.takePartial() == begun)
        #expect(assembler.takePartial() == nil)
        // The next process: the handed-over bytes, then the rest of the stream.
        var next = FrameAssembler(maxPayload: 1 << 20)
        var handed = begun
        #expect(try next.next(from: &handed, allocator: allocator) == nil)
        var tail = big.getSlice(at: 80_000, length: big.readableBytes - 80_000)!
        tail.writeImmutableBuffer(Self.frame(.ping, [1]))
        let data = try #require(try next.next(from: &tail, allocator: allocator))
        #expect(data.header.channel == 5 && data.payload == ByteBuffer(repeating: 7, count: 100_000))
        #expect(try next.next(from: &tail, allocator: allocator)?.header.kind == .ping)
        #expect(try next.next(from: &tail, allocator: allocator) == nil)
        #expect(next.takePartial() == nil)
    }

    /// A framing error is thrown before anything is kept: the bytes of a bad
    /// header are not taken into a partial frame. (The "GET" alone is kept: a
    /// header is judged only once all of it is there.)
    @Test func theAssemblerThrowsOnABadHeader() throws {
        var assembler = FrameAssembler(maxPayload: 1024)
        var oversized = ByteBuffer()
        oversized.writeFrameHeader(FrameHeader(kind: .message, length: 1025))
        #expect(throws: FramingError.frameTooLarge(length: 1025, maximum: 1024)) {
            _ = try assembler.next(from: &oversized, allocator: ByteBufferAllocator())
        }
        #expect(assembler.takePartial() == nil)
        var http = ByteBuffer(string: "GET")
        #expect(try assembler.next(from: &http, allocator: ByteBufferAllocator()) == nil)
        var more = ByteBuffer(string: " / HTTP/1.1\r\n")
        #expect(throws: FramingError.badMagic(0x4745)) { _ = try assembler.next(from: &more, allocator: ByteBufferAllocator()) }
        #expect(assembler.takePartial() == nil)
    }

    // MARK: - Oversized frames refused alone (PROTOCOL.md section 2, step 3)

    /// A PING, a VIDEO frame and a MESSAGE over the maximum, a MESSAGE: the stream the tests below cut into reads.
    static func streamWithOversizedFrames(length: Int = 3000) -> (ByteBuffer, oversizedPayload: ByteBuffer, message: [UInt8]) {
        var stream = frame(.ping, [1, 2])
        let payload = ByteBuffer(bytes: (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        stream.writeFrame(kind: .video, channel: 3, payload: payload)
        stream.writeFrame(kind: .message, payload: payload)
        let message: [UInt8] = [0x08, 0x2A]
        stream.writeImmutableBuffer(frame(.message, message))
        return (stream, payload, message)
    }

    /// Whatever the reads, an oversized frame whose header is sound comes out
    /// once, as its header (and for a MESSAGE its first 16 bytes), its other
    /// bytes are dropped as they come (nothing of them is held), and the
    /// frame after it is whole.
    @Test(arguments: [1, 5, 12, 13, 28, 700, 5000])
    func theAssemblerSkipsAnOversizedFrameAsItsBytesArrive(readSize: Int) throws {
        var assembler = FrameAssembler(maxPayload: 1024, skipOversizedUpTo: 4096)
        let allocator = ByteBufferAllocator()
        var (stream, oversizedPayload, message) = Self.streamWithOversizedFrames()
        var frames: [Frame] = []
        var mostHeld = 0
        while stream.readableBytes > 0 {
            var read = stream.readSlice(length: min(readSize, stream.readableBytes))!
            while let frame = try assembler.next(from: &read, allocator: allocator) { frames.append(frame) }
            #expect(read.readableBytes == 0)
            // What it holds between reads, looked at and given back as the next read's start.
            if var held = assembler.takePartial() {
                mostHeld = max(mostHeld, held.readableBytes)
                #expect(try assembler.next(from: &held, allocator: allocator) == nil)
            }
        }
        #expect(frames.map(\.header.kind) == [.ping, .video, .message, .message])
        #expect(frames.map(\.isOversized) == [false, true, true, false])
        let video = frames[1]
        #expect(video.header.length == 3000 && video.header.channel == 3 && video.payload.readableBytes == 0)
        #expect(frames[2].header.length == 3000)
        #expect(frames[2].payload == oversizedPayload.getSlice(at: 0, length: FrameAssembler.oversizedPrefix))
        #expect(frames[3].payload == ByteBuffer(bytes: message))
        #expect(assembler.skipping == 0 && assembler.takePartial() == nil)
        #expect(mostHeld <= FrameHeader.size + FrameAssembler.oversizedPrefix, "an oversized frame's payload is never gathered")
    }

    /// The boundary: over `skipOversizedUpTo`, or a header unsound otherwise
    /// (an unknown kind, flags set), an oversized length is fatal as before,
    /// decided on the header alone; at the bound it is skipped.
    @Test func anOversizedHeaderPastTheBoundOrOtherwiseUnsoundIsFatal() throws {
        let allocator = ByteBufferAllocator()
        func first(_ header: FrameHeader) throws(FramingError) -> Frame? {
            var assembler = FrameAssembler(maxPayload: 1024, skipOversizedUpTo: 4096)
            var bytes = ByteBuffer()
            bytes.writeFrameHeader(header)
            bytes.writeRepeatingByte(0, count: 16)
            return try assembler.next(from: &bytes, allocator: allocator)
        }
        #expect(try first(FrameHeader(kind: .message, length: 4096))?.isOversized == true)
        #expect(try first(FrameHeader(kind: .message, length: 1024)) == nil, "within the maximum: gathered whole")
        #expect(throws: FramingError.frameTooLarge(length: 4097, maximum: 1024)) { _ = try first(FrameHeader(kind: .video, length: 4097)) }
        #expect(throws: FramingError.frameTooLarge(length: 2000, maximum: 1024)) {
            _ = try first(FrameHeader(kindByte: 0x09, flags: 0, channel: 0, length: 2000))
        }
        #expect(throws: FramingError.frameTooLarge(length: 2000, maximum: 1024)) {
            _ = try first(FrameHeader(kindByte: FrameKind.video.rawValue, flags: 1, channel: 1, length: 2000))
        }
        // Without a bound (clients), any oversized header is fatal.
        var strict = FrameAssembler(maxPayload: 1024)
        var bytes = ByteBuffer()
        bytes.writeFrameHeader(FrameHeader(kind: .video, length: 1025))
        #expect(throws: FramingError.frameTooLarge(length: 1025, maximum: 1024)) { _ = try strict.next(from: &bytes, allocator: allocator) }
    }
}
