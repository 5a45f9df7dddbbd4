import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// The navigation session's rules (PROTOCOL.md section 19), without the car around it.
@Suite struct NavigationSessionTests {
    func started() -> NavigationSession {
        var session = NavigationSession()
        #expect(throws: Never.self) { try session.start(trip: Nav.trip(), routeChoiceID: "").get() }
        return session
    }

    @Test func guidanceUpdatesNeedARunningSession() {
        var session = NavigationSession()
        #expect(session.pause(.loading, description: "").failure?.code == .navigationNotActive)
        #expect(session.updateManeuvers([Nav.maneuver("m1")], scale: 2).failure?.code == .navigationNotActive)
        #expect(session.updateEstimates(maneuverID: "", Nav.estimates(meters: 1, seconds: 1)).failure?.code == .navigationNotActive)
        #expect(session.finish().failure?.code == .navigationNotActive)
        #expect(session.cancel().failure?.code == .navigationNotActive)
    }

    @Test func startForATripPicksTheFirstRouteChoiceByDefault() {
        let session = started()
        #expect(session.state == .active)
        #expect(session.routeChoiceID == "home-r0")
        #expect(session.tripEstimates == Nav.route("home-r0").estimates)
    }

    @Test func startWithAnUnknownRouteChoiceIsUnknownItem() {
        var session = NavigationSession()
        #expect(session.start(trip: Nav.trip(), routeChoiceID: "nowhere").failure?.code == .unknownItem)
        #expect(session.state == .idle)
    }

    @Test func aSecondStartWhileRunningIsAlreadyActive() {
        var session = started()
        #expect(session.start(trip: Nav.trip("work"), routeChoiceID: "").failure?.code == .navigationAlreadyActive)
        #expect(session.trip.id == "home")
    }

    @Test func pauseNeedsAReasonAndKeepsTheDescription() {
        var session = started()
        #expect(session.pause(.unspecified, description: "").failure?.code == .invalidArgument)
        for reason in [HUPauseReason.arrived, .loading, .locating, .rerouting, .proceedToRoute] {
            #expect(session.pause(reason, description: "why \(reason)").success != nil)
            #expect(session.state == .paused(reason, description: "why \(reason)"))
        }
    }

    @Test func atLeastOneManeuverWhileActive() {
        var session = started()
        let empty = session.updateManeuvers([], scale: 2).failure
        #expect(empty?.code == .invalidArgument)
        #expect(empty?.limit == "navigation.maneuvers")
        #expect(empty?.limitValue == 1)
    }

    @Test func maneuversAfterAPauseResumeGuidance() {
        var session = started()
        _ = session.pause(.rerouting, description: "Rerouting")
        #expect(session.updateManeuvers([Nav.maneuver("m1")], scale: 2).success != nil)
        #expect(session.state == .active)
        #expect(session.maneuvers.map(\.id) == ["m1"])
    }

    @Test func estimatesAreShownOnlyOnSignificantChange() {
        var session = started()
        _ = session.updateManeuvers([Nav.maneuver("m1")], scale: 2)
        // 800 m / 90 s shown. Same minute, same 10 m: dropped.
        #expect(session.updateEstimates(maneuverID: "m1", Nav.estimates(meters: 802, seconds: 100)).success == false)
        #expect(session.maneuvers[0].estimates == Nav.estimates(meters: 800, seconds: 90))
        // Another minute: shown.
        #expect(session.updateEstimates(maneuverID: "m1", Nav.estimates(meters: 802, seconds: 130)).success == true)
        // Another 10 m below a kilometre: shown.
        #expect(session.updateEstimates(maneuverID: "m1", Nav.estimates(meters: 780, seconds: 130)).success == true)
        // Trip estimates: within the same 100 m above a kilometre and the same minute: dropped.
        #expect(session.updateEstimates(maneuverID: "", Nav.estimates(meters: 12_030, seconds: 1_210)).success == false)
        #expect(session.updateEstimates(maneuverID: "", Nav.estimates(meters: 11_900, seconds: 1_210)).success == true)
        #expect(session.tripEstimates == Nav.estimates(meters: 11_900, seconds: 1_210))
    }

    @Test func aSlowDriftIsShownOnceItAddsUp() {
        var session = started()
        _ = session.updateManeuvers([Nav.maneuver("m1")], scale: 2)
        // Each step is 4 m, rounded down (PROTOCOL.md 19.2): 796 m shows as 790 m, a new
        // 10 m step; 792 m still shows as 790 m (dropped); 788 m as 780 m.
        let shown = [796.0, 792, 788].map { session.updateEstimates(maneuverID: "m1", Nav.estimates(meters: $0, seconds: 90)).success }
        #expect(shown == [true, false, true])
    }

    @Test func estimatesForAManeuverThatIsNotUpcomingAreUnknownItem() {
        var session = started()
        _ = session.updateManeuvers([Nav.maneuver("m1")], scale: 2)
        #expect(session.updateEstimates(maneuverID: "m9", Nav.estimates(meters: 1, seconds: 1)).failure?.code == .unknownItem)
    }

    @Test func finishAndCancelEndTheSessionWithTheirReason() {
        var finished = started()
        #expect(finished.finish().success != nil)
        #expect(finished.state == .ended(.finished))
        #expect(finished.maneuvers.isEmpty)
        var cancelled = started()
        #expect(cancelled.cancel().success != nil)
        #expect(cancelled.state == .ended(.cancelledByApp))
        #expect(cancelled.updateManeuvers([Nav.maneuver("m1")], scale: 2).failure?.code == .navigationNotActive)
    }

    @Test func afterTheCarCancelsGuidanceUpdatesGetNavigationCancelledByCar() {
        var session = started()
        let ended = session.end(.nativeNavigation)
        #expect(ended)
        #expect(session.updateManeuvers([Nav.maneuver("m1")], scale: 2).failure?.code == .navigationCancelledByCar)
        #expect(session.pause(.loading, description: "").failure?.code == .navigationCancelledByCar)
        // A new session clears it.
        #expect(session.start(trip: Nav.trip(), routeChoiceID: "").success != nil)
        #expect(session.updateManeuvers([Nav.maneuver("m1")], scale: 2).success != nil)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }

    var success: Success? {
        if case .success(let success) = self { return success }
        return nil
    }
}
