#if canImport(FoundationEssentials)
import FoundationEssentials  // Data, for Image.png
#else
import Foundation
#endif
import NIOCore
import SwiftProtobuf

/// A direct decoder for the request that dominates a phone's traffic: a
/// `TemplateRequest` whose template, if it carries one, is a list of general
/// items (with bar buttons and images). It reads the fields straight into the
/// generated values, where swift-protobuf's decoder runs its generic code
/// unspecialised (its `BinaryDecoder` is internal to it), asks the runtime for
/// metadata at each nested field and copies each item in and out of its oneof.
///
/// It takes only what it knows exactly and gives up (nil) on anything else:
/// another body, another template kind or item kind, an unknown field, a wire
/// type that does not match, a field that swift-protobuf would merge (a
/// message field or a oneof seen twice), an enum value its type does not list,
/// text that is not UTF-8, bytes that are not well formed. The caller then
/// decodes with swift-protobuf as before, so the fast path never decides what
/// an error is. What it returns equals swift-protobuf's decoding of the same
/// bytes (`TemplateRequestDecoderTests`, and the stream fuzz target on every
/// payload it meets).
///
/// On the way it measures what `MessageLimits` checks (`WireSizes`), and it
/// knows the template's own bytes (`WireTemplate`), and whether they are
/// exactly what swift-protobuf would encode for the template (each message's
/// fields in ascending order, no default value written, every varint in its
/// shortest form), with what images they hold (`WireTemplate.Measured`).
/// So the car walks the request neither for its limits nor to measure it.
public enum TemplateRequestDecoder {
    public struct Decoded {
        public var envelope: HUEnvelope
        public var sizes: WireSizes
        /// The template's bytes as sent, when the operation carries one.
        public var template: WireTemplate?
    }

    public static func decode(_ payload: ByteBuffer) -> Decoded? {
        payload.withUnsafeReadableBytes { raw in
            var walk = Walk()
            var template: WireTemplate?
            do {
                let envelope = try decodeEnvelope(raw, &walk, &template)
                return Decoded(envelope: envelope, sizes: walk.sizes, template: template)
            } catch {
                return nil
            }
        }
    }
}

/// What `MessageLimits` limits, as a decoder met it: every repeated field's
/// elements counted (nested ones included), and the longest string and bytes.
public struct WireSizes: Sendable, Equatable {
    public var elements = 0
    public var longestString = 0
    public var longestBytes = 0

    public init() {}
}

/// The fast path does not take these bytes; swift-protobuf decodes them.
private struct NotTaken: Error {}

/// What the decoder learns on its way, besides the values.
private struct Walk {
    var sizes = WireSizes()
    /// Whether the bytes read since the last `resetForm()` are swift-protobuf's encoding of what they decode to.
    var canonical = true
    var inlineImages = false
    var images = false
    var imageFields = false
    /// A list item without a kind, or a progress outside 0...1 (NaN too).
    var unplainListItems = false
    var ids = ElementIDs()

    mutating func resetForm() {
        canonical = true
        inlineImages = false
        images = false
        imageFields = false
        unplainListItems = false
        ids = ElementIDs()
    }
}

/// The ids of a template and of its list's elements (sections, items, bar
/// buttons) as their bytes in the request, compared as they are read:
/// whether every element has one and none repeats (`WireTemplate.Measured.uniqueElementIDs`).
private struct ElementIDs {
    static let most = WireTemplate.Measured.mostIDsCompared

    /// Each id's length and its first and last eight bytes: equal keys are
    /// equal ids up to 16 bytes; longer ones are compared whole.
    private struct Key: Equatable {
        let count: Int
        let head: UInt64
        let tail: UInt64
    }
    private var keys: [Key] = []
    private var longIDs: [UnsafeRawBufferPointer] = []
    /// False once an element has no id, an id repeats, or there were too many to compare.
    private(set) var unique = true

    /// An element read without an id field: its id is empty.
    mutating func noteMissing() { unique = false }

    mutating func note(_ id: UnsafeRawBufferPointer) {
        guard unique else { return }
        guard keys.count < Self.most else {
            unique = false
            return
        }
        let key = Self.key(id)
        // Up to 16 bytes the key is the whole id; past that, the bytes are compared.
        if keys.contains(key), key.count <= 16 || longIDs.contains(where: { $0.elementsEqual(id) }) {
            unique = false
            return
        }
        if keys.isEmpty { keys.reserveCapacity(Self.most) }
        keys.append(key)
        if key.count > 16 { longIDs.append(id) }
    }

    private static func key(_ id: UnsafeRawBufferPointer) -> Key {
        if id.count >= 8 {
            return Key(count: id.count, head: id.loadUnaligned(as: UInt64.self), tail: id.loadUnaligned(fromByteOffset: id.count - 8, as: UInt64.self))
        }
        var head: UInt64 = 0
        for index in id.indices { head |= UInt64(id[index]) << (8 * UInt64(index)) }
        return Key(count: id.count, head: head, tail: 0)
    }
}

/// The fields of one message, one after another.
private struct FieldReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0
    /// The fields that may repeat (bit n: field n): only those may follow themselves in canonical form.
    let repeated: UInt64
    var lastNumber: UInt64 = 0

    init(_ bytes: UnsafeRawBufferPointer, repeated: UInt64 = 0) {
        self.bytes = bytes
        self.repeated = repeated
    }

    var atEnd: Bool { offset >= bytes.count }

    /// The next field's number and wire type.
    @inline(__always)
    mutating func tag(_ walk: inout Walk) throws(NotTaken) -> (number: UInt64, wire: UInt64) {
        let tag = try varint(&walk)
        // swift-protobuf refuses tags at or above 2^32 and field number 0.
        guard tag < UInt64(UInt32.max), tag >> 3 != 0 else { throw NotTaken() }
        let number = tag >> 3
        // swift-protobuf writes fields in ascending order, a repeated field's elements together.
        if number < lastNumber || (number == lastNumber && (number >= 64 || repeated & (1 << number) == 0)) { walk.canonical = false }
        lastNumber = number
        return (number, tag & 7)
    }

    /// A varint as swift-protobuf reads one: at most ten bytes, the bits past 64 dropped.
    @inline(__always)
    mutating func varint(_ walk: inout Walk) throws(NotTaken) -> UInt64 {
        let start = offset
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count, shift <= 63 {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7f) &<< shift
            if byte < 0x80 {
                if offset - start != varintSize(value) { walk.canonical = false }
                return value
            }
            shift += 7
        }
        throw NotTaken()
    }

    mutating func varint(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> UInt64 {
        guard wire == 0 else { throw NotTaken() }
        let value = try varint(&walk)
        // proto3 leaves a field at its default out.
        if value == 0 { walk.canonical = false }
        return value
    }

    /// A length-delimited field's content.
    mutating func content(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> UnsafeRawBufferPointer {
        guard wire == 2 else { throw NotTaken() }
        let length = try varint(&walk)
        guard length <= UInt64(bytes.count - offset) else { throw NotTaken() }
        let start = offset
        offset += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
    }

    /// A plain string field: proto3 leaves it out when empty.
    mutating func string(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> String {
        let string = try element(wire: wire, &walk)
        if string.isEmpty { walk.canonical = false }
        return string
    }

    /// The template's or an element's id: a plain string, noted in `walk.ids`.
    mutating func id(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> String {
        let content = try content(wire: wire, &walk)
        if content.isEmpty { walk.canonical = false }
        walk.ids.note(content)
        return try Self.text(content, &walk)
    }

    /// A string in a oneof or a repeated field: written even when empty.
    mutating func element(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> String {
        try Self.text(content(wire: wire, &walk), &walk)
    }

    private static func text(_ content: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> String {
        walk.sizes.longestString = max(walk.sizes.longestString, content.count)
        let utf8 = content.assumingMemoryBound(to: UInt8.self)
        // ASCII is valid UTF-8, and `String(decoding:)` is the standard
        // library's fast path; `String(validating:)` runs its generic code
        // unspecialised (~1,000 instructions a string), so it is kept for the rest.
        if isASCII(utf8) { return String(decoding: utf8, as: UTF8.self) }
        guard let string = String(validating: utf8, as: UTF8.self) else { throw NotTaken() }
        return string
    }

    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        // Eight bytes at a time, then the rest.
        while count - index >= 8 {
            if UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < count {
            if bytes[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    mutating func bool(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> Bool {
        let value = try varint(wire: wire, &walk)
        if value > 1 { walk.canonical = false }  // written as 1
        return value != 0
    }

    mutating func uint32(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> UInt32 {
        let value = try varint(wire: wire, &walk)
        if value > UInt64(UInt32.max) { walk.canonical = false }  // swift-protobuf keeps the low 32 bits
        return UInt32(truncatingIfNeeded: value)
    }

    /// An enum's raw value as swift-protobuf reads it (the varint's low 32 bits, signed).
    mutating func enumValue(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> Int {
        let value = try varint(wire: wire, &walk)
        let raw = Int(Int32(truncatingIfNeeded: value))
        // Known values are small and positive (a negative one is not taken): written as read only when the varint held just them.
        if UInt64(bitPattern: Int64(raw)) != value { walk.canonical = false }
        return raw
    }

    mutating func float(wire: UInt64, _ walk: inout Walk) throws(NotTaken) -> Float {
        guard wire == 5, bytes.count - offset >= 4 else { throw NotTaken() }
        let bits = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        offset += 4
        if bits == 0 { walk.canonical = false }  // left out when its bit pattern is zero
        return Float(bitPattern: bits)
    }
}

/// A set-once guard: a message field or oneof seen twice would be merged.
@inline(__always)
private func once(_ seen: inout Bool) throws(NotTaken) {
    guard !seen else { throw NotTaken() }
    seen = true
}

/// Bit `n` for each field number `n`: `FieldReader.repeated`.
private func fields(_ numbers: UInt64...) -> UInt64 {
    numbers.reduce(0) { $0 | 1 << $1 }
}

private func decodeEnvelope(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk, _ template: inout WireTemplate?) throws(NotTaken) -> HUEnvelope {
    var envelope = HUEnvelope()
    var reader = FieldReader(bytes)
    var body = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1: envelope.requestID = try reader.uint32(wire: wire, &walk)
        case 11:
            try once(&body)
            envelope.body = .templateRequest(try decodeTemplateRequest(reader.content(wire: wire, &walk), &walk, &template))
        default: throw NotTaken()
        }
    }
    return envelope
}

private func decodeTemplateRequest(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk, _ template: inout WireTemplate?) throws(NotTaken) -> HUTemplateRequest {
    var request = HUTemplateRequest()
    var reader = FieldReader(bytes)
    var op = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1: request.appID = try reader.string(wire: wire, &walk)
        case 2: request.sceneID = try reader.uint32(wire: wire, &walk)
        case 3: request.animated = try reader.bool(wire: wire, &walk)
        case 10, 11, 15, 17:
            try once(&op)
            let content = try reader.content(wire: wire, &walk)
            // Whether these bytes are the template's encoding: judged on its own fields only.
            walk.resetForm()
            let (decoded, kindField) = try decodeTemplate(content, &walk)
            let measured = walk.canonical ? WireTemplate.Measured(
                hasInlineImages: walk.inlineImages, hasImages: walk.images, hasImageFields: walk.imageFields, plainListItems: !walk.unplainListItems,
                uniqueElementIDs: walk.ids.unique) : nil
            template = WireTemplate(opField: Int(number), bytes: Array(content), measured: measured, kindField: kindField)
            switch number {
            case 10: request.op = .setRoot(decoded)
            case 11: request.op = .push(decoded)
            case 15: request.op = .present(decoded)
            default: request.op = .update(decoded)
            }
        case 12, 13, 16:
            try once(&op)
            // PopTemplate has no fields: anything in it is unknown to this decoder.
            guard try reader.content(wire: wire, &walk).isEmpty else { throw NotTaken() }
            switch number {
            case 12: request.op = .pop(HUPopTemplate())
            case 13: request.op = .popToRoot(HUPopTemplate())
            default: request.op = .dismiss(HUPopTemplate())
            }
        case 14:
            try once(&op)
            request.op = .popTo(try reader.element(wire: wire, &walk))
        default: throw NotTaken()
        }
    }
    return request
}

/// The template, and its kind's field number (0: it has none).
private func decodeTemplate(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> (template: HUTemplate, kindField: Int) {
    var template = HUTemplate()
    var reader = FieldReader(bytes)
    var kind = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1: template.id = try reader.id(wire: wire, &walk)
        case UInt64(WireTemplate.listKindField):
            try once(&kind)
            template.kind = .list(try decodeList(reader.content(wire: wire, &walk), &walk))
        default: throw NotTaken()
        }
    }
    return (template, kind ? WireTemplate.listKindField : 0)
}

private let listRepeated = fields(2, 3, 4, 5, 6)

private func decodeList(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> HUListTemplate {
    var list = HUListTemplate()
    list.sections.reserveCapacity(WireTemplate.count(of: 2, in: bytes))
    var reader = FieldReader(bytes, repeated: listRepeated)
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1: list.title = try reader.string(wire: wire, &walk)
        case 2:
            list.sections.append(try decodeSection(reader.content(wire: wire, &walk), &walk))
            walk.sizes.elements += 1
        case 3:
            list.leadingButtons.append(try decodeBarButton(reader.content(wire: wire, &walk), &walk))
            walk.sizes.elements += 1
        case 4:
            list.trailingButtons.append(try decodeBarButton(reader.content(wire: wire, &walk), &walk))
            walk.sizes.elements += 1
        case 5:
            list.emptyViewTitleVariants.append(try reader.element(wire: wire, &walk))
            walk.sizes.elements += 1
        case 6:
            list.emptyViewSubtitleVariants.append(try reader.element(wire: wire, &walk))
            walk.sizes.elements += 1
        default: throw NotTaken()
        }
    }
    return list
}

private let sectionRepeated = fields(3)

private func decodeSection(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> HUListSection {
    var section = HUListSection()
    // Sized once: an item is a large value, and each time the array grew it moved them all.
    section.items.reserveCapacity(WireTemplate.count(of: 3, in: bytes))
    var reader = FieldReader(bytes, repeated: sectionRepeated)
    var id = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1:
            id = true
            section.id = try reader.id(wire: wire, &walk)
        case 2: section.header = try reader.string(wire: wire, &walk)
        case 3:
            // Decoded where it is kept: returned, the item was copied out and destroyed.
            section.items.append(HUListItem())
            try decodeItem(reader.content(wire: wire, &walk), into: &section.items[section.items.count - 1], &walk)
            walk.sizes.elements += 1
        default: throw NotTaken()
        }
    }
    if !id { walk.ids.noteMissing() }
    return section
}

private func decodeItem(_ bytes: UnsafeRawBufferPointer, into item: inout HUListItem, _ walk: inout Walk) throws(NotTaken) {
    var reader = FieldReader(bytes)
    var kind = false
    var id = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1:
            id = true
            item.id = try reader.id(wire: wire, &walk)
        case 10:
            try once(&kind)
            item.kind = .general(try decodeGeneralItem(reader.content(wire: wire, &walk), &walk))
        default: throw NotTaken()
        }
    }
    if !kind { walk.unplainListItems = true }
    if !id { walk.ids.noteMissing() }
}

private func decodeGeneralItem(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> HUGeneralItem {
    var general = HUGeneralItem()
    var reader = FieldReader(bytes)
    var image = false
    var accessoryImage = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1: general.text = try reader.string(wire: wire, &walk)
        case 2: general.detailText = try reader.string(wire: wire, &walk)
        case 3:
            try once(&image)
            general.image = try decodeImage(reader.content(wire: wire, &walk), &walk)
        case 4:
            guard let accessory = HUAccessoryType(rawValue: try reader.enumValue(wire: wire, &walk)), accessory.isListed else { throw NotTaken() }
            general.accessory = accessory
        case 5:
            try once(&accessoryImage)
            general.accessoryImage = try decodeImage(reader.content(wire: wire, &walk), &walk)
        case 6: general.showsProgress = try reader.bool(wire: wire, &walk)
        case 7:
            let progress = try reader.float(wire: wire, &walk)
            if !(0...1).contains(progress) { walk.unplainListItems = true }
            general.progress = progress
        case 8: general.playing = try reader.bool(wire: wire, &walk)
        case 9:
            guard let location = HUPlayingIndicatorLocation(rawValue: try reader.enumValue(wire: wire, &walk)), location.isListed else { throw NotTaken() }
            general.playingIndicatorLocation = location
        case 10: general.explicitContent = try reader.bool(wire: wire, &walk)
        case 12: general.disabled = try reader.bool(wire: wire, &walk)
        case 13: general.read = try reader.bool(wire: wire, &walk)
        case 14: general.showReadStatus = try reader.bool(wire: wire, &walk)
        default: throw NotTaken()
        }
    }
    return general
}

private func decodeBarButton(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> HUBarButton {
    var button = HUBarButton()
    var reader = FieldReader(bytes)
    var image = false
    var id = false
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1:
            id = true
            button.id = try reader.id(wire: wire, &walk)
        case 2: button.title = try reader.string(wire: wire, &walk)
        case 3:
            try once(&image)
            button.image = try decodeImage(reader.content(wire: wire, &walk), &walk)
        case 4: button.disabled = try reader.bool(wire: wire, &walk)
        case 5:
            guard let style = HUButtonStyle(rawValue: try reader.enumValue(wire: wire, &walk)), style.isListed else { throw NotTaken() }
            button.style = style
        default: throw NotTaken()
        }
    }
    if !id { walk.ids.noteMissing() }
    return button
}

private func decodeImage(_ bytes: UnsafeRawBufferPointer, _ walk: inout Walk) throws(NotTaken) -> HUImage {
    var image = HUImage()
    var reader = FieldReader(bytes)
    var source = false
    walk.imageFields = true
    while !reader.atEnd {
        let (number, wire) = try reader.tag(&walk)
        switch number {
        case 1:
            try once(&source)
            image.source = .asset(try reader.element(wire: wire, &walk))
        case 2:
            try once(&source)
            let png = try reader.content(wire: wire, &walk)
            walk.sizes.longestBytes = max(walk.sizes.longestBytes, png.count)
            image.source = .png(Data(png))
            walk.inlineImages = true
            walk.images = true
        case 6:
            try once(&source)
            image.source = .ref(try reader.element(wire: wire, &walk))
            walk.images = true
        case 3: image.widthPx = try reader.uint32(wire: wire, &walk)
        case 4: image.heightPx = try reader.uint32(wire: wire, &walk)
        case 5: image.darkAsset = try reader.string(wire: wire, &walk)
        default: throw NotTaken()
        }
    }
    return image
}

// Whether a value is one of its type's declared cases (proto3 keeps others as
// `UNRECOGNIZED`; the car answers those with the slow path's KnownEnums walk).
extension HUAccessoryType {
    fileprivate var isListed: Bool {
        if case .UNRECOGNIZED = self { return false }
        return true
    }
}

extension HUPlayingIndicatorLocation {
    fileprivate var isListed: Bool {
        if case .UNRECOGNIZED = self { return false }
        return true
    }
}

extension HUButtonStyle {
    fileprivate var isListed: Bool {
        if case .UNRECOGNIZED = self { return false }
        return true
    }
}
