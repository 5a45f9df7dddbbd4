import Foundation
import NIOCore
import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// `TemplateRequestDecoder` must decode exactly as swift-protobuf does, or
/// give up: what it returns equals swift-protobuf's envelope, its sizes are
/// what the envelope holds, and its template bytes are `WireTemplate`'s.
@Suite struct TemplateRequestDecoderTests {
    /// A seeded generator, so a failure names its case.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let texts = ["", "a", "Station 7 (now)", "café 🚗", String(repeating: "x", count: 130), "\u{0}nul"]

    static func text(_ rng: inout SplitMix) -> String { texts.randomElement(using: &rng)! }

    static func image(_ rng: inout SplitMix) -> HUImage {
        var image = HUImage()
        switch rng.next() % 4 {
        case 0: image.asset = text(&rng)
        case 1: image.png = Data((0..<Int(rng.next() % 40)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        case 2: image.ref = text(&rng)
        default: break
        }
        if rng.next() % 2 == 0 { image.widthPx = UInt32(truncatingIfNeeded: rng.next() >> UInt64(rng.next() % 64)) }
        if rng.next() % 2 == 0 { image.heightPx = UInt32(rng.next() % 300) }
        if rng.next() % 3 == 0 { image.darkAsset = text(&rng) }
        return image
    }

    static func button(_ rng: inout SplitMix) -> HUBarButton {
        var button = HUBarButton()
        button.id = text(&rng)
        button.title = text(&rng)
        if rng.next() % 2 == 0 { button.image = image(&rng) }
        button.disabled = rng.next() % 2 == 0
        button.style = HUButtonStyle(rawValue: Int(rng.next() % 4))!
        return button
    }

    static func item(_ rng: inout SplitMix) -> HUListItem {
        var general = HUGeneralItem()
        general.text = text(&rng)
        general.detailText = text(&rng)
        if rng.next() % 3 == 0 { general.image = image(&rng) }
        if rng.next() % 4 == 0 { general.accessoryImage = image(&rng) }
        general.accessory = HUAccessoryType(rawValue: Int(rng.next() % 3))!
        general.showsProgress = rng.next() % 2 == 0
        general.progress = [0, 0.5, 1, -0.0, .infinity, 1e-30].randomElement(using: &rng)!
        general.playing = rng.next() % 2 == 0
        general.playingIndicatorLocation = HUPlayingIndicatorLocation(rawValue: Int(rng.next() % 2))!
        general.explicitContent = rng.next() % 2 == 0
        general.disabled = rng.next() % 2 == 0
        general.read = rng.next() % 2 == 0
        general.showReadStatus = rng.next() % 2 == 0
        var item = HUListItem()
        item.id = text(&rng)
        item.kind = .general(general)
        return item
    }

    static func template(_ rng: inout SplitMix) -> HUTemplate {
        var list = HUListTemplate()
        list.title = text(&rng)
        list.sections = (0..<Int(rng.next() % 3)).map { _ in
            var section = HUListSection()
            section.id = text(&rng)
            section.header = text(&rng)
            section.items = (0..<Int(rng.next() % 14)).map { _ in item(&rng) }
            return section
        }
        list.leadingButtons = (0..<Int(rng.next() % 3)).map { _ in button(&rng) }
        list.trailingButtons = (0..<Int(rng.next() % 2)).map { _ in button(&rng) }
        list.emptyViewTitleVariants = (0..<Int(rng.next() % 3)).map { _ in text(&rng) }
        list.emptyViewSubtitleVariants = (0..<Int(rng.next() % 2)).map { _ in text(&rng) }
        var template = HUTemplate()
        template.id = text(&rng)
        if rng.next() % 8 != 0 { template.list = list }
        return template
    }

    static func envelope(_ rng: inout SplitMix) -> HUEnvelope {
        var request = HUTemplateRequest()
        request.appID = text(&rng)
        request.sceneID = UInt32(truncatingIfNeeded: rng.next() >> UInt64(rng.next() % 64))
        request.animated = rng.next() % 2 == 0
        switch rng.next() % 10 {
        case 0: request.op = .setRoot(template(&rng))
        case 1, 2, 3: request.op = .push(template(&rng))
        case 4: request.op = .present(template(&rng))
        case 5: request.op = .update(template(&rng))
        case 6: request.op = .pop(HUPopTemplate())
        case 7: request.op = .popToRoot(HUPopTemplate())
        case 8: request.op = .popTo(text(&rng))
        default: request.op = .dismiss(HUPopTemplate())
        }
        var envelope = HUEnvelope()
        envelope.requestID = UInt32(truncatingIfNeeded: rng.next() >> UInt64(rng.next() % 64))
        envelope.templateRequest = request
        return envelope
    }

    /// What the decoder must report for `envelope`, found by walking it.
    static func expectedSizes(_ envelope: HUEnvelope) -> WireSizes {
        var sizes = WireSizes()
        func note(_ string: String) { sizes.longestString = max(sizes.longestString, string.utf8.count) }
        func note(_ image: HUImage) {
            switch image.source {
            case .asset(let asset): note(asset)
            case .ref(let ref): note(ref)
            case .png(let png): sizes.longestBytes = max(sizes.longestBytes, png.count)
            case nil: break
            }
            note(image.darkAsset)
        }
        func note(_ button: HUBarButton) {
            note(button.id)
            note(button.title)
            if button.hasImage { note(button.image) }
        }
        let request = envelope.templateRequest
        note(request.appID)
        let template: HUTemplate
        switch request.op {
        case .setRoot(let t), .push(let t), .present(let t), .update(let t): template = t
        case .popTo(let id):
            note(id)
            return sizes
        default: return sizes
        }
        note(template.id)
        let list = template.list
        note(list.title)
        sizes.elements += list.sections.count + list.leadingButtons.count + list.trailingButtons.count
        sizes.elements += list.emptyViewTitleVariants.count + list.emptyViewSubtitleVariants.count
        (list.leadingButtons + list.trailingButtons).forEach(note)
        (list.emptyViewTitleVariants + list.emptyViewSubtitleVariants).forEach(note)
        for section in list.sections {
            note(section.id)
            note(section.header)
            sizes.elements += section.items.count
            for item in section.items {
                note(item.id)
                note(item.general.text)
                note(item.general.detailText)
                if item.general.hasImage { note(item.general.image) }
                if item.general.hasAccessoryImage { note(item.general.accessoryImage) }
            }
        }
        return sizes
    }

    /// Decodes `bytes` both ways; when the fast decoder takes them, the two must agree.
    @discardableResult
    static func compare(_ bytes: [UInt8], _ context: String) -> Bool {
        let payload = ByteBuffer(bytes: bytes)
        guard let fast = TemplateRequestDecoder.decode(payload) else { return false }
        let slow: HUEnvelope
        do {
            slow = try HUEnvelope(serializedBytes: bytes)
        } catch {
            Issue.record("the fast decoder took bytes swift-protobuf refuses (\(error)): \(context)")
            return true
        }
        let same = fast.envelope == slow || (try? fast.envelope.serializedBytes() as [UInt8]) == (try? slow.serializedBytes() as [UInt8])
        #expect(same, "\(context)")
        #expect(fast.envelope.unknownFields.data.isEmpty)
        #expect(fast.sizes == expectedSizes(slow), "\(context)")
        let found = WireTemplate(inEnvelope: payload)
        #expect(fast.template?.opField == found?.opField && fast.template?.bytes == found?.bytes, "\(context)")
        if let template = fast.template {
            // The kind it reports is the kind swift-protobuf decoded.
            #expect(template.kindField == WireTemplate.kindField(ofTemplateIn: slow), "\(context)")
        }
        if let template = fast.template, let measured = template.measured {
            // Said to be the template's encoding: it is, and the images are the walk's.
            let decoded = try? HUTemplate(serializedBytes: template.bytes)
            let encoded = try? decoded?.serializedBytes() as [UInt8]?
            #expect(encoded == template.bytes, "\(context)")
            if let decoded {
                let walked = LinearEncoder.sizeAndImages(of: decoded)
                #expect(walked.bytes == template.bytes.count && walked.hasInlineImages == measured.hasInlineImages && walked.hasImages == measured.hasImages, "\(context)")
                #expect(LinearEncoder.holdsImageFields(decoded) == measured.hasImageFields, "\(context)")
                #expect(WireTemplate.Measured.plainListItems(in: decoded) == measured.plainListItems, "\(context)")
                #expect(WireTemplate.Measured.uniqueElementIDs(in: decoded) == measured.uniqueElementIDs, "\(context)")
            }
        }
        return true
    }

    /// swift-protobuf's own encoding of a template is recognised as such.
    static func expectMeasured(_ bytes: [UInt8], _ context: String) {
        guard let fast = TemplateRequestDecoder.decode(ByteBuffer(bytes: bytes)), let template = fast.template else { return }
        #expect(template.measured != nil, "\(context): swift-protobuf's encoding not recognised")
    }

    /// The car learns from it whether a request may change the now-playing
    /// content (`ComposedScope`): a list's kind is 10, no kind is 0, and a
    /// now-playing template is not taken (the car reads that one itself).
    @Test func theTemplatesKindIsReported() throws {
        func decoded(_ template: HUTemplate) throws -> TemplateRequestDecoder.Decoded? {
            var request = HUTemplateRequest()
            request.push = template
            var envelope = HUEnvelope()
            envelope.templateRequest = request
            return TemplateRequestDecoder.decode(ByteBuffer(bytes: try envelope.serializedBytes() as [UInt8]))
        }
        var list = HUTemplate()
        list.id = "l"
        list.list.title = "A list"
        #expect(try decoded(list)?.template?.kindField == WireTemplate.listKindField)
        var none = HUTemplate()
        none.id = "n"
        #expect(try decoded(none)?.template?.kindField == 0)
        var nowPlaying = HUTemplate()
        nowPlaying.id = "p"
        nowPlaying.nowPlaying = HUNowPlayingTemplate()
        #expect(try decoded(nowPlaying) == nil)
    }

    /// The decoder compares the template's ids as it reads them: the car's
    /// element-id rule is skipped only when they are there and unique.
    @Test func theElementIDsAreComparedAsRead() throws {
        func unique(_ template: HUTemplate) throws -> Bool? {
            var request = HUTemplateRequest()
            request.push = template
            var envelope = HUEnvelope()
            envelope.templateRequest = request
            let measured = TemplateRequestDecoder.decode(ByteBuffer(bytes: try envelope.serializedBytes() as [UInt8]))?.template?.measured
            #expect(measured?.uniqueElementIDs == WireTemplate.Measured.uniqueElementIDs(in: template), "\(template)")
            return measured?.uniqueElementIDs
        }
        func list(_ itemIDs: [String], sectionID: String = "s", buttonIDs: [String] = [], templateID: String = "t") -> HUTemplate {
            var template = HUTemplate()
            template.id = templateID
            var section = HUListSection()
            section.id = sectionID
            section.items = itemIDs.map { id in HUListItem.with { $0.id = id; $0.general.text = "x" } }
            template.list.sections = [section]
            template.list.trailingButtons = buttonIDs.map { id in HUBarButton.with { $0.id = id; $0.title = "b" } }
            return template
        }
        let long = String(repeating: "l", count: 20)
        #expect(try unique(list(["a", "b", "item-10", "item-11", long + "1", long + "2"], buttonIDs: ["c"])) == true)
        #expect(try unique(list(["a", "b", "a"])) == false)  // short ids
        #expect(try unique(list(["item-0001", "item-0002", "item-0001"])) == false)  // 8 to 16 bytes
        #expect(try unique(list([long + "1", long + "1"])) == false)  // longer: compared whole
        #expect(try unique(list(["\(long)x\(long)", "\(long)y\(long)"])) == true)  // same length, head and tail: differ in the middle
        #expect(try unique(list(["a", "t"])) == false)  // the template's own id
        #expect(try unique(list(["a"], buttonIDs: ["s"])) == false)  // a button's id is a section's
        #expect(try unique(list(["a"], sectionID: "")) == false)  // a section without an id
        #expect(try unique(list(["a", ""])) == false)  // an item without one
        #expect(try unique(list(["a"], buttonIDs: [""])) == false)  // a button without one
        #expect(try unique(list(["a"], templateID: "")) == true)  // the template's own id is another rule's
        // The template's id, the section's and 22 items': 24 compared; one more is not.
        let most = WireTemplate.Measured.mostIDsCompared
        #expect(try unique(list((0..<(most - 2)).map { "i\($0)" })) == true)
        #expect(try unique(list((0..<(most - 1)).map { "i\($0)" })) == false)
    }

    @Test func theBenchmarksPushIsTakenAndEqualsSwiftProtobufs() throws {
        var general = HUGeneralItem()
        general.text = "Station 0 (now)"
        general.detailText = "Live radio, 128 kbit/s"
        var section = HUListSection()
        section.id = "t-section"
        section.items = (0..<12).map { index in
            var item = HUListItem()
            item.id = "t-item-\(index)"
            item.kind = .general(general)
            return item
        }
        var list = HUListTemplate()
        list.title = "Stations"
        list.sections = [section]
        var template = HUTemplate()
        template.id = "t"
        template.list = list
        var request = HUTemplateRequest()
        request.appID = "com.example.radio"
        request.push = template
        var envelope = HUEnvelope()
        envelope.requestID = 7
        envelope.templateRequest = request
        let bytes: [UInt8] = try envelope.serializedBytes()
        #expect(Self.compare(bytes, "bench push"))
        let decoded = try #require(TemplateRequestDecoder.decode(ByteBuffer(bytes: bytes)))
        #expect(decoded.envelope == envelope)
        #expect(decoded.sizes.elements == 13 && decoded.sizes.longestString == "Live radio, 128 kbit/s".utf8.count)
        #expect(decoded.template?.opField == WireTemplate.pushField)
        #expect(
            decoded.template?.measured
                == WireTemplate.Measured(hasInlineImages: false, hasImages: false, hasImageFields: false, plainListItems: true, uniqueElementIDs: true))
    }

    /// Bytes that decode to a template but are not its encoding are not
    /// measured by the decoder: the car measures the template itself.
    @Test func bytesThatAreNotTheTemplatesEncodingAreNotMeasured() throws {
        var template = HUTemplate()
        template.id = "t"
        template.list.title = "T"
        var item = HUListItem()
        item.id = "i"
        item.general.text = "x"
        item.general.image.png = Data([1, 2, 3])
        template.list.sections = [HUListSection.with { $0.items = [item] }]
        let canonical: [UInt8] = try template.serializedBytes()
        func envelope(_ templateBytes: [UInt8]) -> [UInt8] {
            // Envelope.template_request (11) { TemplateRequest.push (11) { template } }
            let request: [UInt8] = [0x5A] + varint(templateBytes.count) + templateBytes
            return [0x5A] + varint(request.count) + request
        }
        func varint(_ value: Int) -> [UInt8] {
            var value = UInt64(value)
            var bytes: [UInt8] = []
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            return bytes + [UInt8(value)]
        }
        let measured = try #require(TemplateRequestDecoder.decode(ByteBuffer(bytes: envelope(canonical)))?.template?.measured)
        #expect(measured == WireTemplate.Measured(hasInlineImages: true, hasImages: true, hasImageFields: true, plainListItems: true))

        let variants: [(String, [UInt8])] = [
            ("the id written twice", [0x0A, 0x01, UInt8(ascii: "s")] + canonical),
            ("fields out of order", Array(canonical.dropFirst(3)) + Array(canonical.prefix(3))),
            ("an empty string written", canonical + [0x0A, 0x00]),
            ("a length in a longer varint", [0x0A, 0x81, 0x00, UInt8(ascii: "t")] + canonical.dropFirst(3)),
        ]
        for (name, bytes) in variants {
            let decoded = try #require(TemplateRequestDecoder.decode(ByteBuffer(bytes: envelope(bytes))), "\(name)")
            #expect(decoded.template?.bytes == bytes, "\(name)")
            #expect(decoded.template?.measured == nil, "\(name)")
            Self.compare(envelope(bytes), name)
        }
    }

    @Test func everyGeneratedRequestIsTakenAndEqualsSwiftProtobufs() throws {
        for seed in 0..<600 as Range<UInt64> {
            var rng = SplitMix(state: seed)
            let envelope = Self.envelope(&rng)
            let bytes: [UInt8] = try envelope.serializedBytes()
            #expect(Self.compare(bytes, "seed \(seed)"), "seed \(seed) not taken")
            Self.expectMeasured(bytes, "seed \(seed)")
        }
    }

    /// Changed bytes: whatever the fast decoder still takes, swift-protobuf decodes to the same.
    @Test func changedBytesAreTakenOnlyAsSwiftProtobufReadsThem() throws {
        var taken = 0
        var given = 0
        for seed in 0..<400 as Range<UInt64> {
            var rng = SplitMix(state: seed &+ 10_000)
            let original: [UInt8] = try Self.envelope(&rng).serializedBytes()
            for change in 0..<12 {
                var bytes = original
                guard !bytes.isEmpty else { continue }
                let at = Int(rng.next() % UInt64(bytes.count))
                switch change % 4 {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: rng.next())
                case 1: bytes[at] ^= 1 << UInt8(rng.next() % 8)
                case 2: bytes.removeSubrange(at...)
                default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: at)
                }
                if Self.compare(bytes, "seed \(seed) change \(change) at \(at)") { taken += 1 } else { given += 1 }
            }
        }
        // Both ways are exercised.
        #expect(taken > 100 && given > 100, "taken \(taken), given up \(given)")
    }

    @Test func whatItDoesNotKnowExactlyIsLeftToSwiftProtobuf() throws {
        func push(_ change: (inout HUTemplate) -> Void) throws -> [UInt8] {
            var template = HUTemplate()
            template.id = "t"
            var item = HUListItem()
            item.id = "i"
            item.general.text = "x"
            var section = HUListSection()
            section.items = [item]
            template.list.sections = [section]
            change(&template)
            var envelope = HUEnvelope()
            envelope.requestID = 1
            envelope.templateRequest.push = template
            return try envelope.serializedBytes()
        }
        let plain = try push { _ in }
        #expect(TemplateRequestDecoder.decode(ByteBuffer(bytes: plain)) != nil)

        var cases: [(String, [UInt8])] = []
        cases.append(("a grid template", try push { $0.grid = HUGridTemplate() }))
        cases.append(("a message item", try push { $0.list.sections[0].items[0].message.text = "m" }))
        cases.append(("an unknown accessory", try push { $0.list.sections[0].items[0].general.accessory = .UNRECOGNIZED(9) }))
        cases.append(("an unknown button style", try push {
            var button = HUBarButton()
            button.style = .UNRECOGNIZED(-1)
            $0.list.leadingButtons = [button]
        }))
        var other = HUEnvelope()
        other.getStatus = HUGetStatus()
        cases.append(("another body", try other.serializedBytes()))
        // An unknown field (103, a varint) after the body.
        var unknown = plain
        unknown.append(contentsOf: [0xB8, 0x06, 0x01])
        cases.append(("an unknown field in the envelope", unknown))
        // template_request twice: swift-protobuf merges the two.
        cases.append(("a merged body", plain + plain))
        // Invalid UTF-8 in the template id ("t" is at a known place: replace it by 0xFF).
        var invalid = plain
        if let at = invalid.firstIndex(of: UInt8(ascii: "t")) { invalid[at] = 0xFF }
        cases.append(("text that is not UTF-8", invalid))
        for (name, bytes) in cases {
            #expect(TemplateRequestDecoder.decode(ByteBuffer(bytes: bytes)) == nil, "\(name)")
        }
    }
}
