import Foundation

/// Writes protobuf wire format, for the generated `encode(to:)` of each
/// message. A nested message is written after a one-byte length slot that is
/// widened (the message moved along) only when it turns out longer than 127
/// bytes, so no size is computed before writing.
///
/// The bytes live in memory the writer owns (not a Swift array): a write is
/// one capacity check and a store, with no uniqueness check, and a frame is
/// copied into its `ByteBuffer` once (`withBytes`). Not copyable, so that
/// memory has one owner and is freed once.
public struct WireWriter: ~Copyable {
    @usableFromInline var base: UnsafeMutableRawPointer
    @usableFromInline var count: Int
    @usableFromInline var capacity: Int

    @inlinable
    public init(capacity: Int = 256) {
        self.capacity = Swift.max(capacity, 16)
        base = .allocate(byteCount: self.capacity, alignment: 1)
        count = 0
    }

    deinit { base.deallocate() }

    /// The bytes written so far.
    public var bytes: [UInt8] { withBytes { Array($0) } }

    /// Empties the writer for the next message, keeping its memory (a writer
    /// reused frame after frame allocates nothing) unless it grew past
    /// `maximumKept` bytes: then it starts small again, so one large frame
    /// does not hold its size for good.
    public mutating func reuse(keepingAtMost maximumKept: Int) {
        count = 0
        guard capacity > maximumKept else { return }
        base.deallocate()
        capacity = 256
        base = .allocate(byteCount: capacity, alignment: 1)
    }

    /// The bytes written so far, for the length of `body`.
    @inlinable
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Room for `extra` more bytes.
    @inlinable
    mutating func reserve(_ extra: Int) {
        if _slowPath(capacity &- count < extra) { grow(extra) }
    }

    @usableFromInline
    mutating func grow(_ extra: Int) {
        var newCapacity = capacity * 2
        while newCapacity - count < extra { newCapacity *= 2 }
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 1)
        grown.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }

    @inlinable
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count &+= 1
    }

    @inlinable
    mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard let source = raw.baseAddress, raw.count > 0 else { return }
        reserve(raw.count)
        (base + count).copyMemory(from: source, byteCount: raw.count)
        count &+= raw.count
    }

    @inlinable
    public mutating func writeVarint(_ value: UInt64) {
        reserve(10)
        count = storeVarint(value, at: count)
    }

    /// Stores `value` as a varint at offset `at` (room already reserved) and
    /// returns the offset just after it. The one varint writer: a field's
    /// value and a widened length slot both go through it.
    @inlinable
    func storeVarint(_ value: UInt64, at offset: Int) -> Int {
        var value = value
        var at = offset
        while value >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: value) | 0x80, toByteOffset: at, as: UInt8.self)
            value >>= 7
            at &+= 1
        }
        base.storeBytes(of: UInt8(truncatingIfNeeded: value), toByteOffset: at, as: UInt8.self)
        return at &+ 1
    }

    /// A tag or other varint known at generation time, as its bytes.
    @inlinable
    public mutating func writeRaw(_ byte: UInt8) { append(byte) }

    @inlinable
    public mutating func writeRaw(_ first: UInt8, _ second: UInt8) {
        reserve(2)
        base.storeBytes(of: first, toByteOffset: count, as: UInt8.self)
        base.storeBytes(of: second, toByteOffset: count &+ 1, as: UInt8.self)
        count &+= 2
    }

    @inlinable public mutating func writeUInt64(_ value: UInt64) { writeVarint(value) }
    @inlinable public mutating func writeUInt32(_ value: UInt32) { writeVarint(UInt64(value)) }
    @inlinable public mutating func writeInt64(_ value: Int64) { writeVarint(UInt64(bitPattern: value)) }
    /// Negative values take ten bytes (sign-extended), as the encoding says.
    @inlinable public mutating func writeInt32(_ value: Int32) { writeVarint(UInt64(bitPattern: Int64(value))) }
    @inlinable public mutating func writeBool(_ value: Bool) { append(value ? 1 : 0) }
    @inlinable public mutating func writeEnumValue(_ value: Int) { writeVarint(UInt64(bitPattern: Int64(value))) }
    @inlinable public mutating func writeSInt32(_ value: Int32) { writeVarint(UInt64(UInt32(bitPattern: (value << 1) ^ (value >> 31)))) }
    @inlinable public mutating func writeSInt64(_ value: Int64) { writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    @inlinable
    public mutating func writeFixed32(_ value: UInt32) {
        reserve(4)
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt32.self)
        count &+= 4
    }

    @inlinable
    public mutating func writeFixed64(_ value: UInt64) {
        reserve(8)
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt64.self)
        count &+= 8
    }

    @inlinable public mutating func writeSFixed32(_ value: Int32) { writeFixed32(UInt32(bitPattern: value)) }
    @inlinable public mutating func writeSFixed64(_ value: Int64) { writeFixed64(UInt64(bitPattern: value)) }
    @inlinable public mutating func writeFloat(_ value: Float) { writeFixed32(value.bitPattern) }
    @inlinable public mutating func writeDouble(_ value: Double) { writeFixed64(value.bitPattern) }

    @inlinable
    public mutating func writeString(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            writeVarint(UInt64(utf8.count))
            append(UnsafeRawBufferPointer(utf8))
        }
    }

    @inlinable
    public mutating func writeBytes(_ value: Data) {
        writeVarint(UInt64(value.count))
        value.withUnsafeBytes { append($0) }
    }

    /// A message's fields as this codec encoded them before (`WireEncoding`).
    @inlinable
    public mutating func writeEncoded(_ encoding: WireEncoding) {
        encoding.bytes.withUnsafeBytes { append($0) }
    }

    /// A nested message: its length, then its fields.
    @inlinable
    public mutating func writeMessage<M: WireMessage>(_ message: M) {
        writeDelimited { message.encode(to: &$0) }
    }

    /// A length-delimited run written by `body` (a message, a packed run).
    @inlinable
    public mutating func writeDelimited(_ body: (inout WireWriter) -> Void) {
        let slot = count
        append(0)
        body(&self)
        let length = count &- slot &- 1
        if length < 0x80 {
            base.storeBytes(of: UInt8(length), toByteOffset: slot, as: UInt8.self)
            return
        }
        widenSlot(at: slot, length: length)
    }

    /// Moves the `length` bytes after `slot` along to make room for their
    /// length as a varint of more than one byte, and writes it.
    @usableFromInline
    mutating func widenSlot(at slot: Int, length: Int) {
        let lengthSize = WireSize.varint(UInt64(length))
        reserve(lengthSize - 1)
        (base + slot + lengthSize).copyMemory(from: base + slot + 1, byteCount: length)  // memmove: overlapping is fine
        _ = storeVarint(UInt64(length), at: slot)
        count += lengthSize - 1
    }
}
