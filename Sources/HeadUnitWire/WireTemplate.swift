import NIOCore

/// The bytes of the template a `TemplateRequest` carries, as the phone sent
/// them, found by reading the envelope's field headers (not by decoding it).
///
/// The car keeps these beside the template it stores, so a screen that shows
/// the template is sent to the HMIs with them copied in, instead of encoded
/// again (`LinearEncoder.encode(_:renderedTop:into:)`). They are that template
/// exactly only when the decoder did not merge it from several pieces: so the
/// envelope must hold `template_request` once, and the request exactly one
/// field of its `op` oneof. A caller also checks that their length is the
/// template's encoded size, so that what the HMIs are sent measures what the
/// composed bound counted (PROTOCOL.md section 10.4).
public struct WireTemplate: Sendable, Equatable {
    /// The `TemplateRequest.op` field the bytes came in: set_root 10, push 11, present 15, update 17.
    public let opField: Int
    public let bytes: [UInt8]
    /// Set when the bytes are known to be exactly swift-protobuf's encoding of
    /// the template (`TemplateRequestDecoder` checked each field): their
    /// length is its encoded size, and what they hold of images is here, so
    /// the car need not walk the template to measure it (`SceneState.Held`).
    public let measured: Measured?
    /// The template's kind as its field number in `Template.kind` (list 10,
    /// now_playing 13; 0 when it has none) when `TemplateRequestDecoder` read
    /// the template whole (a kind field at most once); nil when not known
    /// (`init(inEnvelope:)`).
    public let kindField: Int?

    public struct Measured: Sendable, Equatable {
        /// An image with an inline PNG.
        public var hasInlineImages: Bool
        /// An image with an inline PNG or a ref.
        public var hasImages: Bool
        /// An image field of any kind, even one with no source: without one,
        /// the car's image rules have nothing to check.
        public var hasImageFields: Bool
        /// Every list item is a general item (none without a kind) and every
        /// progress value is within 0...1: with no image field either, the
        /// car's per-item rules have nothing to find.
        public var plainListItems: Bool
        /// Every element of the list (section, item, bar button) has an id,
        /// and no two ids of the template, its own included, are the same:
        /// the car's element-id rule has nothing to find. False also when
        /// there were more than `mostIDsCompared` ids (not compared).
        public var uniqueElementIDs: Bool

        /// Beyond this many ids the decoder does not compare them (pairwise,
        /// the cost grows with the square): the car checks them itself.
        public static let mostIDsCompared = 24

        public init(hasInlineImages: Bool, hasImages: Bool, hasImageFields: Bool, plainListItems: Bool = false, uniqueElementIDs: Bool = false) {
            self.hasInlineImages = hasInlineImages
            self.hasImages = hasImages
            self.hasImageFields = hasImageFields
            self.plainListItems = plainListItems
            self.uniqueElementIDs = uniqueElementIDs
        }
    }

    public static let setRootField = 10
    public static let pushField = 11
    public static let presentField = 15
    public static let updateField = 17
    /// `Template.list` and `Template.now_playing` (templates.proto).
    public static let listKindField = 10
    public static let nowPlayingKindField = 13

    /// `Envelope.template_request` (headunit.proto) and `TemplateRequest.op`'s field numbers (session.proto).
    static let templateRequestField = 11
    static let opFields = 10...20
    static let templateOpFields: Set<Int> = [setRootField, pushField, presentField, updateField]

    public init(opField: Int, bytes: [UInt8], measured: Measured? = nil, kindField: Int? = nil) {
        self.opField = opField
        self.bytes = bytes
        self.measured = measured
        self.kindField = kindField
    }

    /// The template in an envelope's payload, or nil when it carries none
    /// (another message, another operation) or one the decoder merged.
    public init?(inEnvelope payload: ByteBuffer) {
        guard let found = payload.withUnsafeReadableBytes({ Self.find(in: $0) }) else { return nil }
        self = found
    }

    private static func find(in envelope: UnsafeRawBufferPointer) -> WireTemplate? {
        var request: UnsafeRawBufferPointer?
        var reader = FieldReader(envelope)
        while let field = reader.next() {
            guard let field else { return nil }  // not well formed: the decoder said otherwise, so do not guess
            if field.number == templateRequestField {
                guard request == nil, let content = field.content else { return nil }
                request = content
            }
        }
        guard let request else { return nil }
        var op: (number: Int, content: UnsafeRawBufferPointer)?
        reader = FieldReader(request)
        while let field = reader.next() {
            guard let field else { return nil }
            if opFields.contains(field.number) {
                guard op == nil, let content = field.content else { return nil }
                op = (field.number, content)
            }
        }
        guard let op, templateOpFields.contains(op.number) else { return nil }
        return WireTemplate(opField: op.number, bytes: Array(op.content))
    }

    /// How many times field `number` occurs in a message's bytes (0 when they
    /// are not well formed). `TemplateRequestDecoder` sizes arrays with it.
    static func count(of number: Int, in bytes: UnsafeRawBufferPointer) -> Int {
        var reader = FieldReader(bytes)
        var count = 0
        while let field = reader.next() {
            guard let field else { return 0 }
            if field.number == number { count += 1 }
        }
        return count
    }

    /// Protobuf fields one after another: number, and the content of a
    /// length-delimited one. `next()` is nil at the end and `.some(nil)` on
    /// bytes that are not well formed (or a group, which no message here has).
    private struct FieldReader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        mutating func next() -> (number: Int, content: UnsafeRawBufferPointer?)?? {
            guard offset < bytes.count else { return .none }
            guard let tag = varint(), tag >> 3 > 0, tag >> 3 <= UInt64(Int32.max) else { return .some(nil) }
            let number = Int(tag >> 3)
            switch tag & 7 {
            case 0:
                guard varint() != nil else { return .some(nil) }
                return (number, nil)
            case 1, 5:
                let width = tag & 7 == 1 ? 8 : 4
                guard bytes.count - offset >= width else { return .some(nil) }
                offset += width
                return (number, nil)
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count - offset) else { return .some(nil) }
                let start = offset
                offset += Int(length)
                return (number, UnsafeRawBufferPointer(rebasing: bytes[start..<offset]))
            default:
                return .some(nil)
            }
        }

        private mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.count, shift < 64 {
                let byte = bytes[offset]
                offset += 1
                value |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }
    }
}

// MARK: - What the decoder's facts mean, read from a decoded message

/// `TemplateRequestDecoder`'s tests and its fuzz family hold what it reports
/// to these, computed from swift-protobuf's decoding of the same bytes.
extension WireTemplate {
    /// The `kindField` the decoder reports for the template in `envelope`'s
    /// request: 10 for a list, 0 for none; nil for another kind (the decoder
    /// takes none) or no template.
    public static func kindField(ofTemplateIn envelope: HUEnvelope) -> Int? {
        switch envelope.templateRequest.op {
        case .setRoot(let template), .push(let template), .present(let template), .update(let template):
            switch template.kind {
            case nil: return 0
            case .list: return listKindField
            default: return nil
            }
        default: return nil
        }
    }
}

extension WireTemplate.Measured {
    /// `plainListItems` for `template`: every item of its list a general
    /// item with its progress within 0...1 (true with no list).
    public static func plainListItems(in template: HUTemplate) -> Bool {
        template.list.sections.allSatisfy { section in
            section.items.allSatisfy { item in
                guard case .general(let general) = item.kind else { return false }
                return (0...1).contains(general.progress)
            }
        }
    }

    /// `uniqueElementIDs` for `template`: its list's elements all have an id,
    /// no two of its ids (its own, when it has one, included) are the same,
    /// and there are at most `mostIDsCompared` of them.
    public static func uniqueElementIDs(in template: HUTemplate) -> Bool {
        let list = template.list
        var elementIDs = list.sections.map(\.id) + list.sections.flatMap { $0.items.map(\.id) }
        elementIDs += (list.leadingButtons + list.trailingButtons).map(\.id)
        let ids = elementIDs + (template.id.isEmpty ? [] : [template.id])
        return ids.count <= mostIDsCompared && !elementIDs.contains("") && Set(ids).count == ids.count
    }
}
