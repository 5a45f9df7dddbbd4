import NIOCore
import Testing
@testable import HeadUnitWire

@Suite struct FrameParserTests {
    private static func frameBytes(kind: FrameKind, channel: UInt32 = 0, flags: UInt8 = 0, payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeFrame(kind: kind, channel: channel, flags: flags, payload: ByteBuffer(bytes: payload))
        return buffer
    }

    @Test func parsesAWholeFrameAndWaitsForAPartialOne() throws {
        var buffer = Self.frameBytes(kind: .ping, payload: [1, 2, 3])
        var partial = buffer.getSlice(at: 0, length: 13)!
        #expect(try FrameParser.parse(&partial, maxPayload: 1024) == nil)
        #expect(partial.readableBytes == 13, "nothing consumed while waiting")
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
        #expect(frame.header.kind == .ping)
        #expect(Array(frame.payload.readableBytesView) == [1, 2, 3])
        #expect(buffer.readableBytes == 0)
    }

    @Test func headerIsBigEndianInTheDocumentedOrder() {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kindByte: 0x04, flags: 0x5A, channel: 0x0102_0304, length: 0x0A0B_0C0D))
        #expect(Array(buffer.readableBytesView) == [0x48, 0x55, 0x04, 0x5A, 0x01, 0x02, 0x03, 0x04, 0x0A, 0x0B, 0x0C, 0x0D])
    }

    @Test func headerSplitAtEveryByteBoundary() throws {
        let whole = Self.frameBytes(kind: .message, payload: [0x08, 0x01])
        for split in 1..<FrameHeader.size {
            var buffer = whole.getSlice(at: 0, length: split)!
            #expect(try FrameParser.parse(&buffer, maxPayload: 1024) == nil, "split at \(split)")
            #expect(buffer.readableBytes == split)
            buffer.writeImmutableBuffer(whole.getSlice(at: split, length: whole.readableBytes - split)!)
            let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
            #expect(frame.header == FrameHeader(kind: .message, length: 2))
            #expect(Array(frame.payload.readableBytesView) == [0x08, 0x01])
        }
    }

    @Test func twoFramesInOneBuffer() throws {
        var buffer = Self.frameBytes(kind: .ping, payload: [9])
        var second = Self.frameBytes(kind: .message, payload: [0x08, 0x02])
        buffer.writeBuffer(&second)
        let first = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
        let next = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
        #expect(first.header.kind == .ping && Array(first.payload.readableBytesView) == [9])
        #expect(next.header.kind == .message && Array(next.payload.readableBytesView) == [0x08, 0x02])
        #expect(try FrameParser.parse(&buffer, maxPayload: 1024) == nil)
    }

    @Test func payloadOfExactlyTheMaximumIsAccepted() throws {
        let maximum: UInt32 = 1 << 20
        var buffer = Self.frameBytes(kind: .message, payload: [UInt8](repeating: 0xAB, count: Int(maximum)))
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: maximum))
        #expect(frame.header.length == maximum)
        #expect(frame.payload.readableBytes == Int(maximum))
    }

    @Test func oneOverTheMaximumIsRefusedFromTheHeaderAlone() {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kind: .message, length: (1 << 20) + 1))
        #expect(throws: FramingError.frameTooLarge(length: (1 << 20) + 1, maximum: 1 << 20)) {
            _ = try FrameParser.parse(&buffer, maxPayload: 1 << 20)
        }
    }

    @Test func rejectsLengthOverMaximumBeforeThePayloadArrives() {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kind: .message, length: 5000))
        #expect(throws: FramingError.frameTooLarge(length: 5000, maximum: 4096)) {
            _ = try FrameParser.parse(&buffer, maxPayload: 4096)
        }
    }

    @Test func zeroLengthPayload() throws {
        for kind in FrameKind.allCases {
            var buffer = Self.frameBytes(kind: kind, payload: [])
            #expect(buffer.readableBytes == FrameHeader.size)
            let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 0))
            #expect(frame.header.kind == kind && frame.payload.readableBytes == 0)
        }
    }

    @Test(arguments: [(UInt32(0), UInt8(0)), (1, 0), (0xDEAD_BEEF, 0x5A), (.max, .max)])
    func channelAndFlagsRoundTrip(channel: UInt32, flags: UInt8) throws {
        var buffer = Self.frameBytes(kind: .data, channel: channel, flags: flags, payload: [1, 2])
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 16))
        #expect(frame.header.channel == channel)
        #expect(frame.header.flags == flags)
        #expect(frame.header.kind == .data)
    }

    @Test func unknownKindIsParsedAndReportedNotThrown() throws {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kindByte: 0x7F, flags: 0, channel: 0, length: 1))
        buffer.writeInteger(UInt8(0))
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 16))
        #expect(frame.header.kind == nil)
        #expect(frame.header.kindByte == 0x7F)
    }

    @Test func rejectsBadMagic() {
        var buffer = ByteBuffer(string: "GET / HTTP/1.1\r\n")
        #expect(throws: FramingError.badMagic(0x4745)) { _ = try FrameParser.parse(&buffer, maxPayload: 4096) }
    }

    @Test func magicIsCheckedBeforeLength() {
        var buffer = ByteBuffer(bytes: [0x55, 0x48, 1, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: FramingError.badMagic(0x5548)) { _ = try FrameParser.parse(&buffer, maxPayload: 4096) }
    }

    @Test func framingErrorsCarryTheirCodes() {
        #expect(FramingError.badMagic(0).code == .badMagic)
        #expect(FramingError.frameTooLarge(length: 2, maximum: 1).code == .frameTooLarge)
        #expect(FramingError.frameTooLarge(length: 2, maximum: 1).reason.contains("exceeds the maximum of 1"))
    }

    @Test func payloadIsASliceOfTheInput() throws {
        var buffer = Self.frameBytes(kind: .message, payload: [1, 2, 3, 4])
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 16))
        // The payload shares the input's storage: no copy on the hot path.
        let same = frame.payload.withUnsafeReadableBytes { payload in
            buffer.withUnsafeReadableBytes { rest in payload.baseAddress! + 4 == rest.baseAddress! }
        }
        #expect(same)
    }
}
