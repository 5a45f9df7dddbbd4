/// Protobuf wire-format writing into a byte array, for the few envelopes the
/// car encodes straight from their values (`LifecycleEventEncoding`,
/// `TemplateShownAnswer`): the message forms, built and walked, cost
/// thousands of instructions each on every push and pop.
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

    /// A one-byte tag and the string, unless it is empty.
    static func appendStringField(_ string: String, tag: UInt8, to bytes: inout [UInt8]) {
        var string = string
        let count = string.utf8.count
        guard count > 0 else { return }
        bytes.append(tag)
        appendVarint(UInt64(count), to: &bytes)
        string.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// A one-byte tag and the varint, unless it is zero.
    static func appendVarintField(_ value: UInt64, tag: UInt8, to bytes: inout [UInt8]) {
        guard value != 0 else { return }
        bytes.append(tag)
        appendVarint(value, to: &bytes)
    }

    static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}
