/// `Envelope{app_event: AppEvent{app_id, scene_id, template_id, lifecycle:
/// TemplateLifecycle{phase, animated}}}` encoded straight from its values
/// (PROTOCOL.md section 13: the car sends four of these for every push and
/// pop). Building the three messages and walking them cost ~5,600
/// instructions an event; this is a few hundred. The bytes are exactly
/// swift-protobuf's for the same envelope (fields in number order, proto3
/// defaults left out): `LifecycleEventEncodingTests` compares them.
public enum LifecycleEventEncoding {
    public static func envelope(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> [UInt8] {
        // TemplateLifecycle: phase = 1 (varint), animated = 2 (bool).
        var lifecycle: [UInt8] = []
        if phase.rawValue != 0 {
            lifecycle.append(0x08)
            appendVarint(UInt64(bitPattern: Int64(phase.rawValue)), to: &lifecycle)
        }
        if animated { lifecycle += [0x10, 0x01] }
        // AppEvent: app_id = 1, scene_id = 2, template_id = 4, lifecycle = 18 (a
        // oneof member: written even when empty).
        var event: [UInt8] = []
        event.reserveCapacity(appID.utf8.count + templateID.utf8.count + lifecycle.count + 16)
        appendString(appID, tag: 0x0A, to: &event)
        if sceneID != 0 {
            event.append(0x10)
            appendVarint(UInt64(sceneID), to: &event)
        }
        appendString(templateID, tag: 0x22, to: &event)
        event += [0x92, 0x01]  // (18 << 3) | 2
        appendVarint(UInt64(lifecycle.count), to: &event)
        event += lifecycle
        // Envelope: request_id = 1 is 0 (left out), app_event = 22.
        var envelope: [UInt8] = [0xB2, 0x01]  // (22 << 3) | 2
        envelope.reserveCapacity(event.count + 8)
        appendVarint(UInt64(event.count), to: &envelope)
        envelope += event
        return envelope
    }

    /// The same event as an envelope body (kept for a phone that is
    /// reconnecting, PROTOCOL.md section 22, and the tests' reference).
    public static func body(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> HUEnvelope.OneOf_Body {
        var event = HUAppEvent()
        event.appID = appID
        event.sceneID = sceneID
        event.templateID = templateID
        var lifecycle = HUTemplateLifecycle()
        lifecycle.phase = phase
        lifecycle.animated = animated
        event.kind = .lifecycle(lifecycle)
        return .appEvent(event)
    }

    private static func appendString(_ string: String, tag: UInt8, to bytes: inout [UInt8]) {
        let utf8 = string.utf8
        guard !utf8.isEmpty else { return }
        bytes.append(tag)
        appendVarint(UInt64(utf8.count), to: &bytes)
        bytes.append(contentsOf: utf8)
    }

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}
