import Foundation
import NIOCore
import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// The linear encoder must write exactly the bytes swift-protobuf writes.
@Suite struct LinearEncoderTests {
    /// True when the message holds an image.
    @discardableResult
    func expectSameBytes<M: Message>(_ message: M, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let reference: [UInt8] = try message.serializedBytes()
        let linear = try LinearEncoder.bytes(message)
        #expect(linear == reference, "\(M.self): \(linear.count) vs \(reference.count) bytes", sourceLocation: sourceLocation)
        // The size alone, and with the images met on the way (as ImageWalk.scan finds them).
        let sized = LinearEncoder.sizeAndImages(of: message)
        let scan = ImageWalk.scan(message)
        #expect(LinearEncoder.size(of: message) == reference.count && sized.bytes == reference.count, sourceLocation: sourceLocation)
        #expect(sized.hasInlineImages == scan.hasInline && sized.hasImages == (scan.hasInline || !scan.refs.isEmpty), sourceLocation: sourceLocation)
        if let template = message as? HUTemplate {
            try expectSameBytes(HUEnvelope.with { $0.screenUpdate.full.top = template }, sourceLocation: sourceLocation)
        }
        if let envelope = message as? HUEnvelope, case .full(let screen)? = envelope.screenUpdate.change, screen.hasTop {
            // A full screen whose top template the car held encoded already.
            var buffer = ByteBufferAllocator().buffer(capacity: 0)
            let written = try LinearEncoder.encode(envelope, renderedTop: try LinearEncoder.bytes(screen.top), into: &buffer)
            #expect(written == reference.count && buffer.readBytes(length: buffer.readableBytes) == reference, sourceLocation: sourceLocation)
        }
        return sized.hasImages
    }

    @Test func everyVectorEnvelope() throws {
        var compared = 0
        for vector in VectorFile.shared.vectors {
            for frame in vector.frames where frame.kind == "MESSAGE" {
                guard let envelope = try? HUEnvelope(serializedBytes: Hex.decode(frame.payload_hex)) else { continue }
                try expectSameBytes(envelope)
                compared += 1
            }
        }
        #expect(compared >= 20)
    }

    /// The family fuzz seeds: chunks of (2-byte length, selector byte, message),
    /// each message decoded as an envelope whatever its type, so fields of other
    /// messages turn into unknown fields, which must come out byte for byte too.
    @Test func everyFamilySeed() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/families")
        var compared = 0
        for family in try FileManager.default.contentsOfDirectory(atPath: root.path) {
            let folder = root.appendingPathComponent(family)
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
                var rest = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))[...]
                while rest.count >= 2 {
                    let length = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
                    let chunk = rest.dropFirst(2).prefix(length)
                    rest = rest.dropFirst(2 + length)
                    guard let envelope = try? HUEnvelope(serializedBytes: Array(chunk.dropFirst())) else { continue }
                    try expectSameBytes(envelope)
                    compared += 1
                }
            }
        }
        #expect(compared >= 18)
    }

    /// `sizeAndImages` tells images by source, deep in a list as on a bar button.
    @Test func imagesMetOnTheWay() throws {
        func list(_ source: HUImage.OneOf_Source?) -> HUTemplate {
            HUTemplate.with {
                $0.id = "list"
                $0.list = HUListTemplate.with {
                    $0.sections = [HUListSection.with {
                        $0.items = [HUListItem.with { $0.id = "a"; $0.general = HUGeneralItem.with { $0.text = "A" } },
                                    HUListItem.with { $0.id = "b"; $0.general = HUGeneralItem.with { $0.text = "B"; if let source { $0.image.source = source } } }]
                    }]
                }
            }
        }
        for (source, inline, any) in [(nil, false, false), (.asset("car.seat"), false, false), (.ref(String(repeating: "a", count: 64)), false, true),
                                      (.png(Data([0x89, 0x50, 0x4e, 0x47])), true, true)] as [(HUImage.OneOf_Source?, Bool, Bool)] {
            let template = list(source)
            #expect(try expectSameBytes(template) == any)
            let sized = LinearEncoder.sizeAndImages(of: template)
            #expect(sized.hasInlineImages == inline && sized.hasImages == any, "\(String(describing: source))")
            #expect(LinearEncoder.holdsImageFields(template) == (source != nil), "\(String(describing: source))")
        }
        // An image field with no source is still one (the rules refuse it).
        var sourceless = list(nil)
        sourceless.list.sections[0].items[0].general.image = HUImage()
        #expect(LinearEncoder.holdsImageFields(sourceless) && !LinearEncoder.sizeAndImages(of: sourceless).hasImages)
    }

    /// A screen update as deep as the daemon sends: envelope, update, screen,
    /// template, list, section, item, its kind.
    @Test func deepScreenUpdate() throws {
        var list = HUListTemplate()
        var section = HUListSection()
        section.header = "Sëction"
        for index in 0..<100 {
            var general = HUGeneralItem()
            general.text = String(repeating: "item \(index) ", count: index % 7 + 1)
            general.detailText = index % 3 == 0 ? "" : "détail \(index)"
            var item = HUListItem()
            item.id = "item-\(index)"
            item.kind = .general(general)
            section.items.append(item)
        }
        list.sections = [section, section]
        var template = HUTemplate()
        template.id = "list"
        template.kind = .list(list)
        var screen = HURenderedScreen()
        screen.top = template
        // A modal (also a template, the field after the top) and a tab bar
        // whose tabs hold templates: a walk that splices the top leaves them be.
        screen.presented = HUTemplate.with { $0.id = "alert"; $0.alert.titleVariants = ["Stop?"] }
        screen.stack = ["root", "list"]
        screen.itemsShown = 12
        screen.itemsTotal = 200
        var update = HUScreenUpdate()
        update.sequence = UInt64.max
        update.full = screen
        var envelope = HUEnvelope()
        envelope.requestID = 1 << 40
        envelope.screenUpdate = update
        try expectSameBytes(envelope)
        var tabs = envelope
        tabs.screenUpdate.full.top = HUTemplate.with {
            $0.id = "tabs"
            $0.tabBar.tabs = [HUTab.with { $0.id = "one"; $0.template = template }, HUTab.with { $0.id = "two"; $0.template = template }]
        }
        try expectSameBytes(tabs)

        // Through the frame writer: header length matches the payload.
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        EnvelopeCodec.writeFrame(envelope, into: &buffer)
        let header = try #require(buffer.getInteger(at: FrameHeader.size - 4, as: UInt32.self))
        #expect(Int(header) == buffer.readableBytes - FrameHeader.size)
        let payload = try #require(buffer.getSlice(at: FrameHeader.size, length: Int(header)))
        #expect(try EnvelopeCodec.decode(payload) == envelope)
    }

    /// Field types the protocol does not use yet, from swift-protobuf's own
    /// well-known types: negative and extreme varints, fixed widths, packed
    /// repeated fields, bytes, and a map (which falls back to swift-protobuf).
    @Test func everyScalarKind() throws {
        try expectSameBytes(Google_Protobuf_Int32Value(-5))
        try expectSameBytes(Google_Protobuf_Int32Value(Int32.min))
        try expectSameBytes(Google_Protobuf_Int64Value(-1))
        try expectSameBytes(Google_Protobuf_UInt64Value(UInt64.max))
        try expectSameBytes(Google_Protobuf_UInt32Value(UInt32.max))
        try expectSameBytes(Google_Protobuf_FloatValue(-1.5))
        try expectSameBytes(Google_Protobuf_DoubleValue(.pi))
        try expectSameBytes(Google_Protobuf_BoolValue(true))
        try expectSameBytes(Google_Protobuf_StringValue("héllo, wörld ✓"))
        try expectSameBytes(Google_Protobuf_BytesValue(Data([0, 1, 2, 255])))
        try expectSameBytes(Google_Protobuf_Duration(seconds: -3, nanos: -5))
        var location = Google_Protobuf_SourceCodeInfo.Location()
        location.path = [1, -2, 300, Int32.max]  // packed int32
        location.span = [0, 70000]
        location.leadingComments = "a comment"
        var info = Google_Protobuf_SourceCodeInfo()
        info.location = [location, location]
        try expectSameBytes(info)
        var field = Google_Protobuf_FieldDescriptorProto()
        field.name = "f"
        field.number = 7
        field.type = .sfixed64
        field.label = .repeated
        var descriptor = Google_Protobuf_DescriptorProto()
        descriptor.name = "M"
        descriptor.field = [field, field]
        descriptor.reservedName = ["x", "y"]
        try expectSameBytes(descriptor)
        var structValue = Google_Protobuf_Struct()
        structValue.fields["key"] = Google_Protobuf_Value(stringValue: "value")
        structValue.fields["n"] = Google_Protobuf_Value(numberValue: 2)
        try expectSameBytes(structValue)
        try expectSameBytes(HUEnvelope())
    }
}
