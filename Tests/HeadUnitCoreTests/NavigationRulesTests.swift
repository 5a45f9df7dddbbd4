import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Limits of trip previews, maneuvers, alerts and dashboard buttons (TEMPLATES.md §9).
@Suite struct NavigationRulesTests {
    @Test func upToTwelveTrips() {
        #expect(NavigationRules.check(previews: Nav.previews(trips: 12)) == nil)
        let violation = NavigationRules.check(previews: Nav.previews(trips: 13))
        #expect(violation?.code == .limitExceeded)
        #expect(violation?.limit == "navigation.trips")
        #expect(violation?.limitValue == 12)
        #expect(NavigationRules.check(previews: Nav.previews(trips: 0))?.code == .invalidArgument)
    }

    @Test func upToThreeRouteChoicesPerTrip() {
        #expect(NavigationRules.check(trip: Nav.trip(routes: 3)) == nil)
        let violation = NavigationRules.check(trip: Nav.trip(routes: 4))
        #expect(violation?.code == .limitExceeded)
        #expect(violation?.limit == "navigation.routeChoices")
        #expect(violation?.limitValue == 3)
        #expect(NavigationRules.check(trip: Nav.trip(routes: 0))?.code == .invalidArgument)
    }

    @Test func variantsAreLongestFirst() {
        var trip = Nav.trip()
        trip.routeChoices[0].summaryVariants = ["Short", "A much longer summary"]
        #expect(NavigationRules.check(trip: trip)?.code == .invalidArgument)
        var maneuver = Nav.maneuver("m1")
        maneuver.instructionVariants = ["Turn", "Turn right"]
        #expect(NavigationRules.check(maneuvers: [maneuver], scale: 2)?.code == .invalidArgument)
        var alert = Nav.alert()
        alert.titleVariants = ["Camera", "Speed camera ahead"]
        #expect(NavigationRules.check(alert: alert, scale: 2)?.code == .invalidArgument)
    }

    @Test func selectedTripMustBeOneOfTheTrips() {
        var previews = Nav.previews()
        previews.selectedTripID = "elsewhere"
        #expect(NavigationRules.check(previews: previews)?.code == .unknownItem)
    }

    @Test func atMostTwoManeuversWithUniqueIDs() {
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("a"), Nav.second("b")], scale: 2) == nil)
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("a"), Nav.second("b"), Nav.second("c")], scale: 2)?.limit == "navigation.maneuvers")
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("a"), Nav.second("a")], scale: 2)?.code == .invalidArgument)
    }

    @Test func laneGuidanceIsASymbolOnlySecondManeuverWithEmptyInstructions() {
        let lanes = Nav.laneGuidance()
        #expect(NavigationRules.isLaneGuidance(lanes))
        #expect(NavigationRules.symbolUse(lanes, index: 1, scale: 2) == .laneGuidance)
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("m1"), lanes], scale: 2) == nil)
        // 120 x 18 pt at 2x: 242 px wide is too wide.
        var wide = lanes
        wide.symbol = Fixture.asset("lanes", width: 242, height: 36)
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("m1"), wide], scale: 2)?.limit == "image.laneGuidance")
        // Symbol-only needs a symbol.
        var bare = lanes
        bare.clearSymbol()
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("m1"), bare], scale: 2)?.code == .invalidArgument)
    }

    @Test func displayStyleIsForTheSecondManeuverOnly() {
        var first = Nav.maneuver("m1")
        first.displayStyle = .trailingSymbol
        #expect(NavigationRules.check(maneuvers: [first], scale: 2)?.code == .invalidArgument)
        var second = Nav.maneuver("m2")
        second.displayStyle = .trailingSymbol
        second.symbol = Fixture.asset("s", width: 36, height: 36)
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("m1"), second], scale: 2) == nil)
    }

    @Test func maneuverSymbolSizesFollowTheGuide() {
        // First maneuver: up to 50 pt wide is the one-line symbol, wider the two-line one (120 x 50 pt).
        var m = Nav.maneuver("m1")
        m.symbol = Fixture.asset("s", width: 100, height: 102)
        #expect(NavigationRules.check(maneuvers: [m], scale: 2)?.limit == "image.maneuverSymbol")
        m.symbol = Fixture.asset("s", width: 240, height: 100)
        #expect(NavigationRules.check(maneuvers: [m], scale: 2) == nil)
        m.symbol = Fixture.asset("s", width: 242, height: 100)
        #expect(NavigationRules.check(maneuvers: [m], scale: 2)?.limit == "image.maneuverSymbolTwoLines")
        // Dark symbols follow the same rule.
        m.symbol = Fixture.asset("s", width: 100, height: 100)
        m.darkSymbol = Fixture.asset("s-dark", width: 100, height: 120)
        #expect(NavigationRules.check(maneuvers: [m], scale: 2)?.code == .imageTooLarge)
        // Second maneuver with text: 18 x 18 pt.
        var second = Nav.maneuver("m2")
        second.symbol = Fixture.asset("s", width: 38, height: 36)
        #expect(NavigationRules.check(maneuvers: [Nav.maneuver("m1"), second], scale: 2)?.limit == "image.secondManeuverSymbol")
    }

    @Test func junctionImageIsAtMost140By100Points() {
        var m = Nav.maneuver("m1")
        m.junctionImage = Fixture.png(width: 280, height: 200)
        #expect(NavigationRules.check(maneuvers: [m], scale: 2) == nil)
        m.junctionImage = Fixture.png(width: 281, height: 200)
        #expect(NavigationRules.check(maneuvers: [m], scale: 2)?.limit == "image.junctionImage")
    }

    @Test func attributedInstructionsComeWithPlainOnes() {
        var m = Nav.maneuver("m1")
        m.attributedInstructionVariants = [HUAttributedText.with { $0.text = "Turn right"; $0.spans = [HUTextSpan.with { $0.start = 5; $0.length = 5; $0.bold = true }] }]
        #expect(NavigationRules.check(maneuvers: [m], scale: 2) == nil)
        m.instructionVariants = []
        #expect(NavigationRules.check(maneuvers: [m], scale: 2)?.code == .invalidArgument)
        var past = Nav.maneuver("m1")
        past.attributedInstructionVariants = [HUAttributedText.with { $0.text = "Turn"; $0.spans = [HUTextSpan.with { $0.start = 2; $0.length = 5 }] }]
        #expect(NavigationRules.check(maneuvers: [past], scale: 2)?.code == .invalidArgument)
    }

    @Test func navigationAlertsHaveUpToTwoActionsOrNone() {
        #expect(NavigationRules.check(alert: Nav.alert(actions: 0), scale: 2) == nil)
        #expect(NavigationRules.check(alert: Nav.alert(actions: 2), scale: 2) == nil)
        let violation = NavigationRules.check(alert: Nav.alert(actions: 3), scale: 2)
        #expect(violation?.limit == "navigationAlert.actions")
        #expect(violation?.limitValue == 2)
        var untitled = Nav.alert()
        untitled.titleVariants = []
        #expect(NavigationRules.check(alert: untitled, scale: 2)?.code == .invalidArgument)
    }

    @Test func twoDashboardButtons() {
        func button(_ id: String) -> HUDashboardButton { HUDashboardButton.with { $0.id = id; $0.titleVariants = ["Home"] } }
        #expect(NavigationRules.check(dashboardButtons: [button("a"), button("b")], scale: 2) == nil)
        #expect(NavigationRules.check(dashboardButtons: [button("a"), button("b"), button("c")], scale: 2)?.limit == "dashboard.buttons")
    }
}
