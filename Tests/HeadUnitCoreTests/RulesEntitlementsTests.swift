import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Protocol/TEMPLATES.md section 1: entitlement keys, categories and combinations.
@Suite struct RulesEntitlementsTests {
    typealias E = EntitlementKey

    /// A policy that accepts every key the car knows.
    static let acceptAll = EntitlementPolicy(allowed: Set(Entitlements.singleKeyCategories.keys))

    func category(_ claims: [String], policy: EntitlementPolicy = Self.acceptAll, app: String = "com.example.app") -> Result<HUCategory, RuleViolation> {
        Entitlements.category(for: claims, appID: app, policy: policy)
    }

    func refusal(_ claims: [String], policy: EntitlementPolicy = Self.acceptAll) -> RuleViolation? {
        if case .failure(let violation) = category(claims, policy: policy) { return violation }
        return nil
    }

    static let singleKeys: [(String, HUCategory)] = [
        (E.audio, .audio),
        (E.playableContent, .legacyAudio),
        (E.communication, .communication),
        (E.messaging, .legacyMessaging),
        (E.calling, .legacyMessaging),
        (E.maps, .navigation),
        (E.charging, .evCharging),
        (E.fueling, .fueling),
        (E.parking, .parking),
        (E.quickOrdering, .quickOrdering),
        (E.drivingTask, .drivingTask),
        (E.protocols, .automaker),
        (E.publicSafety, .publicSafety),
    ]

    @Test(arguments: singleKeys)
    func eachKeyGivesItsCategory(key: String, expected: HUCategory) {
        #expect(category([key]) == .success(expected))
    }

    @Test func chargingMayCombineWithFueling() {
        #expect(category([E.charging, E.fueling]) == .success(.chargingAndFueling))
    }

    @Test func audioMayCombineWithPlayableContent() {
        #expect(category([E.audio, E.playableContent]) == .success(.audio))
    }

    @Test func playableContentAloneIsLegacyAudio() {
        #expect(category([E.playableContent]) == .success(.legacyAudio))
    }

    @Test func communicationMayCombineWithMessagingAndCalling() {
        #expect(category([E.communication, E.messaging]) == .success(.communication))
        #expect(category([E.communication, E.calling]) == .success(.communication))
        #expect(category([E.communication, E.messaging, E.calling]) == .success(.communication))
    }

    @Test func messagingOrCallingAloneIsLegacyMessaging() {
        #expect(category([E.messaging]) == .success(.legacyMessaging))
        #expect(category([E.calling]) == .success(.legacyMessaging))
        #expect(category([E.messaging, E.calling]) == .success(.legacyMessaging))
    }

    @Test func duplicateClaimsCountOnce() {
        #expect(category([E.audio, E.audio]) == .success(.audio))
    }

    @Test func navigationCannotCombineWithAudio() throws {
        let violation = try #require(refusal([E.maps, E.audio]))
        #expect(violation.code == .entitlementRefused)
        #expect(violation.message.contains(E.maps))
        #expect(violation.message.contains(E.audio))
    }

    @Test func navigationCannotCombineWithMessagingOrCalling() throws {
        for other in [E.messaging, E.calling, E.communication, E.playableContent] {
            let violation = try #require(refusal([E.maps, other]))
            #expect(violation.code == .entitlementRefused)
            #expect(violation.message.contains(other))
        }
    }

    @Test(arguments: [
        [E.audio, E.communication],
        [E.charging, E.parking],
        [E.fueling, E.quickOrdering],
        [E.drivingTask, E.parking],
        [E.protocols, E.audio],
        [E.publicSafety, E.maps],
        [E.charging, E.fueling, E.parking],
        [E.audio, E.playableContent, E.communication],
    ])
    func otherCombinationsAreRefused(claims: [String]) throws {
        let violation = try #require(refusal(claims))
        #expect(violation.code == .entitlementRefused)
        for key in claims { #expect(violation.message.contains(key)) }
    }

    @Test func emptyClaimsAreRefused() throws {
        let violation = try #require(refusal([]))
        #expect(violation.code == .entitlementRefused)
        #expect(violation.message.contains("com.example.app"))
    }

    @Test func unknownKeysAreRefused() throws {
        let violation = try #require(refusal([E.audio, "com.apple.developer.carplay-teleport"]))
        #expect(violation.code == .entitlementRefused)
        #expect(violation.message.contains("com.apple.developer.carplay-teleport"))
    }

    @Test func claimsNotAcceptedByThePolicyAreRefused() throws {
        let policy = EntitlementPolicy(allowed: [E.audio])
        let violation = try #require(refusal([E.maps], policy: policy))
        #expect(violation.code == .entitlementRefused)
        #expect(violation.message.contains(E.maps))
        // One accepted key does not carry an unaccepted one.
        #expect(refusal([E.charging, E.fueling], policy: EntitlementPolicy(allowed: [E.charging])) != nil)
    }

    @Test func perAppPolicyAcceptsKeysForThatAppOnly() {
        let policy = EntitlementPolicy(allowed: [E.audio], perApp: ["com.acme.nav": [E.maps]])
        #expect(category([E.maps], policy: policy, app: "com.acme.nav") == .success(.navigation))
        #expect(category([E.audio], policy: policy, app: "com.acme.nav") == .success(.audio))
        if case .success = category([E.maps], policy: policy, app: "com.other.nav") {
            Issue.record("a per-app key was accepted for another app")
        }
    }
}
