import NIOCore
import Testing
@testable import HeadUnitWire

@Suite struct FrameParserTests {
    @Test func parsesAWholeFrameAndWaitsForAPartialOne() throws {
        var buffer = ByteBuffer()
        buffer.writeFrame(kind: .ping, payload: ByteBuffer(bytes: [1, 2, 3]))
        var partial = buffer.getSlice(at: 0, length: 13)!
        #expect(try FrameParser.parse(&partial, maxPayload: 1024) == nil)
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
        #expect(frame.header.kind == .ping)
        #expect(Array(frame.payload.readableBytesView) == [1, 2, 3])
    }

    @Test func rejectsLengthOverMaximumBeforeThePayloadArrives() {
        var buffer = ByteBuffer()
        buffer.writeFrameHeader(FrameHeader(kind: .message, length: 5000))
        #expect(throws: FramingError.frameTooLarge(length: 5000, maximum: 4096)) {
            _ = try FrameParser.parse(&buffer, maxPayload: 4096)
        }
    }

    @Test func rejectsBadMagic() {
        var buffer = ByteBuffer(string: "GET / HTTP/1.1\r\n")
        #expect(throws: FramingError.self) { _ = try FrameParser.parse(&buffer, maxPayload: 4096) }
    }
}
