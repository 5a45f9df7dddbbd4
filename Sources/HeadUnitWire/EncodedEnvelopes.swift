/// Envelopes encoded for one peer, in order, kept in one array: each is a
/// 4-byte little-endian length, then the envelope's bytes (without a frame
/// header: the server frames each as it writes it). A push's four lifecycle
/// events are one allocation and one `CarEffect`, not four of each.
public struct EncodedEnvelopes: Sendable, Equatable {
    /// The lengths and envelopes, back to back.
    public private(set) var storage: [UInt8] = []

    public init() {}

    public var isEmpty: Bool { storage.isEmpty }

    /// Room for envelopes of `bytes` in all (their lengths included).
    public mutating func reserveCapacity(_ bytes: Int) { storage.reserveCapacity(bytes) }

    /// Appends one envelope, which `write` appends to the storage.
    public mutating func append(_ write: (inout [UInt8]) -> Void) {
        let start = storage.count
        for _ in 0..<4 { storage.append(0) }
        write(&storage)
        let length = UInt32(storage.count - start - 4)
        for index in 0..<4 { storage[start + index] = UInt8(truncatingIfNeeded: length >> (8 * index)) }
    }

    /// Each envelope's bytes, in order.
    public func forEach(_ body: (ArraySlice<UInt8>) throws -> Void) rethrows {
        var at = 0
        while at < storage.count {
            var length = 0
            for index in 0..<4 { length |= Int(storage[at + index]) << (8 * index) }
            try body(storage[(at + 4)..<(at + 4 + length)])
            at += 4 + length
        }
    }

    /// The envelopes' bytes, in order (for tests and checks).
    public var envelopes: [[UInt8]] {
        var all: [[UInt8]] = []
        forEach { all.append(Array($0)) }
        return all
    }
}
