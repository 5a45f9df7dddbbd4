import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Lane guidance and the maneuver fields of iOS 17.4 (TEMPLATES.md section 9,
/// "Lane guidance"; PROTOCOL.md 16.13), without the car around them.
@Suite struct LaneGuidanceTests {
    static func lane(_ status: HULaneStatus, _ highlighted: Double? = 0, _ angles: [Double] = []) -> HULane {
        HULane.with {
            $0.status = status
            if let highlighted { $0.highlightedAngleDeg = highlighted }
            $0.anglesDeg = angles
        }
    }

    /// Three lanes: left only, straight or right (preferred), right only (good).
    static func guidance(_ id: String = "g1") -> HULaneGuidance {
        HULaneGuidance.with {
            $0.id = id
            $0.lanes = [lane(.notGood, nil, [-90]), lane(.preferred, 0, [90]), lane(.good, 90)]
            $0.instructionVariants = ["Use the middle lane", "Middle lane"]
        }
    }

    func started() -> NavigationSession {
        var session = NavigationSession()
        #expect(throws: Never.self) { try session.start(trip: Nav.trip(), routeChoiceID: "").get() }
        return session
    }

    func violation(_ guidance: HULaneGuidance) -> RuleViolation? { LaneGuidanceRules.check(laneGuidances: [guidance]) }

    @Test func aValidLaneGuidancePasses() {
        #expect(violation(Self.guidance()) == nil)
    }

    @Test func laneGuidanceCountsAreBounded() {
        let none = LaneGuidanceRules.check(laneGuidances: [])
        #expect(none?.code == .invalidArgument && none?.limit == "navigation.laneGuidances" && none?.limitValue == 1)
        let many = LaneGuidanceRules.check(laneGuidances: (0...16).map { Self.guidance("g\($0)") })
        #expect(many?.code == .limitExceeded && many?.limit == "navigation.laneGuidances" && many?.limitValue == 16)
        #expect(LaneGuidanceRules.check(laneGuidances: (0..<16).map { Self.guidance("g\($0)") }) == nil)
    }

    @Test func laneGuidanceIDsAreNonEmptyUniqueAndShort() {
        #expect(violation(Self.guidance("")).map { $0.code } == .invalidArgument)
        #expect(LaneGuidanceRules.check(laneGuidances: [Self.guidance("a"), Self.guidance("a")])?.code == .invalidArgument)
        let long = violation(Self.guidance(String(repeating: "i", count: 65)))
        #expect(long?.code == .limitExceeded && long?.limit == "navigation.laneGuidance.id" && long?.limitValue == 64)
        #expect(violation(Self.guidance(String(repeating: "i", count: 64))) == nil)
    }

    @Test func lanesAreOneToSixteen() {
        var guidance = Self.guidance()
        guidance.lanes = []
        let none = violation(guidance)
        #expect(none?.code == .invalidArgument && none?.limit == "navigation.laneGuidance.lanes" && none?.limitValue == 1)
        guidance.lanes = Array(repeating: Self.lane(.good), count: 17)
        let many = violation(guidance)
        #expect(many?.code == .limitExceeded && many?.limitValue == 16)
    }

    @Test func laneGuidanceInstructionsAreRequiredBoundedAndLongestFirst() {
        var guidance = Self.guidance()
        guidance.instructionVariants = []
        #expect(violation(guidance)?.limit == "navigation.laneGuidance.instructionVariants")
        guidance.instructionVariants = [String(repeating: "x", count: 257)]
        let long = violation(guidance)
        #expect(long?.code == .limitExceeded && long?.limit == "navigation.variantScalars" && long?.limitValue == 256)
        guidance.instructionVariants = ["Lane", "Middle lane"]
        #expect(violation(guidance)?.code == .invalidArgument)
        guidance.instructionVariants = Array(repeating: "x", count: 17)
        #expect(violation(guidance)?.limit == "navigation.variants")
    }

    @Test func aLaneNeedsAStatusAndAGoodLaneItsHighlightedAngle() {
        var guidance = Self.guidance()
        guidance.lanes[0].status = .unspecified
        #expect(violation(guidance)?.code == .invalidArgument)
        guidance = Self.guidance()
        guidance.lanes[1] = Self.lane(.preferred, nil, [0])
        #expect(violation(guidance)?.code == .invalidArgument)
        guidance.lanes[1] = Self.lane(.notGood, nil, [0])
        #expect(violation(guidance) == nil)
    }

    @Test func laneAnglesAreBoundedInRangeAndDistinct() {
        var guidance = Self.guidance()
        guidance.lanes[0] = Self.lane(.notGood, nil, (0..<9).map { Double($0 * 10) })
        let many = violation(guidance)
        #expect(many?.code == .limitExceeded && many?.limit == "navigation.lane.angles" && many?.limitValue == 8)
        for bad in [180.5, -181, .nan, .infinity] {
            guidance.lanes[0] = Self.lane(.good, bad)
            let range = violation(guidance)
            #expect(range?.code == .invalidArgument && range?.limit == "navigation.angle" && range?.limitValue == 180, "\(bad)")
            guidance.lanes[0] = Self.lane(.notGood, nil, [bad])
            #expect(violation(guidance)?.limit == "navigation.angle", "\(bad)")
        }
        guidance.lanes[0] = Self.lane(.good, 45, [45])
        #expect(violation(guidance)?.code == .invalidArgument)
        guidance.lanes[0] = Self.lane(.notGood, nil, [45, 45])
        #expect(violation(guidance)?.code == .invalidArgument)
        guidance.lanes[0] = Self.lane(.good, 180, [-180])
        #expect(violation(guidance) == nil)
    }

    /// The restart snapshot counts what a session holds by the largest lane
    /// guidance the limits allow: it must encode within that.
    @Test func theLargestLaneGuidanceEncodesWithinItsBound() throws {
        let lane = HULane.with { $0.status = .preferred; $0.highlightedAngleDeg = -179.5; $0.anglesDeg = (1...8).map { Double($0) * -22.25 } }
        let largest = HULaneGuidance.with {
            $0.id = String(repeating: "i", count: LaneGuidanceLimits.idBytes)
            $0.lanes = Array(repeating: lane, count: LaneGuidanceLimits.lanes)
            $0.instructionVariants = Array(repeating: String(repeating: "\u{1F6A6}", count: LaneGuidanceLimits.variantScalars), count: NavigationLimits.variants)
        }
        #expect(violation(largest) == nil)
        var snapshot = HUNavigationSessionSnapshot()
        snapshot.laneGuidances = Array(repeating: largest, count: LaneGuidanceLimits.held)
        let bytes: [UInt8] = try snapshot.serializedBytes()
        #expect(bytes.count <= LaneGuidanceLimits.heldBytes, "\(bytes.count) of \(LaneGuidanceLimits.heldBytes)")
        #expect(bytes.count > LaneGuidanceLimits.heldBytes * 8 / 10, "the bound is close: \(bytes.count) of \(LaneGuidanceLimits.heldBytes)")
    }

    // MARK: maneuvers

    func maneuverViolation(_ maneuver: HUManeuver) -> RuleViolation? { NavigationRules.check(maneuvers: [maneuver], scale: 2) }

    @Test func theNewerManeuverFieldsPassWhenValid() {
        var maneuver = Nav.maneuver("m1")
        maneuver.maneuverType = .roundaboutExit3
        maneuver.junctionType = .roundabout
        maneuver.trafficSide = .left
        maneuver.junctionExitAngleDeg = -90
        maneuver.junctionElementAnglesDeg = [0, 90, 180]
        maneuver.highwayExitLabel = "Exit 12A"
        maneuver.roadFollowingVariants = ["Main Street", "Main St"]
        maneuver.notificationInstructionVariants = ["Take the third exit"]
        maneuver.dashboardSymbol = Fixture.asset("turn", width: 100, height: 100)
        maneuver.notificationSymbol = Fixture.asset("turn", width: 100, height: 100)
        maneuver.dashboardJunctionImage = Fixture.asset("junction", width: 280, height: 200)
        #expect(maneuverViolation(maneuver) == nil)
    }

    @Test func junctionAnglesAreBoundedInRangeAndTheExitIsNotAnElement() {
        var maneuver = Nav.maneuver("m1")
        maneuver.junctionElementAnglesDeg = (0..<17).map { Double($0) }
        let many = maneuverViolation(maneuver)
        #expect(many?.code == .limitExceeded && many?.limit == "navigation.maneuver.junctionElementAngles" && many?.limitValue == 16)
        maneuver.junctionElementAnglesDeg = []
        maneuver.junctionExitAngleDeg = 200
        #expect(maneuverViolation(maneuver)?.limit == "navigation.angle")
        maneuver.junctionExitAngleDeg = 90
        maneuver.junctionElementAnglesDeg = [-.infinity]
        #expect(maneuverViolation(maneuver)?.limit == "navigation.angle")
        maneuver.junctionElementAnglesDeg = [0, 90]
        #expect(maneuverViolation(maneuver)?.code == .invalidArgument)
    }

    @Test func highwayExitLabelAndNewerVariantsAreBounded() {
        var maneuver = Nav.maneuver("m1")
        maneuver.highwayExitLabel = String(repeating: "9", count: 65)
        let label = maneuverViolation(maneuver)
        #expect(label?.code == .limitExceeded && label?.limit == "navigation.maneuver.highwayExitLabel" && label?.limitValue == 64)
        maneuver = Nav.maneuver("m1")
        maneuver.notificationInstructionVariants = ["Turn", "Turn right"]
        #expect(maneuverViolation(maneuver)?.code == .invalidArgument)
        maneuver = Nav.maneuver("m1")
        maneuver.roadFollowingVariants = [String(repeating: "r", count: 300)]
        #expect(maneuverViolation(maneuver)?.limit == "navigation.variantScalars")
    }

    @Test func dashboardAndNotificationImagesFollowTheirUses() {
        var maneuver = Nav.maneuver("m1")
        maneuver.dashboardJunctionImage = Fixture.asset("junction", width: 400, height: 400)
        #expect(maneuverViolation(maneuver)?.code == .imageTooLarge)
        maneuver = Nav.maneuver("m1")
        maneuver.notificationSymbol = Fixture.asset("wide", width: 240, height: 100)
        #expect(maneuverViolation(maneuver)?.code == .imageTooLarge)
        maneuver = Nav.maneuver("m1")
        maneuver.dashboardSymbol = Fixture.asset("huge", width: 1000, height: 1000)
        #expect(maneuverViolation(maneuver)?.code == .imageTooLarge)
    }

    // MARK: the session

    @Test func laneGuidanceUpdatesNeedARunningSession() {
        var session = NavigationSession()
        #expect(session.addLaneGuidances([Self.guidance()]).failure?.code == .navigationNotActive)
        #expect(session.setCurrentLaneGuidance("").failure?.code == .navigationNotActive)
        #expect(session.setRoadName(["Main St"]).failure?.code == .navigationNotActive)
        #expect(session.setManeuverState(.prepare).failure?.code == .navigationNotActive)
        session = started()
        session.end(.nativeNavigation)
        #expect(session.addLaneGuidances([Self.guidance()]).failure?.code == .navigationCancelledByCar)
    }

    @Test func aManeuverLinksOnlyAnAddedLaneGuidance() {
        var session = started()
        var maneuver = Nav.maneuver("m1")
        maneuver.linkedLaneGuidanceID = "g1"
        #expect(session.updateManeuvers([maneuver], scale: 2).failure?.code == .unknownItem)
        #expect(session.maneuvers.isEmpty)
        #expect(throws: Never.self) { try session.addLaneGuidances([Self.guidance("g1")]).get() }
        #expect(throws: Never.self) { try session.updateManeuvers([maneuver], scale: 2).get() }
        #expect(session.shownLaneGuidances.map(\.id) == ["g1"])
    }

    @Test func theCurrentLaneGuidanceMustBeAddedAndIsShownFirst() {
        var session = started()
        #expect(session.setCurrentLaneGuidance("g2").failure?.code == .unknownItem)
        #expect(throws: Never.self) { try session.addLaneGuidances([Self.guidance("g1"), Self.guidance("g2")]).get() }
        var maneuver = Nav.maneuver("m1")
        maneuver.linkedLaneGuidanceID = "g1"
        #expect(throws: Never.self) { try session.updateManeuvers([maneuver], scale: 2).get() }
        #expect(throws: Never.self) { try session.setCurrentLaneGuidance("g2").get() }
        #expect(session.shownLaneGuidances.map(\.id) == ["g2", "g1"])
        #expect(throws: Never.self) { try session.setCurrentLaneGuidance("").get() }
        #expect(session.shownLaneGuidances.map(\.id) == ["g1"])
    }

    @Test func theSessionKeepsTheNewestLaneGuidancesAndThoseInUse() {
        var session = started()
        #expect(throws: Never.self) { try session.addLaneGuidances([Self.guidance("first"), Self.guidance("second")]).get() }
        var maneuver = Nav.maneuver("m1")
        maneuver.linkedLaneGuidanceID = "second"
        #expect(throws: Never.self) { try session.updateManeuvers([maneuver], scale: 2).get() }
        #expect(throws: Never.self) { try session.setCurrentLaneGuidance("first").get() }
        for batch in 0..<4 {
            #expect(throws: Never.self) { try session.addLaneGuidances((0..<16).map { Self.guidance("b\(batch)-\($0)") }).get() }
        }
        #expect(session.laneGuidances.guidances.count == LaneGuidanceLimits.held)
        #expect(session.laneGuidances["first"] != nil && session.laneGuidances["second"] != nil)
        #expect(session.laneGuidances["b0-0"] == nil && session.laneGuidances["b3-15"] != nil)
        // Re-adding an id replaces it and makes it the newest.
        var changed = Self.guidance("first")
        changed.instructionVariants = ["Left lane"]
        #expect(throws: Never.self) { try session.addLaneGuidances([changed]).get() }
        #expect(session.laneGuidances.guidances.last == changed)
        #expect(session.shownLaneGuidances.first == changed)
    }

    @Test func roadNameAndManeuverStateAreCheckedAndKept() {
        var session = started()
        #expect(session.setRoadName(["St", "Main Street"]).failure?.code == .invalidArgument)
        #expect(session.setRoadName([String(repeating: "s", count: 257)]).failure?.limit == "navigation.variantScalars")
        #expect(session.setManeuverState(.unspecified).failure?.code == .invalidArgument)
        #expect(throws: Never.self) { try session.setRoadName(["Main Street", "Main St"]).get() }
        #expect(throws: Never.self) { try session.setManeuverState(.execute).get() }
        #expect(session.roadNameVariants == ["Main Street", "Main St"] && session.maneuverState == .execute)
    }

    @Test func endingTheSessionForgetsLanesRoadAndState() {
        var session = started()
        #expect(throws: Never.self) { try session.addLaneGuidances([Self.guidance()]).get() }
        #expect(throws: Never.self) { try session.setCurrentLaneGuidance("g1").get() }
        #expect(throws: Never.self) { try session.setRoadName(["Main St"]).get() }
        #expect(throws: Never.self) { try session.setManeuverState(.initial).get() }
        #expect(throws: Never.self) { try session.finish().get() }
        #expect(session.laneGuidances == HeldLaneGuidances() && session.roadNameVariants.isEmpty && session.maneuverState == .unspecified)
        #expect(throws: Never.self) { try session.start(trip: Nav.trip(), routeChoiceID: "").get() }
        #expect(session.shownLaneGuidances.isEmpty)
    }
}
