/// Protobuf wire-format writing, for the few envelopes the car encodes
/// straight from their values (`LifecycleEventEncoding`,
/// `TemplateShownAnswer`): the message forms, built and walked, cost
/// thousands of instructions each on every push and pop. Each envelope is
/// measured first (the sizes here), then written by a `ByteWriter` into
/// exactly that many bytes.
enum WireBytes {
    /// A string field as proto3 writes it: left out when empty.
    static func stringFieldSize(_ string: String) -> Int {
        let count = string.utf8.count
        return count == 0 ? 0 : 1 + varintSize(UInt64(count)) + count
    }

    /// A varint field as proto3 writes it: left out when zero.
    static func varintFieldSize(_ value: UInt64) -> Int {
        value == 0 ? 0 : 1 + varintSize(value)
    }
}

/// Writes a measured number of bytes through a pointer. Appending to an
/// array byte by byte checked its uniqueness and capacity at every byte
/// (~800 instructions a lifecycle event; a push and a pop send eight).
/// Writing past the measure, or short of it, is a precondition failure.
struct ByteWriter {
    private var next: UnsafeMutablePointer<UInt8>
    private let end: UnsafeMutablePointer<UInt8>

    /// `count` bytes, all written by `write`.
    static func bytes(_ count: Int, _ write: (inout ByteWriter) -> Void) -> [UInt8] {
        // Not `Array(unsafeUninitializedCapacity:)`: it runs unspecialised
        // here, looking the array's metadata up on every call (~500 instructions).
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        append(count, to: &bytes, write)
        return bytes
    }

    /// Appends `count` bytes, all written by `write`, to `bytes`.
    static func append(_ count: Int, to bytes: inout [UInt8], _ write: (inout ByteWriter) -> Void) {
        guard count > 0 else { return }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            let start = buffer.baseAddress!
            var writer = ByteWriter(next: start, end: start + count)
            write(&writer)
            precondition(writer.next == writer.end, "wrote \(writer.next - start) bytes of \(count) measured")
            bytes.append(contentsOf: UnsafeBufferPointer(buffer))
        }
    }

    private init(next: UnsafeMutablePointer<UInt8>, end: UnsafeMutablePointer<UInt8>) {
        self.next = next
        self.end = end
    }

    mutating func byte(_ value: UInt8) {
        precondition(next < end, "wrote past the measured size")
        next.initialize(to: value)
        next += 1
    }

    mutating func bytes(_ source: UnsafeBufferPointer<UInt8>) {
        guard let from = source.baseAddress else { return }
        precondition(end - next >= source.count, "wrote past the measured size")
        next.initialize(from: from, count: source.count)
        next += source.count
    }

    mutating func bytes(_ source: [UInt8]) {
        source.withUnsafeBufferPointer { bytes($0) }
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            byte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        byte(UInt8(value))
    }

    /// A one-byte tag and the string, unless it is empty.
    mutating func stringField(_ string: String, tag: UInt8) {
        var string = string
        string.withUTF8 { utf8 in
            guard !utf8.isEmpty else { return }
            byte(tag)
            varint(UInt64(utf8.count))
            bytes(utf8)
        }
    }

    /// A one-byte tag and the varint, unless it is zero.
    mutating func varintField(_ value: UInt64, tag: UInt8) {
        guard value != 0 else { return }
        byte(tag)
        varint(value)
    }

    /// A frame's 12-byte header (`EncodedEnvelopes`).
    mutating func frameHeader(_ header: FrameHeader) {
        precondition(end - next >= FrameHeader.size, "wrote past the measured size")
        header.store(to: UnsafeMutableRawPointer(next))
        next += FrameHeader.size
    }
}
