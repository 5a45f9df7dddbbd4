#if canImport(Glibc)
import Glibc
#endif
import HeadUnitCore
import HeadUnitWire
import NIOCore
import SwiftProtobuf

/// Structure-aware fuzzing, one target per message family: the input is a
/// sequence of chunks (a 2-byte big-endian length, then that many bytes),
/// each decoded as one message of the family (the chunk's first byte picks
/// which message when the family has several). The messages go, wrapped in
/// Envelopes and frames, into a whole car session that is already past the
/// handshake with apps announced, a scene launched and an accessory serving
/// (`SessionFuzz`), so mutations reach deep rules instead of dying in the
/// decoder. The family is chosen with `HEADUNIT_FUZZ_FAMILY` (read once);
/// `stream` (or unset) is the byte-stream target in FuzzEntry.swift.
enum FuzzFamily: String, CaseIterable {
    case stream, handshake, phone, templates, hmi, navigation, accessory
    /// The phone's assistant and notifications (PROTOCOL.md section 27).
    case assistant
    /// Maximal valid requests and the composed bounds' invariants (BoundsFuzz.swift).
    case bounds

    static let selected: FuzzFamily = {
        guard let name = getenv("HEADUNIT_FUZZ_FAMILY").map({ String(cString: $0) }), !name.isEmpty else { return .stream }
        guard let family = FuzzFamily(rawValue: name) else {
            FuzzChecks.fail("HEADUNIT_FUZZ_FAMILY=\(name): not one of \(FuzzFamily.allCases.map(\.rawValue))")
        }
        return family
    }()

    static let appID = "com.example.fuzz"
    static let navigationAppID = "com.example.fuzz-nav"
    static let automakerAppID = "com.example.fuzz-car"
    static let chatAppID = "com.example.fuzz-chat"
    static let accessoryProtocol = "com.example.fuzz.protocol"

    /// Splits the input into chunks and decodes each as a message of the family.
    func bodies(_ input: UnsafeBufferPointer<UInt8>) -> [HUEnvelope.OneOf_Body] {
        var bodies: [HUEnvelope.OneOf_Body] = []
        var index = 0
        while index + 2 <= input.count, bodies.count < 64 {
            let length = Int(input[index]) << 8 | Int(input[index + 1])
            index += 2
            let end = min(input.count, index + length)
            let chunk = Array(input[index..<end])
            index = end
            if let body = decode(chunk) { bodies.append(body) }
        }
        return bodies
    }

    private func decode(_ chunk: [UInt8]) -> HUEnvelope.OneOf_Body? {
        let selector = chunk.first ?? 0
        let bytes = chunk.dropFirst()
        func message<M: Message>(_: M.Type) -> M? { try? M(serializedBytes: Array(bytes)) }
        switch self {
        case .stream:
            return nil
        case .bounds:
            return BoundsFuzz.body(selector: selector, parameters: Array(bytes))
        case .handshake:
            return message(HUHello.self).map { .hello($0) }
        case .phone:
            switch selector % 4 {
            case 0: return message(HUAnnounceApps.self).map { .announceApps($0) }
            case 1: return message(HUCompleteEvent.self).map { .completeEvent($0) }
            case 2: return message(HUAppClosed.self).map { .appClosed($0) }
            default: return message(HUResumeSession.self).map { .resumeSession($0) }
            }
        case .templates:
            guard var request = message(HUTemplateRequest.self) else { return nil }
            // Aim at the launched app and its scene unless the input names others.
            if request.appID.isEmpty { request.appID = Self.appID }
            if request.sceneID == 0 { request.sceneID = 1 }
            return .templateRequest(request)
        case .hmi:
            switch selector % 4 {
            case 0: return message(HUHmiInput.self).map { .hmiInput($0) }
            case 1: return message(HULaunchApp.self).map { .launchApp($0) }
            case 2: return message(HUSetVehicleState.self).map { .setVehicleState($0) }
            default: return message(HUCloseApp.self).map { .closeApp($0) }
            }
        case .navigation:
            switch selector % 3 {
            case 0:
                guard var request = message(HUNavigationRequest.self) else { return nil }
                if request.appID.isEmpty { request.appID = Self.navigationAppID }
                return .navigationRequest(request)
            case 1: return message(HUNavigationInput.self).map { .navigationInput($0) }
            default: return message(HUClusterInput.self).map { .clusterInput($0) }
            }
        case .assistant:
            switch selector % 5 {
            case 0: return message(HUAssistantInput.self).map { .assistantInput($0) }
            case 1:
                guard var update = message(HUAssistantUpdate.self) else { return nil }
                if update.sessionID == 0 { update.sessionID = 1 }  // the first session the car opens
                return .assistantUpdate(update)
            case 2:
                guard var post = message(HUPostNotification.self) else { return nil }
                if post.appID.isEmpty { post.appID = Self.chatAppID }
                return .postNotification(post)
            case 3: return message(HUNotificationInput.self).map { .notificationInput($0) }
            default: return message(HUCarButtonPressed.self).map { .carButton($0) }
            }
        case .accessory:
            switch selector % 5 {
            case 0: return message(HUServeProtocols.self).map { .serveProtocols($0) }
            case 1: return message(HUOpenSession.self).map { .openSession($0) }
            case 2: return message(HUAnswerSession.self).map { .answerSession($0) }
            case 3: return message(HUCloseSession.self).map { .closeSession($0) }
            default: return message(HUSessionCredit.self).map { .sessionCredit($0) }
            }
        }
    }

    /// The session every family starts from: a phone with an assistant and
    /// four apps (audio, navigation, automaker, communication), the audio app launched on the main screen, the
    /// navigation app's dashboard, an accessory serving the automaker protocol.
    static func preamble() -> [HUEnvelope] {
        func app(_ id: String, _ entitlements: [String], protocols: [String] = []) -> HUAppInfo {
            HUAppInfo.with {
                $0.appID = id
                $0.displayName = id
                $0.entitlements = entitlements
                $0.accessoryProtocols = protocols
            }
        }
        var announce = HUAnnounceApps()
        announce.deviceName = "fuzz phone"
        announce.apps = [
            app(appID, ["com.apple.developer.carplay-audio"]),
            app(navigationAppID, ["com.apple.developer.carplay-maps"]),
            app(automakerAppID, ["com.apple.developer.carplay-protocols"], protocols: [accessoryProtocol]),
            app(chatAppID, ["com.apple.developer.carplay-communication"]),
        ]
        // The phone has an assistant: the voice button, its session and the notifications reach deep (section 27).
        announce.assistant = true
        var serve = HUServeProtocols()
        serve.protocols = [accessoryProtocol]
        return [
            HUEnvelope.with { $0.requestID = 1; $0.serveProtocols = serve },
            HUEnvelope.with { $0.requestID = 2; $0.announceApps = announce },
            HUEnvelope.with { $0.requestID = 3; $0.launchApp = HULaunchApp.with { $0.appID = appID } },
            HUEnvelope.with { $0.requestID = 4; $0.launchApp = HULaunchApp.with { $0.appID = navigationAppID; $0.kind = .dashboard } },
        ]
    }

    /// The session after the preamble, made once; each input starts from a copy
    /// (the same state as replaying the preamble, which with the handshakes was
    /// more than half of each run: starting from a copy made the families 2.5x faster).
    static let prepared: SessionFuzz = {
        var session = SessionFuzz.joined
        for frame in frames(preamble()) { session.step(frame) }
        return session
    }()

    /// Runs one input of this family.
    func run(_ input: UnsafeBufferPointer<UInt8>) {
        let bodies = bodies(input)
        if self == .handshake {
            for body in bodies { Self.handshake(body) }
            return
        }
        var envelopes: [HUEnvelope] = []
        for (index, body) in bodies.enumerated() {
            var envelope = HUEnvelope()
            // Requests alternate ids and notifications (0), as clients send both.
            envelope.requestID = index % 3 == 2 ? 0 : UInt32(100 + index)
            envelope.body = body
            envelopes.append(envelope)
        }
        var session = self == .bounds ? BoundsFuzz.prepared : Self.prepared
        session.play(Self.frames(envelopes))
    }

    static func frames(_ envelopes: [HUEnvelope]) -> [Frame] {
        var frames: [Frame] = []
        for envelope in envelopes {
            var buffer = EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator())
            guard let frame = try? FrameParser.parse(&buffer, maxPayload: 1 << 20) else { continue }
            frames.append(frame)
        }
        return frames
    }

    /// A Hello into a fresh connection: it joins, or is refused with a Goodbye; never anything else.
    static func handshake(_ body: HUEnvelope.OneOf_Body) {
        for transport in [Transport.unix, .tcp] {
            var connection = ConnectionStateMachine(connectionID: 1, transport: transport, configuration: ConnectionConfiguration(), now: 0)
            var envelope = HUEnvelope()
            envelope.requestID = 1
            envelope.body = body
            var buffer = EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator())
            guard let frame = try? FrameParser.parse(&buffer, maxPayload: 1 << 20) else { continue }
            switch connection.receive(frame, now: 0) {
            case .join(let info, let welcome):
                FuzzChecks.check(RolePolicy.isAllowed(info.role, over: transport), "only an allowed role joins")
                FuzzChecks.check(welcome.requestID == 1, "Welcome answers the Hello's request id")
            case .close:
                break
            default:
                FuzzChecks.fail("a Hello either joins or is refused")
            }
        }
    }
}

// MARK: - Seeds

extension FuzzFamily {
    /// One input: chunks of (selector byte, message bytes) in the family's format.
    static func input(_ messages: [(UInt8, any Message)]) -> [UInt8] {
        var bytes: [UInt8] = []
        for (selector, message) in messages {
            let body: [UInt8] = (try? message.serializedBytes()) ?? []
            let length = body.count + 1
            bytes += [UInt8(length >> 8), UInt8(length & 0xFF), selector] + body
        }
        return bytes
    }

    /// Chunks of (selector, raw parameter bytes): the bounds family's format.
    static func raw(_ chunks: [(UInt8, [UInt8])]) -> [UInt8] {
        chunks.flatMap { selector, parameters in [UInt8((parameters.count + 1) >> 8), UInt8((parameters.count + 1) & 0xFF), selector] + parameters }
    }

    static func list(_ id: String, items: Int) -> HUTemplate {
        HUTemplate.with { template in
            template.id = id
            template.list = HUListTemplate.with {
                $0.title = "Fuzz"
                $0.sections = [HUListSection.with { section in
                    section.id = "s"
                    section.items = (0..<items).map { index in
                        HUListItem.with { $0.id = "i\(index)"; $0.general = HUGeneralItem.with { $0.text = "item \(index)" } }
                    }
                }]
            }
        }
    }

    /// The committed corpus (`HeadUnitFuzz --write-family-seeds DIR`): a few
    /// typical inputs per family, so the fuzzer starts from valid sessions.
    static var seeds: [FuzzFamily: [[UInt8]]] {
        let template = { (op: HUTemplateRequest.OneOf_Op) in HUTemplateRequest.with { $0.appID = appID; $0.sceneID = 1; $0.op = op } }
        let navigation = { (op: HUNavigationRequest.OneOf_Op) in HUNavigationRequest.with { $0.appID = navigationAppID; $0.op = op } }
        let trip = HUTrip.with {
            $0.id = "trip"
            $0.routeChoices = [HURouteChoice.with { $0.id = "fast"; $0.summaryVariants = ["Fastest"] }]
        }
        let maneuver = HUManeuver.with { $0.id = "m1"; $0.instructionVariants = ["Turn right"] }
        return [
            .handshake: [
                input([(0, HUHello.with { $0.minVersion = 1; $0.maxVersion = 1; $0.role = .phone; $0.name = "phone" })]),
                input([(0, HUHello.with { $0.minVersion = 1; $0.maxVersion = 3; $0.role = .hmi; $0.name = "hmi" })]),
                input([(0, HUHello.with { $0.minVersion = 2; $0.maxVersion = 9; $0.role = .cluster })]),
            ],
            .phone: [
                input([(0, HUAnnounceApps.with { $0.apps = [HUAppInfo.with { $0.appID = "more"; $0.entitlements = ["com.apple.developer.carplay-communication"] }] })]),
                input([(1, HUCompleteEvent.with { $0.appID = appID; $0.eventID = 1 }), (2, HUAppClosed.with { $0.appID = appID })]),
                input([(3, HUResumeSession.with { $0.resumptionToken = "fuzz-token-1" })]),
            ],
            .templates: [
                input([(0, template(.setRoot(list("root", items: 3)))), (0, template(.push(list("next", items: 1)))), (0, template(.pop(HUPopTemplate())))]),
                input([(0, template(.setRoot(list("root", items: 12)))), (0, template(.update(list("root", items: 20))))]),
                input([(0, template(.setRoot(list("root", items: 2)))), (0, template(.showNowPlaying(HUShowNowPlaying())))]),
            ],
            .hmi: [
                input([(0, HUHmiInput.with { $0.templateID = "root"; $0.selectItem = HUItemSelected.with { $0.itemID = "i0" } })]),
                input([(2, HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.driving = true } }), (0, HUHmiInput.with { $0.goBack = HUGoBack() })]),
                input([(3, HUCloseApp.with { $0.appID = appID }), (1, HULaunchApp.with { $0.appID = appID })]),
            ],
            .navigation: [
                input([(0, navigation(.start(HUStartNavigation.with { $0.trip = trip }))), (0, navigation(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [maneuver] })))]),
                input([(1, HUNavigationInput.with { $0.appID = navigationAppID; $0.dashboardButton = "b" }), (2, HUClusterInput.with { $0.zoomIn = true })]),
                input([(0, navigation(.startPrompt(HUAudioPrompt.with { $0.durationMs = 2000 }))), (0, navigation(.finish(HUFinishNavigation())))]),
            ],
            .bounds: [
                // The largest list, then the largest alert over it; pop; push more.
                raw([(0, [255, 255]), (2, [255, 255, 255]), (1, [200, 255, 1]), (3, []), (1, [255, 255, 2])]),
                // Icons near the image limit until the home screen is full.
                raw([(6, [128, 40, 3, 0, 255]), (6, [128, 40, 3, 10, 255]), (6, [128, 40, 3, 20, 255]), (13, [0])]),
                // Guidance, maneuvers, previews and alerts with many long variants.
                raw([(7, [0, 255, 0, 0, 0, 255, 255, 255]), (8, [0, 255, 255, 255, 255]), (10, [0, 255, 255, 255]), (9, [0, 255, 255, 0, 0, 255, 255, 255]), (12, [1])]),
            ],
            .accessory: [
                input([(1, HUOpenSession.with { $0.appID = automakerAppID; $0.protocol = accessoryProtocol }), (2, HUAnswerSession.with { $0.channel = 1; $0.accept = true })]),
                input([(1, HUOpenSession.with { $0.appID = automakerAppID; $0.protocol = accessoryProtocol }), (4, HUSessionCredit.with { $0.channel = 1; $0.bytes = 4096 }), (3, HUCloseSession.with { $0.channel = 1 })]),
                input([(0, HUServeProtocols.with { $0.protocols = ["com.example.other"] })]),
            ],
        ]
    }
}

/// Called from CFuzzMain's plain-build main for `--write-family-seeds DIR`.
@_cdecl("headunit_write_family_seeds")
public func writeFamilySeeds(_ directory: UnsafePointer<CChar>) -> CInt {
    let root = String(cString: directory)
    for (family, inputs) in FuzzFamily.seeds {
        let folder = root + "/" + family.rawValue
        mkdir(folder, 0o755)
        for (index, bytes) in inputs.enumerated() {
            guard let file = fopen(folder + "/seed-\(index + 1)", "wb") else { return 1 }
            _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
    }
    // The round-trip families' seeds (CodecFuzz.swift).
    return CodecFuzz.writeSeeds(into: root)
}
