import CarPlayKit
import Foundation
import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

/// The templates the examples do not use, in-process against the real daemon
/// and driven from the HMI: tab bar, image row, grid update, search, action
/// sheet, voice control, point of interest.
@Suite("CarPlayKit templates against the daemon", .serialized)
@MainActor
struct CarPlayKitTemplateTests {
    /// Records what handlers and delegates saw, in order.
    final class Recorder: CPTemplateApplicationSceneDelegate, CPTabBarTemplateDelegate, CPSearchTemplateDelegate,
        CPPointOfInterestTemplateDelegate, @unchecked Sendable {
        let connected = AsyncStream<CPInterfaceController>.makeStream()
        private let lock = NSLock()
        nonisolated(unsafe) private var lines: [String] = []

        nonisolated func record(_ line: String) { lock.withLock { lines.append(line) } }
        nonisolated func saw(_ line: String, timeout: Double = 30) async -> Bool {
            await CarPlayKitInterfaceControllerTests.eventually(timeout) { self.lock.withLock { self.lines.contains(line) } }
        }
        nonisolated var all: [String] { lock.withLock { lines } }

        func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                      didConnect interfaceController: CPInterfaceController) {
            connected.continuation.yield(interfaceController)
        }

        func tabBarTemplate(_ tabBarTemplate: CPTabBarTemplate, didSelect selectedTemplate: CPTemplate) {
            record("tab \(selectedTemplate.identifier)")
        }

        func searchTemplate(_ searchTemplate: CPSearchTemplate, updatedSearchText searchText: String,
                            completionHandler: @escaping ([CPListItem]) -> Void) {
            record("search \(searchText)")
            completionHandler([CPListItem(text: "Cafe \(searchText)", detailText: nil, identifier: "cafe")])
        }

        func searchTemplate(_ searchTemplate: CPSearchTemplate, selectedResult item: CPListItem,
                            completionHandler: @escaping () -> Void) {
            record("result \(item.identifier)")
            completionHandler()
        }

        func searchTemplateSearchButtonPressed(_ searchTemplate: CPSearchTemplate) { record("search button") }

        func pointOfInterestTemplate(_ pointOfInterestTemplate: CPPointOfInterestTemplate, didChangeMapRegion region: MKCoordinateRegion) {
            record("region \(region.center.latitude) span \(region.span.latitudeDelta) x \(region.span.longitudeDelta)")
        }

        func pointOfInterestTemplate(_ pointOfInterestTemplate: CPPointOfInterestTemplate,
                                     didSelectPointOfInterest pointOfInterest: CPPointOfInterest) {
            record("poi \(pointOfInterest.identifier)")
        }
    }

    struct Rig {
        let daemon: TestDaemon
        let app: CPApplication
        let hmi: HMISession
        let controller: CPInterfaceController

        @MainActor static func start(_ appID: String, _ entitlements: [CPEntitlement], _ recorder: Recorder) async throws -> Rig {
            let daemon = try await onOwnThread(gated: false) { @Sendable in try TestDaemon.launch() }
            let endpoint = HeadUnitEndpoint.unix(path: daemon.unixSocketPath)
            let app = CPApplication(bundleIdentifier: appID, displayName: appID, entitlements: entitlements)
            app.sceneDelegate = recorder
            try await app.connect(to: endpoint)
            let hmi = try await HMISession.connect(to: endpoint)
            try await hmi.launch(appID)
            var connections = recorder.connected.stream.makeAsyncIterator()
            guard let controller = await connections.next() else { throw TestDaemon.LaunchError(message: "no scene connected for \(appID)") }
            return Rig(daemon: daemon, app: app, hmi: hmi, controller: controller)
        }

        func input(_ templateID: String, _ kind: HUHmiInput.OneOf_Kind) async throws {
            try await hmi.input(HUHmiInput.with { $0.templateID = templateID; $0.kind = kind })
        }

        func stop() { _ = try? daemon.terminate() }
    }

    @Test("audio: tab bar selection, an item inside a tab, image-row image handler, grid button and grid update")
    func tabsRowsGrid() async throws {
        let recorder = Recorder()
        let rig = try await Rig.start("com.test.tabs", [.audio], recorder)
        defer { rig.stop() }

        let song = CPListItem(text: "Song", detailText: nil, identifier: "song")
        song.handler = { _, completion in recorder.record("song"); completion() }
        let row = CPListImageRowItem(text: "Albums", images: [CPImage(named: "a", pixelWidth: 64, pixelHeight: 64),
                                                              CPImage(named: "b", pixelWidth: 64, pixelHeight: 64)], identifier: "row")
        row.listImageRowHandler = { _, index, completion in recorder.record("image \(index)"); completion() }
        row.handler = { _, completion in recorder.record("row"); completion() }
        // A handler that keeps its completion until the test says so.
        let held = HeldCompletion()
        let slow = CPListItem(text: "Slow", detailText: nil, identifier: "slow")
        slow.handler = { _, completion in held.completion = completion }
        let songs = CPListTemplate(title: "Songs", sections: [CPListSection(items: [song, row, slow])], identifier: "songs")
        songs.tabTitle = "Songs"
        let grid = CPGridTemplate(title: "Browse", gridButtons: [
            CPGridButton(titleVariants: ["Jazz"], image: CPImage(named: "jazz", pixelWidth: 80, pixelHeight: 80), identifier: "jazz") { _ in
                recorder.record("grid jazz")
            },
        ], identifier: "browse")
        grid.tabSystemItem = .featured
        let tabs = CPTabBarTemplate(templates: [songs, grid], identifier: "tabs")
        tabs.delegate = recorder
        try await rig.controller.setRootTemplate(tabs, animated: false)

        try await rig.hmi.selectItem("song", on: "songs")
        #expect(await recorder.saw("song"))
        #expect(await rig.hmi.waitForScreen { !$0.hasPending } != nil)
        try await rig.input("songs", .selectItem(HUItemSelected.with { $0.itemID = "row"; $0.imageSelected = true; $0.imageIndex = 1 }))
        #expect(await recorder.saw("image 1"))
        #expect(await rig.hmi.waitForScreen { !$0.hasPending } != nil)
        try await rig.hmi.selectItem("row", on: "songs")
        #expect(await recorder.saw("row"))
        #expect(await rig.hmi.waitForScreen { !$0.hasPending } != nil)

        // A newer selection replaces a pending one (PROTOCOL.md 16.x): the late completion of the
        // replaced one is refused by the car with UNKNOWN_EVENT, which is no error of the app's updates.
        try await rig.hmi.selectItem("slow", on: "songs")
        #expect(await CarPlayKitInterfaceControllerTests.eventually { held.completion != nil })
        try await rig.hmi.selectItem("song", on: "songs")
        #expect(await rig.hmi.waitForScreen { !$0.hasPending } != nil)
        held.completion?()
        try await rig.controller.waitForPendingUpdates()

        // The item's completion is @Sendable: called off the main actor (work finished on a
        // background task), it hops to the main actor and stops the car's spinner.
        held.completion = nil
        try await rig.hmi.selectItem("slow", on: "songs")
        #expect(await CarPlayKitInterfaceControllerTests.eventually { held.completion != nil })
        #expect(await rig.hmi.waitForScreen { $0.hasPending } != nil)
        await Task.detached { held.completion?() }.value
        #expect(await rig.hmi.waitForScreen { !$0.hasPending } != nil)

        try await rig.input("tabs", .selectTab(HUTabSelected.with { $0.tabID = "tab-browse" }))
        #expect(await recorder.saw("tab browse"))
        try await rig.hmi.pressButton("jazz", on: "browse")
        #expect(await recorder.saw("grid jazz"))

        // A grid update inside a tab reaches the car as an update of the tab bar.
        grid.updateGridButtons([CPGridButton(titleVariants: ["Rock"], image: CPImage(named: "rock", pixelWidth: 80, pixelHeight: 80), identifier: "rock")])
        try await rig.controller.waitForPendingUpdates()
        let updated = await rig.hmi.waitForScreen { screen in
            guard case .tabBar(let bar)? = screen.top.kind, let tab = bar.tabs.first(where: { $0.id == "tab-browse" }),
                  case .grid(let grid)? = tab.template.kind else { return false }
            return grid.buttons.map(\.id) == ["rock"]
        }
        #expect(updated != nil)
    }

    @Test("navigation: search with results through the completion, result selection, search button; action sheet; voice control")
    func searchSheetVoice() async throws {
        let recorder = Recorder()
        let rig = try await Rig.start("com.test.nav", [.maps], recorder)
        defer { rig.stop() }
        try await rig.controller.setRootTemplate(CPMapTemplate(identifier: "map"), animated: false)

        let search = CPSearchTemplate(identifier: "search")
        search.delegate = recorder
        try await rig.controller.pushTemplate(search, animated: true)
        try await rig.input("search", .searchText(HUSearchTextChanged.with { $0.text = "caf" }))
        #expect(await recorder.saw("search caf"))
        #expect(await rig.hmi.waitForScreen { $0.searchResults.map(\.id) == ["cafe"] && !$0.hasPending } != nil)
        try await rig.input("search", .selectSearchResult(HUSearchResultSelected.with { $0.itemID = "cafe" }))
        #expect(await recorder.saw("result cafe"))
        #expect(await rig.hmi.waitForScreen { !$0.hasPending } != nil)
        try await rig.input("search", .searchButton(HUSearchButtonPressed()))
        #expect(await recorder.saw("search button"))
        try await rig.controller.popTemplate(animated: true)

        let controller = rig.controller
        let sheet = CPActionSheetTemplate(title: "Route", message: "Avoid tolls?", actions: [
            CPAlertAction(title: "Avoid", style: .default, identifier: "avoid") { _ in
                recorder.record("avoid")
                controller.dismissTemplate(animated: true, completion: nil)
            },
            CPAlertAction(title: "Cancel", style: .cancel, identifier: "cancel-sheet") { _ in },
        ], identifier: "sheet")
        try await rig.controller.presentTemplate(sheet, animated: true)
        try await rig.hmi.pressButton("avoid", on: "sheet")
        #expect(await recorder.saw("avoid"))
        #expect(await rig.hmi.waitForScreen { $0.presented.id.isEmpty } != nil)

        let voice = CPVoiceControlTemplate(voiceControlStates: [
            CPVoiceControlState(identifier: "listening", titleVariants: ["Listening…"], image: nil, repeats: true),
            CPVoiceControlState(identifier: "thinking", titleVariants: ["One moment"], image: nil, repeats: false),
        ], identifier: "voice")
        try await rig.controller.presentTemplate(voice, animated: true)
        voice.activateVoiceControlState(withIdentifier: "thinking")
        try await rig.controller.waitForPendingUpdates()
        let thinking = await rig.hmi.waitForScreen { screen in
            if case .voiceControl(let template)? = screen.presented.kind { return template.activeStateID == "thinking" }
            return false
        }
        #expect(thinking != nil)
        try await rig.controller.dismissTemplate(animated: true)
    }

    @Test("parking: points of interest, selection, region change, the card's button")
    func pointsOfInterest() async throws {
        let recorder = Recorder()
        let rig = try await Rig.start("com.test.parking", [.parking], recorder)
        defer { rig.stop() }
        let garage = CPPointOfInterest(location: Self.place("Garage", 48.1, 11.5),
                                       title: "Garage", subtitle: "2 EUR/h", summary: nil, detailTitle: nil, detailSubtitle: nil,
                                       detailSummary: nil, pinImage: nil, identifier: "garage")
        garage.primaryButton = CPTextButton(title: "Reserve", textStyle: .confirm, identifier: "reserve") { _ in recorder.record("reserve") }
        let lot = CPPointOfInterest(location: Self.place("Lot", 48.2, 11.6),
                                    title: "Lot", subtitle: nil, summary: nil, detailTitle: nil, detailSubtitle: nil,
                                    detailSummary: nil, pinImage: nil, identifier: "lot")
        let places = CPPointOfInterestTemplate(title: "Parking", pointsOfInterest: [garage, lot], selectedIndex: 0, identifier: "places")
        places.pointOfInterestDelegate = recorder
        try await rig.controller.setRootTemplate(places, animated: false)

        try await rig.input("places", .selectPoi(HUPoiSelected.with { $0.poiID = "lot" }))
        #expect(await recorder.saw("poi lot"))
        try await rig.input("places", .poiRegion(HUPoiRegionChanged.with {
            $0.region = HUMapRegion.with { $0.centerLatitude = 48.5; $0.centerLongitude = 11.5; $0.spanLatitude = 0.1; $0.spanLongitude = 0.2 }
        }))
        #expect(await recorder.saw("region 48.5 span 0.1 x 0.2"), "\(recorder.all)")
        try await rig.hmi.pressButton("reserve", on: "places")
        #expect(await recorder.saw("reserve"), "\(recorder.all)")
    }

    /// A named place, the MapKit way: an item at a placemark, named afterwards.
    static func place(_ name: String, _ latitude: CLLocationDegrees, _ longitude: CLLocationDegrees) -> MKMapItem {
        let item = MKMapItem(placemark: MKPlacemark(coordinate: CLLocationCoordinate2D(latitude: latitude, longitude: longitude)))
        item.name = name
        return item
    }

    @Test("MKCoordinateRegion from meters: a degree of latitude is ~111.2 km, a degree of longitude shrinks with the cosine of the latitude")
    func regionFromMeters() {
        let equator = MKCoordinateRegion(center: CLLocationCoordinate2D(latitude: 0, longitude: 10), latitudinalMeters: 111_195, longitudinalMeters: 111_195)
        #expect(abs(equator.span.latitudeDelta - 1) < 0.001 && abs(equator.span.longitudeDelta - 1) < 0.001)
        let north = MKCoordinateRegion(center: CLLocationCoordinate2D(latitude: 60, longitude: 10), latitudinalMeters: 1_000, longitudinalMeters: 1_000)
        #expect(abs(north.span.longitudeDelta / north.span.latitudeDelta - 2) < 0.001)
        #expect(north.center == CLLocationCoordinate2D(latitude: 60, longitude: 10))
    }
}

/// A completion kept by a handler until the test calls it.
final class HeldCompletion: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: (@Sendable () -> Void)?
    var completion: (@Sendable () -> Void)? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
