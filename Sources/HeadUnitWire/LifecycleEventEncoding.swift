/// `Envelope{app_event: AppEvent{app_id, scene_id, template_id, lifecycle:
/// TemplateLifecycle{phase, animated}}}` encoded straight from its values
/// (PROTOCOL.md section 11: the car sends four of these for every push and
/// pop). Building the three messages and walking them cost ~5,600
/// instructions an event; this is a few hundred. The bytes are exactly
/// swift-protobuf's for the same envelope (fields in number order, proto3
/// defaults left out): `LifecycleEventEncodingTests` compares them.
public enum LifecycleEventEncoding {
    public static func envelope(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> [UInt8] {
        let phaseValue = UInt64(bitPattern: Int64(phase.rawValue))
        // Sizes first, so the bytes go into one array allocated once.
        // TemplateLifecycle: phase = 1 (varint), animated = 2 (bool).
        let lifecycleSize = (phaseValue != 0 ? 1 + varintSize(phaseValue) : 0) + (animated ? 2 : 0)
        // AppEvent: app_id = 1, scene_id = 2, template_id = 4, lifecycle = 18
        // (a oneof member: written even when empty).
        let eventSize = stringFieldSize(appID) + (sceneID != 0 ? 1 + varintSize(UInt64(sceneID)) : 0)
            + stringFieldSize(templateID) + 2 + varintSize(UInt64(lifecycleSize)) + lifecycleSize
        // Envelope: request_id = 1 is 0 (left out), app_event = 22.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + varintSize(UInt64(eventSize)) + eventSize)
        bytes.append(0xB2)  // (22 << 3) | 2
        bytes.append(0x01)
        appendVarint(UInt64(eventSize), to: &bytes)
        appendString(appID, tag: 0x0A, to: &bytes)
        if sceneID != 0 {
            bytes.append(0x10)
            appendVarint(UInt64(sceneID), to: &bytes)
        }
        appendString(templateID, tag: 0x22, to: &bytes)
        bytes.append(0x92)  // (18 << 3) | 2
        bytes.append(0x01)
        appendVarint(UInt64(lifecycleSize), to: &bytes)
        if phaseValue != 0 {
            bytes.append(0x08)
            appendVarint(phaseValue, to: &bytes)
        }
        if animated {
            bytes.append(0x10)
            bytes.append(0x01)
        }
        return bytes
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

    private static func stringFieldSize(_ string: String) -> Int {
        let count = string.utf8.count
        return count == 0 ? 0 : 1 + varintSize(UInt64(count)) + count
    }

    private static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    private static func appendString(_ string: String, tag: UInt8, to bytes: inout [UInt8]) {
        var string = string
        let count = string.utf8.count
        guard count > 0 else { return }
        bytes.append(tag)
        appendVarint(UInt64(count), to: &bytes)
        string.withUTF8 { bytes.append(contentsOf: $0) }
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
