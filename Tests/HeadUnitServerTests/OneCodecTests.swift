import Foundation
import HeadUnitCore
import HeadUnitWire
import NIOCore
import NIOEmbedded
import Testing

@testable import HeadUnitServer

/// Issue 49 "one codec": on the daemon's request path nothing runs
/// swift-protobuf's coding. The in-memory server runs the real host and
/// pipeline on an `EmbeddedEventLoop`, so everything it does for a request
/// happens on the test's thread, where debug builds count every generated
/// `decodeMessage`/`traverse` (`ProtobufRuntimeUse`). The test is
/// synchronous so it never leaves that thread.
@Suite struct OneCodecTests {
    @Test(.enabled(if: ProtobufRuntimeUse.isCounted, "swift-protobuf's uses are counted only in debug builds"))
    func everyTemplateKindIsServedWithoutSwiftProtobuf() throws {
        // Every input is built before the count is read.
        let script = OneCodecScript()
        let server = InMemoryServer()

        let before = ProtobufRuntimeUse.onThisThread
        let run = try script.run(on: server)
        let after = ProtobufRuntimeUse.onThisThread

        #expect(after == before, "swift-protobuf's coding ran \(after - before) times on the request path")

        // The count is live here: swift-protobuf's own encoder moves it.
        var probe = HUEnvelope()
        probe.requestID = 1
        _ = try probe.serializedBytes() as [UInt8]
        #expect(ProtobufRuntimeUse.onThisThread > after, "the counter did not count a swift-protobuf encode")

        // Each request answered OK.
        for (step, result) in run.results {
            #expect(result.code == .ok, "\(step): \(result.code) \(result.message)")
        }
        #expect(run.results.count == script.expectedAnswers, "answers: \(run.results.map(\.step))")
        // The HMI was shown every kind, whole, and the updates as diffs.
        #expect(run.kindsShown == Set(TemplateKind.allCases), "kinds the HMI saw: \(run.kindsShown)")
        #expect(run.diffs == 5, "diffs the HMI saw: \(run.diffs)")
        #expect(run.imagesSent == 1, "the list item's PNG reached the HMI as ImageData, once")
        // The HMI's tap, search text and search result reached the app as
        // events it completed; the two selections spun until then.
        #expect(run.eventsCompleted == 3)
        #expect(run.spinnersStarted == 2)
        #expect(run.spinnersStopped == 2)
        #expect(run.searchResultsShown == 2)
        // Driving: each of the four scenes is told its new limits.
        #expect(run.sessionConfigurations == 4)
        #expect(run.status.apps == 4)
        #expect(run.status.scenes == 4)
        #expect(run.metadataUpdates >= 1)
    }
}

/// What the script saw, checked after the count is read.
struct OneCodecRun {
    var results: [(step: String, result: HUResult)] = []
    var kindsShown: Set<TemplateKind> = []
    var diffs = 0
    var imagesSent = 0
    var eventsCompleted = 0
    var spinnersStarted = 0
    var spinnersStopped = 0
    var searchResultsShown = 0
    var metadataUpdates = 0
    var sessionConfigurations = 0
    var status = HUStatus()
}

/// A phone with four apps (audio, communication, navigation, parking) and an
/// HMI: each app launched in turn and shown the template kinds its category
/// allows, so the twelve kinds are each put on screen (set_root, push,
/// present) and five updated in place (update, update_now_playing); plus an
/// HMI tap, a search and a result picked, a navigation start, a metadata
/// subscription, the car driving and a GetStatus.
struct OneCodecScript {
    static let audio = "com.example.radio"
    static let chat = "com.example.chat"
    static let maps = "com.example.maps"
    static let parking = "com.example.parking"

    let announce: HUAnnounceApps
    let radioSteps: [(String, HUTemplateRequest.OneOf_Op)]
    let chatSteps: [(String, HUTemplateRequest.OneOf_Op)]
    let mapSteps: [(String, HUTemplateRequest.OneOf_Op)]
    let parkingSteps: [(String, HUTemplateRequest.OneOf_Op)]
    let tap: HUHmiInput
    let searchText: HUHmiInput
    let searchResults: [HUListItem]
    let pickResult: HUHmiInput
    let startNavigation: HUNavigationRequest
    let driving: HUSetVehicleState

    /// Results the phone and the HMI get, handshakes aside: announce, subscribe,
    /// four launches, the template steps, three inputs and their completions,
    /// the navigation start, the vehicle state and the status.
    var expectedAnswers: Int {
        1 + 1 + 4 + radioSteps.count + chatSteps.count + mapSteps.count + parkingSteps.count + 3 * 2 + 1 + 1 + 1
    }

    init() {
        func app(_ id: String, _ name: String, _ entitlement: String) -> HUAppInfo {
            var app = HUAppInfo()
            app.appID = id
            app.displayName = name
            app.entitlements = [entitlement]
            return app
        }
        var announce = HUAnnounceApps()
        announce.deviceName = "phone"
        announce.apps = [
            app(Self.audio, "Radio", "com.apple.developer.carplay-audio"),
            app(Self.chat, "Chat", "com.apple.developer.carplay-communication"),
            app(Self.maps, "Maps", "com.apple.developer.carplay-maps"),
            app(Self.parking, "Parking", "com.apple.developer.carplay-parking"),
        ]
        self.announce = announce

        var albums = OneCodecTemplates.list("albums", items: 5)
        albums.list.sections[0].items[0].general.image = OneCodecTemplates.png(width: 64, height: 64)
        var albumsChanged = albums
        albumsChanged.list.sections[0].items[2].general.text = "Renamed"
        var genres = OneCodecTemplates.grid("genres")
        genres.grid.title = "Genres"
        var genresChanged = genres
        genresChanged.grid.buttons[1].titleVariants = ["Jazz and blues", "Jazz"]
        var playing = OneCodecTemplates.nowPlaying()
        playing.nowPlaying.elapsedSeconds = 10
        var playingLater = playing.nowPlaying
        playingLater.elapsedSeconds = 20
        radioSteps = [
            ("set_root list", .setRoot(albums)),
            ("update list", .update(albumsChanged)),
            ("push grid", .push(genres)),
            ("update grid", .update(genresChanged)),
            ("push now playing", .push(playing)),
            ("update_now_playing", .updateNowPlaying(playingLater)),
            ("present alert", .present(OneCodecTemplates.alert("alert"))),
            ("dismiss alert", .dismiss(HUPopTemplate())),
            ("set_root tab bar", .setRoot(OneCodecTemplates.tabBar("tabs"))),
        ]

        let details = OneCodecTemplates.information("details")
        var detailsChanged = details
        detailsChanged.information.items[1].detail = "Changed"
        chatSteps = [
            ("set_root contact", .setRoot(OneCodecTemplates.contact("alice"))),
            ("push information", .push(details)),
            ("update information", .update(detailsChanged)),
            ("present action sheet", .present(OneCodecTemplates.actionSheet("sheet"))),
        ]

        mapSteps = [
            ("set_root map", .setRoot(OneCodecTemplates.map("map"))),
            ("push search", .push(OneCodecTemplates.search("search"))),
            ("present voice control", .present(OneCodecTemplates.voiceControl("voice"))),
        ]

        let spots = OneCodecTemplates.pointOfInterest("spots", selected: 0)
        var spotsMoved = spots
        spotsMoved.pointOfInterest.selectedIndex = 2
        parkingSteps = [
            ("set_root point of interest", .setRoot(spots)),
            ("update point of interest", .update(spotsMoved)),
        ]

        var tap = HUHmiInput()
        tap.templateID = "albums"
        var selected = HUItemSelected()
        selected.itemID = "s0.i3"
        tap.kind = .selectItem(selected)
        self.tap = tap

        var searchText = HUHmiInput()
        searchText.templateID = "search"
        var text = HUSearchTextChanged()
        text.text = "coffee"
        searchText.kind = .searchText(text)
        self.searchText = searchText
        searchResults = [OneCodecTemplates.item("r1", "Coffee one"), OneCodecTemplates.item("r2", "Coffee two")]
        var pickResult = HUHmiInput()
        pickResult.templateID = "search"
        var picked = HUSearchResultSelected()
        picked.itemID = "r2"
        pickResult.kind = .selectSearchResult(picked)
        self.pickResult = pickResult

        var start = HUStartNavigation()
        start.trip = OneCodecTemplates.trip("home")
        var navigation = HUNavigationRequest()
        navigation.appID = Self.maps
        navigation.op = .start(start)
        startNavigation = navigation

        var state = HUVehicleState()
        state.driving = true
        state.limitKeyboard = true
        state.limitLists = true
        var driving = HUSetVehicleState()
        driving.state = state
        self.driving = driving
    }

    func run(on server: InMemoryServer) throws -> OneCodecRun {
        var run = OneCodecRun()
        let hmi = OneCodecPeer(try server.connectUnix(), name: "hmi")
        let phone = OneCodecPeer(try server.connectUnix(), name: "phone")
        try hmi.handshake(.hmi, server)
        try phone.handshake(.phone, server)

        run.results.append(("announce", try phone.ask(.announceApps(announce), server)))
        run.results.append(("subscribe metadata", try hmi.ask(.subscribeMetadata(HUSubscribeMetadata()), server)))

        func launch(_ appID: String) throws -> UInt32 {
            var launch = HULaunchApp()
            launch.appID = appID
            run.results.append(("launch \(appID)", try hmi.ask(.launchApp(launch), server)))
            try phone.take(server)
            let scene = phone.taken.lazy.compactMap { envelope -> UInt32? in
                if case .sceneConnected(let connected) = envelope.body, connected.appID == appID { return connected.sceneID }
                return nil
            }.first
            return scene ?? 0
        }
        func play(_ steps: [(String, HUTemplateRequest.OneOf_Op)], appID: String, scene: UInt32) throws {
            for (step, op) in steps {
                var request = HUTemplateRequest()
                request.appID = appID
                request.sceneID = scene
                request.op = op
                run.results.append((step, try phone.ask(.templateRequest(request), server)))
            }
        }
        /// The HMI's input starts an event the app completes with `results`.
        func inputCompleted(_ input: HUHmiInput, appID: String, results: [HUListItem]) throws {
            run.results.append(("input \(input.templateID)", try hmi.ask(.hmiInput(input), server)))
            try phone.take(server)
            let eventID = phone.taken.last { envelope in
                if case .appEvent(let event) = envelope.body { return event.eventID != 0 }
                return false
            }?.appEvent.eventID ?? 0
            var complete = HUCompleteEvent()
            complete.appID = appID
            complete.eventID = eventID
            complete.searchResults = results
            run.results.append(("complete \(input.templateID)", try phone.ask(.completeEvent(complete), server)))
            if eventID != 0 { run.eventsCompleted += 1 }
        }

        let radio = try launch(Self.audio)
        try play(Array(radioSteps.prefix(1)), appID: Self.audio, scene: radio)
        try inputCompleted(tap, appID: Self.audio, results: [])
        try play(Array(radioSteps.dropFirst()), appID: Self.audio, scene: radio)

        try play(chatSteps, appID: Self.chat, scene: try launch(Self.chat))

        let map = try launch(Self.maps)
        try play(Array(mapSteps.prefix(2)), appID: Self.maps, scene: map)
        try inputCompleted(searchText, appID: Self.maps, results: searchResults)
        try inputCompleted(pickResult, appID: Self.maps, results: [])
        try play(Array(mapSteps.dropFirst(2)), appID: Self.maps, scene: map)
        run.results.append(("start navigation", try phone.ask(.navigationRequest(startNavigation), server)))

        try play(parkingSteps, appID: Self.parking, scene: try launch(Self.parking))

        // Timers (metadata coalescing and the like) run on the same thread.
        server.loop.advanceTime(by: .seconds(1))
        run.results.append(("set vehicle state", try hmi.ask(.setVehicleState(driving), server)))
        let status = try hmi.ask(.getStatus(HUGetStatus()), server)
        run.results.append(("get status", status))
        run.status = status.status
        try hmi.take(server)
        try phone.take(server)

        for envelope in hmi.taken {
            switch envelope.body {
            case .screenUpdate(let update):
                switch update.change {
                case .full(let full):
                    if let kind = TemplateKind(full.top.kind) { run.kindsShown.insert(kind) }
                    if let kind = TemplateKind(full.presented.kind) { run.kindsShown.insert(kind) }
                    if full.searchResults.count > 0 { run.searchResultsShown = full.searchResults.count }
                case .diff: run.diffs += 1
                case .spinnerStarted: run.spinnersStarted += 1
                case .spinnerStopped: run.spinnersStopped += 1
                case nil: break
                }
            case .imageData: run.imagesSent += 1
            case .metadataUpdate: run.metadataUpdates += 1
            default: break
            }
        }
        run.sessionConfigurations = phone.taken.filter { envelope in
            if case .sessionConfiguration(let configuration) = envelope.body { return configuration.limitLists }
            return false
        }.count
        return run
    }
}

/// One peer and everything the server wrote to it, decoded with the codec.
final class OneCodecPeer {
    let peer: InMemoryPeer
    let name: String
    private(set) var taken: [HUEnvelope] = []

    init(_ peer: InMemoryPeer, name: String) {
        self.peer = peer
        self.name = name
    }

    /// Runs what the loop has queued, then keeps every envelope written so far.
    func take(_ server: InMemoryServer) throws {
        server.loop.run()
        taken += try peer.envelopes()
    }

    func handshake(_ role: HURole, _ server: InMemoryServer) throws {
        var hello = HUHello()
        hello.role = role
        hello.name = name
        hello.minVersion = 1
        hello.maxVersion = 1
        try peer.request(.hello(hello))
        try take(server)
        guard taken.contains(where: { if case .welcome = $0.body { return true }; return false }) else {
            throw InMemoryError.missing("Welcome for \(name)")
        }
    }

    /// Sends `body` as a request and returns its Result.
    func ask(_ body: HUEnvelope.OneOf_Body, _ server: InMemoryServer) throws -> HUResult {
        let id = try peer.request(body)
        try take(server)
        for envelope in taken.reversed() where envelope.requestID == id {
            if case .result(let result) = envelope.body { return result }
        }
        throw InMemoryError.missing("Result for request \(id) of \(name)")
    }
}

/// Valid templates and parts, as plain values (Protocol/TEMPLATES.md).
enum OneCodecTemplates {
    static func template(_ id: String, _ kind: HUTemplate.OneOf_Kind) -> HUTemplate {
        var template = HUTemplate()
        template.id = id
        template.kind = kind
        return template
    }

    static func item(_ id: String, _ text: String) -> HUListItem {
        var general = HUGeneralItem()
        general.text = text
        general.detailText = "detail"
        var item = HUListItem()
        item.id = id
        item.kind = .general(general)
        return item
    }

    static func list(_ id: String, items count: Int) -> HUTemplate {
        var section = HUListSection()
        section.id = "s0"
        section.header = "Recent"
        section.items = (0..<count).map { item("s0.i\($0)", "Item \($0)") }
        var list = HUListTemplate()
        list.title = "Albums"
        list.sections = [section]
        list.trailingButtons = [barButton("more")]
        return template(id, .list(list))
    }

    static func barButton(_ id: String) -> HUBarButton {
        var button = HUBarButton()
        button.id = id
        button.title = id
        return button
    }

    static func textButton(_ id: String) -> HUTextButton {
        var button = HUTextButton()
        button.id = id
        button.title = id
        return button
    }

    static func grid(_ id: String) -> HUTemplate {
        var grid = HUGridTemplate()
        grid.buttons = (0..<4).map { index in
            var button = HUGridButton()
            button.id = "g\(index)"
            button.titleVariants = ["Button \(index)"]
            return button
        }
        return template(id, .grid(grid))
    }

    static func tabBar(_ id: String) -> HUTemplate {
        func tab(_ id: String, _ content: HUTemplate) -> HUTab {
            var tab = HUTab()
            tab.id = id
            tab.title = id
            tab.template = content
            return tab
        }
        var tabBar = HUTabBarTemplate()
        tabBar.tabs = [tab("library", list("library.list", items: 3)), tab("browse", grid("browse.grid"))]
        tabBar.selectedTabID = "library"
        return template(id, .tabBar(tabBar))
    }

    static func nowPlaying() -> HUTemplate {
        var nowPlaying = HUNowPlayingTemplate()
        nowPlaying.title = "Song"
        nowPlaying.artist = "Artist"
        nowPlaying.durationSeconds = 200
        nowPlaying.playbackRate = 1
        var shuffle = HUNowPlayingButton()
        shuffle.id = "shuffle"
        shuffle.kind = .shuffle
        nowPlaying.buttons = [shuffle]
        return template("now-playing", .nowPlaying(nowPlaying))
    }

    static func alert(_ id: String) -> HUTemplate {
        var alert = HUAlertTemplate()
        alert.titleVariants = ["Delete the download?", "Delete?"]
        alert.actions = [textButton("ok"), textButton("cancel")]
        return template(id, .alert(alert))
    }

    static func actionSheet(_ id: String) -> HUTemplate {
        var sheet = HUActionSheetTemplate()
        sheet.title = "Reply"
        sheet.message = "Choose an answer"
        sheet.actions = [textButton("yes"), textButton("no")]
        return template(id, .actionSheet(sheet))
    }

    static func information(_ id: String) -> HUTemplate {
        var information = HUInformationTemplate()
        information.title = "Order"
        information.items = (0..<3).map { index in
            var item = HUInformationItem()
            item.id = "i\(index)"
            item.title = "Label \(index)"
            item.detail = "Value \(index)"
            return item
        }
        information.actions = [textButton("confirm")]
        return template(id, .information(information))
    }

    static func pointOfInterest(_ id: String, selected: Int32) -> HUTemplate {
        var poi = HUPointOfInterestTemplate()
        poi.title = "Nearby"
        poi.points = (0..<3).map { index in
            var point = HUPointOfInterest()
            point.id = "p\(index)"
            point.title = "Garage \(index)"
            var location = HULocation()
            location.latitude = 48.1 + Double(index) / 100
            location.longitude = 11.5
            point.location = location
            point.primaryButton = textButton("p\(index).go")
            return point
        }
        poi.selectedIndex = selected
        return template(id, .pointOfInterest(poi))
    }

    static func contact(_ id: String) -> HUTemplate {
        var contact = HUContactTemplate()
        contact.title = "Alice"
        contact.informativeTexts = ["Mobile", "+49 89 1234"]
        contact.actions = ["call", "message"].map { name in
            var action = HUContactAction()
            action.id = name
            action.kind = name == "call" ? .call : .message
            return action
        }
        return template(id, .contact(contact))
    }

    static func map(_ id: String) -> HUTemplate {
        var pan = HUMapButton()
        pan.id = "pan"
        var image = HUImage()
        image.asset = "pan"
        image.widthPx = 88
        image.heightPx = 88
        pan.image = image
        var map = HUMapTemplate()
        map.mapButtons = [pan]
        map.panningSupported = true
        map.trailingButtons = [barButton("find")]
        map.guidanceBackgroundColor = "#102030"
        return template(id, .map(map))
    }

    static func search(_ id: String) -> HUTemplate {
        var search = HUSearchTemplate()
        search.placeholder = "Where to?"
        return template(id, .search(search))
    }

    static func voiceControl(_ id: String) -> HUTemplate {
        var voice = HUVoiceControlTemplate()
        voice.states = ["listening", "thinking"].map { name in
            var state = HUVoiceControlState()
            state.id = name
            state.titleVariants = [name.capitalized]
            return state
        }
        voice.activeStateID = "listening"
        return template(id, .voiceControl(voice))
    }

    static func trip(_ id: String) -> HUTrip {
        var estimates = HUTravelEstimates()
        estimates.distanceRemainingM = 12_000
        estimates.timeRemainingS = 1_200
        var route = HURouteChoice()
        route.id = "fast"
        route.summaryVariants = ["Via the fast road", "fast"]
        route.estimates = estimates
        var destination = HUPlace()
        destination.name = "Home"
        var trip = HUTrip()
        trip.id = id
        trip.destination = destination
        trip.routeChoices = [route]
        return trip
    }

    /// A PNG's signature, IHDR chunk (with its CRC) and IEND chunk: what the car reads of it.
    static func png(width: UInt32, height: UInt32) -> HUImage {
        func bigEndian(_ value: UInt32) -> [UInt8] {
            [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
        }
        let chunk: [UInt8] = Array("IHDR".utf8) + bigEndian(width) + bigEndian(height) + [8, 6, 0, 0, 0]
        var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        bytes += bigEndian(13) + chunk + bigEndian(ImageRules.crc32(chunk))
        bytes += bigEndian(0) + Array("IEND".utf8) + bigEndian(0xAE42_6082)
        var image = HUImage()
        image.png = Data(bytes)
        return image
    }
}
