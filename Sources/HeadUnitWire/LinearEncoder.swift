#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore
import SwiftProtobuf

/// Protobuf binary encoding in linear time, straight into a `ByteBuffer`.
///
/// swift-protobuf's encoder writes a nested message's length prefix by calling
/// `serializedDataSize()` on it, which walks the whole subtree, and then walks
/// it again to write it; every level does the same for the levels below, so a
/// message `d` levels deep is walked `d` times. A screen update for the HMI is
/// eight levels deep (envelope, update, screen, template, list, section, item,
/// its kind), so that cost most of the daemon's CPU per request. Here one walk
/// writes: a nested message gets one byte for its length before its content
/// is written, enough below 128 bytes (most of them); a longer one moves its
/// content up by the bytes its length needs more. (A first walk measuring
/// every nested size, then a second writing, cost twice the walks.)
///
/// The bytes are identical to `serializedBytes()` (the tests compare them):
/// fields come in the same order from the same generated `traverse`. Map
/// fields are the one thing not handled (no message of the protocol has one);
/// for those `encode` falls back to swift-protobuf's encoder.
public enum LinearEncoder {
    /// Appends the encoding of `message` to `buffer`; returns its byte count.
    @discardableResult
    public static func encode<M: Message>(_ message: M, into buffer: inout ByteBuffer) throws -> Int {
        try withEncoding(message) { buffer.writeBytes($0) }
    }

    /// The bytes `encode` writes, lent to `body` (valid only inside it): a
    /// caller that allocates after learning the size allocates once.
    public static func withEncoding<M: Message, Result>(_ message: M, _ body: (UnsafeRawBufferPointer) -> Result) throws -> Result {
        var writer = WritingVisitor<Plain>()
        defer { writer.deallocate() }
        do {
            try message.traverse(visitor: &writer)
        } catch is MapFieldsNotSupported {
            let bytes: [UInt8] = try message.serializedBytes()
            return bytes.withUnsafeBytes(body)
        }
        return body(writer.written)
    }

    /// `encode` of a screen update whose full screen's top template is
    /// `renderedTop`, already encoded (a template the car holds, with the
    /// bytes the phone sent it in or encoded once: `SceneState.Held`): its
    /// bytes are copied where the walk meets `RenderedScreen.top` instead of
    /// walking it again. The envelope decodes as `envelope` (debug builds
    /// check every call); the bytes are `encode`'s when `renderedTop` is the
    /// top's encoding (the tests compare them), and the same length when they
    /// are the phone's, whose fields may come in another order.
    @discardableResult
    public static func encode(_ envelope: HUEnvelope, renderedTop: [UInt8], into buffer: inout ByteBuffer) throws -> Int {
        try withEncoding(envelope, renderedTop: renderedTop) { buffer.writeBytes($0) }
    }

    /// The bytes `encode(_:renderedTop:into:)` writes, lent to `body` (valid
    /// only inside it): a caller that allocates after learning the size
    /// allocates once (`EnvelopeCodec.frame`).
    public static func withEncoding<Result>(
        _ envelope: HUEnvelope, renderedTop: [UInt8], _ body: (UnsafeRawBufferPointer) -> Result
    ) throws -> Result {
        // Room for the top and a screen's usual rest: the walk seldom grows it.
        var writer = WritingVisitor<SplicingTop>(capacity: renderedTop.count + 512)
        defer { writer.deallocate() }
        writer.renderedTop = renderedTop
        try envelope.traverse(visitor: &writer)  // no map fields in the protocol
        // Checked up to 64 KiB (a decode of the largest screens per update
        // made debug daemons too slow for the tests that pipeline them).
        assert(
            writer.written.count > 1 << 16 || (try? HUEnvelope(serializedBytes: Array(writer.written))) == envelope,
            "the spliced top template is the one the screen shows")
        return body(writer.written)
    }

    /// The encoded size of `message` in bytes, without encoding it: one walk
    /// (the first of `encode`'s two). How the daemon measures what it would
    /// send (composed state, PROTOCOL.md section 10.4) before it changes anything.
    public static func size<M: Message>(of message: M) -> Int {
        var sizes = SizingVisitor<SizeOnly>()
        do {
            try message.traverse(visitor: &sizes)
        } catch {
            // Map fields (none in the protocol): swift-protobuf's own count.
            return ((try? message.serializedBytes()) as [UInt8]?)?.count ?? 0
        }
        return sizes.total
    }

    /// `size(of:)`, and on the same walk whether `message` holds an image
    /// with an inline PNG, and one with any source (`ImageWalk.scan` tells
    /// the same with a walk of its own).
    public static func sizeAndImages<M: Message>(of message: M) -> (bytes: Int, hasInlineImages: Bool, hasImages: Bool) {
        measure(message)
    }

    /// The same for a template (what the Core asks): called with the type
    /// known here, the walk is compiled for templates, which a generic call
    /// from another module would not be.
    public static func sizeAndImages(of template: HUTemplate) -> (bytes: Int, hasInlineImages: Bool, hasImages: Bool) {
        measure(template)
    }

    /// Whether `template` holds an image field, with a source or without
    /// (what `WireTemplate.Measured.hasImageFields` says of its bytes).
    public static func holdsImageFields(_ template: HUTemplate) -> Bool {
        var sizes = SizingVisitor<SizeAndImages>()
        try? template.traverse(visitor: &sizes)
        return sizes.hasImageFields
    }

    private static func measure<M: Message>(_ message: M) -> (bytes: Int, hasInlineImages: Bool, hasImages: Bool) {
        var sizes = SizingVisitor<SizeAndImages>()
        do {
            try message.traverse(visitor: &sizes)
        } catch {
            let scan = ImageWalk.scan(message)
            return (size(of: message), scan.hasInline, scan.hasInline || !scan.refs.isEmpty)
        }
        return (sizes.total, sizes.hasInlineImages, sizes.hasImages)
    }

    /// The encoding as an array (tests and tools; the daemon writes to buffers).
    public static func bytes<M: Message>(_ message: M) throws -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        try encode(message, into: &buffer)
        return buffer.readBytes(length: buffer.readableBytes) ?? []
    }
}

struct MapFieldsNotSupported: Error {}

extension LinearEncoder {
    /// The encoded size of a message field whose content is `contentBytes`
    /// long: tag, length prefix and content.
    public static func messageFieldSize(fieldNumber: Int, contentBytes: Int) -> Int {
        tagSize(fieldNumber) + varintSize(UInt64(contentBytes)) + contentBytes
    }
}

// MARK: - Wire format arithmetic

/// Also used by the envelopes the car writes itself (`WireBytes`).
@inline(__always)
func varintSize(_ value: UInt64) -> Int {
    // 1 byte per started group of 7 bits; 0 takes one byte.
    let bits = 64 - (value | 1).leadingZeroBitCount
    return (bits + 6) / 7
}

@inline(__always)
private func tagSize(_ fieldNumber: Int) -> Int {
    varintSize(UInt64(fieldNumber) << 3)
}

@inline(__always)
private func zigZag32(_ value: Int32) -> UInt64 {
    UInt64(UInt32(bitPattern: (value &<< 1) ^ (value >> 31)))
}

@inline(__always)
private func zigZag64(_ value: Int64) -> UInt64 {
    UInt64(bitPattern: (value &<< 1) ^ (value >> 63))
}

/// int32 and enum values are encoded as sign-extended 64-bit varints.
@inline(__always)
private func int32Varint(_ value: Int32) -> UInt64 {
    UInt64(bitPattern: Int64(value))
}

private enum WireType: UInt64 {
    case varint = 0, fixed64 = 1, lengthDelimited = 2, startGroup = 3, endGroup = 4, fixed32 = 5
}

/// The payload length of a packed repeated field.
private func packedLength<T>(_ values: [T], _ size: (T) -> Int) -> Int {
    var length = 0
    for value in values { length += size(value) }
    return length
}

extension Visitor {
    /// Visits each element where it lies: the protocol's default
    /// `visitRepeatedMessageField` loops `for v in value`, which copies every
    /// element first (a list item is a 288-byte struct with a dozen
    /// references to retain and release).
    @inline(__always)
    fileprivate mutating func visitEachInPlace<M: Message>(_ values: [M], _ visit: (inout Self, borrowing M) throws -> Void) throws {
        try values.withUnsafeBufferPointer { elements in
            for index in elements.indices { try visit(&self, elements[index]) }
        }
    }
}

// MARK: - Sizes (size(of:), sizeAndImages)

/// What a sizing walk keeps besides the total, fixed per walk by the type
/// so that each kind of walk is compiled without the others' branches.
private protocol SizingMode {
    /// Whether images are noted (`sizeAndImages`).
    static var notesImages: Bool { get }
}
private enum SizeOnly: SizingMode {
    static var notesImages: Bool { false }
}
private enum SizeAndImages: SizingMode {
    static var notesImages: Bool { true }
}

extension LinearEncoder {
    /// `RenderedScreen.top` and `.presented` (session.proto): the field a
    /// splicing walk takes as encoded, and the car's composed bound's
    /// held sizes (Car+Bounds).
    public static let renderedTopField = 5
    public static let renderedPresentedField = 6
}

private struct SizingVisitor<Mode: SizingMode>: Visitor {
    var total = 0
    /// Images met on the way (`SizeAndImages`): with an inline PNG, with any source.
    var hasInlineImages = false
    var hasImages = false
    /// An image field at all, with a source or without.
    var hasImageFields = false

    @inline(__always)
    private mutating func addField(_ fieldNumber: Int, payload: Int) {
        total += tagSize(fieldNumber) + payload
    }

    @inline(__always)
    private mutating func addDelimited(_ fieldNumber: Int, length: Int) {
        total += tagSize(fieldNumber) + varintSize(UInt64(length)) + length
    }

    mutating func visitSingularFloatField(value: Float, fieldNumber: Int) throws { addField(fieldNumber, payload: 4) }
    mutating func visitSingularDoubleField(value: Double, fieldNumber: Int) throws { addField(fieldNumber, payload: 8) }
    mutating func visitSingularInt32Field(value: Int32, fieldNumber: Int) throws { addField(fieldNumber, payload: varintSize(int32Varint(value))) }
    mutating func visitSingularInt64Field(value: Int64, fieldNumber: Int) throws { addField(fieldNumber, payload: varintSize(UInt64(bitPattern: value))) }
    mutating func visitSingularUInt32Field(value: UInt32, fieldNumber: Int) throws { addField(fieldNumber, payload: varintSize(UInt64(value))) }
    mutating func visitSingularUInt64Field(value: UInt64, fieldNumber: Int) throws { addField(fieldNumber, payload: varintSize(value)) }
    mutating func visitSingularSInt32Field(value: Int32, fieldNumber: Int) throws { addField(fieldNumber, payload: varintSize(zigZag32(value))) }
    mutating func visitSingularSInt64Field(value: Int64, fieldNumber: Int) throws { addField(fieldNumber, payload: varintSize(zigZag64(value))) }
    mutating func visitSingularFixed32Field(value: UInt32, fieldNumber: Int) throws { addField(fieldNumber, payload: 4) }
    mutating func visitSingularFixed64Field(value: UInt64, fieldNumber: Int) throws { addField(fieldNumber, payload: 8) }
    mutating func visitSingularSFixed32Field(value: Int32, fieldNumber: Int) throws { addField(fieldNumber, payload: 4) }
    mutating func visitSingularSFixed64Field(value: Int64, fieldNumber: Int) throws { addField(fieldNumber, payload: 8) }
    mutating func visitSingularBoolField(value: Bool, fieldNumber: Int) throws { addField(fieldNumber, payload: 1) }
    mutating func visitSingularStringField(value: String, fieldNumber: Int) throws { addDelimited(fieldNumber, length: value.utf8.count) }
    mutating func visitSingularBytesField(value: Data, fieldNumber: Int) throws { addDelimited(fieldNumber, length: value.count) }
    mutating func visitSingularEnumField<E: Enum>(value: E, fieldNumber: Int) throws {
        addField(fieldNumber, payload: varintSize(UInt64(bitPattern: Int64(value.rawValue))))
    }

    mutating func visitSingularMessageField<M: Message>(value: M, fieldNumber: Int) throws {
        if Mode.notesImages, M.self == HUImage.self {
            hasImageFields = true
            switch unsafeBitCast(value, to: HUImage.self).source {
            case .png: (hasInlineImages, hasImages) = (true, true)
            case .ref: hasImages = true
            case .asset, nil: break  // the car's own artwork: nothing to send or intern
            }
        }
        let outer = total
        total = 0
        try value.traverse(visitor: &self)
        let length = total
        total = outer
        addDelimited(fieldNumber, length: length)
    }

    mutating func visitRepeatedMessageField<M: Message>(value: [M], fieldNumber: Int) throws {
        try visitEachInPlace(value) { visitor, element in try visitor.visitSingularMessageField(value: element, fieldNumber: fieldNumber) }
    }

    mutating func visitRepeatedStringField(value: [String], fieldNumber: Int) throws {
        for string in value { addDelimited(fieldNumber, length: string.utf8.count) }
    }

    mutating func visitRepeatedBytesField(value: [Data], fieldNumber: Int) throws {
        for bytes in value { addDelimited(fieldNumber, length: bytes.count) }
    }

    mutating func visitSingularGroupField<G: Message>(value: G, fieldNumber: Int) throws {
        total += 2 * tagSize(fieldNumber)
        try value.traverse(visitor: &self)
    }

    mutating func visitPackedFloatField(value: [Float], fieldNumber: Int) throws { addDelimited(fieldNumber, length: 4 * value.count) }
    mutating func visitPackedDoubleField(value: [Double], fieldNumber: Int) throws { addDelimited(fieldNumber, length: 8 * value.count) }
    mutating func visitPackedInt32Field(value: [Int32], fieldNumber: Int) throws { addDelimited(fieldNumber, length: packedLength(value) { varintSize(int32Varint($0)) }) }
    mutating func visitPackedInt64Field(value: [Int64], fieldNumber: Int) throws { addDelimited(fieldNumber, length: packedLength(value) { varintSize(UInt64(bitPattern: $0)) }) }
    mutating func visitPackedUInt32Field(value: [UInt32], fieldNumber: Int) throws { addDelimited(fieldNumber, length: packedLength(value) { varintSize(UInt64($0)) }) }
    mutating func visitPackedUInt64Field(value: [UInt64], fieldNumber: Int) throws { addDelimited(fieldNumber, length: packedLength(value) { varintSize($0) }) }
    mutating func visitPackedSInt32Field(value: [Int32], fieldNumber: Int) throws { addDelimited(fieldNumber, length: packedLength(value) { varintSize(zigZag32($0)) }) }
    mutating func visitPackedSInt64Field(value: [Int64], fieldNumber: Int) throws { addDelimited(fieldNumber, length: packedLength(value) { varintSize(zigZag64($0)) }) }
    mutating func visitPackedFixed32Field(value: [UInt32], fieldNumber: Int) throws { addDelimited(fieldNumber, length: 4 * value.count) }
    mutating func visitPackedFixed64Field(value: [UInt64], fieldNumber: Int) throws { addDelimited(fieldNumber, length: 8 * value.count) }
    mutating func visitPackedSFixed32Field(value: [Int32], fieldNumber: Int) throws { addDelimited(fieldNumber, length: 4 * value.count) }
    mutating func visitPackedSFixed64Field(value: [Int64], fieldNumber: Int) throws { addDelimited(fieldNumber, length: 8 * value.count) }
    mutating func visitPackedBoolField(value: [Bool], fieldNumber: Int) throws { addDelimited(fieldNumber, length: value.count) }
    mutating func visitPackedEnumField<E: Enum>(value: [E], fieldNumber: Int) throws {
        addDelimited(fieldNumber, length: packedLength(value) { varintSize(UInt64(bitPattern: Int64($0.rawValue))) })
    }

    mutating func visitMapField<KeyType, ValueType: MapValueType>(
        fieldType: _ProtobufMap<KeyType, ValueType>.Type, value: _ProtobufMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws { throw MapFieldsNotSupported() }
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufEnumMap<KeyType, ValueType>.Type, value: _ProtobufEnumMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws where ValueType.RawValue == Int { throw MapFieldsNotSupported() }
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufMessageMap<KeyType, ValueType>.Type, value: _ProtobufMessageMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws { throw MapFieldsNotSupported() }

    mutating func visitUnknown(bytes: Data) throws { total += bytes.count }
}

// MARK: - Bytes (encode)

/// Whether a writing walk copies `RenderedScreen.top` from bytes encoded before.
private protocol WritingMode {
    static var splicesTop: Bool { get }
}
private enum Plain: WritingMode {
    static var splicesTop: Bool { false }
}
private enum SplicingTop: WritingMode {
    static var splicesTop: Bool { true }
}

private struct WritingVisitor<Mode: WritingMode>: Visitor {
    /// The bytes written so far, in memory this walk owns (grown by doubling;
    /// `deallocate` when done). Each field reserves the most it can take
    /// before it writes, so the puts below write without checks.
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private var count = 0
    /// `splicesTop`: the rendered screen's top template, encoded, and
    /// whether the message being walked is that screen.
    var renderedTop: [UInt8] = []
    var inRenderedScreen = false

    init(capacity: Int = 256) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 8)
    }

    func deallocate() { base.deallocate() }

    var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Room for `bytes` more. A tag and a varint take at most 15 bytes.
    @inline(__always)
    private mutating func reserve(_ bytes: Int) {
        if bytes > capacity - count { grow(count + bytes) }
    }

    @inline(never)
    private mutating func grow(_ needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        newBase.copyMemory(from: base, byteCount: count)
        base.deallocate()
        (base, capacity) = (newBase, newCapacity)
    }

    @inline(__always)
    private mutating func putByte(_ byte: UInt8) {
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    private mutating func putVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            putByte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        putByte(UInt8(value))
    }

    @inline(__always)
    private mutating func putTag(_ fieldNumber: Int, _ wireType: WireType) {
        reserve(15)
        putVarint(UInt64(fieldNumber) << 3 | wireType.rawValue)
    }

    @inline(__always)
    private mutating func putFixed32(_ value: UInt32) {
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt32.self)
        count += 4
    }

    @inline(__always)
    private mutating func putFixed64(_ value: UInt64) {
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt64.self)
        count += 8
    }

    private mutating func putRaw(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func visitSingularFloatField(value: Float, fieldNumber: Int) throws { putTag(fieldNumber, .fixed32); putFixed32(value.bitPattern) }
    mutating func visitSingularDoubleField(value: Double, fieldNumber: Int) throws { putTag(fieldNumber, .fixed64); putFixed64(value.bitPattern) }
    mutating func visitSingularInt32Field(value: Int32, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putVarint(int32Varint(value)) }
    mutating func visitSingularInt64Field(value: Int64, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putVarint(UInt64(bitPattern: value)) }
    mutating func visitSingularUInt32Field(value: UInt32, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putVarint(UInt64(value)) }
    mutating func visitSingularUInt64Field(value: UInt64, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putVarint(value) }
    mutating func visitSingularSInt32Field(value: Int32, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putVarint(zigZag32(value)) }
    mutating func visitSingularSInt64Field(value: Int64, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putVarint(zigZag64(value)) }
    mutating func visitSingularFixed32Field(value: UInt32, fieldNumber: Int) throws { putTag(fieldNumber, .fixed32); putFixed32(value) }
    mutating func visitSingularFixed64Field(value: UInt64, fieldNumber: Int) throws { putTag(fieldNumber, .fixed64); putFixed64(value) }
    mutating func visitSingularSFixed32Field(value: Int32, fieldNumber: Int) throws { putTag(fieldNumber, .fixed32); putFixed32(UInt32(bitPattern: value)) }
    mutating func visitSingularSFixed64Field(value: Int64, fieldNumber: Int) throws { putTag(fieldNumber, .fixed64); putFixed64(UInt64(bitPattern: value)) }
    mutating func visitSingularBoolField(value: Bool, fieldNumber: Int) throws { putTag(fieldNumber, .varint); putByte(value ? 1 : 0) }

    mutating func visitSingularStringField(value: String, fieldNumber: Int) throws {
        putTag(fieldNumber, .lengthDelimited)
        let utf8 = value.utf8
        putVarint(UInt64(utf8.count))
        let copied: Void? = utf8.withContiguousStorageIfAvailable { putRaw(UnsafeRawBufferPointer($0)) }
        if copied == nil {
            reserve(utf8.count)
            for byte in utf8 { putByte(byte) }
        }
    }

    mutating func visitSingularBytesField(value: Data, fieldNumber: Int) throws {
        putTag(fieldNumber, .lengthDelimited)
        putVarint(UInt64(value.count))
        value.withUnsafeBytes { putRaw($0) }
    }

    mutating func visitSingularEnumField<E: Enum>(value: E, fieldNumber: Int) throws {
        putTag(fieldNumber, .varint)
        putVarint(UInt64(bitPattern: Int64(value.rawValue)))
    }

    mutating func visitSingularMessageField<M: Message>(value: M, fieldNumber: Int) throws {
        putTag(fieldNumber, .lengthDelimited)
        if Mode.splicesTop, inRenderedScreen, fieldNumber == LinearEncoder.renderedTopField, M.self == HUTemplate.self {
            putVarint(UInt64(renderedTop.count))
            renderedTop.withUnsafeBytes { putRaw($0) }
            return
        }
        // One byte for the length, written once the content is.
        let lengthAt = count
        count += 1
        let outerScreen = inRenderedScreen
        if Mode.splicesTop { inRenderedScreen = M.self == HURenderedScreen.self }
        try value.traverse(visitor: &self)
        if Mode.splicesTop { inRenderedScreen = outerScreen }
        let length = count - lengthAt - 1
        let more = varintSize(UInt64(length)) - 1
        if more > 0 {
            reserve(more)
            let content = base + lengthAt + 1
            (content + more).copyMemory(from: content, byteCount: length)  // memmove: the regions overlap
        }
        count = lengthAt
        putVarint(UInt64(length))
        count += length
    }

    mutating func visitRepeatedMessageField<M: Message>(value: [M], fieldNumber: Int) throws {
        try visitEachInPlace(value) { visitor, element in try visitor.visitSingularMessageField(value: element, fieldNumber: fieldNumber) }
    }

    // Repeated strings and bytes are never packed. swift-protobuf's default
    // loops through the protocol's witness, so each element went to an
    // unspecialised copy of the singular visit (~4x its cost).
    mutating func visitRepeatedStringField(value: [String], fieldNumber: Int) throws {
        for string in value { try visitSingularStringField(value: string, fieldNumber: fieldNumber) }
    }

    mutating func visitRepeatedBytesField(value: [Data], fieldNumber: Int) throws {
        for bytes in value { try visitSingularBytesField(value: bytes, fieldNumber: fieldNumber) }
    }

    mutating func visitSingularGroupField<G: Message>(value: G, fieldNumber: Int) throws {
        putTag(fieldNumber, .startGroup)
        try value.traverse(visitor: &self)
        putTag(fieldNumber, .endGroup)
    }

    private mutating func putPacked<T>(_ values: [T], _ fieldNumber: Int, size: (T) -> Int, put: (inout Self, T) -> Void) {
        putTag(fieldNumber, .lengthDelimited)
        let length = packedLength(values, size)
        putVarint(UInt64(length))
        reserve(length)
        for value in values { put(&self, value) }
    }

    mutating func visitPackedFloatField(value: [Float], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 4 }) { $0.putFixed32($1.bitPattern) } }
    mutating func visitPackedDoubleField(value: [Double], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 8 }) { $0.putFixed64($1.bitPattern) } }
    mutating func visitPackedInt32Field(value: [Int32], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { varintSize(int32Varint($0)) }) { $0.putVarint(int32Varint($1)) } }
    mutating func visitPackedInt64Field(value: [Int64], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { varintSize(UInt64(bitPattern: $0)) }) { $0.putVarint(UInt64(bitPattern: $1)) } }
    mutating func visitPackedUInt32Field(value: [UInt32], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { varintSize(UInt64($0)) }) { $0.putVarint(UInt64($1)) } }
    mutating func visitPackedUInt64Field(value: [UInt64], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { varintSize($0) }) { $0.putVarint($1) } }
    mutating func visitPackedSInt32Field(value: [Int32], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { varintSize(zigZag32($0)) }) { $0.putVarint(zigZag32($1)) } }
    mutating func visitPackedSInt64Field(value: [Int64], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { varintSize(zigZag64($0)) }) { $0.putVarint(zigZag64($1)) } }
    mutating func visitPackedFixed32Field(value: [UInt32], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 4 }) { $0.putFixed32($1) } }
    mutating func visitPackedFixed64Field(value: [UInt64], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 8 }) { $0.putFixed64($1) } }
    mutating func visitPackedSFixed32Field(value: [Int32], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 4 }) { $0.putFixed32(UInt32(bitPattern: $1)) } }
    mutating func visitPackedSFixed64Field(value: [Int64], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 8 }) { $0.putFixed64(UInt64(bitPattern: $1)) } }
    mutating func visitPackedBoolField(value: [Bool], fieldNumber: Int) throws { putPacked(value, fieldNumber, size: { _ in 1 }) { $0.putByte($1 ? 1 : 0) } }
    mutating func visitPackedEnumField<E: Enum>(value: [E], fieldNumber: Int) throws {
        putPacked(value, fieldNumber, size: { varintSize(UInt64(bitPattern: Int64($0.rawValue))) }) {
            $0.putVarint(UInt64(bitPattern: Int64($1.rawValue)))
        }
    }

    // `encode` falls back to swift-protobuf for a message with a map.
    mutating func visitMapField<KeyType, ValueType: MapValueType>(
        fieldType: _ProtobufMap<KeyType, ValueType>.Type, value: _ProtobufMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws { throw MapFieldsNotSupported() }
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufEnumMap<KeyType, ValueType>.Type, value: _ProtobufEnumMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws where ValueType.RawValue == Int { throw MapFieldsNotSupported() }
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufMessageMap<KeyType, ValueType>.Type, value: _ProtobufMessageMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws { throw MapFieldsNotSupported() }

    mutating func visitUnknown(bytes: Data) throws { bytes.withUnsafeBytes { putRaw($0) } }
}
