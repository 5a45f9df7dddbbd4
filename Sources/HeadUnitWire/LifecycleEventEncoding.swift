/// `Envelope{app_event: AppEvent{app_id, scene_id, template_id, lifecycle:
/// TemplateLifecycle{phase, animated}}}` encoded straight from its values
/// (PROTOCOL.md section 11: the car sends four of these for every push and
/// pop). Building the three messages and walking them cost ~5,600
/// instructions an event; this is a few hundred. The bytes are exactly
/// swift-protobuf's for the same envelope (fields in number order, proto3
/// defaults left out): `LifecycleEventEncodingTests` compares them.
public enum LifecycleEventEncoding {
    /// The fields every event of one scene carries alike (app_id = 1,
    /// scene_id = 2), encoded once for a transition's events and copied into each.
    public struct SceneFields: Sendable {
        fileprivate let bytes: [UInt8]

        public init(appID: String, sceneID: UInt32) {
            bytes = ByteWriter.bytes(WireBytes.stringFieldSize(appID) + WireBytes.varintFieldSize(UInt64(sceneID))) { writer in
                writer.stringField(appID, tag: 0x0A)
                writer.varintField(UInt64(sceneID), tag: 0x10)
            }
        }
    }

    public static func envelope(appID: String, sceneID: UInt32, templateID: String, phase: HULifecyclePhase, animated: Bool) -> [UInt8] {
        let scene = SceneFields(appID: appID, sceneID: sceneID)
        return ByteWriter.bytes(size(scene, templateID: templateID, phase: phase, animated: animated)) { writer in
            write(scene, templateID: templateID, phase: phase, animated: animated, to: &writer)
        }
    }

    /// The envelope's size in bytes.
    public static func size(_ scene: SceneFields, templateID: String, phase: HULifecyclePhase, animated: Bool) -> Int {
        let eventSize = eventSize(scene, templateID: templateID, phase: phase, animated: animated)
        return 2 + varintSize(UInt64(eventSize)) + eventSize
    }

    /// Appends the envelope to a batch for one peer.
    public static func append(
        _ scene: SceneFields, templateID: String, phase: HULifecyclePhase, animated: Bool, to envelopes: inout EncodedEnvelopes
    ) {
        envelopes.append(measured: size(scene, templateID: templateID, phase: phase, animated: animated)) { writer in
            write(scene, templateID: templateID, phase: phase, animated: animated, to: &writer)
        }
    }

    private static func write(
        _ scene: SceneFields, templateID: String, phase: HULifecyclePhase, animated: Bool, to writer: inout ByteWriter
    ) {
        let phaseValue = UInt64(bitPattern: Int64(phase.rawValue))
        let eventSize = eventSize(scene, templateID: templateID, phase: phase, animated: animated)
        // Envelope: request_id = 1 is 0 (left out), app_event = 22.
        writer.byte(0xB2)  // (22 << 3) | 2
        writer.byte(0x01)
        writer.varint(UInt64(eventSize))
        writer.bytes(scene.bytes)
        writer.stringField(templateID, tag: 0x22)
        writer.byte(0x92)  // (18 << 3) | 2
        writer.byte(0x01)
        writer.varint(UInt64(lifecycleSize(phaseValue, animated: animated)))
        writer.varintField(phaseValue, tag: 0x08)
        if animated {
            writer.byte(0x10)
            writer.byte(0x01)
        }
    }

    /// TemplateLifecycle: phase = 1 (varint), animated = 2 (bool).
    private static func lifecycleSize(_ phaseValue: UInt64, animated: Bool) -> Int {
        WireBytes.varintFieldSize(phaseValue) + (animated ? 2 : 0)
    }

    /// AppEvent: app_id = 1, scene_id = 2, template_id = 4, lifecycle = 18
    /// (a oneof member: written even when empty).
    private static func eventSize(_ scene: SceneFields, templateID: String, phase: HULifecyclePhase, animated: Bool) -> Int {
        let lifecycleSize = lifecycleSize(UInt64(bitPattern: Int64(phase.rawValue)), animated: animated)
        return scene.bytes.count + WireBytes.stringFieldSize(templateID) + 2 + varintSize(UInt64(lifecycleSize)) + lifecycleSize
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
