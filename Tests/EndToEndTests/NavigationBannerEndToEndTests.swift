import Foundation
import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

/// Navigation banners over real sockets (PROTOCOL.md 19.9, 16.14): the HMI
/// sees a notified maneuver, estimates update or alert of a navigation app
/// that is not on the main screen, the banner expires after 8 s, and the
/// driver's tap brings the app's map to the main screen and tells the app.
@Suite("Navigation banners over real sockets", .serialized)
struct NavigationBannerEndToEndTests {
    static let other = "com.example.other-maps"

    static func notified(_ maneuvers: [HUManeuver]) -> HUEnvelope.OneOf_Body {
        NavWire.nav(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = maneuvers; $0.notify = true }))
    }

    static func select(_ bannerID: UInt64, app: String = NavWire.appID) -> HUEnvelope.OneOf_Body {
        .navigationInput(HUNavigationInput.with { $0.appID = app; $0.selectBanner = HUSelectBanner.with { $0.bannerID = bannerID } })
    }

    static func rig() throws -> NavRig {
        try NavRig.start(extraApps: [HUAppInfo.with { $0.appID = other; $0.displayName = "Other"; $0.entitlements = [NavWire.maps] }])
    }

    @Test func aBannerAppearsOverAnotherAppIsUpdatedAndSelectingItBringsTheAppBack() async throws {
        try await onOwnThread {
            var rig = try Self.rig()
            defer { rig.stop() }
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("home") })), on: rig.phone)
            // In front: no banner.
            try rig.ok(Self.notified([NavWire.maneuver("m1", "Turn right")]), on: rig.phone)
            rig.settle()
            #expect(rig.hmiModel.state.banner.appID.isEmpty)
            // Another app in front: the banner shows the maneuver's notification variants.
            try rig.ok(.launchApp(HULaunchApp.with { $0.appID = Self.other }), on: rig.hmi)
            var m2 = NavWire.maneuver("m2", "Turn left onto High St")
            m2.notificationInstructionVariants = ["Turn left onto High Street"]
            try rig.ok(Self.notified([m2]), on: rig.phone)
            rig.settle()
            let banner = rig.hmiModel.state.banner
            #expect(banner.appID == NavWire.appID && banner.maneuverID == "m2")
            #expect(banner.instructionVariants == ["Turn left onto High Street"])
            #expect(banner.symbol.asset == "turn")
            #expect(rig.clusterModel.state.banner == banner)
            // `headunitctl watch` names it too.
            #expect(MetadataText.render(rig.hmiModel.state).contains("banner \(banner.bannerID) (\(NavWire.appID)): Turn left onto High Street in 800 m, 1 min"))
            // A notified estimates update updates it.
            try rig.ok(NavWire.nav(.updateEstimates(HUEstimatesUpdate.with {
                $0.maneuverID = "m2"; $0.estimates = NavWire.estimates(150, 15); $0.notify = true
            })), on: rig.phone)
            rig.settle()
            #expect(rig.hmiModel.state.banner.estimates == NavWire.estimates(150, 15))
            #expect(rig.hmiModel.state.banner.bannerID == banner.bannerID)
            // Selecting a stale id, or for an app without a banner, is refused.
            #expect(try rig.hmi.request(Self.select(banner.bannerID + 1)).code == .unknownItem)
            #expect(try rig.hmi.request(Self.select(banner.bannerID, app: Self.other)).code == .nothingPresented)
            // The tap: the app's map comes to the main screen and the app hears which maneuver.
            try rig.ok(Self.select(banner.bannerID), on: rig.hmi)
            let event = try rig.phone.navigationEvent()
            #expect(event.bannerSelected.maneuverID == "m2")
            rig.settle()
            #expect(rig.hmiModel.state.banner.appID.isEmpty)
            // The main screen shows the map again: a pan input reaches the app's map without naming it.
            try rig.ok(NavWire.nav(.showPanning(HUShowPanning())), on: rig.phone)
            let panning = try rig.hmi.request(.navigationInput(HUNavigationInput.with { $0.pan = .up }))
            #expect(panning.code == .ok, "\(panning.message)")
            // Gone with the tap: selecting it again finds nothing.
            #expect(try rig.hmi.request(Self.select(banner.bannerID)).code == .nothingPresented)
        }
    }

    @Test func anAlertBannerOverTheHomeScreenExpiresAfterEightSeconds() async throws {
        try await onOwnThread {
            var rig = try Self.rig()
            defer { rig.stop() }
            try rig.ok(.hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }), on: rig.hmi)
            try rig.ok(NavWire.nav(.showAlert(HUNavigationAlert.with {
                $0.id = "closure"; $0.titleVariants = ["Road closed ahead"]; $0.subtitleVariants = ["Detour via Elm St"]; $0.notify = true
            })), on: rig.phone)
            rig.settle()
            let banner = rig.hmiModel.state.banner
            #expect(banner.alertID == "closure" && banner.instructionVariants == ["Road closed ahead"])
            #expect(banner.subtitleVariants == ["Detour via Elm St"])
            // With the home screen in front, the input must name the app.
            #expect(try rig.hmi.request(.navigationInput(HUNavigationInput.with {
                $0.selectBanner = HUSelectBanner.with { $0.bannerID = banner.bannerID }
            })).code == .notConnected)
            rig.settle(8.5)
            #expect(rig.hmiModel.state.banner.appID.isEmpty)
            #expect(rig.hmiModel.state.alert.alert.id == "closure")  // the alert itself stays
            #expect(try rig.hmi.request(Self.select(banner.bannerID)).code == .nothingPresented)
        }
    }

    @Test func selectingAnAlertBannerNamesTheAlert() async throws {
        try await onOwnThread {
            var rig = try Self.rig()
            defer { rig.stop() }
            try rig.ok(.hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }), on: rig.hmi)
            try rig.ok(NavWire.nav(.showAlert(HUNavigationAlert.with { $0.id = "closure"; $0.titleVariants = ["Road closed"]; $0.notify = true })), on: rig.phone)
            rig.settle()
            try rig.ok(Self.select(rig.hmiModel.state.banner.bannerID), on: rig.hmi)
            #expect(try rig.phone.navigationEvent().bannerSelected.alertID == "closure")
        }
    }
}
