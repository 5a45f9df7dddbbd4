import HeadUnitWire

/// Entitlement keys (TEMPLATES.md §1) by the category they give.
enum Entitlement {
    static let audio = "com.apple.developer.carplay-audio"
    static let communication = "com.apple.developer.carplay-communication"
    static let maps = "com.apple.developer.carplay-maps"
    static let charging = "com.apple.developer.carplay-charging"
    static let fueling = "com.apple.developer.carplay-fueling"
    static let parking = "com.apple.developer.carplay-parking"
    static let quickOrdering = "com.apple.developer.carplay-quick-ordering"
    static let drivingTask = "com.apple.developer.carplay-driving-task"
    static let publicSafety = "com.apple.developer.carplay-public-safety"
}

func appInfo(_ id: String, _ entitlements: [String]) -> HUAppInfo {
    var app = HUAppInfo()
    app.appID = id
    app.displayName = id
    app.entitlements = entitlements
    return app
}

/// A phone with one app launched on the main screen by an HMI (§11.1-3).
final class LaunchedApp {
    let phone: WireConnection
    let hmi: WireConnection
    let appID: String
    let scene: HUSceneConnected
    let decision: HUAppDecision

    init(phone: WireConnection, hmi: WireConnection, appID: String, scene: HUSceneConnected, decision: HUAppDecision) {
        self.phone = phone
        self.hmi = hmi
        self.appID = appID
        self.scene = scene
        self.decision = decision
    }

    func request(_ op: HUTemplateRequest.OneOf_Op, _ what: String) throws -> HUResult {
        var request = HUTemplateRequest()
        request.appID = appID
        request.sceneID = scene.sceneID
        request.op = op
        return try phone.request(.templateRequest(request), what)
    }

    /// A template operation that must succeed.
    @discardableResult
    func ok(_ op: HUTemplateRequest.OneOf_Op, _ what: String) throws -> HUResult {
        let result = try request(op, what)
        try requireCode(result, .ok, what)
        return result
    }

    /// A template operation that must be refused with `code`.
    @discardableResult
    func refused(_ op: HUTemplateRequest.OneOf_Op, _ code: HUErrorCode, _ what: String) throws -> HUResult {
        let result = try request(op, what)
        try requireCode(result, code, what)
        return result
    }

    /// Lifecycle events for `templateID`, taken from the phone in arrival order
    /// until `phases` are all in; checks each one's app and scene.
    func lifecycle(_ templateID: String, _ phases: [HULifecyclePhase], _ what: String) throws {
        for phase in phases {
            let event = try phone.take("AppEvent{template_id \"\(templateID)\", lifecycle \(phase)} after \(what)") { envelope -> HUAppEvent? in
                if case .appEvent(let event) = envelope.body, event.templateID == templateID, case .lifecycle = event.kind { return event }
                return nil
            }
            try require(event.lifecycle.phase == phase, "\(phase) next for \"\(templateID)\" after \(what) (WILL before DID, §11.4)", got: "\(event.lifecycle.phase)")
            try require(event.appID == appID && event.sceneID == scene.sceneID, "the lifecycle event for app \(appID) scene \(scene.sceneID)", got: "app \(event.appID) scene \(event.sceneID)")
        }
    }
}

extension CheckContext {
    /// AnnounceApps that waits out a previous check's phone still being cleaned
    /// up (PHONE_ALREADY_CONNECTED for up to a second), then returns the Result.
    func announce(_ phone: WireConnection, _ apps: [HUAppInfo], device: String = "Conformance Phone", assistant: Bool = false) throws -> HUResult {
        var announce = HUAnnounceApps()
        announce.deviceName = device
        announce.apps = apps
        announce.assistant = assistant
        let deadline = WireConnection.nowMs() + 1000
        while true {
            let result = try phone.request(.announceApps(announce), "AnnounceApps")
            if result.code == .phoneAlreadyConnected && WireConnection.nowMs() < deadline {
                sleepMs(50)
                continue
            }
            return result
        }
    }

    /// An HMI, a phone announcing one app with `entitlements`, and the app's main
    /// scene launched. Skips when the endpoint's policy refuses the entitlement.
    func launchedApp(_ entitlements: [String], appID: String = "com.example.conformance") throws -> LaunchedApp {
        let hmi = try self.hmi()
        let phone = try self.phone()
        let result = try announce(phone, [appInfo(appID, entitlements)])
        try requireCode(result, .ok, "AnnounceApps")
        guard let decision = result.appDecisions.decisions.first(where: { $0.appID == appID }) else {
            throw CheckFailure(expected: "an AppDecision for \(appID)", got: describe(result))
        }
        guard decision.accepted else {
            throw CheckSkipped("the endpoint's entitlement policy refused \(entitlements.joined(separator: "+")): \(name(decision.code)) \(decision.reason)")
        }
        var launch = HULaunchApp()
        launch.appID = appID
        launch.kind = .main
        try requireCode(try hmi.request(.launchApp(launch), "LaunchApp \(appID)"), .ok, "LaunchApp")
        let scene = try phone.take("SceneConnected for \(appID)") { envelope -> HUSceneConnected? in
            if case .sceneConnected(let scene) = envelope.body, scene.appID == appID { return scene }
            return nil
        }
        return LaunchedApp(phone: phone, hmi: hmi, appID: appID, scene: scene, decision: decision)
    }

    /// Puts the vehicle back to parked when the check ends (vehicle state outlives connections).
    func restoreParkedAtEnd(_ hmi: WireConnection) {
        onCleanup {
            var state = HUSetVehicleState()
            state.state.driving = false
            _ = try? hmi.request(.setVehicleState(state), "SetVehicleState parked")
        }
    }
}

// MARK: - Templates that pass every rule, to vary one thing at a time

enum Make {
    static func item(_ id: String) -> HUListItem {
        var item = HUListItem()
        item.id = id
        var general = HUGeneralItem()
        general.text = "Item \(id)"
        item.general = general
        return item
    }

    static func bar(_ id: String) -> HUBarButton {
        var button = HUBarButton()
        button.id = id
        button.title = id
        return button
    }

    static func action(_ id: String) -> HUTextButton {
        var button = HUTextButton()
        button.id = id
        button.title = id
        return button
    }

    static func list(_ id: String, items: Int = 2, leading: Int = 0, trailing: Int = 0) -> HUTemplate {
        var list = HUListTemplate()
        list.title = id
        var section = HUListSection()
        section.id = "\(id).s"
        section.items = (0..<items).map { item("\(id).i\($0)") }
        list.sections = [section]
        list.leadingButtons = (0..<leading).map { bar("\(id).l\($0)") }
        list.trailingButtons = (0..<trailing).map { bar("\(id).t\($0)") }
        var template = HUTemplate()
        template.id = id
        template.list = list
        return template
    }

    static func imageRowList(_ id: String, images: Int) -> HUTemplate {
        var template = list(id, items: 0)
        var row = HUImageRowItem()
        row.text = "Row"
        row.images = (0..<images).map { _ in
            var image = HUImage()
            image.asset = "conformance.tile"
            image.widthPx = 32
            image.heightPx = 32
            return image
        }
        var item = HUListItem()
        item.id = "\(id).row"
        item.imageRow = row
        template.list.sections[0].items = [item]
        return template
    }

    static func grid(_ id: String, buttons: Int = 2, leading: Int = 0, trailing: Int = 0) -> HUTemplate {
        var grid = HUGridTemplate()
        grid.title = id
        grid.buttons = (0..<buttons).map { index in
            var button = HUGridButton()
            button.id = "\(id).b\(index)"
            button.titleVariants = ["Button \(index)"]
            return button
        }
        grid.leadingButtons = (0..<leading).map { bar("\(id).l\($0)") }
        grid.trailingButtons = (0..<trailing).map { bar("\(id).t\($0)") }
        var template = HUTemplate()
        template.id = id
        template.grid = grid
        return template
    }

    static func tabBar(_ id: String, tabs: Int = 2) -> HUTemplate {
        var bar = HUTabBarTemplate()
        bar.tabs = (0..<tabs).map { index in
            var tab = HUTab()
            tab.id = "\(id).tab\(index)"
            tab.title = "Tab \(index)"
            tab.template = list("\(id).tab\(index).list", items: 1)
            return tab
        }
        var template = HUTemplate()
        template.id = id
        template.tabBar = bar
        return template
    }

    static func nowPlaying(_ id: String, buttons: Int = 0) -> HUTemplate {
        var playing = HUNowPlayingTemplate()
        playing.title = "Song"
        playing.artist = "Artist"
        playing.buttons = (0..<buttons).map { index in
            var button = HUNowPlayingButton()
            button.id = "\(id).np\(index)"
            button.kind = .more
            return button
        }
        var template = HUTemplate()
        // The shared now-playing template always has this id (PROTOCOL.md 11.9); `id` only prefixes its buttons.
        template.id = "now-playing"
        template.nowPlaying = playing
        return template
    }

    static func alert(_ id: String, titles: Int = 1, actions: Int = 1) -> HUTemplate {
        var alert = HUAlertTemplate()
        alert.titleVariants = (0..<titles).map { "Alert title \($0)" }
        alert.actions = (0..<actions).map { action("\(id).a\($0)") }
        var template = HUTemplate()
        template.id = id
        template.alert = alert
        return template
    }

    static func actionSheet(_ id: String, actions: Int = 2) -> HUTemplate {
        var sheet = HUActionSheetTemplate()
        sheet.title = "Sheet"
        sheet.actions = (0..<actions).map { action("\(id).a\($0)") }
        var template = HUTemplate()
        template.id = id
        template.actionSheet = sheet
        return template
    }

    static func information(_ id: String, items: Int = 1, actions: Int = 0, leading: Int = 0) -> HUTemplate {
        var info = HUInformationTemplate()
        info.title = id
        info.items = (0..<items).map { index in
            var item = HUInformationItem()
            item.id = "\(id).it\(index)"
            item.title = "Title \(index)"
            item.detail = "Detail"
            return item
        }
        info.actions = (0..<actions).map { action("\(id).a\($0)") }
        info.leadingButtons = (0..<leading).map { bar("\(id).l\($0)") }
        var template = HUTemplate()
        template.id = id
        template.information = info
        return template
    }

    static func pointOfInterest(_ id: String, points: Int = 1) -> HUTemplate {
        var poi = HUPointOfInterestTemplate()
        poi.title = id
        poi.points = (0..<points).map { index in
            var point = HUPointOfInterest()
            point.id = "\(id).p\(index)"
            point.title = "Place \(index)"
            point.location.latitude = 48.1 + Double(index) / 100
            point.location.longitude = 11.5
            return point
        }
        poi.selectedIndex = -1
        var template = HUTemplate()
        template.id = id
        template.pointOfInterest = poi
        return template
    }

    static func contact(_ id: String, texts: Int = 1, actions: Int = 1, leading: Int = 0) -> HUTemplate {
        var contact = HUContactTemplate()
        contact.title = "Contact"
        contact.informativeTexts = (0..<texts).map { "Line \($0)" }
        contact.actions = (0..<actions).map { index in
            var action = HUContactAction()
            action.id = "\(id).c\(index)"
            action.kind = .call
            action.title = "Call \(index)"
            return action
        }
        contact.leadingButtons = (0..<leading).map { bar("\(id).l\($0)") }
        var template = HUTemplate()
        template.id = id
        template.contact = contact
        return template
    }

    static func map(_ id: String, mapButtons: Int = 0, leading: Int = 0, trailing: Int = 0) -> HUTemplate {
        var map = HUMapTemplate()
        map.mapButtons = (0..<mapButtons).map { index in
            var button = HUMapButton()
            button.id = "\(id).m\(index)"
            return button
        }
        map.leadingButtons = (0..<leading).map { bar("\(id).l\($0)") }
        map.trailingButtons = (0..<trailing).map { bar("\(id).t\($0)") }
        var template = HUTemplate()
        template.id = id
        template.map = map
        return template
    }

    static func search(_ id: String) -> HUTemplate {
        var search = HUSearchTemplate()
        search.placeholder = "Where to?"
        var template = HUTemplate()
        template.id = id
        template.search = search
        return template
    }

    static func voiceControl(_ id: String, states: Int = 1) -> HUTemplate {
        var voice = HUVoiceControlTemplate()
        voice.states = (0..<states).map { index in
            var state = HUVoiceControlState()
            state.id = "\(id).v\(index)"
            state.titleVariants = ["Listening"]
            return state
        }
        voice.activeStateID = states > 0 ? "\(id).v0" : ""
        var template = HUTemplate()
        template.id = id
        template.voiceControl = voice
        return template
    }
}
