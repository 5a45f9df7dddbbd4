import HeadUnitWire

/// PROTOCOL.md §19 beyond guidance: navigation alerts, the dashboard's
/// buttons and the metadata stream's now-playing section (with the orders of
/// §16.13 and §16.14).
enum NavigationSectionChecks {
    typealias N = NavigationChecks

    static func alert(_ id: String, actions: [String] = []) -> HUNavigationAlert {
        var alert = HUNavigationAlert()
        alert.id = id
        alert.titleVariants = ["Alert \(id)"]
        alert.actions = actions.map(Make.action)
        return alert
    }

    static func input(_ app: LaunchedApp, _ kind: HUNavigationInput.OneOf_Kind) -> HUEnvelope.OneOf_Body {
        var input = HUNavigationInput()
        input.appID = app.appID
        input.kind = kind
        return .navigationInput(input)
    }

    static func dismissed(_ app: LaunchedApp, _ what: String) throws -> HUAlertDismissed {
        try app.phone.takeNavigationEvent(what) { if case .alertDismissed(let d) = $0.kind { return d } else { return nil } }
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "navigation.alerts", .p("19.2"),
            "navigation alerts: none shown NOTHING_PRESENTED (app and driver); shown on the cluster; replaced by the app's next alert_dismissed{APP}; the driver's action alert_dismissed{USER_ACTION, action}, an unknown action UNKNOWN_ITEM; the app's own finish leaves its alert shown",
            needsCarRole: true
        ) { ctx in
            let (app, cluster) = try N.mapsWithCluster(ctx)
            try requireCode(try app.phone.request(N.request(app, .dismissAlert(HUDismissNavigationAlert())), "dismiss_alert with none shown"), .nothingPresented, "the app's dismiss_alert with none shown")
            try requireCode(try app.hmi.request(input(app, .dismissAlert(HUDismissNavigationAlert())), "NavigationInput dismiss_alert with none shown"), .nothingPresented, "the driver's dismiss_alert with none shown")
            try N.ok(app, .showAlert(alert("first")), "show_alert first")
            let shown = try cluster.metadataUntil("alert first on the cluster") { $0.alert.alert.id == "first" ? $0.alert : nil }
            try require(shown.appID == app.appID, "the alert section names the app", got: "\"\(shown.appID)\"")
            // The app's next alert replaces it: the first is dismissed, reason APP.
            try N.ok(app, .showAlert(alert("second", actions: ["avoid", "ignore"])), "show_alert second")
            let replaced = try dismissed(app, "alert_dismissed for the replaced alert")
            try require(replaced.alertID == "first" && replaced.reason == .app, "alert_dismissed{first, APP}", got: "\(replaced)")
            try requireCode(try app.hmi.request(input(app, .alertAction("nope")), "NavigationInput alert_action nope"), .unknownItem, "an action the alert does not have")
            try requireCode(try app.hmi.request(input(app, .alertAction("avoid")), "NavigationInput alert_action avoid"), .ok, "the driver's action")
            let chosen = try dismissed(app, "alert_dismissed after the driver's action")
            try require(chosen.alertID == "second" && chosen.reason == .userAction && chosen.actionID == "avoid", "alert_dismissed{second, USER_ACTION, avoid}", got: "\(chosen)")
            _ = try cluster.metadataUntil("no alert on the cluster") { $0.alert.hasAlert ? nil : true }
            // §19.2: "the app's own `finish` or `cancel` leaves its alert shown".
            try N.ok(app, N.start(), "start")
            _ = try cluster.metadataUntil("guidance ACTIVE") { $0.guidance.state == .active ? true : nil }
            try N.ok(app, .showAlert(alert("third")), "show_alert third")
            try N.ok(app, .finish(HUFinishNavigation()), "finish")
            let afterFinish = try cluster.metadataUntil("guidance ENDED") { $0.guidance.state == .ended ? $0 : nil }
            try require(afterFinish.alert.alert.id == "third", "the alert still shown after the app's own finish", got: "\"\(afterFinish.alert.alert.id)\"")
            try N.ok(app, .dismissAlert(HUDismissNavigationAlert()), "dismiss_alert")
            let byApp = try dismissed(app, "alert_dismissed after dismiss_alert")
            try require(byApp.alertID == "third" && byApp.reason == .app, "alert_dismissed{third, APP}", got: "\(byApp)")
        },
        ConformanceCheck(
            "navigation.dashboard-buttons", .p("19.4"),
            "dashboard buttons: on the metadata stream's cluster section; dashboard_button without a dashboard scene NOT_CONNECTED, unknown UNKNOWN_ITEM, pressed: dashboard_button_pressed on the dashboard scene; while the app guides (paused too) INVALID_POSITION",
            needsCarRole: true
        ) { ctx in
            guard ctx.reference?.vehicle.dashboardPresent == true else { throw CheckSkipped("the vehicle has no dashboard (Welcome.vehicle)") }
            let (app, cluster) = try N.mapsWithCluster(ctx)
            try requireCode(try app.hmi.request(input(app, .dashboardButton("home")), "dashboard_button without a dashboard scene"), .notConnected, "no dashboard scene")
            var launch = HULaunchApp()
            launch.appID = app.appID
            launch.kind = .dashboard
            try requireCode(try app.hmi.request(.launchApp(launch), "LaunchApp DASHBOARD"), .ok, "LaunchApp DASHBOARD")
            let scene = try app.phone.take("SceneConnected for the dashboard") { envelope -> UInt32? in
                if case .sceneConnected(let s) = envelope.body, s.kind == .dashboard { return s.sceneID }
                return nil
            }
            var button = HUDashboardButton()
            button.id = "home"
            button.titleVariants = ["Home"]
            var buttons = HUDashboardButtons()
            buttons.buttons = [button]
            try N.ok(app, .setDashboardButtons(buttons), "set_dashboard_buttons [home]")
            let section = try cluster.metadataUntil("the dashboard's buttons") { $0.cluster.dashboardButtons.map(\.id) == ["home"] ? $0.cluster : nil }
            _ = section
            try requireCode(try app.hmi.request(input(app, .dashboardButton("nope")), "dashboard_button nope"), .unknownItem, "a button the app did not set")
            try requireCode(try app.hmi.request(input(app, .dashboardButton("home")), "dashboard_button home"), .ok, "dashboard_button home")
            let pressed = try app.phone.take("NavigationEvent dashboard_button_pressed") { envelope -> HUNavigationEvent? in
                if case .navigationEvent(let e) = envelope.body, case .dashboardButtonPressed = e.kind { return e }
                return nil
            }
            try require(pressed.dashboardButtonPressed == "home" && pressed.sceneID == scene, "dashboard_button_pressed home on the dashboard scene \(scene) (§19.3)", got: "\(pressed)")
            try N.ok(app, N.start(), "start")
            try requireCode(try app.hmi.request(input(app, .dashboardButton("home")), "dashboard_button while guiding"), .invalidPosition, "while the app guides")
            var pause = HUPauseNavigation()
            pause.reason = .loading
            try N.ok(app, .pause(pause), "pause")
            try requireCode(try app.hmi.request(input(app, .dashboardButton("home")), "dashboard_button while paused"), .invalidPosition, "while paused (a paused session guides)")
            try N.ok(app, .cancel(HUCancelNavigation()), "cancel")
            try requireCode(try app.hmi.request(input(app, .dashboardButton("home")), "dashboard_button after cancel"), .ok, "once the app no longer guides")
        },
        ConformanceCheck(
            "metadata.now-playing", .p("19.5"),
            "the now-playing section: an audio app's update_now_playing (no root needed) shows there; paused content (rate 0) stays; an app closed keeps it; a gone phone's is cleared",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio], appID: "com.example.conformance.radio")
            let cluster = try ctx.carRole(.cluster, "cluster")
            try requireCode(try cluster.request(.subscribeMetadata(HUSubscribeMetadata()), "SubscribeMetadata"), .ok, "SubscribeMetadata")
            _ = try cluster.takeMetadata("the first MetadataUpdate (full)")
            var content = HUNowPlayingTemplate()
            content.title = "Conformance Song"
            content.artist = "The Kit"
            content.playbackRate = 1
            content.durationSeconds = 200
            try app.ok(.updateNowPlaying(content), "update_now_playing")
            var section = try cluster.metadataUntil("the app's now playing") { $0.nowPlaying.title == "Conformance Song" ? $0.nowPlaying : nil }
            try require(section.appID == app.appID && section.artist == "The Kit" && section.playbackRate == 1 && section.durationSeconds == 200,
                        "app, artist, rate 1, duration 200 s", got: "\(section)")
            content.playbackRate = 0
            try app.ok(.updateNowPlaying(content), "update_now_playing paused")
            section = try cluster.metadataUntil("paused content") { $0.nowPlaying.playbackRate == 0 ? $0.nowPlaying : nil }
            try require(section.appID == app.appID && section.title == "Conformance Song", "paused content stays (rate 0)", got: "\(section)")
            var closed = HUAppClosed()
            closed.appID = app.appID
            try requireCode(try app.phone.request(.appClosed(closed), "AppClosed"), .ok, "AppClosed")
            // A round trip on the cluster: what AppClosed changed was sent before this answer.
            try requireCode(try cluster.request(.getStatus(HUGetStatus()), "GetStatus"), .ok, "the cluster's GetStatus")
            while (try? cluster.takeMetadata("updates so far", timeoutMs: 1)) != nil {}
            let kept = cluster.metadataSeen.last?.nowPlaying
            try require(kept?.appID == app.appID && kept?.title == "Conformance Song", "a closed app keeps its content in the section", got: "\(String(describing: kept))")
            app.phone.leave()
            let cleared = try cluster.metadataUntil("the section cleared when the phone is gone") { $0.nowPlaying.appID.isEmpty ? $0.nowPlaying : nil }
            try require(cleared.title.isEmpty, "nothing of a gone phone's content", got: "\(cleared)")
        },
    ]
}
