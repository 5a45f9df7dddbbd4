import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// A request refused by a composed bound (Car+Bounds) leaves the car as it
/// was: a template request's scene is measured before it is stored
/// (`Car.appScenesViolation`), anything else is undone to the whole car.
@Suite struct ComposedUndoTests {
    static let app = "com.example.radio"

    /// A car whose phone may hold the root list and `room` bytes more: the
    /// session played once to measure the root, then on a car with the bound.
    static func harness(room: Int) -> (CarHarness, UInt32) {
        func session(on car: Car) -> (CarHarness, UInt32) {
            var h = CarHarness()
            h.car = car
            h.join(h.hmi, .hmi)
            h.join(h.phone, .phone)
            _ = h.announce([(app, [EntitlementKey.audio])])
            let scene = h.launch(app)
            #expect(h.template(app, scene, .setRoot(listTemplate("root", items: 3))).code == .ok)
            _ = h.drain(h.phone)
            _ = h.drain(h.hmi)
            return (h, scene)
        }
        let measured = session(on: CarHarness().car).0.car
        var configuration = measured.configuration
        configuration.composed = ComposedLimits(maxPhoneTemplateBytes: measured.phoneTemplateBytes + room)
        return session(on: Car(configuration: configuration))
    }

    @Test func aPushOverThePhonesTemplateBytesLeavesTheSceneAndSendsNoLifecycle() {
        var (h, scene) = Self.harness(room: 2_000)
        let before = h.car.templates.apps[Self.app]!
        let bytesBefore = h.car.phoneTemplateBytes

        let refused = h.template(Self.app, scene, .push(listTemplate("big", items: 100)))
        #expect(refused.code == .messageTooLarge, "\(refused.message)")
        #expect(refused.limit == "max_phone_template_bytes")
        // The phone hears the refusal alone: no lifecycle event of a push that did not happen.
        let heard = h.drain(h.phone)
        #expect(heard.count == 1, "\(heard)")
        #expect(h.car.templates.apps[Self.app] == before)
        #expect(h.car.templates.apps[Self.app]?.scenes[.main]?.stack.map(\.id) == ["root"])
        #expect(h.car.phoneTemplateBytes == bytesBefore)
        #expect(!h.drain(h.hmi).contains { if case .screenUpdate = $0.body { true } else { false } }, "the HMI's screen is unchanged")

        // A push that fits goes on from the state as it was.
        #expect(h.template(Self.app, scene, .push(listTemplate("small", items: 2))).code == .ok)
        let phases = h.drain(h.phone).compactMap { envelope -> String? in
            guard case .appEvent(let event) = envelope.body, case .lifecycle(let lifecycle) = event.kind else { return nil }
            return "\(event.templateID) \(lifecycle.phase)"
        }
        #expect(phases == ["root willDisappear", "small willAppear", "root didDisappear", "small didAppear"])
        #expect(h.car.templates.apps[Self.app]?.scenes[.main]?.stack.map(\.id) == ["root", "small"])
    }

    /// A refused present leaves no modal, and a refused pop cannot happen (a
    /// pop only frees room): the same app state after a refusal on a deeper stack.
    @Test func aRefusedPresentOnADeeperStackLeavesItAsItWas() {
        var (h, scene) = Self.harness(room: 1_500)
        #expect(h.template(Self.app, scene, .push(listTemplate("second", items: 2))).code == .ok)
        _ = h.drain(h.phone)
        let before = h.car.templates.apps[Self.app]!
        var alert = alertTemplate("alert")
        alert.alert.titleVariants = [String(repeating: "t", count: 2_000)]
        let refused = h.template(Self.app, scene, .present(alert))
        #expect(refused.code == .messageTooLarge, "\(refused.message)")
        #expect(h.drain(h.phone).count == 1)
        #expect(h.car.templates.apps[Self.app] == before)
        #expect(h.car.templates.apps[Self.app]?.scenes[.main]?.presented == nil)
        #expect(h.template(Self.app, scene, .pop(HUPopTemplate())).code == .ok)
        #expect(h.car.templates.apps[Self.app]?.scenes[.main]?.stack.map(\.id) == ["root"])
    }
}
