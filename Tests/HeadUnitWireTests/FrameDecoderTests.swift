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
}
