import HeadUnitWire
import CFuzzMain
import NIOCore

/// libFuzzer entry: arbitrary bytes through the frame parser and envelope decoder.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var buffer = ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: size))
    while true {
        let frame: Frame?
        do {
            frame = try FrameParser.parse(&buffer, maxPayload: 1 << 20)
        } catch {
            return 0
        }
        guard let frame else { return 0 }
        if frame.header.kind == .message {
            _ = try? EnvelopeCodec.decode(frame.payload)
        }
    }
}
