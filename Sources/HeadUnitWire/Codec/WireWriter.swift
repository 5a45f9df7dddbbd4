import Foundation

/// Writes protobuf wire format, for the generated `encode(to:)` of each
/// message. A nested message is written after a one-byte length slot that is
/// widened (the message moved along) only when it turns out longer than 127
/// bytes, so no size is computed before writing.
public struct WireWriter {
    public var bytes: [UInt8]

    @inlinable
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inlinable
    public mutating func writeVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// A tag or other varint known at generation time, as its bytes.
    @inlinable
    public mutating func writeRaw(_ byte: UInt8) { bytes.append(byte) }

    @inlinable
    public mutating func writeRaw(_ first: UInt8, _ second: UInt8) {
        bytes.append(first)
        bytes.append(second)
    }

    @inlinable public mutating func writeUInt64(_ value: UInt64) { writeVarint(value) }
    @inlinable public mutating func writeUInt32(_ value: UInt32) { writeVarint(UInt64(value)) }
    @inlinable public mutating func writeInt64(_ value: Int64) { writeVarint(UInt64(bitPattern: value)) }
    /// Negative values take ten bytes (sign-extended), as the encoding says.
    @inlinable public mutating func writeInt32(_ value: Int32) { writeVarint(UInt64(bitPattern: Int64(value))) }
    @inlinable public mutating func writeBool(_ value: Bool) { bytes.append(value ? 1 : 0) }
    @inlinable public mutating func writeEnumValue(_ value: Int) { writeVarint(UInt64(bitPattern: Int64(value))) }
    @inlinable public mutating func writeSInt32(_ value: Int32) { writeVarint(UInt64(UInt32(bitPattern: (value << 1) ^ (value >> 31)))) }
    @inlinable public mutating func writeSInt64(_ value: Int64) { writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    @inlinable
    public mutating func writeFixed32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inlinable
    public mutating func writeFixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
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
            bytes.append(contentsOf: utf8)
        }
    }

    @inlinable
    public mutating func writeBytes(_ value: Data) {
        writeVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A message's fields as this codec encoded them before (`WireEncoding`).
    @inlinable
    public mutating func writeEncoded(_ encoding: WireEncoding) {
        bytes.append(contentsOf: encoding.bytes)
    }

    /// A nested message: its length, then its fields.
    @inlinable
    public mutating func writeMessage<M: WireMessage>(_ message: M) {
        writeDelimited { message.encode(to: &$0) }
    }

    /// A length-delimited run written by `body` (a message, a packed run).
    @inlinable
    public mutating func writeDelimited(_ body: (inout WireWriter) -> Void) {
        let slot = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - slot - 1
        if length < 0x80 {
            bytes[slot] = UInt8(length)
            return
        }
        widenSlot(at: slot, length: length)
    }

    @usableFromInline
    mutating func widenSlot(at slot: Int, length: Int) {
        var lengthBytes: [UInt8] = []
        var value = UInt64(length)
        while value >= 0x80 {
            lengthBytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        lengthBytes.append(UInt8(value))
        let extra = lengthBytes.count - 1
        bytes.append(contentsOf: repeatElement(0, count: extra))
        bytes.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!
            (base + slot + 1 + extra).copyMemory(from: base + slot + 1, byteCount: length)
            for (index, byte) in lengthBytes.enumerated() { raw[slot + index] = byte }
        }
    }
}
