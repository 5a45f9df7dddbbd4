import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// The rules decided in the second round of the contract (PROTOCOL.md
/// section 17, issue 26), each quoted and provoked over a real socket.
@Suite("Contract decisions (issue 26) over real sockets", .serialized, .ownThread)
struct ContractDecisionTests {
    static let audio = "com.apple.developer.carplay-audio"

    static func app(_ id: String, _ entitlement: String = NavWire.maps) -> HUAppInfo {
        HUAppInfo.with { $0.appID = id; $0.displayName = id; $0.entitlements = [entitlement] }
    }

    static func nav(_ appID: String, _ op: HUNavigationRequest.OneOf_Op) -> HUEnvelope.OneOf_Body {
        .navigationRequest(HUNavigationRequest.with { $0.appID = appID; $0.op = op })
    }

    static func previews(_ trips: [String], selected: String = "") -> HUEnvelope.OneOf_Body {
        NavWire.nav(.showTripPreviews(HUTripPreviews.with { $0.trips = trips.map(NavWire.trip); $0.selectedTripID = selected }))
    }

    static func start(_ trip: String = "home", route: String = "") -> HUEnvelope.OneOf_Body {
        NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip(trip); $0.routeChoiceID = route }))
    }

    static func launch(_ appID: String, _ kind: HUSceneKind = .main) -> HUEnvelope.OneOf_Body {
        .launchApp(HULaunchApp.with { $0.appID = appID; $0.kind = kind })
    }

    static func vehicle(_ build: (inout HUVehicleState) -> Void) -> HUEnvelope.OneOf_Body {
        var state = HUVehicleState()
        build(&state)
        return .setVehicleState(HUSetVehicleState.with { $0.state = state })
    }

    static func metadataUpdates(_ peer: RecordingPeer) -> [HUMetadataUpdate] {
        var updates: [HUMetadataUpdate] = []
        while let update = try? peer.waitFor(timeout: 0, { envelope -> HUMetadataUpdate? in
            if case .metadataUpdate(let update) = envelope.body { return update }
            return nil
        }) { updates.append(update) }
        return updates
    }

    // MARK: - B1: section 1's complete role table

    /// PROTOCOL.md section 1's role table, read from the document itself.
    struct RoleTable {
        /// What each role may send (the "sends" column, before "only while AUTHENTICATING").
        var sends: [HURole: Set<String>] = [:]
        /// What the daemon sends each role (the "receives" column).
        var receives: [HURole: Set<String>] = [:]
        /// `PairStart`, `Pair`, `Authenticate`: a TCP phone's, while AUTHENTICATING only.
        var whileAuthenticating: Set<String> = []
        /// The connection-control messages the paragraph under the table names for every role.
        static let everyRole: Set<String> = ["Hello", "Goodbye", "Welcome"]

        var named: Set<String> {
            sends.values.reduce(into: whileAuthenticating) { $0.formUnion($1) }.union(receives.values.joined()).union(Self.everyRole)
        }
    }

    static let frameNames: Set<String> = ["DATA", "MEDIA", "VIDEO"]

    /// Message names in backquotes and the frame kinds named in capitals.
    static func names(in cell: Substring) -> Set<String> {
        let quoted = cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        let frames = cell.split { !$0.isLetter }.map(String.init).filter { frameNames.contains($0) }
        return Set(quoted + frames)
    }

    static func roleTable() throws -> RoleTable {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Protocol/PROTOCOL.md"), encoding: .utf8)
        let section = try #require(text.range(of: "## 1. Overview").flatMap { start in text[start.upperBound...].range(of: "\n## 2. ", options: .regularExpression).map { text[start.lowerBound..<$0.lowerBound] } })
        let roles: [String: HURole] = ["`ROLE_PHONE`": .phone, "`ROLE_HMI`": .hmi, "`ROLE_CLUSTER`": .cluster, "`ROLE_ACCESSORY`": .accessory]
        var table = RoleTable()
        for line in section.split(separator: "\n") where line.hasPrefix("| `ROLE_") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            // "", role, who, transports, sends, receives, ""
            try #require(cells.count == 7, "a role row has five columns: \(line)")
            let role = try #require(roles.first { cells[1].hasPrefix($0.key) }?.value, "\(cells[1])")
            let sends = cells[4].components(separatedBy: "only while AUTHENTICATING")
            table.sends[role] = Self.names(in: Substring(sends[0]))
            if sends.count > 1 { table.whileAuthenticating.formUnion(Self.names(in: Substring(sends[1]))) }
            table.receives[role] = Self.names(in: Substring(cells[5]))
        }
        try #require(table.sends.count == 4, "four role rows in section 1")
        return table
    }

    /// Every body of `Envelope`'s oneof, found by decoding each field number
    /// as an empty length-delimited field (no list to keep up to date: a body
    /// added to headunit.proto is found here), with its message's name.
    static func everyBody() -> [(name: String, body: HUEnvelope.OneOf_Body)] {
        var bodies: [(String, HUEnvelope.OneOf_Body)] = []
        for field in 2..<2048 {
            var tag = UInt32(field) << 3 | 2
            var bytes: [UInt8] = []
            while tag >= 0x80 { bytes.append(UInt8(tag & 0x7f) | 0x80); tag >>= 7 }
            bytes += [UInt8(tag), 0]
            guard let envelope = try? EnvelopeCodec.decode(ByteBuffer(bytes: bytes)), let body = envelope.body,
                let message = Mirror(reflecting: body).children.first?.value
            else { continue }
            // The generated types carry the proto's swift_prefix "HU".
            bodies.append((String(String(describing: type(of: message)).dropFirst(2)), body))
        }
        return bodies
    }

    /// The frame kinds that carry data (all but MESSAGE, PING and PONG), by the name section 1 uses.
    static var dataFrameKinds: [(name: String, kind: FrameKind)] {
        FrameKind.allCases.filter { ![.message, .ping, .pong].contains($0) }.map { (String(describing: $0).uppercased(), $0) }
    }

    /// Section 1: "This table is complete: every Envelope body (each field of
    /// `Envelope`'s `body` oneof) and every frame kind that carries data ... is in it."
    @Test func roleTableNamesEveryBodyAndEveryFrameKind() throws {
        let table = try Self.roleTable()
        let bodies = Self.everyBody()
        #expect(bodies.count >= 58, "found \(bodies.count) bodies")
        let names = Set(bodies.map(\.name))
        #expect(names.count == bodies.count, "one message per body")
        let missing = names.subtracting(table.named).sorted()
        #expect(missing.isEmpty, "bodies section 1's table does not name: \(missing)")
        let frames = Set(Self.dataFrameKinds.map(\.name))
        #expect(frames == Self.frameNames, "frame kinds that carry data: \(frames)")
        let unknown = table.named.subtracting(names).subtracting(frames).sorted()
        #expect(unknown.isEmpty, "names in section 1's table that are neither a body nor a frame kind: \(unknown)")
        #expect(table.whileAuthenticating == ["PairStart", "Pair", "Authenticate"])
        #expect(!table.sends[.phone]!.contains("GetStatus"))
    }

    /// Section 1: "A client may send exactly what its role's "sends" column lists ...;
    /// everything else ... is refused with `ERROR_CODE_NOT_FOR_ROLE`"; "A phone may not send `GetStatus`".
    /// Every body of the oneof and every data frame kind, from every role, over the Unix socket.
    @Test func roleTableIsCompleteAndEveryRoleSendsExactlyItsColumn() throws {
        let table = try Self.roleTable()
        let daemon = try TestDaemon.launch(limits: ["maxErrorsPerSecond": 1000])
        defer { _ = try? daemon.terminate() }
        let bodies = Self.everyBody()
        for role in [HURole.phone, .hmi, .cluster, .accessory] {
            let peer = RecordingPeer(try daemon.connectUnix())
            defer { peer.close() }
            _ = try peer.client.handshake(role: role)
            let sends = table.sends[role]!
            for (name, body) in bodies where name != "Goodbye" {
                let code = try peer.request(body).code
                if name == "Hello" {
                    #expect(code == .alreadyHandshaken, "\(role): a second Hello: got \(code)")
                } else if sends.contains(name) {
                    #expect(code != .notForRole, "\(role) may send \(name)")
                } else {
                    #expect(code == .notForRole, "\(role) may not send \(name): got \(code)")
                }
            }
            for (name, kind) in Self.dataFrameKinds {
                // Refused either way here (no session, stream or scene on channel 7, a bad VIDEO header):
                // by its role, or for what it carries.
                try peer.client.sendFrame(kind, channel: 7, payload: [UInt8](repeating: 0, count: 24))
                let code = try peer.waitFor { envelope -> HUErrorCode? in
                    if envelope.requestID == 0, case .result(let result) = envelope.body { return result.code }
                    return nil
                }
                if sends.contains(name) {
                    #expect(code != .notForRole, "\(role) may send \(name) frames")
                } else {
                    #expect(code == .notForRole, "\(role) may not send \(name) frames: got \(code)")
                }
            }
            #expect(try peer.client.pingRoundTrip(), "\(role): none of it is fatal")
        }
        #expect(!table.sends[.phone]!.contains("GetStatus"))
    }

    // MARK: - B5, B6, B7: limits

    /// Section 10: "`max_apps` ... the apps the phone announced so far plus those in the request (all its `AnnounceApps` together)".
    @Test func maxAppsCountsEveryAppThePhoneAnnounced() throws {
        let daemon = try TestDaemon.launch(limits: ["maxApps": 3])
        defer { _ = try? daemon.terminate() }
        let phone = RecordingPeer(try daemon.connectUnix())
        _ = try phone.client.handshake(role: .phone)
        let announce = { (ids: [String]) in HUEnvelope.OneOf_Body.announceApps(HUAnnounceApps.with { $0.apps = ids.map { Self.app($0, Self.audio) } }) }
        #expect(try phone.request(announce(["a", "b"])).code == .ok)
        let refused = try phone.request(announce(["c", "d"]))
        #expect(refused.code == .limitExceeded && refused.limit == "announce.apps" && refused.limitValue == 3)
        #expect(try phone.request(announce(["c"])).code == .ok)
    }

    /// Section 10: "Every W limit is announced non-zero: a configured 0 is the default".
    @Test func welcomeLimitsAreNeverZero() throws {
        let daemon = try TestDaemon.launch(limits: ["maxRequestsPerSecond": 0, "announceTimeoutMs": 0, "maxStringBytes": 0])
        defer { _ = try? daemon.terminate() }
        let limits = try daemon.connectUnix().handshake(role: .phone).limits
        let values = [limits.maxPayloadBytes, limits.heartbeatIntervalMs, limits.heartbeatTimeoutMs, limits.completionTimeoutMs,
                      limits.maxErrorsPerSecond, limits.maxRequestsPerSecond, limits.maxStringBytes, limits.maxImageBytes,
                      limits.maxMessageElements, limits.announceTimeoutMs, limits.resumeGraceMs]
        #expect(values.allSatisfy { $0 > 0 }, "\(limits)")
        #expect(limits.maxRequestsPerSecond == 1000 && limits.announceTimeoutMs == 10000 && limits.maxStringBytes == 1024)
    }

    /// Section 5 step 4: "`auth` over `max_image_bytes` (262144 bytes ...): `Goodbye{HELLO_TOO_LARGE}`".
    @Test func helloAuthOverMaxImageBytesIsHelloTooLarge() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        for (size, welcome) in [(262_144, true), (262_145, false)] {
            let client = try daemon.connectUnix()
            defer { client.close() }
            var hello = HUHello()
            (hello.minVersion, hello.maxVersion, hello.role, hello.auth) = (1, 1, .phone, Data(count: size))
            try client.send(.hello(hello), requestID: 1)
            let envelope = try client.readEnvelope()
            if welcome {
                guard case .welcome = envelope.body else { Issue.record("auth of \(size) bytes: \(envelope)"); continue }
            } else {
                guard case .goodbye(let bye) = envelope.body else { Issue.record("auth of \(size) bytes: \(envelope)"); continue }
                #expect(bye.code == .helloTooLarge && bye.reason.contains("auth"), "\(bye)")
            }
        }
    }

    // MARK: - B8, B10: status and authentication

    /// Section 16.9: "a phone still AUTHENTICATING is in no count and no list ... while a session waits to be
    /// resumed, `Status` says `phones: 0`, `apps` and `scenes` as before the loss, and `phone_link: PHONE_LINK_RECONNECTING`".
    @Test func statusCountsNoAuthenticatingPhoneAndKeepsAppsWhileReconnecting() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        let hmi = RecordingPeer(try daemon.connectUnix())
        _ = try hmi.client.handshake(role: .hmi)
        let tcp = try RawSocketClient.tcp(port: try #require(daemon.tcpPort))
        defer { tcp.close() }
        #expect(try tcp.handshake(role: .phone).authRequired)
        var status = try hmi.request(.getStatus(HUGetStatus())).status
        #expect(status.phones == 0 && status.peers == 1 && status.peer.count == 1 && status.authenticatedPhones == 0, "\(status)")
        let phone = RecordingPeer(try daemon.connectUnix())
        _ = try phone.client.handshake(role: .phone)
        #expect(try phone.request(.announceApps(HUAnnounceApps.with { $0.apps = [Self.app("com.example.a", Self.audio)] })).code == .ok)
        #expect(try hmi.request(Self.launch("com.example.a")).code == .ok)
        status = try hmi.request(.getStatus(HUGetStatus())).status
        #expect(status.phones == 1 && status.apps == 1 && status.scenes == 1)
        phone.close()  // no Goodbye: the session waits to be resumed (section 21)
        var reconnecting = false
        for _ in 0..<50 where !reconnecting {
            status = try hmi.request(.getStatus(HUGetStatus())).status
            reconnecting = status.phoneLink == .reconnecting
            if !reconnecting { usleep(20_000) }
        }
        #expect(reconnecting && status.phones == 0 && status.apps == 1 && status.scenes == 1, "\(status)")
    }

    /// Section 20.1: "`Goodbye{AUTH_REQUIRED}`, whose reason names what was sent: ... `got a DATA frame on channel 3`".
    @Test func authRequiredNamesADataFrameAndItsChannel() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        let tcp = try RawSocketClient.tcp(port: try #require(daemon.tcpPort))
        defer { tcp.close() }
        #expect(try tcp.handshake(role: .phone).authRequired)
        try tcp.sendFrame(.data, channel: 3, payload: [1, 2, 3])
        let bye = try tcp.readGoodbye()
        #expect(bye.code == .authRequired && bye.reason.contains("DATA frame on channel 3"), "\(bye)")
    }

    // MARK: - B9: the field path

    /// Section 10.3: "an element of a repeated field carries its 0-based index in brackets after its field number".
    @Test func messageTooLargePathIndexesRepeatedElements() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let phone = RecordingPeer(try daemon.connectUnix())
        _ = try phone.client.handshake(role: .phone)
        var apps = ["a", "b", "c"].map { Self.app("com.example.\($0)", Self.audio) }
        apps[2].displayName = String(repeating: "x", count: 1025)
        let result = try phone.request(.announceApps(HUAnnounceApps.with { $0.apps = apps }))
        #expect(result.code == .messageTooLarge && result.limit == "max_string_bytes")
        // Envelope.announce_apps (10) . AnnounceApps.apps (2), element 2 . AppInfo.display_name (2)
        #expect(result.message.contains("10.2[2].2"), "\(result.message)")
    }

    // MARK: - N2, N23: NavigationRequest's order of checks

    /// Section 16.13: "The app is not a navigation app: `NOT_ALLOWED_FOR_CATEGORY` (so an audio app that was never
    /// launched gets 100, not 106)"; "The main scene must be connected, not on screen".
    @Test func navigationRequestChecksCategoryBeforeSceneAndNeedsTheSceneConnectedNotShown() throws {
        let rig = try NavRig.start(extraApps: [Self.app("com.example.music", Self.audio), Self.app("com.example.maps2")])
        defer { rig.stop() }
        #expect(try rig.phone.request(Self.nav("com.example.music", .hideTripPreviews(HUHideTripPreviews()))).code == .notAllowedForCategory)
        #expect(try rig.phone.request(Self.nav("com.example.maps2", .hideTripPreviews(HUHideTripPreviews()))).code == .notConnected)
        #expect(try rig.phone.request(.navigationRequest(HUNavigationRequest.with { $0.appID = NavWire.appID })).code == .invalidArgument)
        #expect(try rig.hmi.request(.navigationInput(HUNavigationInput.with { $0.appID = NavWire.appID })).code == .invalidArgument)
        // On the home screen, the app's main scene is still connected: it may show previews.
        try rig.ok(.hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }), on: rig.hmi)
        try rig.ok(Self.previews(["home"]), on: rig.phone)
    }

    // MARK: - N3: alerts

    /// Section 19.2: "the app's own `finish` or `cancel` leaves its alert shown ... another app starting guidance
    /// cancels the first app's guidance by the car, so the first app's alert is dismissed (`SYSTEM`)".
    @Test func anAlertOutlivesItsAppsFinishAndIsDismissedWhenAnotherAppTakesGuidance() throws {
        var rig = try NavRig.start(extraApps: [Self.app("com.example.maps2")])
        defer { rig.stop() }
        let alert = HUNavigationAlert.with { $0.id = "closure"; $0.titleVariants = ["Road closed"] }
        try rig.ok(Self.start(), on: rig.phone)
        try rig.ok(NavWire.nav(.showAlert(alert)), on: rig.phone)
        try rig.ok(NavWire.nav(.finish(HUFinishNavigation())), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.alert.alert.id == "closure")
        try rig.ok(Self.start(), on: rig.phone)
        // Another app takes guidance: the first app's guidance is cancelled by the car, its alert dismissed.
        try rig.ok(Self.launch("com.example.maps2"), on: rig.hmi)
        let scene = try rig.phone.waitFor { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body, connected.appID == "com.example.maps2" { return connected.sceneID }
            return nil
        }
        try rig.ok(.templateRequest(HUTemplateRequest.with { $0.appID = "com.example.maps2"; $0.sceneID = scene; $0.setRoot = NavWire.mapRoot() }), on: rig.phone)
        try rig.ok(Self.nav("com.example.maps2", .start(HUStartNavigation.with { $0.trip = NavWire.trip("work") })), on: rig.phone)
        let dismissed = try rig.phone.waitFor { envelope -> HUAlertDismissed? in
            if case .navigationEvent(let event) = envelope.body, case .alertDismissed(let dismissed) = event.kind { return dismissed }
            return nil
        }
        #expect(dismissed.alertID == "closure" && dismissed.reason == .system)
    }

    // MARK: - N4, N5: estimates and versions

    /// Section 19.2: "the distance **rounded down** like the minutes ... (1049 m shows as 1000 m, 1050 m as 1000 m ...)".
    @Test func distancesAreRoundedDownLikeTheMinutes() throws {
        var rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.start(), on: rig.phone)
        var first = NavWire.maneuver("m1", "Turn left")
        first.estimates = NavWire.estimates(1000, 90)
        try rig.ok(NavWire.maneuvers([first]), on: rig.phone)
        rig.settle()
        let update = { (meters: Double) in NavWire.nav(.updateEstimates(HUEstimatesUpdate.with { $0.maneuverID = "m1"; $0.estimates = NavWire.estimates(meters, 90) })) }
        // 1060 m shows as 1000 m (rounded to the nearest it would be 1100 m): not significant.
        try rig.ok(update(1060), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.maneuvers.maneuvers.first?.estimates.distanceRemainingM == 1000)
        try rig.ok(update(1100), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.maneuvers.maneuvers.first?.estimates.distanceRemainingM == 1100)
        // Below 1000 m: 10 m steps, down: 995 m shows as 990 m, so 999 m after it changes nothing.
        try rig.ok(update(995), on: rig.phone)
        try rig.ok(update(999), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.maneuvers.maneuvers.first?.estimates.distanceRemainingM == 995)
    }

    /// Section 19.5: "One request that changes several sections is one version".
    @Test func oneRequestChangingSeveralSectionsIsOneVersion() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.previews(["home"]), on: rig.phone)
        rig.cluster.drain(for: 0.2)
        let before = Self.metadataUpdates(rig.cluster).last?.version ?? 0
        try rig.ok(Self.start(), on: rig.phone)  // guidance starts and the previews go
        rig.cluster.drain(for: 0.2)
        let updates = Self.metadataUpdates(rig.cluster)
        #expect(updates.count == 1 && updates[0].version == before + 1, "\(updates.map(\.version)) after \(before)")
        #expect(updates.first.map { $0.state.hasGuidance && $0.state.hasPreviews } == true)
    }

    // MARK: - N8, N9

    /// Section 16.15: "A second `SubscribeMetadata` on a subscribed connection is `Result{OK}` too and changes nothing: no second `full`".
    @Test func aSecondSubscribeIsOKAndSendsNoNewFull() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        rig.cluster.drain(for: 0.2)
        _ = Self.metadataUpdates(rig.cluster)
        #expect(try rig.cluster.request(.subscribeMetadata(HUSubscribeMetadata())).code == .ok)
        rig.cluster.drain(for: 0.3)
        #expect(Self.metadataUpdates(rig.cluster).isEmpty)
    }

    /// Section 19.8: "a navigation app whose main scene connects while the style is not `NORMAL` gets it right after its `SceneConnected`".
    @Test func aMainSceneConnectingWhileThePromptStyleIsNotNormalIsTold() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let hmi = RecordingPeer(try daemon.connectUnix())
        _ = try hmi.client.handshake(role: .hmi)
        let phone = RecordingPeer(try daemon.connectUnix())
        _ = try phone.client.handshake(role: .phone)
        #expect(try phone.request(.announceApps(HUAnnounceApps.with { $0.apps = [Self.app(NavWire.appID)] })).code == .ok)
        #expect(try hmi.request(Self.vehicle { $0.callActive = true }).code == .ok)
        #expect(try hmi.request(Self.launch(NavWire.appID)).code == .ok)
        var order: [String] = []
        while order.count < 2 {
            let envelope = try phone.client.readEnvelope()
            switch envelope.body {
            case .sceneConnected: order.append("SceneConnected")
            case .navigationEvent(let event): order.append("prompt_style \(event.promptStyle)")
            default: break
            }
        }
        #expect(order == ["SceneConnected", "prompt_style short"])
    }

    // MARK: - N10, N11, N12, N14

    /// Section 16.13: "`previewed_trip_id` is `selected_trip_id` (empty: the first trip) ... before any driver input";
    /// 19.4: "`trip_previewed` and `trip_started` carry the resolved id".
    @Test func previewsStartAtTheSelectedTripAndEventsCarryTheResolvedRoute() throws {
        var rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.previews(["home", "work"], selected: "work"), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.previews.previewedTripID == "work" && rig.clusterModel.state.previews.previewedRouteChoiceID == "fast")
        try rig.ok(NavWire.input(.previewTrip(HUTripChosen.with { $0.tripID = "home" })), on: rig.hmi)
        let event = try rig.phone.navigationEvent()
        #expect(event.tripPreviewed.tripID == "home" && event.tripPreviewed.routeChoiceID == "fast")
    }

    /// Section 19.4: "the app does not guide (its session is neither ACTIVE nor PAUSED)": a paused session guides.
    @Test func aPausedSessionGuidesSoDashboardButtonsAreRefused() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.launch(NavWire.appID, .dashboard), on: rig.hmi)
        try rig.ok(NavWire.nav(.setDashboardButtons(HUDashboardButtons.with {
            $0.buttons = [HUDashboardButton.with { $0.id = "home"; $0.titleVariants = ["Home"]; $0.image = NavWire.asset("home", 80, 80) }]
        })), on: rig.phone)
        try rig.ok(Self.start(), on: rig.phone)
        try rig.ok(NavWire.nav(.pause(HUPauseNavigation.with { $0.reason = .loading })), on: rig.phone)
        #expect(try rig.hmi.request(NavWire.input(.dashboardButton("home"))).code == .invalidPosition)
        try rig.ok(NavWire.nav(.cancel(HUCancelNavigation())), on: rig.phone)
        try rig.ok(NavWire.input(.dashboardButton("home")), on: rig.hmi)
    }

    /// Section 19.4: "With `app_id` empty and the home screen on the main screen, the answer is `NOT_CONNECTED`".
    @Test func navigationInputForTheMainScreenWhileHomeIsShownIsNotConnected() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(.hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }), on: rig.hmi)
        #expect(try rig.hmi.request(.navigationInput(HUNavigationInput.with { $0.exitPanning = HUDismissPanning() })).code == .notConnected)
    }

    // MARK: - N13, N16, N17

    /// TEMPLATES.md section 9: "an empty one is `INVALID_ARGUMENT`" and "A minimum ... refused for none carries `limit` and `limit_value` 1".
    @Test func navigationIdsAreNonEmptyAndMinimumsCarryLimitValueOne() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.start(), on: rig.phone)
        #expect(try rig.phone.request(NavWire.maneuvers([NavWire.maneuver("", "Turn left")])).code == .invalidArgument)
        let none = try rig.phone.request(NavWire.nav(.showTripPreviews(HUTripPreviews())))
        #expect(none.code == .invalidArgument && none.limit == "navigation.trips" && none.limitValue == 1)
        var trip = NavWire.trip("bare")
        trip.routeChoices = []
        let noRoute = try rig.phone.request(NavWire.nav(.showTripPreviews(HUTripPreviews.with { $0.trips = [trip] })))
        #expect(noRoute.code == .invalidArgument && noRoute.limit == "navigation.routeChoices" && noRoute.limitValue == 1)
    }

    /// Section 19.5: "the `trip` and `route_choice_id` while ACTIVE or PAUSED (ENDED clears them ...)".
    @Test func endedGuidanceClearsTripAndRoute() throws {
        var rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.start("home", route: "scenic"), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.guidance.trip.id == "home" && rig.clusterModel.state.guidance.routeChoiceID == "scenic")
        try rig.ok(NavWire.nav(.finish(HUFinishNavigation())), on: rig.phone)
        rig.settle()
        let guidance = rig.clusterModel.state.guidance
        #expect(guidance.state == .ended && !guidance.hasTrip && guidance.routeChoiceID.isEmpty && guidance.endReason == .finished)
    }

    // MARK: - N15, N19: the edges

    /// Section 16.13: "`dismiss_panning` ... left, `panning{ended}` (the app is told even when it asked itself)";
    /// "already panning: OK, no event"; "not panning: `INVALID_POSITION`".
    @Test func panningEdges() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        #expect(try rig.phone.request(NavWire.nav(.dismissPanning(HUDismissPanning()))).code == .invalidPosition)
        try rig.ok(NavWire.nav(.showPanning(HUShowPanning())), on: rig.phone)
        #expect(try rig.phone.navigationEvent().panning.began)
        try rig.ok(NavWire.nav(.showPanning(HUShowPanning())), on: rig.phone)
        try rig.ok(NavWire.nav(.dismissPanning(HUDismissPanning())), on: rig.phone)
        let event = try rig.phone.navigationEvent()
        #expect(event.panning.ended, "a second show_panning sends no second began: \(event)")
    }

    /// Section 16.13: "`end_prompt` ... none playing: OK"; "`active: false` without one: OK"; previews "also while the app
    /// guides: guidance is not touched"; a prompt "also with no main audio: then nothing is ducked or paused".
    @Test func audioAndPreviewEdgesAreOK() throws {
        var rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(NavWire.nav(.endPrompt(HUEndPrompt())), on: rig.phone)
        try rig.ok(NavWire.nav(.setVoiceSession(HUVoiceSession.with { $0.active = false })), on: rig.phone)
        try rig.ok(NavWire.nav(.startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })), on: rig.phone)
        try rig.ok(Self.start(), on: rig.phone)
        try rig.ok(Self.previews(["work"]), on: rig.phone)
        rig.settle()
        let state = rig.clusterModel.state
        #expect(state.audio.promptAppID == NavWire.appID && !state.audio.mainDucked && !state.audio.mainPaused && state.audio.mainOwner == .none)
        #expect(state.guidance.state == .active && state.previews.appID == NavWire.appID)
    }

    /// Section 16.13: "The session lasts until `active: false` or the app's scenes end: dismissing the
    /// voice-control template does not end it".
    @Test func dismissingTheVoiceControlTemplateDoesNotEndTheVoiceSession() throws {
        var rig = try NavRig.start()
        defer { rig.stop() }
        let status = try rig.hmi.request(.getStatus(HUGetStatus())).status
        let main = try #require(status.app.first { $0.appID == NavWire.appID }?.scene.first { $0.kind == .main }).sceneID
        let voice = HUTemplate.with {
            $0.id = "voice"
            $0.voiceControl = HUVoiceControlTemplate.with {
                $0.states = [HUVoiceControlState.with { $0.id = "listening"; $0.titleVariants = ["Listening"] }]
                $0.activeStateID = "listening"
            }
        }
        let template = { (op: HUTemplateRequest.OneOf_Op) in
            HUEnvelope.OneOf_Body.templateRequest(HUTemplateRequest.with { $0.appID = NavWire.appID; $0.sceneID = main; $0.op = op })
        }
        try rig.ok(template(.present(voice)), on: rig.phone)
        try rig.ok(NavWire.nav(.setVoiceSession(HUVoiceSession.with { $0.active = true })), on: rig.phone)
        try rig.ok(template(.dismiss(HUPopTemplate())), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.audio.voiceAppID == NavWire.appID && rig.clusterModel.state.audio.promptStyle == .none)
        try rig.ok(NavWire.nav(.setVoiceSession(HUVoiceSession.with { $0.active = false })), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.audio.voiceAppID.isEmpty && rig.clusterModel.state.audio.promptStyle == .normal)
    }

    // MARK: - N20, N21, N22

    /// Section 19.3: "`scene_id` ... main for ... `navigation_cancelled` and `prompt_style`".
    @Test func navigationCancelledAndPromptStyleCarryTheMainSceneID() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        let status = try rig.hmi.request(.getStatus(HUGetStatus())).status
        let main = try #require(status.app.first { $0.appID == NavWire.appID }?.scene.first { $0.kind == .main }).sceneID
        try rig.ok(Self.launch(NavWire.appID, .instrumentCluster), on: rig.hmi)
        try rig.ok(Self.start(), on: rig.phone)
        try rig.ok(Self.vehicle { $0.nativeNavigationActive = true }, on: rig.hmi)
        let cancelled = try rig.phone.navigationEvent()
        #expect(cancelled.sceneID == main && cancelled.navigationCancelled.reason == .nativeNavigation)
        try rig.ok(Self.vehicle { $0.nativeNavigationActive = true; $0.callActive = true }, on: rig.hmi)
        let style = try rig.phone.navigationEvent()
        #expect(style.sceneID == main && style.promptStyle == .short)
    }

    /// Section 16.16: "When two navigation apps have cluster scenes connected, the input goes to ... the one launched there last".
    @Test func clusterInputGoesToTheAppShownOnTheCluster() throws {
        let rig = try NavRig.start(extraApps: [Self.app("com.example.maps2")])
        defer { rig.stop() }
        try rig.ok(Self.launch(NavWire.appID, .instrumentCluster), on: rig.hmi)
        try rig.ok(Self.launch("com.example.maps2", .instrumentCluster), on: rig.hmi)
        try rig.ok(.clusterInput(HUClusterInput.with { $0.zoomIn = true }), on: rig.cluster)
        let event = try rig.phone.navigationEvent()
        #expect(event.appID == "com.example.maps2" && event.clusterInput.zoomIn)
    }

    /// Section 19.5: "its content stays while paused (`playback_rate` 0) ... An app closed (`AppClosed`, `CloseApp`)
    /// keeps its content here ... a gone phone's is cleared".
    @Test func nowPlayingShowsPausedContentAClosedAppsContentAndNothingOfAGonePhone() throws {
        var rig = try NavRig.start(extraApps: [Self.app("com.example.music", Self.audio)])
        defer { rig.stop() }
        try rig.ok(Self.launch("com.example.music"), on: rig.hmi)
        let scene = try rig.phone.waitFor { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body, connected.appID == "com.example.music" { return connected.sceneID }
            return nil
        }
        let content = HUNowPlayingTemplate.with { $0.title = "Song"; $0.playbackRate = 0 }
        try rig.ok(.templateRequest(HUTemplateRequest.with { $0.appID = "com.example.music"; $0.sceneID = scene; $0.updateNowPlaying = content }), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.nowPlaying.appID == "com.example.music" && rig.clusterModel.state.nowPlaying.title == "Song"
                && rig.clusterModel.state.nowPlaying.playbackRate == 0)
        try rig.ok(.appClosed(HUAppClosed.with { $0.appID = "com.example.music" }), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.nowPlaying.appID == "com.example.music")
        try rig.phone.client.send(.goodbye(HUGoodbye()), requestID: 0)
        rig.settle(0.3)
        #expect(rig.clusterModel.state.nowPlaying.appID.isEmpty)
    }

    // MARK: - N5, N10, N19, N22: more of section 19's edges

    /// Section 19.5: "pipelined requests rebuilt once (the end of a batch, section 4) are one version too".
    @Test func pipelinedRequestsRebuiltOnceAreOneVersion() throws {
        var rig = try NavRig.start()
        defer { rig.stop() }
        rig.settle(0.3)
        let before = rig.clusterModel.version
        // Four requests, four sections (previews, alert, cluster: panning, audio), in one write: one read batch.
        let bodies: [HUEnvelope.OneOf_Body] = [
            Self.previews(["home"]),
            NavWire.nav(.showAlert(HUNavigationAlert.with { $0.id = "closure"; $0.titleVariants = ["Road closed"] })),
            NavWire.nav(.showPanning(HUShowPanning())),
            NavWire.nav(.startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })),
        ]
        var bytes: [UInt8] = []
        for (index, body) in bodies.enumerated() {
            bytes += RawSocketClient.envelopeBytes(HUEnvelope.with { $0.requestID = 900 + UInt32(index); $0.body = body })
        }
        try rig.phone.client.send(bytes)
        for index in bodies.indices {
            let code = try rig.phone.waitFor { envelope -> HUErrorCode? in
                if envelope.requestID == 900 + UInt32(index), case .result(let result) = envelope.body { return result.code }
                return nil
            }
            #expect(code == .ok, "request \(index)")
        }
        rig.cluster.drain(for: 0.3)
        let updates = Self.metadataUpdates(rig.cluster)
        #expect(updates.map(\.version) == [before + 1], "one update, one version after \(before): \(updates.map(\.version))")
        if let update = updates.first {
            let state = update.state
            #expect(state.hasPreviews && state.hasAlert && state.hasCluster && state.hasAudio, "every changed section in the one update: \(state)")
            #expect(state.previews.appID == NavWire.appID && state.alert.alert.id == "closure" && state.cluster.panning
                    && state.audio.promptAppID == NavWire.appID)
        }
    }

    /// Section 16.14: "The events (`trip_previewed`, `trip_started`...) carry the **resolved** route
    /// choice id: an empty one in the input is the trip's first route, and the event names it."
    @Test func tripStartedCarriesTheResolvedRouteChoiceID() throws {
        let rig = try NavRig.start()
        defer { rig.stop() }
        try rig.ok(Self.previews(["home", "work"]), on: rig.phone)
        try rig.ok(NavWire.input(.startTrip(HUTripChosen.with { $0.tripID = "work" })), on: rig.hmi)
        let started = try rig.phone.navigationEvent()
        #expect(started.tripStarted.tripID == "work" && started.tripStarted.routeChoiceID == "fast", "\(started)")
        try rig.ok(NavWire.input(.startTrip(HUTripChosen.with { $0.tripID = "home"; $0.routeChoiceID = "scenic" })), on: rig.hmi)
        #expect(try rig.phone.navigationEvent().tripStarted.routeChoiceID == "scenic")
    }

    /// Section 16.13: "`dismiss_panning` | not panning: `INVALID_POSITION` (whatever the root; a map is not required to leave)".
    @Test func dismissPanningWithoutAMapRootIsInvalidPosition() throws {
        let rig = try NavRig.start(extraApps: [Self.app("com.example.maps2")])
        defer { rig.stop() }
        try rig.ok(Self.launch("com.example.maps2"), on: rig.hmi)
        _ = try rig.phone.waitFor { envelope -> Bool? in
            if case .sceneConnected(let connected) = envelope.body, connected.appID == "com.example.maps2" { return true }
            return nil
        }
        // No root at all: leaving panning is INVALID_POSITION, not NO_MAP_TEMPLATE (entering it is).
        #expect(try rig.phone.request(Self.nav("com.example.maps2", .dismissPanning(HUDismissPanning()))).code == .invalidPosition)
        #expect(try rig.phone.request(Self.nav("com.example.maps2", .showPanning(HUShowPanning()))).code == .noMapTemplate)
    }

    /// Section 19.5, `now_playing`: "Content comes from `update_now_playing` and from a now-playing
    /// template the app pushes or updates (not an empty one)".
    @Test func nowPlayingContentComesFromAPushedNowPlayingTemplateButNotAnEmptyOne() throws {
        var rig = try NavRig.start(extraApps: [Self.app("com.example.music", Self.audio)])
        defer { rig.stop() }
        try rig.ok(Self.launch("com.example.music"), on: rig.hmi)
        let scene = try rig.phone.waitFor { envelope -> UInt32? in
            if case .sceneConnected(let connected) = envelope.body, connected.appID == "com.example.music" { return connected.sceneID }
            return nil
        }
        let template = { (op: HUTemplateRequest.OneOf_Op) in
            HUEnvelope.OneOf_Body.templateRequest(HUTemplateRequest.with { $0.appID = "com.example.music"; $0.sceneID = scene; $0.op = op })
        }
        try rig.ok(template(.setRoot(TemplateSessionErrorTests.list("root"))), on: rig.phone)
        // An empty now-playing template (show_now_playing before any content) sets no content.
        try rig.ok(template(.showNowPlaying(HUShowNowPlaying())), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.nowPlaying.appID.isEmpty, "\(rig.clusterModel.state.nowPlaying)")
        try rig.ok(template(.popToRoot(HUPopTemplate())), on: rig.phone)
        // A pushed now-playing template with content: that content is the section's.
        let pushed = HUTemplate.with { $0.id = "now-playing"; $0.nowPlaying = HUNowPlayingTemplate.with { $0.title = "Pushed"; $0.playbackRate = 1 } }
        try rig.ok(template(.push(pushed)), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.nowPlaying.appID == "com.example.music" && rig.clusterModel.state.nowPlaying.title == "Pushed")
        // Updating that template updates the section.
        let updated = HUTemplate.with { $0.id = "now-playing"; $0.nowPlaying = HUNowPlayingTemplate.with { $0.title = "Updated"; $0.playbackRate = 1 } }
        try rig.ok(template(.update(updated)), on: rig.phone)
        rig.settle()
        #expect(rig.clusterModel.state.nowPlaying.title == "Updated")
    }
}
