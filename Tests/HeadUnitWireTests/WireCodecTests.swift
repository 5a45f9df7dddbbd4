import Foundation
import HeadUnitProtobufOracle
import HeadUnitWire
import NIOCore
import SwiftProtobuf
import Testing

// Both modules define the protocol's types under the same names: ours are
// HeadUnitWire's, swift-protobuf's generated ones the oracle's.
fileprivate typealias SearchTemplate = HeadUnitWire.HUSearchTemplate
fileprivate typealias OracleSearchTemplate = HeadUnitProtobufOracle.HUSearchTemplate
fileprivate typealias GeneralItem = HeadUnitWire.HUGeneralItem
fileprivate typealias OracleGeneralItem = HeadUnitProtobufOracle.HUGeneralItem
fileprivate typealias ListItem = HeadUnitWire.HUListItem
fileprivate typealias OracleListItem = HeadUnitProtobufOracle.HUListItem
fileprivate typealias Image = HeadUnitWire.HUImage
fileprivate typealias OracleImage = HeadUnitProtobufOracle.HUImage
fileprivate typealias PointsOfInterest = HeadUnitWire.HUPointOfInterestTemplate
fileprivate typealias OraclePointsOfInterest = HeadUnitProtobufOracle.HUPointOfInterestTemplate
fileprivate typealias PeerAccess = HeadUnitWire.HUPeerAccess
fileprivate typealias OraclePeerAccess = HeadUnitProtobufOracle.HUPeerAccess
fileprivate typealias Lane = HeadUnitWire.HULane
fileprivate typealias OracleLane = HeadUnitProtobufOracle.HULane
fileprivate typealias Template = HeadUnitWire.HUTemplate
fileprivate typealias OracleTemplate = HeadUnitProtobufOracle.HUTemplate
fileprivate typealias TabBarTemplate = HeadUnitWire.HUTabBarTemplate
fileprivate typealias OracleTabBarTemplate = HeadUnitProtobufOracle.HUTabBarTemplate

/// The wire decisions of PROTOCOL.md section 4.4, one by one, on our codec,
/// each also held to swift-protobuf (`CodecOracle.check`); and `WireWriter`'s
/// one-byte length slot widened at 128 and 16384 bytes.
@Suite struct WireCodecTests {
    /// Bytes from hex (spaces ignored).
    static func bytes(_ hex: String) -> [UInt8] { Hex.decode(hex) }

    /// Decodes with ours, and checks swift-protobuf agrees (both decode to the same encoding, or both refuse).
    fileprivate static func decode<Ours: WireMessage, Oracle: SwiftProtobuf.Message>(
        _ hex: String, _ ours: Ours.Type, _ oracle: Oracle.Type, sourceLocation: SourceLocation = #_sourceLocation
    ) -> Result<Ours, WireDecodingError> {
        let input = bytes(hex)
        do {
            _ = try CodecOracle.check(input, ours, oracle)
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
        do throws(WireDecodingError) { return .success(try Ours(wireBytes: input)) } catch { return .failure(error) }
    }

    // MARK: - unknown and mistyped fields

    @Test func unknownFieldIsSkippedAndNotKept() throws {
        // placeholder "ab", then field 99 as a varint, a length-delimited run, a fixed32 and a group.
        let decoded = try Self.decode("0a 02 6162  98 06 2a  9a 06 02 0102  9d 06 01020304  9b 06 08 01 9c 06", SearchTemplate.self, OracleSearchTemplate.self).get()
        #expect(decoded.placeholder == "ab")
        #expect(decoded.wireBytes() == Self.bytes("0a 02 6162"))
    }

    @Test func knownFieldWithAnotherWireTypeIsSkipped() throws {
        // placeholder "ab", then field 1 again as a varint and as a fixed64: skipped, the value stays.
        let decoded = try Self.decode("0a 02 6162  08 05  09 0102030405060708", SearchTemplate.self, OracleSearchTemplate.self).get()
        #expect(decoded.placeholder == "ab")
        #expect(decoded.wireBytes() == Self.bytes("0a 02 6162"))
        // A message field sent as a varint is skipped too.
        let item = try Self.decode("18 07  0a 01 78", GeneralItem.self, OracleGeneralItem.self).get()
        #expect(item.text == "x" && item.image == Image())
    }

    // MARK: - fields sent twice

    @Test func scalarSentTwiceTakesTheLast() throws {
        let search = try Self.decode("0a 01 61  0a 01 62", SearchTemplate.self, OracleSearchTemplate.self).get()
        #expect(search.placeholder == "b")
        // selected_index 3, then 5.
        let points = try Self.decode("18 03  18 05", PointsOfInterest.self, OraclePointsOfInterest.self).get()
        #expect(points.selectedIndex == 5)
        #expect(points.wireBytes() == Self.bytes("18 05"))
    }

    @Test func messageSentTwiceIsMerged() throws {
        // image {asset "a", width 10}, then image {width 30, height 20}.
        let item = try Self.decode("1a 05 0a 01 61 18 0a  1a 04 18 1e 20 14", GeneralItem.self, OracleGeneralItem.self).get()
        #expect(item.image.asset == "a")
        #expect(item.image.widthPx == 30)
        #expect(item.image.heightPx == 20)
        #expect(item.wireBytes() == Self.bytes("1a 07 0a 01 61 18 1e 20 14"))
    }

    @Test func oneofTakesTheLastMemberAndMergesTheSameMember() throws {
        // asset "a", then png 0x01: the png.
        let image = try Self.decode("0a 01 61  12 01 01", Image.self, OracleImage.self).get()
        #expect(image.source == .png(Data([1])))
        // general {text "x"}, then general {detail_text "y"}: one general with both.
        let merged = try Self.decode("52 03 0a 01 78  52 03 12 01 79", ListItem.self, OracleListItem.self).get()
        #expect(merged.general.text == "x" && merged.general.detailText == "y")
        // general {text "x"}, then message {text "m"}: the message only.
        let replaced = try Self.decode("52 03 0a 01 78  62 03 0a 01 6d", ListItem.self, OracleListItem.self).get()
        guard case .message(let message)? = replaced.kind else {
            Issue.record("the last member sent wins: \(String(describing: replaced.kind))")
            return
        }
        #expect(message.text == "m")
        #expect(replaced.wireBytes() == Self.bytes("62 03 0a 01 6d"))
    }

    // MARK: - enums and varints

    @Test func unknownEnumValueIsKeptAsItsNumber() throws {
        // accessory = 7 (AccessoryType defines 0-2).
        let item = try Self.decode("20 07", GeneralItem.self, OracleGeneralItem.self).get()
        #expect(item.accessory == .UNRECOGNIZED(7))
        #expect(item.accessory.rawValue == 7)
        #expect(item.wireBytes() == Self.bytes("20 07"))
    }

    @Test func nonMinimalVarintIsAcceptedUpToTenBytes() throws {
        // selected_index 5 in four bytes, then in ten.
        let four = try Self.decode("18 85 80 80 00", PointsOfInterest.self, OraclePointsOfInterest.self).get()
        #expect(four.selectedIndex == 5)
        #expect(four.wireBytes() == Self.bytes("18 05"))
        let ten = try Self.decode("18 85 80 80 80 80 80 80 80 80 00", PointsOfInterest.self, OraclePointsOfInterest.self).get()
        #expect(ten.selectedIndex == 5)
        // A negative int32 is ten bytes (sign-extended) and round-trips.
        let negative = try Self.decode("18 ff ff ff ff ff ff ff ff ff 01", PointsOfInterest.self, OraclePointsOfInterest.self).get()
        #expect(negative.selectedIndex == -1)
        #expect(negative.wireBytes() == Self.bytes("18 ff ff ff ff ff ff ff ff ff 01"))
    }

    /// A field's tag is read in at most five bytes, as swift-protobuf reads it (its fifth
    /// byte at most 15): a tag padded to six bytes or more is malformed, even for a
    /// field this version does not define. (Found by the codec-voice-control fuzz family:
    /// `a2a2808080800000`, field 548 as a length-delimited run of 0 bytes.)
    @Test func tagOverFiveBytesIsMalformed() throws {
        // placeholder (field 1, wire type 2) with its tag in five bytes: taken.
        let five = try Self.decode("8a 80 80 80 00 01 61", SearchTemplate.self, OracleSearchTemplate.self).get()
        #expect(five.placeholder == "a")
        #expect(Self.decode("8a 80 80 80 80 00 01 61", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        #expect(Self.decode("a2a2808080800000", HeadUnitWire.HUVoiceControlTemplate.self, HeadUnitProtobufOracle.HUVoiceControlTemplate.self).failure == .malformed)
        // Inside a group being skipped swift-protobuf reads a tag as any varint (up to ten
        // bytes), so a six-byte tag there, or a six-byte end-group, is taken by both.
        _ = try Self.decode("9b06 888080808000 01 9c06", SearchTemplate.self, OracleSearchTemplate.self).get()
        _ = try Self.decode("9b06 9c8680808000", SearchTemplate.self, OracleSearchTemplate.self).get()
    }

    @Test func elevenByteVarintIsMalformed() {
        let result = Self.decode("18 85 80 80 80 80 80 80 80 80 80 00", PointsOfInterest.self, OraclePointsOfInterest.self)
        #expect(result.failure == .malformed)
    }

    @Test func packedAndUnpackedRepeatedScalarsAreBothAccepted() throws {
        // uids packed [1, 2, 3], then 4 unpacked, then packed [300].
        let access = try Self.decode("0a 03 010203  08 04  0a 02 ac02", PeerAccess.self, OraclePeerAccess.self).get()
        #expect(access.uids == [1, 2, 3, 4, 300])
        #expect(access.wireBytes() == Self.bytes("0a 06 01020304 ac02"))
        // angles_deg (double): 90 unpacked, then [-45] packed; written packed.
        let lane = try Self.decode("19 0000000000805640  1a 08 00000000008046c0", Lane.self, OracleLane.self).get()
        #expect(lane.anglesDeg == [90, -45])
        #expect(lane.wireBytes() == Self.bytes("1a 10 0000000000805640 00000000008046c0"))
        // A packed run of doubles that does not divide by 8 is malformed.
        #expect(Self.decode("1a 07 00000000008046", Lane.self, OracleLane.self).failure == .malformed)
    }

    // MARK: - malformed

    @Test func invalidUTF8IsMalformed() {
        let result = Self.decode("0a 02 c3 28", SearchTemplate.self, OracleSearchTemplate.self)
        #expect(result.failure == .invalidUTF8)
        // A string cut in the middle of a character is not UTF-8 either.
        #expect(Self.decode("0a 01 c3", SearchTemplate.self, OracleSearchTemplate.self).failure == .invalidUTF8)
    }

    /// A Template with `levels` messages nested below it: Template > TabBar > Tab > Template > ...
    static func nested(levels: Int) -> String {
        let tags: [UInt8] = [0x62, 0x0a, 0x3a]  // tab_bar = 12, tabs = 1, template = 7
        var inner: [UInt8] = []
        for level in (0..<levels).reversed() {
            var length: [UInt8] = []
            var value = inner.count
            while value >= 0x80 {
                length.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            length.append(UInt8(value))
            inner = [tags[level % 3]] + length + inner
        }
        return inner.map { String(format: "%02x", $0) }.joined()
    }

    /// Depth counts the outer message: 100 messages deep (99 below the outer one)
    /// decodes, 101 is malformed, as swift-protobuf's `messageDepthLimit` of 100.
    @Test func depthOverOneHundredIsMalformed() throws {
        _ = try Self.decode(Self.nested(levels: 99), Template.self, OracleTemplate.self).get()
        #expect(Self.decode(Self.nested(levels: 100), Template.self, OracleTemplate.self).failure == .tooDeep)
    }

    /// Groups (only ever skipped, as unknown fields) count toward the same depth.
    @Test func groupsNestedOverOneHundredAreMalformed() throws {
        func groups(_ count: Int) -> String {  // field 99: start-group tags, then as many end-group tags
            String(repeating: "9b06", count: count) + String(repeating: "9c06", count: count)
        }
        let skipped = try Self.decode("0a 01 61" + groups(99), SearchTemplate.self, OracleSearchTemplate.self).get()
        #expect(skipped.placeholder == "a")
        #expect(Self.decode(groups(100), SearchTemplate.self, OracleSearchTemplate.self).failure == .tooDeep)
    }

    @Test func lengthPastTheEndIsMalformed() {
        #expect(Self.decode("0a 05 61", SearchTemplate.self, OracleSearchTemplate.self).failure == .truncated)
        // A nested message's length past its parent's end.
        #expect(Self.decode("1a 02 0a 05 61", GeneralItem.self, OracleGeneralItem.self).failure == .truncated)
        // A varint cut by the end, and a fixed32 cut by the end.
        #expect(Self.decode("18 85", PointsOfInterest.self, OraclePointsOfInterest.self).failure == .truncated)
        #expect(Self.decode("0d 0102", SearchTemplate.self, OracleSearchTemplate.self).failure == .truncated)
    }

    @Test func fieldNumberZeroIsMalformed() {
        #expect(Self.decode("00 01", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        #expect(Self.decode("02 00", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
    }

    @Test func wireTypesSixAndSevenAreMalformed() {
        #expect(Self.decode("0e 00", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        #expect(Self.decode("0f 00", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        // Also for a field this version does not define.
        #expect(Self.decode("9e 06 00", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
    }

    @Test func strayEndGroupIsMalformed() {
        #expect(Self.decode("0c", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        #expect(Self.decode("0a 01 61 9c 06", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        // A group closed with another field's end-group, and one never closed.
        #expect(Self.decode("9b 06 08 01 a4 06", SearchTemplate.self, OracleSearchTemplate.self).failure == .malformed)
        #expect(Self.decode("9b 06 08 01", SearchTemplate.self, OracleSearchTemplate.self).failure == .truncated)
    }

    // MARK: - WireWriter's length slot

    /// A search template whose encoding is `size` bytes (placeholder only).
    fileprivate static func search(encodedSize size: Int) -> SearchTemplate {
        let prefix = size < 1000 ? 2 : 3  // the tag, then a length of one byte (127, 128) or two (16383, 16384)
        var search = SearchTemplate()
        search.placeholder = String(repeating: "x", count: size - prefix)
        return search
    }

    @Test(arguments: [(127, [0x7F]), (128, [0x80, 0x01]), (16383, [0xFF, 0x7F]), (16384, [0x80, 0x80, 0x01])] as [(Int, [UInt8])])
    func lengthSlotIsWidenedAtItsLimits(_ size: Int, _ length: [UInt8]) throws {
        let search = Self.search(encodedSize: size)
        #expect(search.wireSize == size)
        var writer = WireWriter()
        writer.writeMessage(search)
        #expect(Array(writer.bytes.prefix(length.count)) == length)
        #expect(Array(writer.bytes.dropFirst(length.count)) == search.wireBytes())

        // Nested: a template (tag 0xa2 0x01 for search = 20) in a tab in a tab bar, each slot widened in turn.
        var template = Template()
        template.id = "t"
        template.search = search
        var tab = HeadUnitWire.HUTab()
        tab.template = template
        var bar = TabBarTemplate()
        bar.tabs = [tab]
        let encoded = bar.wireBytes()
        #expect(bar.wireSize == encoded.count)
        let outcome = try CodecOracle.check(encoded, TabBarTemplate.self, OracleTabBarTemplate.self)
        #expect(outcome == .agreed(encodedBytes: encoded.count))
        #expect(encoded.count == 1 + WireSize.varint(UInt64(tab.wireSize)) + tab.wireSize)
    }

    /// A twelve-item list template, as the benchmark pushes.
    private static func listTemplate() -> Template {
        var list = HeadUnitWire.HUListTemplate()
        var section = HeadUnitWire.HUListSection()
        section.items = (0..<12).map { index in
            var general = GeneralItem()
            general.text = "Item \(index)"
            general.detailText = "detail"
            var item = ListItem()
            item.id = "item-\(index)"
            item.general = general
            return item
        }
        list.sections = [section]
        var template = Template()
        template.id = "list"
        template.list = list
        return template
    }

    @Test func aKeptEncodingIsTheValuesEncodingAndIsNotPartOfTheValue() throws {
        let plain = Self.listTemplate()
        var kept = plain
        kept.keepWireEncoding()
        #expect(kept.wireEncoding?.bytes == plain.wireBytes())
        #expect(kept.wireSize == plain.wireSize)
        #expect(kept == plain)
        #expect(plain.wireEncoding == nil)
        // In a message around it, the kept bytes are what is written.
        var screen = HeadUnitWire.HURenderedScreen()
        screen.top = kept
        var plainScreen = HeadUnitWire.HURenderedScreen()
        plainScreen.top = plain
        #expect(screen.wireBytes() == plainScreen.wireBytes())
    }

    @Test func anyChangeDropsTheKeptEncoding() throws {
        var template = Self.listTemplate()
        template.keepWireEncoding()
        // A change deep inside the oneof, through the generated accessors.
        template.list.sections[0].items[3].general.text = "changed"
        #expect(template.wireEncoding == nil)
        let decoded = try Template(wireBytes: template.wireBytes())
        #expect(decoded.list.sections[0].items[3].general.text == "changed")

        template.keepWireEncoding()
        template.id = "renamed"
        #expect(template.wireEncoding == nil)
        #expect(try Template(wireBytes: template.wireBytes()).id == "renamed")

        template.keepWireEncoding()
        template.kind = nil
        #expect(template.wireEncoding == nil)
        #expect(template.wireBytes() == Template.with { $0.id = "renamed" }.wireBytes())

        // A decode into a value that kept bytes drops them too (merge).
        template = Self.listTemplate()
        template.keepWireEncoding()
        let idX: [UInt8] = [0x0A, 0x01, 0x78]  // id = "x"
        try idX.withUnsafeBytes { raw in
            var reader = WireReader(raw)
            try template.merge(from: &reader)
        }
        #expect(template.wireEncoding == nil)
        #expect(template.id == "x")
    }

    /// A writer kept for frame after frame (the server's `FrameWriter`)
    /// writes each frame alone, whatever came before, large or small.
    @Test func aReusedWriterWritesOnlyTheNextFrame() throws {
        var writer = WireWriter()
        var large = HeadUnitWire.HUEnvelope()
        large.requestID = 1
        large.templateRequest.push = Self.listTemplate()
        large.templateRequest.push.id = String(repeating: "x", count: 70_000)  // past what the writer keeps
        var smallEnvelope = HeadUnitWire.HUEnvelope()
        smallEnvelope.requestID = 2
        smallEnvelope.templateRequest.push = Self.listTemplate()
        for envelope in [large, smallEnvelope, smallEnvelope, large, smallEnvelope] {
            var reused = ByteBuffer()
            EnvelopeCodec.writeFrame(envelope, into: &reused, using: &writer)
            var fresh = ByteBuffer()
            EnvelopeCodec.writeFrame(envelope, into: &fresh)
            #expect(reused == fresh)
            #expect(reused.readableBytes == FrameHeader.size + envelope.wireSize)
        }
    }

    /// A template read whole keeps the bytes it came in (PROTOCOL.md 4.4):
    /// spliced as they are, non-canonical forms included, so nothing is
    /// encoded again and nothing has to be proved canonical.
    @Test func aTemplateReadWholeKeepsTheBytesItCameIn() throws {
        let canonical = Self.listTemplate().wireBytes()
        // The same value, written otherwise: the id's tag padded (0x8A 0x80 0x00
        // is field 1, wire type 2 in three bytes) and moved after the list.
        let idField: [UInt8] = [0x0A, 0x04] + Array("list".utf8)
        #expect(canonical.starts(with: idField))
        let padded: [UInt8] = Array(canonical.dropFirst(idField.count)) + [0x8A, 0x80, 0x00, 0x04] + Array("list".utf8)
        var template = try Template(wireBytes: padded)
        #expect(template == Self.listTemplate())
        #expect(template.receivedEncoding?.bytes == padded)
        #expect(template.wireBytes() == canonical)  // not spliced until kept
        template.keepWireEncoding()
        #expect(template.wireBytes() == padded)
        #expect(template.wireSize == padded.count)
        // A change drops both.
        template.id = "other"
        #expect(template.receivedEncoding == nil && template.wireEncoding == nil)
    }

    /// A field skipped anywhere inside (an unknown number deep in an item,
    /// or a known one with another wire type) means the bytes hold more than
    /// the value: they are not kept, and the car's encoding is used instead.
    @Test func aTemplateWithASkippedFieldIsEncodedNotSpliced() throws {
        var item = HeadUnitWire.HUListItem()
        item.id = "a"
        var withUnknown = item.wireBytes()
        withUnknown += [0xF8, 0x07, 0x01]  // field 127, a varint: unknown
        var section = HeadUnitWire.HUListSection()
        section.items = [item]
        var list = HeadUnitWire.HUListTemplate()
        list.sections = [section]
        // Rebuilt by hand: the section (its items are field 3) holds the item
        // with its unknown field; the list's sections are field 2.
        let sectionBytes: [UInt8] = [0x1A, UInt8(withUnknown.count)] + withUnknown
        #expect(try HeadUnitWire.HUListSection(wireBytes: sectionBytes) == section)
        let listBytes: [UInt8] = [0x12, UInt8(sectionBytes.count)] + sectionBytes
        #expect(try HeadUnitWire.HUListTemplate(wireBytes: listBytes) == list)
        let templateBytes: [UInt8] = [0x0A, 0x01, 0x74, 0x52, UInt8(listBytes.count)] + listBytes
        var template = try Template(wireBytes: templateBytes)
        #expect(template.id == "t" && template.list == list)
        #expect(template.receivedEncoding == nil)
        template.keepWireEncoding()
        #expect(template.wireBytes() == Template.with { $0.id = "t"; $0.list = list }.wireBytes())
        #expect(template.wireBytes().count == templateBytes.count - 3)

        // A known field with another wire type is skipped the same way.
        let idAsVarint: [UInt8] = [0x08, 0x01] + Self.listTemplate().wireBytes()
        #expect(try Template(wireBytes: idAsVarint).receivedEncoding == nil)
    }
}

extension Result {
    /// The error, or nil when it succeeded.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
