/// The OK answer to a template request, `Envelope{request_id, result:
/// Result{template_shown: TemplateShown{template_id, depth, items_shown,
/// items_total}}}` (PROTOCOL.md section 11), encoded straight from its
/// values: every push and pop answers with one, and building the three
/// messages and walking them cost thousands of instructions. The bytes are
/// exactly swift-protobuf's for the same envelope (fields in number order,
/// proto3 defaults left out): `TemplateShownEncodingTests` compares them.
public struct TemplateShownAnswer: Equatable, Sendable {
    public var templateID: String
    public var depth: UInt32
    public var itemsShown: UInt32
    public var itemsTotal: UInt32

    public init(templateID: String, depth: UInt32, itemsShown: UInt32 = 0, itemsTotal: UInt32 = 0) {
        self.templateID = templateID
        self.depth = depth
        self.itemsShown = itemsShown
        self.itemsTotal = itemsTotal
    }

    /// The answer to `requestID`, encoded.
    public func envelope(requestID: UInt32) -> [UInt8] {
        // TemplateShown: template_id = 1, depth = 2, items_shown = 3, items_total = 4.
        let shownSize = WireBytes.stringFieldSize(templateID) + WireBytes.varintFieldSize(UInt64(depth))
            + WireBytes.varintFieldSize(UInt64(itemsShown)) + WireBytes.varintFieldSize(UInt64(itemsTotal))
        // Result: code = 1 is OK (0, left out), no message or limit; template_shown = 12
        // (a oneof member: written even when empty).
        let resultSize = 1 + varintSize(UInt64(shownSize)) + shownSize
        // Envelope: request_id = 1, result = 5.
        return ByteWriter.bytes(WireBytes.varintFieldSize(UInt64(requestID)) + 1 + varintSize(UInt64(resultSize)) + resultSize) { writer in
            writer.varintField(UInt64(requestID), tag: 0x08)
            writer.byte(0x2A)  // (5 << 3) | 2
            writer.varint(UInt64(resultSize))
            writer.byte(0x62)  // (12 << 3) | 2
            writer.varint(UInt64(shownSize))
            writer.stringField(templateID, tag: 0x0A)
            writer.varintField(UInt64(depth), tag: 0x10)
            writer.varintField(UInt64(itemsShown), tag: 0x18)
            writer.varintField(UInt64(itemsTotal), tag: 0x20)
        }
    }

    /// The same answer as a message (the tests' reference).
    public var result: HUResult {
        var shown = HUTemplateShown()
        shown.templateID = templateID
        shown.depth = depth
        shown.itemsShown = itemsShown
        shown.itemsTotal = itemsTotal
        var result = HUResult()
        result.templateShown = shown
        return result
    }
}
