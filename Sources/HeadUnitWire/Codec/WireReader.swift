import Foundation

/// Reads protobuf wire format from borrowed bytes, for the generated
/// `merge(from:)` of each message. Only valid while the bytes it was made
/// from are.
public struct WireReader {
    /// As swift-protobuf's default `messageDepthLimit`: the outer message
    /// counts, so 99 levels may nest below it (groups being skipped count too).
    public static let maximumDepth = 100

    @usableFromInline var position: UnsafeRawPointer?
    @usableFromInline let end: UnsafeRawPointer?
    @usableFromInline var depth: Int
    /// Fields skipped so far, nested messages' included: unknown numbers and
    /// known numbers sent with another wire type (section 4.4). A message
    /// that keeps the bytes it was read from (`Mark`) keeps them only when
    /// none was skipped inside it, so what it forwards is what it holds.
    @usableFromInline var skippedFields = 0

    @inlinable
    public init(_ bytes: UnsafeRawBufferPointer, depth: Int = 0) {
        self.position = bytes.baseAddress
        self.end = bytes.baseAddress.map { $0 + bytes.count }
        self.depth = depth
    }

    @inlinable
    var remaining: Int {
        guard let position, let end else { return 0 }
        return end - position
    }

    @inlinable
    public var isAtEnd: Bool { position == end }

    // MARK: - tags

    /// The next field's tag (field number << 3 | wire type), or nil at the
    /// end. Wire types 6 and 7 and field number 0 are malformed, as is an
    /// end-group here (groups are only skipped, by `skip(tag:)`).
    @inlinable
    public mutating func nextTag() throws(WireDecodingError) -> UInt32? {
        guard let position, position != end else { return nil }
        let first = position.load(as: UInt8.self)
        let tag: UInt32
        if first < 0x80 {
            self.position = position + 1
            tag = UInt32(first)
        } else {
            tag = try readTagVarint()
        }
        let wireType = tag & 7
        guard tag >> 3 != 0, wireType <= 5, wireType != 4 else { throw .malformed }
        return tag
    }

    /// Skips the field whose tag was just read (a group whole).
    public mutating func skip(tag: UInt32) throws(WireDecodingError) {
        skippedFields &+= 1
        switch tag & 7 {
        case 0: _ = try readVarint()
        case 1: try advance(8)
        case 2: try advance(try readLength())
        case 3:
            guard depth + 1 < Self.maximumDepth else { throw .tooDeep }
            depth += 1
            defer { depth -= 1 }
            while true {
                guard let position, position != end else { throw .truncated }
                // Inside a skipped group a tag is any varint, as swift-protobuf reads it there.
                let value = try readVarint()
                guard value < UInt64(UInt32.max) else { throw .malformed }
                let inner = UInt32(value)
                guard inner >> 3 != 0, inner & 7 <= 5 else { throw .malformed }
                if inner & 7 == 4 {
                    guard inner >> 3 == tag >> 3 else { throw .malformed }
                    return
                }
                try skip(tag: inner)
            }
        case 5: try advance(4)
        default: throw .malformed
        }
    }

    @inlinable
    mutating func advance(_ count: Int) throws(WireDecodingError) {
        guard count <= remaining else { throw .truncated }
        position = position.map { $0 + count }
    }

    /// A tag of more than one byte: at most five, the fifth under 16 (field
    /// numbers end at 2^29 - 1), as swift-protobuf reads them.
    @usableFromInline
    mutating func readTagVarint() throws(WireDecodingError) -> UInt32 {
        guard var pointer = position, let end else { throw .truncated }
        var value: UInt32 = 0
        for index in 0..<5 {
            guard pointer != end else { throw index == 0 ? .truncated : .malformed }
            let byte = pointer.load(as: UInt8.self)
            pointer += 1
            if index == 4 {
                guard byte <= 0x0F else { throw .malformed }
                value |= UInt32(byte) << 28
                break
            }
            value |= UInt32(byte & 0x7F) << (7 * UInt32(index))
            if byte < 0x80 { break }
        }
        position = pointer
        return value
    }

    // MARK: - scalars

    @inlinable
    public mutating func readVarint() throws(WireDecodingError) -> UInt64 {
        guard var pointer = position, pointer != end, let end else { throw .truncated }
        var byte = pointer.load(as: UInt8.self)
        pointer += 1
        if byte < 0x80 {
            position = pointer
            return UInt64(byte)
        }
        var value = UInt64(byte & 0x7F)
        var shift: UInt64 = 7
        while true {
            guard pointer != end else { throw .truncated }
            guard shift <= 63 else { throw .malformed }
            byte = pointer.load(as: UInt8.self)
            pointer += 1
            value |= UInt64(byte & 0x7F) &<< shift
            if byte < 0x80 {
                position = pointer
                return value
            }
            shift += 7
        }
    }

    @inlinable
    public mutating func readLength() throws(WireDecodingError) -> Int {
        let length = try readVarint()
        guard length < 0x7FFF_FFFF else { throw .malformed }
        guard length <= UInt64(remaining) else { throw .truncated }
        return Int(length)
    }

    @inlinable public mutating func readUInt64() throws(WireDecodingError) -> UInt64 { try readVarint() }
    @inlinable public mutating func readUInt32() throws(WireDecodingError) -> UInt32 { UInt32(truncatingIfNeeded: try readVarint()) }
    @inlinable public mutating func readInt64() throws(WireDecodingError) -> Int64 { Int64(bitPattern: try readVarint()) }
    @inlinable public mutating func readInt32() throws(WireDecodingError) -> Int32 { Int32(truncatingIfNeeded: try readVarint()) }
    @inlinable public mutating func readBool() throws(WireDecodingError) -> Bool { try readVarint() != 0 }
    @inlinable public mutating func readEnumValue() throws(WireDecodingError) -> Int { Int(Int32(truncatingIfNeeded: try readVarint())) }

    @inlinable
    public mutating func readSInt32() throws(WireDecodingError) -> Int32 {
        let value = UInt32(truncatingIfNeeded: try readVarint())
        return Int32(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
    }

    @inlinable
    public mutating func readSInt64() throws(WireDecodingError) -> Int64 {
        let value = try readVarint()
        return Int64(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
    }

    @inlinable
    public mutating func readFixed32() throws(WireDecodingError) -> UInt32 {
        guard remaining >= 4, let pointer = position else { throw .truncated }
        position = pointer + 4
        return UInt32(littleEndian: pointer.loadUnaligned(as: UInt32.self))
    }

    @inlinable
    public mutating func readFixed64() throws(WireDecodingError) -> UInt64 {
        guard remaining >= 8, let pointer = position else { throw .truncated }
        position = pointer + 8
        return UInt64(littleEndian: pointer.loadUnaligned(as: UInt64.self))
    }

    @inlinable public mutating func readSFixed32() throws(WireDecodingError) -> Int32 { Int32(bitPattern: try readFixed32()) }
    @inlinable public mutating func readSFixed64() throws(WireDecodingError) -> Int64 { Int64(bitPattern: try readFixed64()) }
    @inlinable public mutating func readFloat() throws(WireDecodingError) -> Float { Float(bitPattern: try readFixed32()) }
    @inlinable public mutating func readDouble() throws(WireDecodingError) -> Double { Double(bitPattern: try readFixed64()) }

    @inlinable
    public mutating func readString() throws(WireDecodingError) -> String {
        let length = try readLength()
        guard length > 0, let pointer = position else { return "" }
        position = pointer + length
        let bytes = UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: length)
        // The standard library's concrete UTF-8 check and copy (public,
        // underscored): `String(validating:as:)` is generic over the encoding
        // and runs unspecialized, with two metadata lookups per string.
        guard let string = String._tryFromUTF8(bytes) else { throw .invalidUTF8 }
        return string
    }

    public mutating func readBytes() throws(WireDecodingError) -> Data {
        let length = try readLength()
        guard length > 0, let pointer = position else { return Data() }
        position = pointer + length
        return Data(bytes: pointer, count: length)
    }

    // MARK: - nested

    /// Reads a length-delimited message and merges it into `message`.
    @inlinable
    public mutating func mergeMessage<M: WireMessage>(_ message: inout M) throws(WireDecodingError) {
        let length = try readLength()
        guard depth + 1 < Self.maximumDepth else { throw .tooDeep }
        guard let pointer = position else {
            // Zero bytes left and a zero length: an empty message.
            return
        }
        var inner = WireReader(UnsafeRawBufferPointer(start: pointer, count: length), depth: depth + 1)
        try message.merge(from: &inner)
        position = pointer + length
        skippedFields &+= inner.skippedFields
    }

    @inlinable
    public mutating func readMessage<M: WireMessage>(_ type: M.Type = M.self) throws(WireDecodingError) -> M {
        var message = M()
        try mergeMessage(&message)
        return message
    }

    /// Merges into an optional message field (absent: from empty).
    @inlinable
    public mutating func mergeMessage<M: WireMessage>(_ message: inout M?) throws(WireDecodingError) {
        var value = message ?? M()
        message = nil
        try mergeMessage(&value)
        message = value
    }

    /// Reads a packed run: `element` is called until the run's bytes are used.
    @inlinable
    public mutating func readPacked(_ element: (inout WireReader) throws(WireDecodingError) -> Void) throws(WireDecodingError) {
        let length = try readLength()
        guard length > 0, let pointer = position else { return }
        var inner = WireReader(UnsafeRawBufferPointer(start: pointer, count: length), depth: depth)
        while !inner.isAtEnd {
            do throws(WireDecodingError) {
                try element(&inner)
            } catch .truncated {
                throw .malformed  // a value cut by the run's end
            }
        }
        position = pointer + length
    }

    /// The byte count of a packed run of fixed-size values, checked to divide.
    @inlinable
    public mutating func readPackedFixed(size: Int) throws(WireDecodingError) -> UnsafeRawBufferPointer {
        let length = try readLength()
        guard length % size == 0 else { throw .malformed }
        guard length > 0, let pointer = position else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        position = pointer + length
        return UnsafeRawBufferPointer(start: pointer, count: length)
    }
}

extension WireReader {
    /// Reads a length-delimited run (a map entry) through `body`, one level deeper.
    @inlinable
    public mutating func readDelimited(_ body: (inout WireReader) throws(WireDecodingError) -> Void) throws(WireDecodingError) {
        let length = try readLength()
        guard depth + 1 < Self.maximumDepth else { throw .tooDeep }
        guard let pointer = position else { return }
        var inner = WireReader(UnsafeRawBufferPointer(start: pointer, count: length), depth: depth + 1)
        try body(&inner)
        position = pointer + length
        skippedFields &+= inner.skippedFields
    }
}

extension WireReader {
    /// Where a message's bytes begin, for `receivedBytes(since:)`.
    public struct Mark {
        @usableFromInline let position: UnsafeRawPointer?
        @usableFromInline let skippedFields: Int

        @inlinable init(position: UnsafeRawPointer?, skippedFields: Int) {
            self.position = position
            self.skippedFields = skippedFields
        }
    }

    @inlinable
    public var mark: Mark { Mark(position: position, skippedFields: skippedFields) }

    /// The bytes read since `mark`, when no field was skipped among them
    /// (else nil): they then hold exactly what was decoded from them.
    @inlinable
    public func receivedBytes(since mark: Mark) -> [UInt8]? {
        guard skippedFields == mark.skippedFields else { return nil }
        guard let start = mark.position, let position else { return [] }
        return Array(UnsafeRawBufferPointer(start: start, count: position - start))
    }
}
