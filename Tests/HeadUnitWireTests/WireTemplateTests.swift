import NIOCore
import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// `WireTemplate` finds a TemplateRequest's template in the envelope's bytes,
/// and only where those bytes are exactly the template the decoder makes.
@Suite struct WireTemplateTests {
    let template = HUTemplate.with {
        $0.id = "list"
        $0.list.title = "Títle"
        $0.list.sections = [HUListSection.with { $0.items = [HUListItem.with { $0.id = "a"; $0.general.text = "A" }] }]
    }

    func request(_ op: HUTemplateRequest.OneOf_Op) -> HUEnvelope {
        HUEnvelope.with {
            $0.requestID = 300
            $0.templateRequest = HUTemplateRequest.with { $0.appID = "app"; $0.sceneID = 2; $0.animated = true; $0.op = op }
        }
    }

    func found(_ bytes: [UInt8]) -> WireTemplate? {
        WireTemplate(inEnvelope: ByteBufferAllocator().buffer(bytes: bytes))
    }

    @Test func eachTemplateOperation() throws {
        let bytes: [UInt8] = try template.serializedBytes()
        for (op, field) in [(HUTemplateRequest.OneOf_Op.setRoot(template), 10), (.push(template), 11), (.present(template), 15), (.update(template), 17)] {
            #expect(found(try request(op).serializedBytes()) == WireTemplate(opField: field, bytes: bytes))
        }
        for op in [HUTemplateRequest.OneOf_Op.pop(HUPopTemplate()), .popTo("list"), .showNowPlaying(HUShowNowPlaying())] {
            #expect(found(try request(op).serializedBytes()) == nil)
        }
        #expect(found(try HUEnvelope.with { $0.launchApp.appID = "app" }.serializedBytes()) == nil)
        #expect(found([]) == nil)
    }

    /// Fields in any order; the template's own bytes are taken as they are.
    @Test func fieldsInAnotherOrder() throws {
        let op: [UInt8] = try HUTemplateRequest.with { $0.push = template }.serializedBytes()
        let rest: [UInt8] = try HUTemplateRequest.with { $0.appID = "app"; $0.sceneID = 2 }.serializedBytes()
        let requestBytes = op + rest
        let envelope: [UInt8] = [0x5a] + varint(requestBytes.count) + requestBytes + [0x08, 0x07]  // template_request (11), then request_id
        #expect(try HUEnvelope(serializedBytes: envelope).templateRequest.push == template)
        #expect(found(envelope) == WireTemplate(opField: 11, bytes: try template.serializedBytes()))
    }

    /// Where the decoder merges pieces (a message field sent twice) or the
    /// oneof's last field wins, the bytes are not one template's: not taken.
    @Test func mergedOrReplacedIsNotTaken() throws {
        let push: [UInt8] = try request(.push(template)).serializedBytes()
        #expect(found(push + push) == nil)  // template_request twice: merged
        let twoOps: [UInt8] = try request(.setRoot(template)).serializedBytes() + (try HUEnvelope.with {
            $0.templateRequest = HUTemplateRequest.with { $0.pop = HUPopTemplate() }
        }.serializedBytes())
        #expect(try HUEnvelope(serializedBytes: twoOps).templateRequest.op == .pop(HUPopTemplate()))
        #expect(found(twoOps) == nil)
        // Cut short, or a group: not well formed, not guessed at.
        #expect(found(Array(push.dropLast())) == nil)
        #expect(found([0x0b, 0x0c]) == nil)
    }

    private func varint(_ value: Int) -> [UInt8] {
        var value = UInt64(value), bytes: [UInt8] = []
        while value >= 0x80 { bytes.append(UInt8(value & 0x7f) | 0x80); value >>= 7 }
        return bytes + [UInt8(value)]
    }
}
