import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Navigation banners (PROTOCOL.md 19.9): a notified maneuver, estimates
/// update or alert of an app not on the main screen; tapping one brings the
/// app to the main screen and tells it.
@Suite struct NavigationBannerTests {
    static func notified(_ maneuvers: [HUManeuver]) -> HUNavigationRequest.OneOf_Op {
        .updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = maneuvers; $0.notify = true })
    }

    static func goHome(_ h: inout CarHarness) {
        #expect(h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() })).code == .ok)
    }

    @Test func aBannerShowsOnlyWhileTheAppIsNotOnTheMainScreen() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        #expect(h.navigate(Self.notified([Nav.maneuver("m1")])).code == .ok)
        #expect(h.metadata().banner.appID.isEmpty)
        Self.goHome(&h)
        // Not notified: no banner.
        #expect(h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m2")] })).code == .ok)
        #expect(h.metadata().banner.appID.isEmpty)
        var m3 = Nav.maneuver("m3", "Turn left onto High St")
        m3.notificationInstructionVariants = ["Turn left onto High Street"]
        m3.notificationSymbol = HUImage.with { $0.asset = "banner-left"; $0.widthPx = 100; $0.heightPx = 100 }
        #expect(h.navigate(Self.notified([m3])).code == .ok)
        let banner = h.metadata().banner
        #expect(banner.appID == Nav.appID && banner.maneuverID == "m3" && banner.bannerID == 1)
        #expect(banner.instructionVariants == ["Turn left onto High Street"])
        #expect(banner.symbol.asset == "banner-left")
        #expect(h.timers.contains(.navigationBanner(bannerID: 1)))
        // The app coming back to the main screen removes it.
        _ = h.launch(Nav.appID)
        #expect(h.metadata().banner.appID.isEmpty)
        #expect(!h.timers.contains(.navigationBanner(bannerID: 1)))
    }

    @Test func aNotifiedEstimatesUpdateUpdatesTheBannerOfItsManeuver() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        Self.goHome(&h)
        #expect(h.navigate(Self.notified([Nav.maneuver("m1")])).code == .ok)
        let before = h.metadata().banner.estimates
        let near = Nav.estimates(meters: 200, seconds: 20)
        #expect(h.navigate(.updateEstimates(HUEstimatesUpdate.with { $0.maneuverID = "m1"; $0.estimates = near })).code == .ok)
        #expect(h.metadata().banner.estimates == before)
        let nearer = Nav.estimates(meters: 100, seconds: 10)
        #expect(h.navigate(.updateEstimates(HUEstimatesUpdate.with { $0.maneuverID = "m1"; $0.estimates = nearer; $0.notify = true })).code == .ok)
        #expect(h.metadata().banner.estimates == nearer)
        // Maneuvers that no longer include it take its banner away.
        #expect(h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.maneuver("m2")] })).code == .ok)
        #expect(h.metadata().banner.appID.isEmpty)
    }

    @Test func bannersExpireAndGoWithGuidanceOrTheirAlert() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        Self.goHome(&h)
        #expect(h.navigate(Self.notified([Nav.maneuver("m1")])).code == .ok)
        h.apply(h.car.timerFired(.navigationBanner(bannerID: 1), nowMilliseconds: h.now + 8000))
        #expect(h.metadata().banner.appID.isEmpty)
        #expect(h.navigate(Self.notified([Nav.maneuver("m2")])).code == .ok)
        // A stale timer does nothing.
        h.apply(h.car.timerFired(.navigationBanner(bannerID: 1), nowMilliseconds: h.now))
        #expect(h.metadata().banner.maneuverID == "m2")
        #expect(h.navigate(.finish(HUFinishNavigation())).code == .ok)
        #expect(h.metadata().banner.appID.isEmpty)
        var alert = Nav.alert()
        alert.notify = true
        #expect(h.navigate(.showAlert(alert)).code == .ok)
        let banner = h.metadata().banner
        #expect(banner.alertID == "speed-trap" && banner.instructionVariants == alert.titleVariants)
        #expect(h.navigate(.dismissAlert(HUDismissNavigationAlert())).code == .ok)
        #expect(h.metadata().banner.appID.isEmpty)
    }

    @Test func selectingTheBannerBringsTheAppToTheMainScreenAndTellsIt() {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        Self.goHome(&h)
        #expect(h.navigationInput(.selectBanner(HUSelectBanner.with { $0.bannerID = 1 }), app: Nav.appID).code == .nothingPresented)
        #expect(h.navigate(Self.notified([Nav.maneuver("m1")])).code == .ok)
        #expect(h.navigationInput(.selectBanner(HUSelectBanner.with { $0.bannerID = 1 })).code == .notConnected)
        #expect(h.navigationInput(.selectBanner(HUSelectBanner.with { $0.bannerID = 7 }), app: Nav.appID).code == .unknownItem)
        _ = h.navigationEvents()
        #expect(h.navigationInput(.selectBanner(HUSelectBanner.with { $0.bannerID = 1 }), app: Nav.appID).code == .ok)
        #expect(h.navigationEvents() == [.bannerSelected(HUBannerSelected.with { $0.maneuverID = "m1" })])
        #expect(h.car.isOnMainScreen(Nav.appID))
        #expect(h.metadata().banner.appID.isEmpty)
        #expect(h.navigationInput(.selectBanner(HUSelectBanner.with { $0.bannerID = 1 }), app: Nav.appID).code == .nothingPresented)
    }
}
