import HeadUnitWire

/// PROTOCOL.md §11: a phone session, step by step (announce, launch, templates,
/// events, close, disconnect). Launching needs an HMI: car role.
enum PhoneSessionChecks {
    static func hmiInput(_ templateID: String, _ kind: HUHmiInput.OneOf_Kind) -> HUEnvelope.OneOf_Body {
        var input = HUHmiInput()
        input.templateID = templateID
        input.kind = kind
        return .hmiInput(input)
    }

    static func selectItem(_ itemID: String) -> HUHmiInput.OneOf_Kind {
        var selected = HUItemSelected()
        selected.itemID = itemID
        return .selectItem(selected)
    }

    static func complete(_ app: LaunchedApp, _ eventID: UInt64) throws -> HUResult {
        var complete = HUCompleteEvent()
        complete.appID = app.appID
        complete.eventID = eventID
        return try app.phone.request(.completeEvent(complete), "CompleteEvent \(eventID)")
    }

    /// The next ScreenUpdate of the main screen matching `match` on the HMI.
    static func screenUpdate<T>(_ hmi: WireConnection, _ what: String, _ match: @escaping (HUScreenUpdate) -> T?) throws -> T {
        try hmi.take(what) { envelope -> T? in
            if case .screenUpdate(let update) = envelope.body, update.screen == .main { return match(update) }
            return nil
        }
    }

    static func fullScreen(_ hmi: WireConnection, _ what: String, where condition: @escaping (HURenderedScreen) -> Bool) throws -> HURenderedScreen {
        try screenUpdate(hmi, what) { update -> HURenderedScreen? in
            if case .full(let screen)? = update.change, condition(screen) { return screen }
            return nil
        }
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("session.announce-decisions", .p("11.2"), "AnnounceApps succeeds as a whole with one AppDecision per app: accepted with a category, ENTITLEMENT_REFUSED, DUPLICATE_APP") { ctx in
            let phone = try ctx.phone()
            let result = try ctx.announce(phone, [
                appInfo("com.example.audio", [Entitlement.audio]), appInfo("com.example.nokeys", []),
                appInfo("com.example.bogus", ["com.example.not-an-entitlement"]), appInfo("com.example.audio", [Entitlement.audio]),
            ])
            try requireCode(result, .ok, "AnnounceApps as a whole")
            let decisions = result.appDecisions.decisions
            try require(decisions.count == 4, "4 AppDecisions", got: "\(decisions.count): \(describe(result))")
            try require(decisions.map(\.appID) == ["com.example.audio", "com.example.nokeys", "com.example.bogus", "com.example.audio"],
                        "decisions in announce order", got: decisions.map(\.appID).joined(separator: ", "))
            if decisions[0].accepted {
                try require(decisions[0].category == .audio, "CATEGORY_AUDIO for carplay-audio", got: "\(decisions[0].category)")
            }
            try require(!decisions[1].accepted && decisions[1].code == .entitlementRefused, "no keys: refused with ENTITLEMENT_REFUSED (TEMPLATES §1)", got: "accepted \(decisions[1].accepted), \(name(decisions[1].code))")
            try require(!decisions[2].accepted && decisions[2].code == .entitlementRefused, "an unknown key: refused with ENTITLEMENT_REFUSED", got: "accepted \(decisions[2].accepted), \(name(decisions[2].code))")
            try require(!decisions[3].accepted && decisions[3].code == .duplicateApp, "the same app id twice: DUPLICATE_APP", got: "accepted \(decisions[3].accepted), \(name(decisions[3].code))")
        },
        ConformanceCheck("session.phone-already-connected", .p("11.2"), "AnnounceApps from a second phone while one is connected: PHONE_ALREADY_CONNECTED") { ctx in
            let first = try ctx.phone("phone-1")
            try requireCode(try ctx.announce(first, [appInfo("com.example.first", [Entitlement.audio])]), .ok, "the first phone's AnnounceApps")
            let second = try ctx.phone("phone-2")
            var announce = HUAnnounceApps()
            announce.deviceName = "Second Phone"
            announce.apps = [appInfo("com.example.second", [Entitlement.audio])]
            try requireCode(try second.request(.announceApps(announce), "AnnounceApps from a second phone"), .phoneAlreadyConnected, "AnnounceApps from a second phone")
            try second.requireAlive("PHONE_ALREADY_CONNECTED (a request error)")
        },
        ConformanceCheck("session.home-screen-icons", .p("11.2"), "after AnnounceApps the HMI gets a HomeScreen with an icon per launchable app and the device name", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            let phone = try ctx.phone()
            let result = try ctx.announce(phone, [appInfo("com.example.audio", [Entitlement.audio]), appInfo("com.example.nokeys", [])], device: "Alice's iPhone")
            let audioAccepted = result.appDecisions.decisions.first?.accepted ?? false
            let home = try hmi.take("HomeScreen with device_name \"Alice's iPhone\"") { envelope -> HUHomeScreen? in
                if case .homeScreen(let home) = envelope.body, home.deviceName == "Alice's iPhone" { return home }
                return nil
            }
            let ids = home.icons.map(\.appID)
            try require(!ids.contains("com.example.nokeys"), "no icon for the refused app", got: ids.joined(separator: ", "))
            try require(!audioAccepted || ids.contains("com.example.audio"), "an icon for the accepted com.example.audio", got: "[" + ids.joined(separator: ", ") + "]")
        },
        ConformanceCheck("session.launch", .p("11.3"), "LaunchApp: HMI Result OK, phone SceneConnected{app_id, scene_id, kind MAIN, limits}", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try require(app.scene.kind == .main, "SceneConnected.kind SCENE_KIND_MAIN", got: "\(app.scene.kind)")
            try require(app.scene.maxStackDepth == 5, "max_stack_depth 5 for an audio app (TEMPLATES §2)", got: "\(app.scene.maxStackDepth)")
            try require(app.scene.maxTabs == 4, "max_tabs 4 for an audio app (TEMPLATES §2)", got: "\(app.scene.maxTabs)")
        },
        ConformanceCheck("session.set-root", .p("11.4"), "set_root: Result template_shown{root, depth 1, items}, WILL_APPEAR then DID_APPEAR, HMI ScreenUpdate full", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            let result = try app.ok(.setRoot(Make.list("root", items: 3)), "set_root list \"root\"")
            guard case .templateShown(let shown)? = result.detail else { throw CheckFailure(expected: "Result.template_shown", got: describe(result)) }
            try require(shown.templateID == "root" && shown.depth == 1, "template_shown{template_id \"root\", depth 1}", got: "{\(shown.templateID), depth \(shown.depth)}")
            try require(shown.itemsTotal == 3, "items_total 3", got: "\(shown.itemsTotal)")
            if !app.scene.vehicleState.limitLists {
                try require(shown.itemsShown == 3, "items_shown 3 while lists are not limited", got: "\(shown.itemsShown)")
            }
            try app.lifecycle("root", [.willAppear, .didAppear], "set_root")
            let screen = try fullScreen(app.hmi, "ScreenUpdate{full} showing \(app.appID)") { $0.appID == app.appID && $0.stack == ["root"] }
            try require(screen.top.id == "root", "RenderedScreen.top \"root\"", got: screen.top.id)
        },
        ConformanceCheck("session.push-pop", .p("11.7"), "push and pop answer template_shown{top, depth} and send WILL/DID_DISAPPEAR and WILL/DID_APPEAR", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.lifecycle("root", [.willAppear, .didAppear], "set_root")
            let pushed = try app.ok(.push(Make.list("second")), "push \"second\"")
            try require(pushed.templateShown.templateID == "second" && pushed.templateShown.depth == 2, "template_shown{second, depth 2}", got: "{\(pushed.templateShown.templateID), depth \(pushed.templateShown.depth)}")
            try app.lifecycle("root", [.willDisappear, .didDisappear], "push")
            try app.lifecycle("second", [.willAppear, .didAppear], "push")
            _ = try fullScreen(app.hmi, "ScreenUpdate{full} with stack [root, second]") { $0.stack == ["root", "second"] }
            let popped = try app.ok(.pop(HUPopTemplate()), "pop")
            try require(popped.templateShown.templateID == "root" && popped.templateShown.depth == 1, "template_shown{root, depth 1}", got: "{\(popped.templateShown.templateID), depth \(popped.templateShown.depth)}")
            try app.lifecycle("second", [.willDisappear, .didDisappear], "pop")
            try app.lifecycle("root", [.willAppear, .didAppear], "pop")
            try app.ok(.push(Make.list("a")), "push a")
            try app.ok(.push(Make.list("b")), "push b")
            let toA = try app.ok(.popTo("a"), "pop_to \"a\"")
            try require(toA.templateShown.templateID == "a" && toA.templateShown.depth == 2, "template_shown{a, depth 2}", got: "{\(toA.templateShown.templateID), depth \(toA.templateShown.depth)}")
            let toRoot = try app.ok(.popToRoot(HUPopTemplate()), "pop_to_root")
            try require(toRoot.templateShown.templateID == "root" && toRoot.templateShown.depth == 1, "template_shown{root, depth 1}", got: "{\(toRoot.templateShown.templateID), depth \(toRoot.templateShown.depth)}")
            try app.refused(.popTo("nowhere"), .unknownTemplate, "pop_to a template not on the stack")
        },
        ConformanceCheck("session.multi-level-pop-lifecycle", .p("11.7"), "popping a,b,c,d to the root: only d disappears and a appears; hidden b and c get nothing", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("a")), "set_root a")
            for id in ["b", "c", "d"] { try app.ok(.push(Make.list(id)), "push \(id)") }
            try app.ok(.popToRoot(HUPopTemplate()), "pop_to_root")
            try app.lifecycle("a", [.willAppear, .didAppear, .willDisappear, .didDisappear, .willAppear, .didAppear], "set_root, push b, pop_to_root")
            for id in ["b", "c"] { try app.lifecycle(id, [.willAppear, .didAppear, .willDisappear, .didDisappear], "pushed, then covered") }
            try app.lifecycle("d", [.willAppear, .didAppear, .willDisappear, .didDisappear], "pushed, then popped")
            try app.ok(.popToRoot(HUPopTemplate()), "pop_to_root at the root (a no-op)")
            if let extra = app.phone.backlog.first(where: { if case .appEvent(let e) = $0.body, case .lifecycle = e.kind { return true } else { return false } }) {
                throw CheckFailure(expected: "no lifecycle event for hidden templates or a no-op pop", got: describe(extra))
            }
        },
        ConformanceCheck("session.pop-edges", .p("11.7"), "pop/pop_to_root/dismiss before set_root: NO_ROOT_TEMPLATE; pop at the root: INVALID_POSITION; pop_to the top: OK", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.refused(.pop(HUPopTemplate()), .noRootTemplate, "pop before set_root")
            try app.refused(.popToRoot(HUPopTemplate()), .noRootTemplate, "pop_to_root before set_root")
            try app.refused(.dismiss(HUPopTemplate()), .noRootTemplate, "dismiss before set_root")
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.refused(.pop(HUPopTemplate()), .invalidPosition, "pop at the root")
            let top = try app.ok(.popTo("root"), "pop_to the template on top")
            try require(top.templateShown.templateID == "root" && top.templateShown.depth == 1, "template_shown{root, depth 1}", got: "{\(top.templateShown.templateID), depth \(top.templateShown.depth)}")
        },
        ConformanceCheck("session.now-playing-content-needs-no-root", .p("11.9"), "update_now_playing before set_root: OK; show_now_playing before set_root: NO_ROOT_TEMPLATE", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            var content = HUNowPlayingTemplate()
            content.title = "Song"
            try app.ok(.updateNowPlaying(content), "update_now_playing before set_root")
            try app.refused(.showNowPlaying(HUShowNowPlaying()), .noRootTemplate, "show_now_playing before set_root")
        },
        ConformanceCheck("session.no-root", .p("9"), "push or present before set_root: NO_ROOT_TEMPLATE", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.refused(.push(Make.list("early")), .noRootTemplate, "push before set_root")
            try app.refused(.present(Make.alert("early-alert")), .noRootTemplate, "present before set_root")
        },
        ConformanceCheck("session.present-dismiss", .p("11.8"), "present a modal; ALREADY_PRESENTED for a second; its button -> AppEvent button_pressed; dismiss; NOTHING_PRESENTED", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.refused(.dismiss(HUPopTemplate()), .nothingPresented, "dismiss with nothing presented")
            try app.ok(.present(Make.alert("alert")), "present alert")
            try app.refused(.present(Make.alert("alert-2")), .alreadyPresented, "a second present")
            var press = HUButtonPressed()
            press.buttonID = "alert.a0"
            try requireCode(try app.hmi.request(hmiInput("alert", .pressButton(press)), "press alert.a0"), .ok, "HMI press_button on the alert")
            let event = try app.phone.take("AppEvent{button_pressed alert.a0}") { envelope -> HUAppEvent? in
                if case .appEvent(let event) = envelope.body, case .buttonPressed? = event.kind { return event }
                return nil
            }
            try require(event.templateID == "alert" && event.buttonPressed.buttonID == "alert.a0", "AppEvent{template_id alert, button_pressed alert.a0}", got: "{\(event.templateID), \(event.buttonPressed.buttonID)}")
            try app.ok(.dismiss(HUPopTemplate()), "dismiss")
            try app.refused(.dismiss(HUPopTemplate()), .nothingPresented, "a second dismiss")
        },
        ConformanceCheck("session.item-selection", .p("11.5"), "select_item: AppEvent with event_id, HMI spinner_started; CompleteEvent OK, spinner_stopped; again UNKNOWN_EVENT", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try requireCode(try app.hmi.request(hmiInput("root", selectItem("root.i1")), "select_item root.i1"), .ok, "HMI select_item")
            let event = try app.phone.take("AppEvent{item_selected root.i1}") { envelope -> HUAppEvent? in
                if case .appEvent(let event) = envelope.body, case .itemSelected? = event.kind { return event }
                return nil
            }
            try require(event.itemSelected.itemID == "root.i1" && event.templateID == "root", "item_selected{root.i1} on template root", got: "\(event.itemSelected.itemID) on \(event.templateID)")
            try require(event.eventID != 0, "a non-zero event_id (the car waits)", got: "0")
            try require(event.appID == app.appID && event.sceneID == app.scene.sceneID, "app_id and scene_id of the app", got: "\(event.appID) scene \(event.sceneID)")
            let started = try screenUpdate(app.hmi, "ScreenUpdate{spinner_started}") { update -> HUPendingSelection? in
                if case .spinnerStarted(let pending)? = update.change { return pending }
                return nil
            }
            try require(started.eventID == event.eventID && started.itemID == "root.i1" && started.templateID == "root", "spinner_started{event_id \(event.eventID), root, root.i1}", got: "{\(started.eventID), \(started.templateID), \(started.itemID)}")
            try requireCode(try complete(app, event.eventID), .ok, "CompleteEvent")
            let stopped = try screenUpdate(app.hmi, "ScreenUpdate{spinner_stopped}") { update -> HUPendingSelection? in
                if case .spinnerStopped(let pending)? = update.change { return pending }
                return nil
            }
            try require(stopped.eventID == event.eventID, "spinner_stopped{event_id \(event.eventID)}", got: "event_id \(stopped.eventID)")
            try requireCode(try complete(app, event.eventID), .unknownEvent, "CompleteEvent for an event already completed")
            try requireCode(try complete(app, 987_654_321), .unknownEvent, "CompleteEvent for an event never sent")
        },
        ConformanceCheck("session.selection-replaced", .p("11.5"), "a new selection while one is pending replaces it: the old spinner stops", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try requireCode(try app.hmi.request(hmiInput("root", selectItem("root.i0")), "select root.i0"), .ok, "select_item root.i0")
            let first = try app.phone.take("AppEvent{item_selected root.i0}") { envelope -> UInt64? in
                if case .appEvent(let event) = envelope.body, case .itemSelected? = event.kind { return event.eventID }
                return nil
            }
            try requireCode(try app.hmi.request(hmiInput("root", selectItem("root.i1")), "select root.i1"), .ok, "select_item root.i1")
            _ = try screenUpdate(app.hmi, "ScreenUpdate{spinner_stopped{event_id \(first)}}") { update -> Bool? in
                if case .spinnerStopped(let pending)? = update.change, pending.eventID == first { return true }
                return nil
            }
        },
        ConformanceCheck("session.completion-timeout", .p("11.6"), "no CompleteEvent within completion_timeout_ms: spinner_stopped, AppEvent timed_out; a late CompleteEvent gets COMPLETION_TIMEOUT", needsCarRole: true) { ctx in
            let timeout = Int(ctx.limits.completionTimeoutMs)
            guard timeout <= 3000 || ctx.options.slow else {
                throw CheckSkipped("completion_timeout_ms is \(timeout); use --slow to wait for it")
            }
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try requireCode(try app.hmi.request(hmiInput("root", selectItem("root.i0")), "select_item root.i0"), .ok, "HMI select_item")
            let start = WireConnection.nowMs()
            let eventID = try app.phone.take("AppEvent{item_selected}") { envelope -> UInt64? in
                if case .appEvent(let event) = envelope.body, case .itemSelected? = event.kind { return event.eventID }
                return nil
            }
            let wait = timeout + ctx.timeoutMs
            let timedOut = try app.phone.take("AppEvent{timed_out{\(eventID)}} within \(timeout) ms", timeoutMs: wait) { envelope -> UInt64? in
                if case .appEvent(let event) = envelope.body, case .timedOut(let out)? = event.kind { return out.timedOutEventID }
                return nil
            }
            let waited = Int(WireConnection.nowMs() - start)
            try require(timedOut == eventID, "timed_out_event_id \(eventID)", got: "\(timedOut)")
            try require(waited >= timeout * 8 / 10, "no time-out before about completion_timeout_ms (\(timeout))", got: "timed_out after \(waited) ms")
            _ = try app.hmi.take("ScreenUpdate{spinner_stopped{\(eventID)}}", timeoutMs: wait) { envelope -> Bool? in
                if case .screenUpdate(let update) = envelope.body, case .spinnerStopped(let pending)? = update.change, pending.eventID == eventID { return true }
                return nil
            }
            try requireCode(try complete(app, eventID), .completionTimeout, "CompleteEvent after the event timed out")
        },
        ConformanceCheck("session.update-in-place", .p("11.9"), "update (same id) and update_item: Result OK, the HMI gets ScreenUpdate{diff} with exactly the changed list_item (TEMPLATES §7)", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            var template = Make.list("root", items: 12)
            try app.ok(.setRoot(template), "set_root with 12 items")
            _ = try fullScreen(app.hmi, "ScreenUpdate{full} with root") { $0.stack == ["root"] }
            template.list.sections[0].items[4].general.text = "Changed by update"
            try app.ok(.update(template), "update root with item 4 changed")
            let diff = try screenUpdate(app.hmi, "ScreenUpdate{diff} for the update") { update -> HUTemplateDiff? in
                if case .diff(let diff)? = update.change { return diff }
                return nil
            }
            try require(diff.templateID == "root" && diff.changes.count == 1 && diff.changes[0].listItem.id == "root.i4" && diff.changes[0].listItem.general.text == "Changed by update",
                        "diff{root: one list_item root.i4}", got: "diff{\(diff.templateID): \(diff.changes.count) change(s)\(diff.changes.first.map { ", first " + String(describing: $0.element).prefix(60) } ?? "")}")
            var update = HUItemUpdate()
            update.templateID = "root"
            update.item = Make.item("root.i7")
            update.item.general.text = "Changed by update_item"
            try app.ok(.updateItem(update), "update_item root.i7")
            let second = try screenUpdate(app.hmi, "ScreenUpdate{diff} for update_item") { update -> HUTemplateDiff? in
                if case .diff(let diff)? = update.change { return diff }
                return nil
            }
            try require(second.changes.count == 1 && second.changes[0].listItem.id == "root.i7", "diff with one list_item root.i7", got: "\(second.changes.count) change(s)")
        },
        ConformanceCheck("session.go-back", .p("11.7"), "the car's back button pops with lifecycle events; at the root it leaves for the home screen, scene kept", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.ok(.push(Make.list("second")), "push")
            try app.lifecycle("second", [.willAppear, .didAppear], "push")
            try requireCode(try app.hmi.request(hmiInput("second", .goBack(HUGoBack())), "go_back on second"), .ok, "HMI go_back")
            try app.lifecycle("second", [.willDisappear, .didDisappear], "go_back")
            _ = try fullScreen(app.hmi, "ScreenUpdate{full} with stack [root]") { $0.appID == app.appID && $0.stack == ["root"] }
            try requireCode(try app.hmi.request(hmiInput("root", .goBack(HUGoBack())), "go_back at the root"), .ok, "HMI go_back at the root")
            // Root's events in order: set_root, push, the pop by go_back, then leaving for home.
            try app.lifecycle("root", [.willAppear, .didAppear, .willDisappear, .didDisappear, .willAppear, .didAppear, .willDisappear, .didDisappear],
                              "set_root, push, go_back, then go_back at the root")
            _ = try fullScreen(app.hmi, "ScreenUpdate{full} of the home screen (empty app_id)") { $0.appID.isEmpty }
            if let gone = app.phone.backlog.first(where: { if case .sceneDisconnected = $0.body { return true } else { return false } }) {
                throw CheckFailure(expected: "the scene to stay connected", got: describe(gone))
            }
        },
        ConformanceCheck("session.go-back-while-presented", .p("11.7"), "go_back while a modal is presented: INVALID_POSITION", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.ok(.present(Make.alert("alert")), "present")
            try requireCode(try app.hmi.request(hmiInput("alert", .goBack(HUGoBack())), "go_back on the alert"), .invalidPosition, "go_back while presented")
        },
        ConformanceCheck("session.app-closed", .p("11.11"), "AppClosed: Result OK, SceneDisconnected{APP_CLOSED}; relaunching gives a new scene_id", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            var closed = HUAppClosed()
            closed.appID = app.appID
            try requireCode(try app.phone.request(.appClosed(closed), "AppClosed"), .ok, "AppClosed")
            let gone = try app.phone.take("SceneDisconnected") { envelope -> HUSceneDisconnected? in
                if case .sceneDisconnected(let scene) = envelope.body { return scene }
                return nil
            }
            try require(gone.reason == .appClosed && gone.sceneID == app.scene.sceneID, "SceneDisconnected{scene \(app.scene.sceneID), APP_CLOSED}", got: "{scene \(gone.sceneID), \(gone.reason)}")
            var launch = HULaunchApp()
            launch.appID = app.appID
            try requireCode(try app.hmi.request(.launchApp(launch), "LaunchApp again"), .ok, "relaunch after AppClosed")
            let again = try app.phone.take("SceneConnected again") { envelope -> HUSceneConnected? in
                if case .sceneConnected(let scene) = envelope.body { return scene }
                return nil
            }
            try require(again.sceneID != app.scene.sceneID, "a new scene_id", got: "the same \(again.sceneID)")
        },
        ConformanceCheck("session.closed-by-car", .p("11.11"), "CloseApp from the HMI: SceneDisconnected{CLOSED_BY_CAR}; later template requests get NOT_CONNECTED", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            var close = HUCloseApp()
            close.appID = app.appID
            try requireCode(try app.hmi.request(.closeApp(close), "CloseApp"), .ok, "CloseApp")
            let gone = try app.phone.take("SceneDisconnected") { envelope -> HUSceneDisconnected? in
                if case .sceneDisconnected(let scene) = envelope.body { return scene }
                return nil
            }
            try require(gone.reason == .closedByCar, "DISCONNECT_REASON_CLOSED_BY_CAR", got: "\(gone.reason)")
            try app.refused(.push(Make.list("late")), .notConnected, "push into a closed scene")
        },
        ConformanceCheck("session.not-your-scene", .p("9"), "a template request for another app's scene: NOT_YOUR_SCENE", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            let phone = try ctx.phone()
            let result = try ctx.announce(phone, [appInfo("com.example.a", [Entitlement.audio]), appInfo("com.example.b", [Entitlement.audio])])
            guard result.appDecisions.decisions.allSatisfy(\.accepted) else { throw CheckSkipped("the endpoint refused the audio entitlement") }
            var launch = HULaunchApp()
            launch.appID = "com.example.a"
            try requireCode(try hmi.request(.launchApp(launch), "LaunchApp a"), .ok, "LaunchApp")
            let scene = try phone.take("SceneConnected for a") { envelope -> UInt32? in
                if case .sceneConnected(let scene) = envelope.body { return scene.sceneID }
                return nil
            }
            var request = HUTemplateRequest()
            request.appID = "com.example.b"
            request.sceneID = scene
            request.setRoot = Make.list("root")
            try requireCode(try phone.request(.templateRequest(request), "set_root by b in a's scene"), .notYourScene, "app b drawing into app a's scene")
        },
        ConformanceCheck("session.vehicle-state", .p("11.10"), "SetVehicleState{driving}: each scene gets SessionConfiguration with both limits (driving implies them)", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            ctx.restoreParkedAtEnd(app.hmi)
            var state = HUSetVehicleState()
            state.state.driving = true
            try requireCode(try app.hmi.request(.setVehicleState(state), "SetVehicleState driving"), .ok, "SetVehicleState")
            let config = try app.phone.take("SessionConfiguration") { envelope -> HUSessionConfiguration? in
                if case .sessionConfiguration(let config) = envelope.body { return config }
                return nil
            }
            try require(config.appID == app.appID && config.sceneID == app.scene.sceneID, "SessionConfiguration for the app's scene", got: "\(config.appID) scene \(config.sceneID)")
            try require(config.limitLists && config.limitKeyboard, "limit_lists and limit_keyboard (driving with neither set implies both, §12.5)", got: "limit_lists \(config.limitLists), limit_keyboard \(config.limitKeyboard)")
            if let cap = ctx.reference?.vehicle.maxListItemsWhileDriving, cap > 0 {
                try require(config.maxListItems == cap, "max_list_items \(cap) (VehicleProfile.max_list_items_while_driving)", got: "\(config.maxListItems)")
            }
        },
        ConformanceCheck("session.disconnect-goodbye", .p("11.12"), "phone Goodbye: the HMI gets a HomeScreen without icons and with an empty device_name", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            app.phone.leave()
            _ = try app.hmi.take("HomeScreen without icons and device_name") { envelope -> Bool? in
                if case .homeScreen(let home) = envelope.body, home.icons.isEmpty, home.deviceName.isEmpty { return true }
                return nil
            }
        },
        ConformanceCheck("session.disconnect-drop", .p("7"), "a phone that drops without Goodbye is cleaned up the same way: empty HomeScreen", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            app.phone.close()
            _ = try app.hmi.take("HomeScreen without icons and device_name") { envelope -> Bool? in
                if case .homeScreen(let home) = envelope.body, home.icons.isEmpty, home.deviceName.isEmpty { return true }
                return nil
            }
        },
    ]
}
