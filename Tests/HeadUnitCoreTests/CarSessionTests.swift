import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// Drives the Car state machine as the server would, recording what it sends.
struct CarHarness {
    var car = Car(configuration: CarConfiguration(vehicle: .standard, entitlements: .acceptAll, completionTimeoutMilliseconds: 5000))
    let phone: PeerID = 1
    let hmi: PeerID = 2
    var now: UInt64 = 1_000
    var nextRequest: UInt32 = 1
    /// Everything sent, per peer, in order.
    var sent: [PeerID: [HUEnvelope]] = [:]
    var timers: Set<CarTimer> = []
    var closed: [PeerID: HUErrorCode] = [:]
    /// Session bytes sent, and DATA frames refused, per peer.
    var data: [PeerID: [(channel: UInt32, bytes: [UInt8])]] = [:]
    var refusedData: [PeerID: [HUErrorCode]] = [:]
    /// VIDEO payloads sent per viewer (section 25).
    var video: [PeerID: [(channel: UInt32, bytes: [UInt8])]] = [:]
    /// What the mixer was told, and microphone samples sent (section 24).
    var engine: [AudioStreams.EngineCommand] = []
    var media: [PeerID: [(channel: UInt32, bytes: [UInt8])]] = [:]
    /// Whether the phone's connection takes writes: state it is owed is sent after each input while it does.
    var phoneKeepsUp = true

    mutating func apply(_ effects: [CarEffect]) {
        for effect in effects {
            switch effect {
            case .send(let peer, let envelope):
                // Found by the long fuzz run: a phone that left was still sent SessionClosed.
                #expect(car.peers[peer] != nil, "sent to peer \(peer), which is not connected: \(envelope)")
                sent[peer, default: []].append(envelope)
            case .toHMIs(_, let envelope, _):
                for peer in car.hmiPeerIDs { sent[peer, default: []].append(envelope) }
            case .hmiJoined(let peer, let streams):
                // As the server does (HMIHub): the latest state of each stream.
                for stream in streams {
                    if let state = car.catchUp(stream) { sent[peer, default: []].append(state.envelope) }
                }
            case .close(let peer, let code, _): closed[peer] = code
            case .startTimer(let timer, _): timers.insert(timer)
            case .cancelTimer(let timer): timers.remove(timer)
            case .sendData(let peer, let channel, let payload): data[peer, default: []].append((channel, Array(payload.readableBytesView)))
            case .sendVideo(let peer, let channel, let payload): video[peer, default: []].append((channel, Array(payload.readableBytesView)))
            case .refuseData(let peer, let code, _): refusedData[peer, default: []].append(code)
            case .refuseRequest(let peer, let result, let requestID):
                sent[peer, default: []].append(HUEnvelope.with { $0.requestID = requestID; $0.body = .result(result) })
            case .audio(let command): engine.append(command)
            case .sendMedia(let peer, let channel, let payload): media[peer, default: []].append((channel, Array(payload.readableBytesView)))
            }
        }
        // The server's flush: what the phone is owed (18.2) goes out while it keeps up.
        if phoneKeepsUp {
            let owed = car.takeOwedToPhone { _ in true }
            if !owed.isEmpty { apply(owed) }
        }
    }

    mutating func join(_ peer: PeerID, _ role: HURole) {
        apply(car.peerJoined(peer, info: PeerInfo(role: role, name: "\(role)", transport: .unix)))
    }

    /// Sends a request and returns its Result.
    @discardableResult
    mutating func request(_ peer: PeerID, _ body: HUEnvelope.OneOf_Body) -> HUResult {
        var envelope = HUEnvelope()
        envelope.requestID = nextRequest
        nextRequest += 1
        envelope.body = body
        let before = sent[peer]?.count ?? 0
        apply(car.receive(envelope, from: peer, nowMilliseconds: now))
        let answers = (sent[peer] ?? [])[before...].filter { $0.requestID == envelope.requestID }
        return answers.first?.result ?? HUResult.with { $0.code = .UNRECOGNIZED(-1) }
    }

    mutating func drain(_ peer: PeerID) -> [HUEnvelope] {
        defer { sent[peer] = [] }
        return sent[peer] ?? []
    }

    mutating func announce(_ apps: [(String, [String])]) -> HUResult {
        request(phone, .announceApps(HUAnnounceApps.with {
            $0.deviceName = "Test Phone"
            $0.apps = apps.map { app in HUAppInfo.with { $0.appID = app.0; $0.displayName = app.0; $0.entitlements = app.1 } }
        }))
    }

    /// Launches an app from the HMI and returns its main scene id.
    mutating func launch(_ appID: String) -> UInt32 {
        _ = drain(phone)
        let result = request(hmi, .launchApp(HULaunchApp.with { $0.appID = appID }))
        #expect(result.code == .ok, "launch: \(result.message)")
        return drain(phone).compactMap { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body { return connected.sceneID }
            return nil
        }.first ?? 0
    }

    mutating func template(_ appID: String, _ scene: UInt32, _ op: HUTemplateRequest.OneOf_Op) -> HUResult {
        request(phone, .templateRequest(HUTemplateRequest.with {
            $0.appID = appID
            $0.sceneID = scene
            $0.op = op
        }))
    }
}

func listTemplate(_ id: String, items: Int) -> HUTemplate {
    HUTemplate.with {
        $0.id = id
        $0.list = HUListTemplate.with {
            $0.title = id
            $0.sections = [HUListSection.with {
                $0.id = "s"
                $0.items = (0..<items).map { index in
                    HUListItem.with { $0.id = "item-\(index)"; $0.general = HUGeneralItem.with { $0.text = "Item \(index)" } }
                }
            }]
        }
    }
}

func gridTemplate(_ id: String, buttons: Int) -> HUTemplate {
    HUTemplate.with {
        $0.id = id
        $0.grid = HUGridTemplate.with {
            $0.title = id
            $0.buttons = (0..<buttons).map { index in
                HUGridButton.with {
                    $0.id = "b\(index)"
                    $0.titleVariants = ["Button \(index)"]
                    $0.image = HUImage.with { $0.asset = "icon"; $0.widthPx = 80; $0.heightPx = 80 }
                }
            }
        }
    }
}

func alertTemplate(_ id: String) -> HUTemplate {
    HUTemplate.with {
        $0.id = id
        $0.alert = HUAlertTemplate.with {
            $0.titleVariants = ["Something happened"]
            $0.actions = [HUTextButton.with { $0.id = "ok"; $0.title = "OK" }]
        }
    }
}

@Suite struct CarSessionTests {
    let audio = [EntitlementKey.audio]

    @Test func aWholeSessionFromAnnounceToDisconnect() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        let decisions = h.announce([("com.example.radio", audio)])
        #expect(decisions.appDecisions.decisions.map(\.accepted) == [true])
        let scene = h.launch("com.example.radio")
        #expect(scene != 0)

        #expect(h.template("com.example.radio", scene, .setRoot(listTemplate("root", items: 3))).code == .ok)
        // The HMI saw the list.
        let screens = h.drain(h.hmi).compactMap { envelope -> HURenderedScreen? in
            if case .screenUpdate(let update) = envelope.body, case .full(let full) = update.change { return full }
            return nil
        }
        #expect(screens.last?.top.id == "root")

        // Selection: event to the app with an event id, spinner on the HMI, completion stops it.
        let tap = h.request(h.hmi, .hmiInput(HUHmiInput.with {
            $0.templateID = "root"
            $0.selectItem = HUItemSelected.with { $0.itemID = "item-1" }
        }))
        #expect(tap.code == .ok)
        let event = h.drain(h.phone).compactMap { envelope -> HUAppEvent? in
            if case .appEvent(let event) = envelope.body, case .itemSelected = event.kind { return event }
            return nil
        }.first
        #expect(event?.eventID ?? 0 > 0)
        #expect(h.drain(h.hmi).contains { if case .screenUpdate(let u) = $0.body, case .spinnerStarted = u.change { return true } else { return false } })
        let completed = h.request(h.phone, .completeEvent(HUCompleteEvent.with { $0.appID = "com.example.radio"; $0.eventID = event?.eventID ?? 0 }))
        #expect(completed.code == .ok)
        #expect(h.drain(h.hmi).contains { if case .screenUpdate(let u) = $0.body, case .spinnerStopped = u.change { return true } else { return false } })
        #expect(h.timers.isEmpty)

        #expect(h.template("com.example.radio", scene, .push(gridTemplate("grid", buttons: 4))).code == .ok)
        #expect(h.template("com.example.radio", scene, .pop(HUPopTemplate())).code == .ok)
        #expect(h.template("com.example.radio", scene, .present(alertTemplate("alert"))).code == .ok)
        #expect(h.template("com.example.radio", scene, .dismiss(HUPopTemplate())).code == .ok)

        _ = h.drain(h.hmi)
        h.apply(h.car.peerLeft(h.phone))
        let afterPhone = h.drain(h.hmi)
        #expect(afterPhone.contains { if case .homeScreen(let home) = $0.body { return home.icons.isEmpty } else { return false } })
        #expect(afterPhone.contains { if case .screenUpdate(let u) = $0.body, case .full(let full) = u.change { return full.appID.isEmpty } else { return false } })
        #expect(h.car.status().scenes == 0)
    }

    @Test func aSelectionThatIsNeverCompletedTimesOut() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("app", audio)])
        let scene = h.launch("app")
        _ = h.template("app", scene, .setRoot(listTemplate("root", items: 2)))
        _ = h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.templateID = "root"; $0.selectItem = HUItemSelected.with { $0.itemID = "item-0" } }))
        let timer = try! #require(h.timers.first)
        _ = h.drain(h.hmi)
        h.apply(h.car.timerFired(timer, nowMilliseconds: 7000))
        #expect(h.drain(h.hmi).contains { if case .screenUpdate(let u) = $0.body, case .spinnerStopped = u.change { return true } else { return false } })
        #expect(h.drain(h.phone).contains { if case .appEvent(let e) = $0.body, case .timedOut = e.kind { return true } else { return false } })
        guard case .completion(let eventID) = timer else { return }
        let late = h.request(h.phone, .completeEvent(HUCompleteEvent.with { $0.appID = "app"; $0.eventID = eventID }))
        #expect(late.code == .completionTimeout)
        let never = h.request(h.phone, .completeEvent(HUCompleteEvent.with { $0.appID = "app"; $0.eventID = 999 }))
        #expect(never.code == .unknownEvent)
    }

    @Test func requestsForAnotherAppsSceneAreRefused() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("a", audio), ("b", audio)])
        let sceneA = h.launch("a")
        #expect(h.template("b", sceneA, .setRoot(listTemplate("x", items: 1))).code == .notYourScene)
        #expect(h.template("nobody", 99, .setRoot(listTemplate("x", items: 1))).code == .unknownApp)
        #expect(h.template("b", 99, .setRoot(listTemplate("x", items: 1))).code == .notConnected)
        #expect(h.template("a", sceneA, .push(listTemplate("x", items: 1))).code == .noRootTemplate)
    }

    @Test func stackDepthIsLimitedByCategory() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("order", [EntitlementKey.quickOrdering])])
        let scene = h.launch("order")
        #expect(h.template("order", scene, .setRoot(listTemplate("root", items: 1))).code == .ok)
        #expect(h.template("order", scene, .push(listTemplate("two", items: 1))).code == .ok)
        let third = h.template("order", scene, .push(listTemplate("three", items: 1)))
        #expect(third.code == .depthExceeded)
        #expect(third.limitValue == 2)
    }

    @Test func oneModalAtATime() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("app", audio)])
        let scene = h.launch("app")
        #expect(h.template("app", scene, .present(alertTemplate("a1"))).code == .noRootTemplate)
        _ = h.template("app", scene, .setRoot(listTemplate("root", items: 1)))
        #expect(h.template("app", scene, .dismiss(HUPopTemplate())).code == .nothingPresented)
        #expect(h.template("app", scene, .present(alertTemplate("a1"))).code == .ok)
        #expect(h.template("app", scene, .present(alertTemplate("a2"))).code == .alreadyPresented)
    }

    @Test func updatingOneItemSendsTheHMIThatItemOnly() throws {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("app", audio)])
        let scene = h.launch("app")
        _ = h.template("app", scene, .setRoot(listTemplate("root", items: 12)))
        _ = h.drain(h.hmi)
        var item = HUListItem()
        item.id = "item-5"
        item.general = HUGeneralItem.with { $0.text = "Now playing"; $0.playing = true }
        let result = h.template("app", scene, .updateItem(HUItemUpdate.with { $0.templateID = "root"; $0.item = item }))
        #expect(result.code == .ok)
        let updates = h.drain(h.hmi)
        #expect(updates.count == 1)
        guard case .screenUpdate(let update) = updates.first?.body, case .diff(let diff) = update.change else {
            Issue.record("expected a diff, got \(updates)")
            return
        }
        #expect(diff.changes.count == 1)
        #expect(diff.changes.first?.listItem == item)
    }

    @Test func drivingTruncatesListsAndTellsTheApp() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("app", audio)])
        let scene = h.launch("app")
        _ = h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.driving = true } }))
        #expect(h.drain(h.phone).contains { if case .sessionConfiguration(let c) = $0.body { return c.limitLists && c.maxListItems == 12 } else { return false } })
        let shown = h.template("app", scene, .setRoot(listTemplate("root", items: 20)))
        #expect(shown.templateShown.itemsShown == 12)
        #expect(shown.templateShown.itemsTotal == 20)
    }

    @Test func aSecondPhoneIsRefused() {
        var h = CarHarness()
        h.join(h.phone, .phone)
        h.join(3, .phone)
        _ = h.announce([("app", audio)])
        let second = h.request(3, .announceApps(HUAnnounceApps.with { $0.apps = [HUAppInfo.with { $0.appID = "x"; $0.entitlements = [EntitlementKey.audio] }] }))
        #expect(second.code == .phoneAlreadyConnected)
    }

    @Test func closingAnAppTouchesNoOtherApp() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("a", audio), ("b", audio)])
        let sceneA = h.launch("a")
        _ = h.template("a", sceneA, .setRoot(listTemplate("ra", items: 1)))
        let sceneB = h.launch("b")
        _ = h.template("b", sceneB, .setRoot(listTemplate("rb", items: 1)))
        _ = h.drain(h.phone)
        #expect(h.request(h.phone, .appClosed(HUAppClosed.with { $0.appID = "a" })).code == .ok)
        let sent = h.drain(h.phone)
        #expect(sent.contains { if case .sceneDisconnected(let d) = $0.body { return d.appID == "a" && d.reason == .appClosed } else { return false } })
        #expect(!sent.contains { if case .sceneDisconnected(let d) = $0.body { return d.appID == "b" } else { return false } })
        #expect(h.template("b", sceneB, .push(listTemplate("more", items: 1))).code == .ok)
    }

    @Test func automakerAppsAppearOnlyWithAMatchingProtocol() {
        var h = CarHarness()
        h.join(h.phone, .phone)
        let result = h.request(h.phone, .announceApps(HUAnnounceApps.with {
            $0.apps = [
                HUAppInfo.with { $0.appID = "laps"; $0.entitlements = [EntitlementKey.protocols]; $0.accessoryProtocols = ["com.openmotors.performance"] },
                HUAppInfo.with { $0.appID = "comfort"; $0.entitlements = [EntitlementKey.protocols]; $0.accessoryProtocols = ["com.openmotors.climate", "com.openmotors.radio"] },
                HUAppInfo.with { $0.appID = "charge"; $0.entitlements = [EntitlementKey.protocols]; $0.accessoryProtocols = ["com.openmotors.electric"] },
            ]
        }))
        let decisions = result.appDecisions.decisions
        #expect(decisions.map(\.accepted) == [true, true, false])
        #expect(decisions[1].matchedProtocols == ["com.openmotors.climate"])
        #expect(decisions[2].code == .entitlementRefused)
    }
}

@Suite struct CarNowPlayingTests {
    @Test func theHomeScreenNowPlayingButtonOpensTheAppsSharedNowPlaying() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("radio", [EntitlementKey.audio])])
        // The app has no scene yet; it populates its now playing anyway.
        let content = HUNowPlayingTemplate.with { $0.title = "Jazz FM"; $0.playbackRate = 1 }
        let scene = h.launch("radio")
        _ = h.template("radio", scene, .updateNowPlaying(content))
        _ = h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }))
        _ = h.drain(h.hmi)
        let open = h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.openNowPlaying = HUOpenNowPlaying() }))
        #expect(open.code == .ok)
        let screens = h.drain(h.hmi).compactMap { envelope -> HURenderedScreen? in
            if case .screenUpdate(let update) = envelope.body, case .full(let full) = update.change { return full }
            return nil
        }
        #expect(screens.last?.top.nowPlaying.title == "Jazz FM")
        #expect(screens.last?.showNowPlayingButton == false)
        // The app may now push a list on top of it, and nothing else.
        #expect(h.template("radio", scene, .push(listTemplate("queue", items: 2))).code == .ok)
    }

    @Test func nowPlayingCannotBeTheAppsRoot() {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("radio", [EntitlementKey.audio])])
        let scene = h.launch("radio")
        let template = HUTemplate.with { $0.id = "now-playing"; $0.nowPlaying = HUNowPlayingTemplate.with { $0.title = "x" } }
        #expect(h.template("radio", scene, .setRoot(template)).code == .invalidPosition)
    }
}
