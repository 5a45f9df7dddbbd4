/// `Envelope{app_event: AppEvent{app_id, scene_id, template_id, lifecycle:
/// TemplateLifecycle{phase, animated}}}` encoded straight from its values
/// (PROTOCOL.md section 11: the car sends four of these for every push and
/// pop). Building the three messages and walking them cost ~5,600
/// instructions an event; this is a few hundred. The bytes are exactly
/// swift-protobuf's for the same envelope (fields in number order, proto3
/// defaults left out): `LifecycleEventEncodingTests` compares them.
public enum LifecycleEventEncoding {
    public static func envelope(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size(appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated))
        append(appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated, to: &bytes)
        return bytes
    }

    /// The envelope's size in bytes.
    public static func size(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> Int {
        let eventSize = eventSize(appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated)
        return 2 + varintSize(UInt64(eventSize)) + eventSize
    }

    /// Appends the envelope's bytes to `bytes`.
    public static func append(
        appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool, to bytes: inout [UInt8]
    ) {
        let phaseValue = UInt64(bitPattern: Int64(phase.rawValue))
        let eventSize = eventSize(appID: appID, sceneID: sceneID, templateID: templateID, phase: phase, animated: animated)
        // Envelope: request_id = 1 is 0 (left out), app_event = 22.
        bytes.append(0xB2)  // (22 << 3) | 2
        bytes.append(0x01)
        WireBytes.appendVarint(UInt64(eventSize), to: &bytes)
        WireBytes.appendStringField(appID, tag: 0x0A, to: &bytes)
        WireBytes.appendVarintField(UInt64(sceneID), tag: 0x10, to: &bytes)
        WireBytes.appendStringField(templateID, tag: 0x22, to: &bytes)
        bytes.append(0x92)  // (18 << 3) | 2
        bytes.append(0x01)
        WireBytes.appendVarint(UInt64(lifecycleSize(phaseValue, animated: animated)), to: &bytes)
        WireBytes.appendVarintField(phaseValue, tag: 0x08, to: &bytes)
        if animated {
            bytes.append(0x10)
            bytes.append(0x01)
        }
    }

    /// TemplateLifecycle: phase = 1 (varint), animated = 2 (bool).
    private static func lifecycleSize(_ phaseValue: UInt64, animated: Bool) -> Int {
        WireBytes.varintFieldSize(phaseValue) + (animated ? 2 : 0)
    }

    /// AppEvent: app_id = 1, scene_id = 2, template_id = 4, lifecycle = 18
    /// (a oneof member: written even when empty).
    private static func eventSize(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> Int {
        let lifecycleSize = lifecycleSize(UInt64(bitPattern: Int64(phase.rawValue)), animated: animated)
        return WireBytes.stringFieldSize(appID) + WireBytes.varintFieldSize(UInt64(sceneID))
            + WireBytes.stringFieldSize(templateID) + 2 + varintSize(UInt64(lifecycleSize)) + lifecycleSize
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
}
