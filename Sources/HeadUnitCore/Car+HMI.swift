import HeadUnitWire

// What the car's own HMI asks, and what it is shown.
extension Car {
    func screen(for kind: HUSceneKind) -> HUScreen {
        switch kind {
        case .dashboard: return .dashboard
        case .instrumentCluster: return .instrumentCluster
        case .main, .unspecified, .UNRECOGNIZED: return .main
        }
    }

    /// List cap in force (the car's maximumItemCount while lists are limited).
    var listCap: Int? {
        guard vehicleState.limitLists else { return nil }
        let cap = Int(configuration.vehicle.maxListItemsWhileDriving)
        return cap > 0 ? cap : 12
    }

    var sectionCap: Int? {
        guard vehicleState.limitLists else { return nil }
        let cap = Int(configuration.vehicle.maxListSectionsWhileDriving)
        return cap > 0 ? cap : nil
    }

    // MARK: - launching and closing

    mutating func launchApp(_ launch: HULaunchApp) -> Result<HUResult, RuleViolation> {
        // A phone that is reconnecting still carries its apps: what they are sent waits for it.
        guard phoneLink.carriesApps else { return .failure(RuleViolation(.noPhone, "no phone is connected")) }
        guard let app = templates.apps[launch.appID] else {
            return .failure(RuleViolation(.unknownApp, "no app '\(launch.appID)' on the home screen"))
        }
        let kind: HUSceneKind
        switch launch.kind {
        case .unspecified, .main: kind = .main
        case .dashboard, .instrumentCluster: kind = launch.kind
        case .UNRECOGNIZED(let value):
            return .failure(RuleViolation(.invalidArgument, "unknown scene kind \(value)"))
        }
        // A Siri-only messaging or calling app: its icon opens the phone's assistant for it (27.2).
        if opensAssistant(app) {
            guard kind == .main else { return .failure(RuleViolation(.notAllowedForCategory, "only navigation apps have \(kind) scenes")) }
            return startAssistant(source: .hmi, appID: app.id)
        }
        guard app.isLaunchable, let category = app.category else {
            let reason = app.refusal?.message
                ?? "app '\(launch.appID)' has a legacy category (\(app.category ?? .unspecified)) with no template UI on the car screen"
            return .failure(RuleViolation(.appNotLaunchable, reason))
        }
        switch kind {
        case .dashboard, .instrumentCluster:
            let present = kind == .dashboard ? configuration.vehicle.dashboardPresent : configuration.vehicle.instrumentClusterPresent
            guard category == .navigation else {
                return .failure(RuleViolation(.notAllowedForCategory, "only navigation apps have \(kind) scenes"))
            }
            guard present else {
                return .failure(RuleViolation(.appNotLaunchable, "this vehicle has no \(kind == .dashboard ? "dashboard" : "instrument cluster")"))
            }
        case .main, .unspecified, .UNRECOGNIZED:
            break
        }
        connectScene(appID: launch.appID, kind: kind, nowPlaying: nil)
        return .ok
    }

    /// Shows the app's scene of this kind on its screen, connecting it first when
    /// needed, with the app's now-playing template on top when asked for.
    mutating func connectScene(appID: String, kind: HUSceneKind, nowPlaying: HUTemplate?) {
        let screen = screen(for: kind)
        let ref = SceneRef(appID: appID, kind: kind)
        // On the main screen the app needs no banner (PROTOCOL.md 19.9).
        if kind == .main { applyBanner(navigation.banner.dismiss(appID: appID)) }
        if templates.screenOwners[screen] != ref, let previous = templates.screenOwners[screen], let scene = templates.apps[previous.appID]?.scenes[previous.kind] {
            sendLifecycle(SceneState.Transition(disappeared: scene.visibleIDs), appID: previous.appID, scene: scene, animated: false)
        }
        if var scene = templates.apps[appID]!.scenes[kind] {
            let wasShown = templates.screenOwners[screen] == ref
            templates.screenOwners[screen] = ref
            let transition = nowPlaying.map { scene.showNowPlaying($0) } ?? SceneState.Transition()
            templates.apps[appID]!.scenes[kind] = scene
            if wasShown {
                sendLifecycle(transition, appID: appID, scene: scene, animated: true)
            } else {
                // Coming back on screen: only what is visible now appears.
                sendLifecycle(SceneState.Transition(appeared: scene.visibleIDs.reversed()), appID: appID, scene: scene, animated: false)
            }
            return
        }
        var scene = SceneState(id: templates.newSceneID(), appID: appID, kind: kind)
        sendToPhone(.sceneConnected(sceneConnected(appID: appID, sceneID: scene.id, kind: kind, category: templates.apps[appID]!.category!)))
        if let nowPlaying {
            sendLifecycle(scene.showNowPlaying(nowPlaying), appID: appID, scene: scene, animated: false)
        }
        templates.apps[appID]!.scenes[kind] = scene
        templates.screenOwners[screen] = ref
        // A navigation app assumes NORMAL until told otherwise (PROTOCOL.md 19.8):
        // a main scene connecting while the style is not NORMAL is told at once.
        if kind == .main, templates.apps[appID]!.category == .navigation, audio.promptStyle != .normal {
            sendNavigationEvent(appID, .main, .promptStyle(audio.promptStyle))
        }
    }

    /// What the phone is told of a scene: on connecting, and again on resuming.
    func sceneConnected(appID: String, sceneID: UInt32, kind: HUSceneKind, category: HUCategory) -> HUSceneConnected {
        var connected = HUSceneConnected()
        connected.appID = appID
        connected.sceneID = sceneID
        connected.kind = kind
        connected.window = SceneWindows.window(for: kind, vehicle: configuration.vehicle, safeArea: vehicleState.safeArea)
        connected.contentStyle = vehicleState.contentStyle
        connected.vehicleState = vehicleState
        connected.maxStackDepth = UInt32(CategoryRules.maxStackDepth(for: category))
        connected.maxListItems = UInt32(listCap ?? 0)
        connected.maxListSections = UInt32(sectionCap ?? 0)
        connected.maxTabs = UInt32(CategoryRules.maxTabs(for: category))
        if category == .navigation { connected.video = videoParams(sceneID: sceneID, kind: kind) }
        return connected
    }

    /// The driver closes an app: its scenes end, and its calls (PROTOCOL.md 26.8).
    mutating func closeApp(_ appID: String) -> Result<HUResult, RuleViolation> {
        guard let app = templates.apps[appID] else { return .failure(RuleViolation(.unknownApp, "no app '\(appID)'")) }
        let hasCalls = calls.appsInCalls.contains(appID)
        guard !app.scenes.isEmpty || hasCalls else { return .failure(RuleViolation(.notConnected, "app '\(appID)' has no connected scene and no call")) }
        endScenes(of: appID, reason: .closedByCar, tellPhone: true)
        if hasCalls { endCallsByCar(of: appID) }
        return .ok
    }

    // MARK: - vehicle state

    mutating func setVehicleState(_ state: HUVehicleState) -> Result<HUResult, RuleViolation> {
        // Checked before anything reaches an app: a bad value is refused whole.
        if case .UNRECOGNIZED(let value) = state.contentStyle {
            return .failure(RuleViolation(.invalidArgument, "unknown content style \(value)"))
        }
        if state.hasSafeArea {
            let display = configuration.vehicle.mainDisplay
            let insets = state.safeArea
            // 64-bit sums: four u32 insets cannot overflow.
            if UInt64(insets.left) + UInt64(insets.right) >= UInt64(display.widthPt)
                || UInt64(insets.top) + UInt64(insets.bottom) >= UInt64(display.heightPt)
            {
                return .failure(RuleViolation(
                    .invalidArgument, "safe area insets leave no room on the \(display.widthPt)x\(display.heightPt) pt main display"))
            }
        }
        var state = state
        if state.driving {
            // Driving implies the limited UI unless the HMI says exactly what is limited.
            if !state.limitKeyboard && !state.limitLists { state.limitKeyboard = true; state.limitLists = true }
        }
        if state.contentStyle == .unspecified { state.contentStyle = vehicleState.contentStyle }
        if !state.hasSafeArea { state.safeArea = vehicleState.safeArea }
        let safeAreaChanged = state.safeArea != vehicleState.safeArea
        vehicleState = state
        vehicleStateChanged(state)
        if safeAreaChanged {
            // The main screen's stream window carries the safe area (section 25.5).
            var outputs: [VideoRoutes.Output] = []
            video.windowChanged(.main, outputs: &outputs)
            perform(outputs)
        }
        for appID in templates.appOrder {
            guard let app = templates.apps[appID] else { continue }
            for scene in app.scenes.values.sorted(by: { $0.id < $1.id }) {
                var configuration = HUSessionConfiguration()
                configuration.appID = appID
                configuration.sceneID = scene.id
                configuration.contentStyle = state.contentStyle
                configuration.limitKeyboard = state.limitKeyboard
                configuration.limitLists = state.limitLists
                configuration.maxListItems = UInt32(listCap ?? 0)
                configuration.maxListSections = UInt32(sectionCap ?? 0)
                configuration.safeArea = state.safeArea
                sendToPhone(.sessionConfiguration(configuration))
            }
        }
        return .ok
    }

    // MARK: - input

    /// What an input acts on: the main screen's app scene, the template the
    /// driver sees there (inside a tab bar, the selected tab's), and the
    /// event the app is to hear, addressed to that template.
    struct InputTarget {
        var owner: SceneRef
        var scene: SceneState
        var visible: HUTemplate
        var event: HUAppEvent
    }

    mutating func handleInput(_ input: HUHmiInput) -> Result<HUResult, RuleViolation> {
        // Inputs that need no template on screen.
        switch input.kind {
        case .goHome: return goHome()
        case .openNowPlaying(let open): return openNowPlaying(open.appID.isEmpty ? templates.nowPlayingAppID : open.appID)
        case .goBack: return goBack()
        case nil: return .failure(RuleViolation(.invalidArgument, "input names no action"))
        default: break
        }
        let target: InputTarget
        switch inputTarget(input) {
        case .success(let found): target = found
        case .failure(let violation): return .failure(violation)
        }
        switch input.kind {
        case .selectItem(let selection): return selectItem(selection, target)
        case .pressButton(let press): return pressButton(press, target)
        case .selectTab(let selection): return selectTab(selection, target)
        case .searchText(let text): return searchText(text, target)
        case .selectSearchResult(let selection): return selectSearchResult(selection, target)
        case .searchButton(let press): return searchButton(press, target)
        case .selectPoi(let selection): return selectPoi(selection, target)
        case .poiRegion(let region): return poiRegion(region, target)
        case .nowPlayingButton(let press): return nowPlayingButton(press, target)
        case .goBack, .goHome, .openNowPlaying, nil: return .ok  // handled above
        }
    }

    /// The main screen's app and the template an input names: NOT_CONNECTED,
    /// NO_ROOT_TEMPLATE, UNKNOWN_TEMPLATE, in that order.
    func inputTarget(_ input: HUHmiInput) -> Result<InputTarget, RuleViolation> {
        guard let owner = templates.screenOwners[.main], let scene = templates.apps[owner.appID]?.scenes[owner.kind] else {
            return .failure(RuleViolation(.notConnected, "the main screen shows no app"))
        }
        guard let visibleID = scene.visibleTemplateID, var visible = scene.presented ?? scene.top else {
            return .failure(RuleViolation(.noRootTemplate, "the app has not set a root template"))
        }
        guard input.templateID == visibleID || (scene.presented == nil && visibleTab(of: scene)?.id == input.templateID) else {
            return .failure(RuleViolation(.unknownTemplate, "template '\(input.templateID)' is not the one on screen ('\(visibleID)')"))
        }
        if let tab = visibleTab(of: scene), scene.presented == nil, input.templateID == tab.id || !isTabBarInput(input) {
            visible = tab
        }
        var event = HUAppEvent()
        event.appID = owner.appID
        event.sceneID = scene.id
        event.templateID = visible.id
        return .success(InputTarget(owner: owner, scene: scene, visible: visible, event: event))
    }

    mutating func goHome() -> Result<HUResult, RuleViolation> {
        if let owner = templates.screenOwners[.main], let scene = templates.apps[owner.appID]?.scenes[owner.kind] {
            sendLifecycle(SceneState.Transition(disappeared: scene.visibleIDs), appID: owner.appID, scene: scene, animated: false)
        }
        templates.screenOwners[.main] = nil
        return .ok
    }

    mutating func goBack() -> Result<HUResult, RuleViolation> {
        guard let owner = templates.screenOwners[.main], var scene = templates.apps[owner.appID]?.scenes[owner.kind] else {
            return .failure(RuleViolation(.notConnected, "the main screen shows no app"))
        }
        if scene.presented != nil {
            return .failure(RuleViolation(.invalidPosition, "a modal template is presented; choose one of its actions"))
        }
        // Back at the root leaves the app for the home screen.
        guard scene.stack.count > 1 else { return goHome() }
        if case .success(let transition) = scene.pop() {
            templates.apps[owner.appID]!.scenes[owner.kind] = scene
            sendLifecycle(transition, appID: owner.appID, scene: scene, animated: true)
        }
        return .ok
    }

    mutating func selectItem(_ selection: HUItemSelected, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard let item = findItem(selection.itemID, in: target.visible) else {
            return .failure(RuleViolation(.unknownItem, "no item '\(selection.itemID)' in '\(target.visible.id)'"))
        }
        var event = target.event
        switch item.kind {
        case .message(let message):
            // Message items start the car's voice flow; the app's handler is never called.
            var started = HUVoiceFlowStarted()
            started.itemID = item.id
            started.conversationID = message.conversationID.isEmpty ? message.phoneOrEmail : message.conversationID
            event.kind = .voiceFlowStarted(started)
            sendToPhone(.appEvent(event))
            // The voice flow is the phone's assistant's (27.2): it opens for the conversation when it can.
            openAssistantForMessage(appID: target.owner.appID, conversationID: started.conversationID, contact: message.text)
            return .ok
        case .general(let general):
            if general.disabled { return .failure(RuleViolation(.invalidArgument, "item '\(item.id)' is disabled")) }
        case .imageRow(let row):
            if selection.imageSelected && Int(selection.imageIndex) >= row.images.count {
                return .failure(RuleViolation(.invalidArgument, "image index \(selection.imageIndex) out of range (\(row.images.count) images)"))
            }
        case nil:
            break
        }
        event.kind = .itemSelected(selection)
        startPending(&event, itemID: item.id, sceneKind: target.owner.kind, spinner: true, search: false)
        return .ok
    }

    mutating func pressButton(_ press: HUButtonPressed, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard buttonIDs(of: target.visible).contains(press.buttonID) else {
            return .failure(RuleViolation(.unknownItem, "no button '\(press.buttonID)' in '\(target.visible.id)'"))
        }
        var event = target.event
        event.kind = .buttonPressed(press)
        sendToPhone(.appEvent(event))
        return .ok
    }

    mutating func selectTab(_ selection: HUTabSelected, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        var scene = target.scene
        guard case .tabBar(let bar) = scene.top?.kind, scene.presented == nil,
            let tab = bar.tabs.first(where: { $0.id == selection.tabID })
        else {
            return .failure(RuleViolation(.unknownItem, "no tab '\(selection.tabID)' on screen"))
        }
        let owner = target.owner
        let previous = visibleTab(of: scene)
        scene.selectedTabs[scene.top!.id] = tab.id
        templates.apps[owner.appID]!.scenes[owner.kind] = scene
        var event = target.event
        event.templateID = scene.top!.id
        event.kind = .tabSelected(selection)
        sendToPhone(.appEvent(event))
        if let previous, previous.id != tab.template.id {
            sendLifecycle(SceneState.Transition(disappeared: [previous.id], appeared: [tab.template.id]), appID: owner.appID, scene: scene, animated: false)
        }
        return .ok
    }

    mutating func searchText(_ text: HUSearchTextChanged, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard case .search = target.visible.kind else {
            return .failure(RuleViolation(.invalidPosition, "search text goes to a search template"))
        }
        if vehicleState.limitKeyboard {
            return .failure(RuleViolation(.invalidPosition, "the keyboard is limited while driving"))
        }
        var event = target.event
        event.kind = .searchTextChanged(text)
        startPending(&event, itemID: "", sceneKind: target.owner.kind, spinner: false, search: true)
        return .ok
    }

    mutating func selectSearchResult(_ selection: HUSearchResultSelected, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard case .search = target.visible.kind, target.scene.searchResults.contains(where: { $0.id == selection.itemID }) else {
            return .failure(RuleViolation(.unknownItem, "no search result '\(selection.itemID)'"))
        }
        var event = target.event
        event.kind = .searchResultSelected(selection)
        startPending(&event, itemID: selection.itemID, sceneKind: target.owner.kind, spinner: true, search: false)
        return .ok
    }

    mutating func searchButton(_ press: HUSearchButtonPressed, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard case .search = target.visible.kind else {
            return .failure(RuleViolation(.invalidPosition, "the search button belongs to a search template"))
        }
        var event = target.event
        event.kind = .searchButtonPressed(press)
        sendToPhone(.appEvent(event))
        return .ok
    }

    mutating func selectPoi(_ selection: HUPoiSelected, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard case .pointOfInterest(let poi) = target.visible.kind, poi.points.contains(where: { $0.id == selection.poiID }) else {
            return .failure(RuleViolation(.unknownItem, "no point '\(selection.poiID)' in '\(target.visible.id)'"))
        }
        var event = target.event
        event.kind = .poiSelected(selection)
        sendToPhone(.appEvent(event))
        return .ok
    }

    mutating func poiRegion(_ region: HUPoiRegionChanged, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard case .pointOfInterest = target.visible.kind else {
            return .failure(RuleViolation(.invalidPosition, "region changes go to a point-of-interest template"))
        }
        var event = target.event
        event.kind = .poiRegionChanged(region)
        sendToPhone(.appEvent(event))
        return .ok
    }

    mutating func nowPlayingButton(_ press: HUNowPlayingButtonPressed, _ target: InputTarget) -> Result<HUResult, RuleViolation> {
        guard case .nowPlaying = target.visible.kind else {
            return .failure(RuleViolation(.invalidPosition, "now-playing buttons go to the now-playing template"))
        }
        let content = templates.apps[target.owner.appID]!.nowPlaying
        var known = Set(content.buttons.map(\.id))
        if content.upNextEnabled { known.insert("up-next") }
        if content.albumArtistButtonEnabled { known.insert("album-artist") }
        guard known.contains(press.buttonID) else {
            return .failure(RuleViolation(.unknownItem, "no now-playing button '\(press.buttonID)'"))
        }
        var event = target.event
        event.kind = .nowPlayingButton(press)
        sendToPhone(.appEvent(event))
        return .ok
    }

    func isTabBarInput(_ input: HUHmiInput) -> Bool {
        if case .selectTab = input.kind { return true }
        return false
    }

    /// The template inside the selected tab when a tab bar is on top.
    func visibleTab(of scene: SceneState) -> HUTemplate? {
        guard let top = scene.top, case .tabBar(let bar) = top.kind, !bar.tabs.isEmpty else { return nil }
        let selected = scene.selectedTabs[top.id] ?? (bar.selectedTabID.isEmpty ? bar.tabs[0].id : bar.selectedTabID)
        return (bar.tabs.first { $0.id == selected } ?? bar.tabs[0]).template
    }

    mutating func startPending(_ event: inout HUAppEvent, itemID: String, sceneKind: HUSceneKind, spinner: Bool, search: Bool) {
        let pending = PendingEvent(appID: event.appID, sceneKind: sceneKind, templateID: event.templateID, itemID: itemID, showsSpinner: spinner, isSearch: search)
        // A new selection replaces one still spinning on the same screen.
        let (eventID, replaced) = templates.startPending(pending)
        event.eventID = eventID
        for (id, old) in replaced {
            effects.append(.cancelTimer(.completion(eventID: id)))
            sendSpinnerStopped(eventID: id, pending: old)
        }
        sendToPhone(.appEvent(event))
        effects.append(.startTimer(.completion(eventID: eventID), milliseconds: configuration.completionTimeoutMilliseconds))
        if spinner {
            sendToHMIs(.screen(screen(for: sceneKind)), .screenUpdate(screenUpdate(screen(for: sceneKind), .spinnerStarted(pending.selection(eventID)))))
        }
    }

    mutating func sendSpinnerStopped(eventID: UInt64, pending: PendingEvent) {
        sendToHMIs(.screen(screen(for: pending.sceneKind)), .screenUpdate(screenUpdate(screen(for: pending.sceneKind), .spinnerStopped(pending.selection(eventID)))))
    }

    mutating func openNowPlaying(_ appID: String) -> Result<HUResult, RuleViolation> {
        guard !appID.isEmpty, let app = templates.apps[appID] else {
            return .failure(RuleViolation(.unknownApp, "no app is playing"))
        }
        guard let category = app.category, CategoryRules.allows(.nowPlaying, for: category) else {
            return .failure(RuleViolation(.notAllowedForCategory, "'\(appID)' has no now-playing template"))
        }
        var template = HUTemplate()
        template.id = nowPlayingTemplateID
        template.nowPlaying = app.nowPlaying
        connectScene(appID: appID, kind: .main, nowPlaying: template)
        return .ok
    }

    func findItem(_ itemID: String, in template: HUTemplate) -> HUListItem? {
        switch template.kind {
        case .list(let list):
            for section in list.sections {
                if let item = section.items.first(where: { $0.id == itemID }) { return item }
            }
            return nil
        case .search:
            guard let owner = templates.screenOwners[.main] else { return nil }
            return templates.apps[owner.appID]?.scenes[owner.kind]?.searchResults.first { $0.id == itemID }
        default:
            return nil
        }
    }

    /// Every pressable button id of a template.
    func buttonIDs(of template: HUTemplate) -> Set<String> {
        func bar(_ buttons: [HUBarButton]) -> [String] { buttons.filter { !$0.disabled }.map(\.id) }
        switch template.kind {
        case .list(let list): return Set(bar(list.leadingButtons) + bar(list.trailingButtons))
        case .grid(let grid): return Set(grid.buttons.filter { !$0.disabled }.map(\.id) + bar(grid.leadingButtons) + bar(grid.trailingButtons))
        case .alert(let alert): return Set(alert.actions.map(\.id))
        case .actionSheet(let sheet): return Set(sheet.actions.map(\.id))
        case .information(let info): return Set(info.actions.map(\.id) + bar(info.leadingButtons) + bar(info.trailingButtons))
        case .contact(let contact): return Set(contact.actions.map(\.id) + bar(contact.leadingButtons) + bar(contact.trailingButtons))
        case .pointOfInterest(let poi):
            return Set(poi.points.flatMap { point in
                [point.primaryButton, point.secondaryButton].filter { !$0.id.isEmpty }.map(\.id)
            })
        case .map(let map):
            return Set(bar(map.leadingButtons) + bar(map.trailingButtons) + map.mapButtons.filter { !$0.hidden && !$0.disabled }.map(\.id))
        case .tabBar, .nowPlaying, .search, .voiceControl, nil:
            return []
        }
    }

    // MARK: - rendering

    /// Everything `homeScreen()` reads, cheap to compare: the apps' infos
    /// and the calls by reference first, strings by storage first.
    func homeInputs() -> HomeInputs {
        HomeInputs(
            deviceName: templates.deviceName, nowPlayingAppID: templates.nowPlayingAppID, phoneLink: phoneLink.wire, calls: $calls, assistant: $assistant,
            apps: templates.appOrder.map { id in
                guard let app = templates.apps[id] else { return HomeInputs.App(id: id, info: nil, category: nil, running: false) }
                // The info by reference, the main scene by its key: neither copied.
                return HomeInputs.App(
                    id: id, info: app.sharedInfo, category: app.category, running: app.scenes[.main] != nil)
            })
    }

    /// A legacy messaging or calling app (Siri-only) on a phone with an
    /// assistant: it has an icon, and launching it opens the assistant for it.
    func opensAssistant(_ app: AppState) -> Bool {
        app.category == .legacyMessaging && assistant.available
    }

    func homeScreen() -> HUHomeScreen {
        var home = HUHomeScreen()
        home.deviceName = templates.deviceName
        home.nowPlayingAppID = templates.nowPlayingAppID
        home.phoneLink = phoneLink.wire
        let apps = templates.apps
        home.calls = calls.infos { apps[$0]?.info.displayName ?? $0 }
        if let ended = calls.lastEnded { home.lastCallEnded = ended }
        if let view = assistant.view { home.assistant = view }
        if let ended = assistant.lastEnded { home.lastAssistantEnded = ended }
        home.notifications = assistant.notifications.held
        home.notificationsOff = assistant.notifications.off
        home.icons = templates.appOrder.compactMap { apps[$0] }.filter { $0.isLaunchable || opensAssistant($0) }.map { app in
            var icon = HUHomeScreenIcon()
            icon.appID = app.id
            icon.displayName = app.info.displayName
            icon.category = app.category!
            icon.icon = app.info.icon
            icon.running = app.scenes[.main] != nil
            return icon
        }
        return home
    }

    /// What a screen shows now, with the car's own adjustments applied
    /// (shared now-playing content, the selected tab, list truncation).
    func render(_ screen: HUScreen) -> HURenderedScreen {
        let shown = templates.shownScene(templates.screenOwners[screen])
        return render(screen, app: shown?.app, scene: shown?.scene, listCap: listCap)
    }

    /// A screen showing `scene` of `app` (nil: the home screen), read by the
    /// caller, lists cut to `listCap`. The composed bound measures every scene
    /// this way, uncut, as if shown (Car+Bounds).
    func render(_ screen: HUScreen, app: AppState?, scene: SceneState?, listCap: Int?) -> HURenderedScreen {
        var rendered = HURenderedScreen()
        rendered.screen = screen
        rendered.contentStyle = vehicleState.contentStyle
        rendered.rightHandDrive = configuration.vehicle.rightHandDrive
        guard let app, let scene else { return rendered }
        let owner = SceneRef(appID: scene.appID, kind: scene.kind)
        rendered.appID = owner.appID
        rendered.sceneID = scene.id
        rendered.stack = scene.stack.map(\.id)
        // The kind as held (`SceneState.Held`): reading `top.kind` copies the template's content.
        if var top = scene.top, let held = scene.stackHeld.last {
            switch held.kind {
            case .nowPlaying:
                top.nowPlaying = app.nowPlaying
                if let commands = remote.set(of: owner.appID) { rendered.remoteCommands = commands }
            case .tabBar:
                if case .tabBar(let bar) = top.kind {
                    rendered.selectedTabID = scene.selectedTabs[top.id] ?? (bar.selectedTabID.isEmpty ? bar.tabs.first?.id ?? "" : bar.selectedTabID)
                }
            case .search:
                rendered.searchResults = scene.searchResults
            default:
                break
            }
            if let cap = listCap, held.kind == .list || held.kind == .tabBar {
                let truncated = truncateLists(top, maxItems: cap)
                top = truncated.template
                rendered.itemsShown = UInt32(truncated.shown)
                rendered.itemsTotal = UInt32(truncated.total)
            } else if held.kind == .list {
                let total = UInt32(held.listSectionItems.reduce(0, +))
                rendered.itemsShown = total
                rendered.itemsTotal = total
            }
            rendered.top = top
        }
        if let presented = scene.presented { rendered.presented = presented }
        // The navigation bar's Now Playing button shows for the current now-playing app only.
        rendered.showNowPlayingButton = !templates.nowPlayingAppID.isEmpty && scene.stackHeld.last.map { $0.kind != .nowPlaying } ?? false
        if let pending = templates.spinning(on: owner) { rendered.pending = pending }
        return rendered
    }

    /// Lists (on top or in a tab bar's tabs) cut to the driving cap.
    func truncateLists(_ template: HUTemplate, maxItems: Int) -> (template: HUTemplate, shown: Int, total: Int) {
        switch template.kind {
        case .list:
            return DrivingLimits.truncate(template, maxItems: maxItems, maxSections: sectionCap ?? Int.max)
        case .tabBar(var bar):
            var shown = 0, total = 0
            for index in bar.tabs.indices {
                let truncated = DrivingLimits.truncate(bar.tabs[index].template, maxItems: maxItems, maxSections: sectionCap ?? Int.max)
                bar.tabs[index].template = truncated.template
                shown += truncated.shown
                total += truncated.total
            }
            var result = template
            result.kind = .tabBar(bar)
            return (result, shown, total)
        default:
            return (template, 0, 0)
        }
    }

    mutating func screenUpdate(_ screen: HUScreen, _ change: HUScreenUpdate.OneOf_Change, advance: Bool = true) -> HUScreenUpdate {
        var update = HUScreenUpdate()
        update.screen = screen
        update.sequence = templates.sequence(screen, advance: advance)
        update.change = change
        return update
    }

    /// Sends the HMI what changed on each screen since it last saw it:
    /// element diffs when only the top template's content changed, else the
    /// whole screen. Also refreshes the home screen when it changed.
    mutating func publishScreens() {
        // What the HMIs are sent carries images by ref (section 12.6).
        defer { templates.hmiImages.endRound() }
        publishHome()
        for screen in [HUScreen.main, .dashboard, .instrumentCluster] {
            let owner = templates.screenOwners[screen]
            // The dashboard and cluster appear to the HMI once an app first
            // owns them: until then they are not rendered (an owner's app is
            // never gone: its scenes end first, `endScenes`).
            if screen != .main, owner == nil, templates.rendered[screen] == nil { continue }
            let (new, refs) = renderForHMIs(screen, owner: owner)
            let old = templates.rendered[screen] ?? HURenderedScreen.with { $0.screen = screen }
            guard new != old else { continue }
            templates.rendered[screen] = new
            if peers.hmis.isEmpty { continue }
            // A diff larger than a frame (many removed ids) goes as the full
            // screen, which the composed bound keeps within one (Car+Bounds).
            if let diff = contentDiff(from: old, to: new), !diffIsOversized(diff, screen: screen) {
                if !diff.changes.isEmpty { sendToHMIs(.screen(screen), .screenUpdate(screenUpdate(screen, .diff(diff)))) }
            } else {
                sendToHMIs(.screen(screen), .screenUpdate(screenUpdate(screen, .full(new))), images: refs)
            }
        }
        publishVideo()
    }

    /// The home screen, sent when it changed, built from its inputs when they
    /// changed (`HomeInputs`: the screen reads nothing else).
    private mutating func publishHome() {
        let inputs = homeInputs()
        if templates.lastHomeScreen != nil, let last = templates.lastHomeInputs, inputs == last.inputs {
            templates.hmiImages.keepShowing(last.refs)  // built from the same inputs: the same screen, its images still in use
            // Kept so they share the car's current storage: the next comparison is identity checks.
            templates.lastHomeInputs = (inputs, last.refs)
        } else {
            var home = homeScreen()
            templates.hmiImages.externalize(&home)
            templates.lastHomeInputs = (inputs, HMIImages.refs(in: home))
            if home != templates.lastHomeScreen {
                templates.lastHomeScreen = home
                sendToHMIs(.home, .homeScreen(home))
            }
        }
    }

    /// `screen` as HMIs are sent it, and the refs of its images. The owner's
    /// app and scene are read once for both.
    mutating func renderForHMIs(_ screen: HUScreen, owner: SceneRef?) -> (HURenderedScreen, [String]?) {
        let shown = templates.shownScene(owner)
        var rendered = render(screen, app: shown?.app, scene: shown?.scene, listCap: listCap)
        let refs = externalize(&rendered, scene: shown?.scene)
        return (rendered, refs)
    }

    /// `hmiImages.externalize` of a screen showing `scene`, without
    /// walking its top template when the scene holds it without any image
    /// (`SceneState.Held`; the render only cuts it, or it is the now-playing
    /// template, which is walked): the rest of the screen is scanned alone.
    mutating func externalize(_ rendered: inout HURenderedScreen, scene: SceneState?) -> [String]? {
        guard let top = takeHeldTop(&rendered, scene: scene, where: { !$0.hasImages })
        else { return templates.hmiImages.externalize(&rendered) }
        let scan = ImageWalk.scan(rendered)
        rendered.top = top
        guard !scan.hasInline else { return templates.hmiImages.externalize(&rendered) }
        return scan.refs
    }

    /// Takes the top template out of `rendered` and returns it, when it is
    /// the one `scene` holds and its `Held` facts (found once when it was
    /// stored) say it needs no image walk: the caller walks the rest and puts
    /// it back. Nil (the screen unchanged) when it must be walked. The
    /// now-playing top carries the app's shared content, not what the scene holds.
    func takeHeldTop(_ rendered: inout HURenderedScreen, scene: SceneState?, where needsNoWalk: (SceneState.Held) -> Bool) -> HUTemplate? {
        guard rendered.hasTop, let held = scene?.stackHeld.last, needsNoWalk(held), held.kind != .nowPlaying else { return nil }
        let top = rendered.top
        rendered.clearTop()
        return top
    }

    /// After a restart (section 22) the screens carry refs whose bytes this
    /// process never saw: rendering once holds them again.
    mutating func reloadHMIImages() {
        var home = homeScreen()
        templates.hmiImages.externalize(&home)
        for screen in templates.rendered.keys {
            var full = render(screen)
            templates.hmiImages.externalize(&full)
        }
    }

    /// A diff when the screens differ only in the top template's content (and
    /// spinner state, which travels separately); nil when a full redraw is needed.
    func contentDiff(from old: HURenderedScreen, to new: HURenderedScreen) -> HUTemplateDiff? {
        guard old.hasTop, new.hasTop, old.top.id == new.top.id else { return nil }
        var oldRest = old, newRest = new
        oldRest.clearTop(); newRest.clearTop()
        oldRest.clearPending(); newRest.clearPending()
        (oldRest.itemsShown, oldRest.itemsTotal) = (0, 0)
        (newRest.itemsShown, newRest.itemsTotal) = (0, 0)
        guard oldRest == newRest, var changes = TemplateDiffer.diff(from: old.top, to: new.top) else { return nil }
        if old.itemsShown != new.itemsShown {
            changes.append(HUElementChange.with { $0.itemsShown = new.itemsShown })
        }
        var diff = HUTemplateDiff()
        diff.templateID = new.top.id
        diff.changes = changes
        return diff
    }
}
