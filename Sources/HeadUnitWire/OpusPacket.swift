import NIOCore

/// The length of an Opus packet from its TOC byte (RFC 6716 section 3.1),
/// so credit is counted without decoding: by the daemon on its loop and by
/// the phone SDK before it sends. The car's decoder (libopus, off the loop)
/// still judges the rest of the packet.
public enum OpusPacket {
    /// Samples per channel at 48 kHz, or nil when the TOC cannot be a valid packet.
    public static func samplesAt48k(_ bytes: ByteBufferView) -> Int? {
        guard let toc = bytes.first else { return nil }
        let config = Int(toc >> 3)
        let frameSize: Int
        switch config {
        case 0...11: frameSize = [480, 960, 1920, 2880][config % 4]  // SILK: 10, 20, 40, 60 ms
        case 12...15: frameSize = [480, 960][config % 2]  // hybrid: 10, 20 ms
        default: frameSize = [120, 240, 480, 960][config % 4]  // CELT: 2.5, 5, 10, 20 ms
        }
        let count: Int
        switch toc & 0x3 {
        case 0: count = 1
        case 1:
            // Two frames of equal size: the rest splits evenly.
            guard (bytes.count - 1) % 2 == 0 else { return nil }
            count = 2
        case 2: count = 2
        default:
            guard bytes.count >= 2 else { return nil }
            count = Int(bytes[bytes.index(after: bytes.startIndex)] & 0x3F)
            guard count >= 1 else { return nil }
        }
        let samples = count * frameSize
        // A packet lasts at most 120 ms.
        return samples <= 5760 ? samples : nil
    }
}
