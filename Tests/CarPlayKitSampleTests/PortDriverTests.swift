import CarPlayKit
import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// The Apple-style ports of this folder, run in-process against the real
/// daemon and driven from an HMI session (and an accessory peer for the
/// automaker app): every handler and delegate the port wrote must fire.
/// The ports name nothing by id (Apple's templates have none), so the HMI
/// finds what to tap by its text on the screen it was sent.
@Suite("Apple-style ports driven from the HMI", .serialized)
@MainActor
struct PortDriverTests {
    struct Car {
        let daemon: TestDaemon
        let endpoint: HeadUnitEndpoint
        let hmi: HMISession

        static func start() async throws -> Car {
            let daemon = try await onOwnThread(gated: false) { try TestDaemon.launch(tcp: false) }
            let endpoint = HeadUnitEndpoint.unix(path: daemon.unixSocketPath)
            return Car(daemon: daemon, endpoint: endpoint, hmi: try await HMISession.connect(to: endpoint))
        }

        func stop() { _ = try? daemon.terminate() }

        /// The main screen once `condition` holds on it (nil after 30 s).
        func screen(_ condition: @escaping @Sendable (HURenderedScreen) -> Bool) async -> HURenderedScreen? {
            await hmi.waitForScreen(where: condition)
        }

        func input(_ templateID: String, _ kind: HUHmiInput.OneOf_Kind) async throws {
            try await hmi.input(HUHmiInput.with { $0.templateID = templateID; $0.kind = kind })
        }

        func navigation(_ appID: String, _ kind: HUNavigationInput.OneOf_Kind) async throws {
            _ = try await hmi.connection.request(.navigationInput(HUNavigationInput.with { $0.appID = appID; $0.kind = kind }))
        }
    }

    /// Waits for a condition on the main actor (the ports' state lives there); polls, never blocks a thread.
    static func eventually(_ timeout: Double = 30, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return condition()
    }

    // MARK: finding what the driver taps, by text

    /// The list (inside a tab bar too) and the id of its item whose text is `text`.
    nonisolated static func listItem(_ template: HUTemplate, text: String) -> (template: String, item: String)? {
        switch template.kind {
        case .list(let list)?:
            for section in list.sections {
                if let item = section.items.first(where: { $0.general.text == text }) { return (template.id, item.id) }
            }
            return nil
        case .tabBar(let bar)?:
            return bar.tabs.lazy.compactMap { listItem($0.template, text: text) }.first
        default:
            return nil
        }
    }

    /// The id of the button titled `title` on `template` (bar, grid, information, alert buttons).
    nonisolated static func button(_ template: HUTemplate, title: String) -> String? {
        switch template.kind {
        case .grid(let grid)?:
            return grid.buttons.first { $0.titleVariants.contains(title) }?.id
                ?? (grid.leadingButtons + grid.trailingButtons).first { $0.title == title }?.id
        case .information(let information)?:
            return information.actions.first { $0.title == title }?.id
        case .alert(let alert)?:
            return alert.actions.first { $0.title == title }?.id
        case .map(let map)?:
            return (map.leadingButtons + map.trailingButtons).first { $0.title == title }?.id
        case .list(let list)?:
            return (list.leadingButtons + list.trailingButtons).first { $0.title == title }?.id
        default:
            return nil
        }
    }

    // MARK: the ports

    @Test("audio port: tab bar of lists, an item's handler pushes Now Playing, a presented alert's action dismisses it")
    func audio() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let app = CPApplication(bundleIdentifier: "com.sample.audio", displayName: "Sample Radio", entitlements: [.audio])
        let delegate = CarPlaySceneDelegate()
        app.sceneDelegate = delegate
        try await app.connect(to: car.endpoint)
        try await car.hmi.launch(app.bundleIdentifier)

        let tabs = try #require(await car.screen { if case .tabBar? = $0.top.kind { true } else { false } })
        let jazz = try #require(Self.listItem(tabs.top, text: "Jazz"))
        try await car.hmi.selectItem(jazz.item, on: jazz.template)
        #expect(await car.screen { if case .nowPlaying? = $0.top.kind { !$0.hasPending } else { false } } != nil)
        try await car.hmi.goBack(on: try #require(await car.hmi.screen()?.top.id))
        #expect(await car.screen { if case .tabBar? = $0.top.kind { true } else { false } } != nil)

        let clear = try #require(Self.listItem(tabs.top, text: "Clear history"))
        let settingsTab = try #require(tabs.top.tabBar.tabs.first { $0.template.id == clear.template })
        try await car.input(tabs.top.id, .selectTab(HUTabSelected.with { $0.tabID = settingsTab.id }))
        try await car.hmi.selectItem(clear.item, on: clear.template)
        let alert = try #require(await car.screen { if case .alert? = $0.presented.kind { true } else { false } })
        try await car.hmi.pressButton(try #require(Self.button(alert.presented, title: "Clear")), on: alert.presented.id)
        #expect(await car.screen { $0.presented.id.isEmpty && !$0.hasPending } != nil)
        try await app.interfaceController?.waitForPendingUpdates()
        await app.disconnect()
    }

    @Test("communication port: a conversation's handler pushes the contact, its call button places a call with CallKit that the car shows, the HMI mutes and ends it through the app's provider delegate")
    func communication() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let app = CPApplication(bundleIdentifier: "com.sample.messages", displayName: "Sample Messages", entitlements: [.communication])
        let delegate = CommunicationSceneDelegate()
        app.sceneDelegate = delegate
        try await app.connect(to: car.endpoint)
        try await car.hmi.launch(app.bundleIdentifier)

        let list = try #require(await car.screen { Self.listItem($0.top, text: "Bob") != nil })
        let bob = try #require(Self.listItem(list.top, text: "Bob"))
        try await car.hmi.selectItem(bob.item, on: bob.template)
        let card = try #require(await car.screen { if case .contact? = $0.top.kind { true } else { false } })
        #expect(card.top.contact.title == "Bob")
        let call = try #require(card.top.contact.actions.first { $0.kind == .call })
        try await car.hmi.pressButton(call.id, on: card.top.id)
        #expect(await Self.eventually { delegate.events.contains("call Bob") })
        // The push's completion and the button's handler reach the main actor through separate tasks: either may run first.
        #expect(await Self.eventually { delegate.events.contains("contact Bob shown: true") })
        #expect(delegate.events.contains("contact appeared"))

        // The call button placed a call with CXStartCallAction: the car shows it, connected, with the contact's name.
        let calling = try #require(await car.hmi.waitForHomeScreen { $0.calls.first?.phase == .active })
        let placed = try #require(calling.calls.first)
        #expect(placed.appID == app.bundleIdentifier && placed.outgoing && placed.description_p.localizedCallerName == "Bob")
        #expect(placed.description_p.remoteHandle.value == "+1 555 0100" && placed.description_p.remoteHandle.type == .phoneNumber)
        #expect(placed.availableActions.contains(.setHeld) && placed.availableActions.contains(.playDtmf))
        #expect(delegate.callManager.events.contains("start performed"))
        #expect(await Self.eventually { delegate.callManager.events.contains("audio activated") })
        #expect(await Self.eventually { delegate.callManager.events.contains("start requested") })
        // The driver mutes, then ends it on the car: the app's provider delegate performs both.
        let mute = try await car.hmi.callAction(HUCallAction.with { $0.kind = .setMuted; $0.callUuid = placed.callUuid; $0.muted = true })
        #expect(mute.fulfilled && delegate.callManager.events.contains("muted"))
        let end = try await car.hmi.callAction(HUCallAction.with { $0.kind = .end; $0.callUuid = placed.callUuid })
        #expect(end.fulfilled)
        // The driver's end is the car's, answered at once (PROTOCOL.md 26.5); the app performs it after.
        #expect(await Self.eventually { delegate.callManager.events.contains("end Bob") })
        #expect(await Self.eventually { delegate.callManager.events.contains("audio deactivated") })
        let ended = try #require(await car.hmi.waitForHomeScreen { $0.calls.isEmpty && $0.hasLastCallEnded })
        #expect(ended.lastCallEnded.reason == .endedByAction && ended.lastCallEnded.callUuid == placed.callUuid)

        try await car.hmi.goBack(on: card.top.id)
        #expect(await car.screen { $0.top.id == list.top.id } != nil)
        await app.disconnect()
    }

    @Test("navigation port: panning callbacks, search with Apple's completions, trip previews, start, the second maneuver's display style from the delegate, lane guidance and the maneuver's junction")
    func navigation() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let app = CPApplication(bundleIdentifier: "com.sample.maps", displayName: "Sample Maps", entitlements: [.maps])
        let delegate = NavigationSceneDelegate()
        app.sceneDelegate = delegate
        try await app.connect(to: car.endpoint)
        try await car.hmi.launch(app.bundleIdentifier)
        let appID = app.bundleIdentifier

        let map = try #require(await car.screen { if case .map? = $0.top.kind { true } else { false } })
        let pan = try #require(map.top.map.mapButtons.first { $0.id.hasPrefix("pan") })
        try await car.hmi.pressButton(pan.id, on: map.top.id)
        #expect(await Self.eventually { delegate.events.contains("pan began") })
        try await car.navigation(appID, .pan(.up))
        #expect(await Self.eventually { delegate.events.contains("pan \(CPMapTemplate.PanDirection.up)") })
        try await car.navigation(appID, .exitPanning(HUDismissPanning()))
        #expect(await Self.eventually { delegate.events.contains("pan will end") })

        try await car.hmi.pressButton(try #require(Self.button(map.top, title: "Search")), on: map.top.id)
        let search = try #require(await car.screen { if case .search? = $0.top.kind { true } else { false } })
        try await car.input(search.top.id, .searchText(HUSearchTextChanged.with { $0.text = "bakery" }))
        let results = try #require(await car.screen { $0.searchResults.first?.general.text == "Cafe bakery" && !$0.hasPending })
        try await car.input(search.top.id, .selectSearchResult(HUSearchResultSelected.with { $0.itemID = results.searchResults[0].id }))
        #expect(await car.screen { $0.top.id == map.top.id && !$0.hasPending } != nil)

        #expect(await Self.eventually { !delegate.trips.isEmpty })
        let trip = try #require(delegate.trips.first)
        let chosen = HUTripChosen.with { $0.tripID = trip.identifier; $0.routeChoiceID = trip.routeChoices[0].identifier }
        try await car.navigation(appID, .startTrip(chosen))
        #expect(await Self.eventually { delegate.events.contains("guiding") })
        #expect(await Self.eventually { delegate.events.contains("style asked") })
        try await app.interfaceController?.waitForPendingUpdates()
        // The style the delegate chose reached the car: the cluster's metadata has it on the second maneuver.
        let cluster = try await ClusterSession.connect(to: car.endpoint)
        try await cluster.subscribe()
        var updates = cluster.updates.makeAsyncIterator()
        let full = try #require(await updates.next())  // the whole state first: the maneuvers were accepted before
        var model = MetadataModel()
        _ = model.apply(full)
        let maneuvers = model.state.maneuvers.maneuvers
        #expect(maneuvers.count == 2)
        #expect(maneuvers.last?.displayStyle == .instructionOnly)
        #expect(maneuvers.last?.instructionVariants == ["Then turn left"])
        // The lane guidance the port added, linked and made current reached the car, with the maneuver's junction.
        let section = model.state.maneuvers
        #expect(section.laneGuidances.count == 1)
        let lanes = try #require(section.laneGuidances.first)
        #expect(section.currentLaneGuidanceID == lanes.id && maneuvers.first?.linkedLaneGuidanceID == lanes.id)
        #expect(lanes.instructionVariants == ["Use the right lane to turn onto Main Street", "Right lane"])
        #expect(lanes.lanes.map(\.status) == [.notGood, .good, .preferred])
        #expect(lanes.lanes.map(\.anglesDeg) == [[-90], [90], []])
        #expect(lanes.lanes[2].highlightedAngleDeg == 90 && !lanes.lanes[0].hasHighlightedAngleDeg)
        #expect(maneuvers.first?.maneuverType == .rightTurn && maneuvers.first?.junctionType == .intersection && maneuvers.first?.trafficSide == .right)
        #expect(maneuvers.first?.junctionExitAngleDeg == 90 && maneuvers.first?.junctionElementAnglesDeg == [-90, 0])
        #expect(section.currentRoadNameVariants == ["Station Road", "Station Rd"] && section.maneuverState == .prepare)
        await cluster.close()
        await app.disconnect()
    }

    @Test("navigation port: with the home screen in front a new maneuver is a banner the HMI sees; selecting it brings the map back and the scene delegate's didSelect hears the maneuver")
    func navigationBanner() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let app = CPApplication(bundleIdentifier: "com.sample.maps", displayName: "Sample Maps", entitlements: [.maps])
        let delegate = NavigationSceneDelegate()
        app.sceneDelegate = delegate
        try await app.connect(to: car.endpoint)
        try await car.hmi.launch(app.bundleIdentifier)
        let appID = app.bundleIdentifier
        _ = try #require(await car.screen { if case .map? = $0.top.kind { true } else { false } })
        #expect(await Self.eventually { delegate.mapTemplate != nil })
        delegate.showPreviews()
        try await app.interfaceController?.waitForPendingUpdates()
        let trip = try #require(delegate.trips.first)
        try await car.navigation(appID, .startTrip(HUTripChosen.with { $0.tripID = trip.identifier }))
        #expect(await Self.eventually { delegate.events.contains("guiding") })
        try await app.interfaceController?.waitForPendingUpdates()
        // The driver goes to the home screen; the app's next turn becomes a banner.
        try await car.hmi.input(HUHmiInput.with { $0.goHome = HUGoHome() })
        let hmiFeed = try await ClusterSession.connect(to: car.endpoint)
        try await hmiFeed.subscribe()
        var updates = hmiFeed.updates.makeAsyncIterator()
        var model = MetadataModel()
        delegate.announceNextTurn()
        while model.state.banner.appID.isEmpty, let update = await updates.next() { model.apply(update) }
        let banner = model.state.banner
        #expect(banner.appID == appID && banner.instructionVariants == ["Turn left onto High Street"])
        #expect(delegate.events.contains("banner asked"))
        try await car.navigation(appID, .selectBanner(HUSelectBanner.with { $0.bannerID = banner.bannerID }))
        #expect(await Self.eventually { delegate.events.contains("selected Turn left onto High St") })
        #expect(await car.screen { if case .map? = $0.top.kind { true } else { false } } != nil)
        await hmiFeed.close()
        await app.disconnect()
    }

    @Test("navigation port: the dashboard's shortcuts and the cluster's window, zoom and settings reach Apple-style scene delegates")
    func navigationDashboardAndCluster() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let app = CPApplication(bundleIdentifier: "com.sample.maps", displayName: "Sample Maps", entitlements: [.maps])
        let main = NavigationSceneDelegate()
        let dashboard = DashboardSceneDelegate()
        let cluster = InstrumentClusterSceneDelegate()
        app.sceneDelegate = main
        app.dashboardSceneDelegate = dashboard
        app.instrumentClusterSceneDelegate = cluster
        try await app.connect(to: car.endpoint)
        try await car.hmi.launch(app.bundleIdentifier)
        try await car.hmi.launch(app.bundleIdentifier, kind: .dashboard)
        try await car.hmi.launch(app.bundleIdentifier, kind: .instrumentCluster)
        // Each scene's delegate got its window at the vehicle's size (points).
        #expect(await Self.eventually { dashboard.dashboardController != nil && cluster.events.contains("window 480x240") }, "\(cluster.events)")
        #expect(dashboard.windowSize?.width == 520 && dashboard.windowSize?.height == 480)
        try await app.interfaceController?.waitForPendingUpdates()

        // The shortcuts and the cluster's description reached the car (the cluster's metadata).
        let clusterPeer = try await ClusterSession.connect(to: car.endpoint)
        try await clusterPeer.subscribe()
        var updates = clusterPeer.updates.makeAsyncIterator()
        var model = MetadataModel()
        while model.state.cluster.dashboardButtons.count < 2 || model.state.cluster.inactiveDescriptionVariants.isEmpty,
              let update = await updates.next() {
            _ = model.apply(update)
        }
        let buttons = model.state.cluster.dashboardButtons
        #expect(buttons.map(\.titleVariants) == [["Home"], ["Work"]])
        #expect(model.state.cluster.inactiveDescriptionVariants == ["Maps is ready to guide", "Maps ready"])
        // The driver presses the second shortcut: its handler runs, no other.
        try await car.navigation(app.bundleIdentifier, .dashboardButton(buttons[1].id))
        #expect(await Self.eventually { dashboard.events == ["shortcut work"] }, "\(dashboard.events)")

        // The driver zooms the cluster's map and changes its settings.
        try await clusterPeer.send(HUClusterInput.with { $0.zoomIn = true })
        try await clusterPeer.send(HUClusterInput.with { $0.zoomIn = true })
        try await clusterPeer.send(HUClusterInput.with { $0.zoomOut = true })
        try await clusterPeer.send(HUClusterInput.with { $0.compass = .disabled })
        try await clusterPeer.send(HUClusterInput.with { $0.speedLimit = .enabled })
        let settings = ["compass \(CPInstrumentClusterSetting.disabled)", "speed limit \(CPInstrumentClusterSetting.enabled)"]
        #expect(await Self.eventually { settings.allSatisfy(cluster.events.contains) }, "\(cluster.events)")
        #expect(cluster.events.filter { $0.hasPrefix("zoom") } == ["zoom in", "zoom in", "zoom out"])
        #expect(cluster.zoom == 0.5)
        await clusterPeer.close()
        await app.disconnect()
    }

    @Test("automaker port: EAAccessoryManager's accessories and notifications from the car's availability, an EASession stream pair to an accessory peer")
    func automaker() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let climate = try await AccessoryPeer.connect(to: car.endpoint, name: "climate ECU")
        try await climate.serve([ClimateSessionController.protocolString])
        // The accessory echoes what it is sent.
        let echo = Task {
            for await stream in climate.sessions {
                Task { for try await bytes in stream { try await stream.write(bytes) } }
            }
        }
        defer { echo.cancel() }

        let app = CPApplication(bundleIdentifier: "com.sample.mycar", displayName: "My Car", entitlements: [.protocols],
                                accessoryProtocols: [ClimateSessionController.protocolString])
        let delegate = AutomakerSceneDelegate()
        app.sceneDelegate = delegate
        try await app.connect(to: car.endpoint)
        #expect(await Self.eventually { delegate.events.contains("connected \(ClimateSessionController.protocolString)") })
        #expect(EAAccessoryManager.shared().connectedAccessories.map(\.protocolStrings) == [[ClimateSessionController.protocolString]])

        try await car.hmi.launch(app.bundleIdentifier)
        let grid = try #require(await car.screen { if case .grid? = $0.top.kind { true } else { false } })
        try await car.hmi.pressButton(try #require(Self.button(grid.top, title: "Climate")), on: grid.top.id)
        let info = try #require(await car.screen { $0.top.information.items.first?.detail == "Connected" })
        try await car.hmi.pressButton(try #require(Self.button(info.top, title: "Warmer")), on: info.top.id)
        #expect(await Self.eventually { delegate.events.contains("reply 1") })
        #expect(await car.screen { $0.top.information.items.first?.detail == "Replied 1 byte(s)" } != nil)
        #expect(delegate.climate.readData == [0x01])

        // The accessory goes away: the car withdraws the protocol, the app hears it.
        await climate.close()
        #expect(await Self.eventually { delegate.events.contains("disconnected \(ClimateSessionController.protocolString)") })
        #expect(EAAccessoryManager.shared().connectedAccessories.isEmpty)
        try await app.interfaceController?.waitForPendingUpdates()
        await app.disconnect()
    }
}
