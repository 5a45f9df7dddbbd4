#if canImport(Glibc)
import Glibc
#endif
import HeadUnitCore
import HeadUnitWire
import NIOCore

/// The input's frames as one car session: a phone (TCP), an HMI (Unix) and an
/// accessory (Unix) already past the handshake, each behind its own
/// ConnectionStateMachine, all talking to one Car. HMI-only messages go to the
/// HMI's connection, accessory-only ones to the accessory's, the two-sided
/// session messages and DATA frames to the phone or the accessory by parity,
/// everything else to the phone's, so the fuzzer reaches the car's rules
/// (scenes, template stacks, inputs, completions, accessory sessions and
/// their credit) and the role table.
/// Checked: nothing crashes; every request delivered to the car is answered
/// by exactly one Result with its request id, to the peer that asked; the car
/// only ever addresses peers that are connected.
struct SessionFuzz {
    static let phoneID: PeerID = 1
    static let hmiID: PeerID = 2
    static let accessoryID: PeerID = 3

    var car = Car(configuration: CarConfiguration(vehicle: .standard, entitlements: .acceptAll))
    var connectionConfiguration = ConnectionConfiguration()
    /// The bounds mode (`FuzzFamily.bounds`, PROTOCOL.md section 10.4): no
    /// frame the car makes may be over this many bytes, and after every step
    /// the HMI's model (built from what it was sent) must equal the car's.
    var frameLimit: Int?
    var hmiScreens: [HUScreen: HURenderedScreen] = [:]
    var hmiHome: HUHomeScreen?
    var connections: [PeerID: ConnectionStateMachine] = [:]
    var timers: [CarTimer: UInt64] = [:]
    var now: UInt64 = 1_000
    /// The phone's current connection: a phone that leaves comes back as a new
    /// connection (a new id), so resumption (PROTOCOL.md section 21) is fuzzed too.
    var phone = phoneID

    /// The three peers past their handshakes, made once: `Car` and the
    /// connection state machines are values, so each input starts from a copy
    /// instead of paying for three handshakes again.
    static let joined: SessionFuzz = joined(SessionFuzz())

    static func joined(_ fresh: SessionFuzz) -> SessionFuzz {
        var session = fresh
        session.join(phoneID, role: .phone, transport: .tcp)
        session.join(hmiID, role: .hmi, transport: .unix)
        session.join(accessoryID, role: .accessory, transport: .unix)
        return session
    }

    static func run(_ frames: [Frame]) {
        var session = joined
        session.play(frames)
    }

    /// Every frame, a quarter second apart; then every pending completion times out and the car stops.
    mutating func play(_ frames: [Frame]) {
        for frame in frames { step(frame) }
        fireTimers(upTo: .max)
        apply(car.shutdown(reason: "fuzz input done"))
    }

    mutating func step(_ frame: Frame) {
        now += 250
        fireTimers(upTo: now)
        receive(frame)
        if frameLimit != nil { checkBounds() }
    }

    /// The bounds mode's invariants after a step: the metadata stream's full
    /// update fits a frame (so every partial one does), and what the HMI was
    /// sent adds up to what the car holds for it: nothing was dropped.
    mutating func checkBounds() {
        guard let limit = frameLimit else { return }
        _ = car.takeMetadata()
        let metadata = HUEnvelope.with { $0.metadataUpdate = car.clusterFeed.snapshot }
        FuzzChecks.check(metadata.wireSize <= limit, "the metadata snapshot fits a frame (\(metadata.wireSize) > \(limit))")
        // What the phone holds, whichever request added it (section 10.4).
        let held = car.phoneTemplateBytes, budget = car.configuration.composed.maxPhoneTemplateBytes
        FuzzChecks.check(held <= budget, "the phone's templates within max_phone_template_bytes (\(held) > \(budget))")
        if let home = hmiHome {
            FuzzChecks.check(car.catchUp(.home)?.envelope.homeScreen == home, "the HMI's home screen is the car's")
        }
        for (screen, model) in hmiScreens {
            guard case .screenUpdate(let update)? = car.catchUp(.screen(screen))?.envelope.body, case .full(var full) = update.change else {
                FuzzChecks.fail("the HMI holds a \(screen) screen the car does not")
            }
            var shown = model
            // The spinner travels on its own (spinner_started/stopped); the car re-renders it lazily.
            full.clearPending()
            shown.clearPending()
            FuzzChecks.check(full == shown, "the HMI's \(screen) screen is the car's")
        }
    }

    /// What the HMI peer is sent, applied as an HMI would (section 12).
    mutating func hmiReceives(_ envelope: HUEnvelope) {
        switch envelope.body {
        case .homeScreen(let home):
            hmiHome = home
        case .screenUpdate(let update):
            if case .full(let full) = update.change {
                hmiScreens[update.screen] = full
            } else if var screen = hmiScreens[update.screen] {
                ScreenModel.apply(update, to: &screen)
                hmiScreens[update.screen] = screen
            }
        default:
            break
        }
    }

    /// Every frame the car makes, as the server would write it: within the limit.
    func checkFrame(_ envelope: HUEnvelope) {
        guard let limit = frameLimit else { return }
        let size = envelope.wireSize
        FuzzChecks.check(size <= limit, "no frame over the maximum (\(size) > \(limit)): \(envelope.body.map { "\($0)".prefix(80) } ?? "")")
    }

    /// `HEADUNIT_FUZZ_TRACE=1 HeadUnitFuzz crash-file` prints what each peer sent and what the car did.
    static let tracing = getenv("HEADUNIT_FUZZ_TRACE") != nil

    func trace(_ line: @autoclosure () -> String) {
        if Self.tracing { print("[\(now)] \(line())") }
    }

    mutating func join(_ id: PeerID, role: HURole, transport: Transport) {
        var connection = ConnectionStateMachine(
            connectionID: id, transport: transport, configuration: connectionConfiguration, now: now)
        var hello = HUEnvelope()
        hello.requestID = 1
        hello.hello = .with {
            $0.minVersion = 1
            $0.maxVersion = 1
            $0.role = role
            $0.name = "fuzz"
        }
        var bytes = EnvelopeCodec.frame(hello, allocator: ByteBufferAllocator())
        guard let frame = try? FrameParser.parse(&bytes, maxPayload: 1 << 20),
            case .join(let info, _) = connection.receive(frame, now: now)
        else {
            FuzzChecks.fail("a valid Hello must join")
        }
        connections[id] = connection
        var joined = info
        if role == .phone { joined.resumptionToken = "fuzz-token-\(id)" }
        apply(car.peerJoined(id, info: joined))
    }

    mutating func rejoinPhone(after left: PeerID) {
        guard left == phone, phone < Self.phoneID + 1000 else { return }
        phone += 1000
        join(phone, role: .phone, transport: .tcp)
    }

    mutating func receive(_ frame: Frame) {
        let target = target(of: frame)
        guard var connection = connections[target] else { return }
        let action = connection.receive(frame, now: now)
        trace("peer \(target) sent \(frame.header.kind) (\(frame.payload.readableBytes) bytes): \(action)")
        connections[target] = connection
        switch action {
        case .deliver(let envelope, let unknownEnum):
            // The limits' walk finds what the car's own walk would.
            if case .found(let found) = unknownEnum {
                FuzzChecks.check(found == KnownEnums.firstUnknown(in: envelope), "the limits' walk found unknown enum \(String(describing: found))")
            }
            let effects = car.receive(envelope, from: target, nowMilliseconds: now, unknownEnum: unknownEnum)
            if envelope.requestID != 0 {
                let answers = effects.filter {
                    switch $0 {
                    case .send(let peer, let sent):
                        if peer == target, sent.requestID == envelope.requestID, case .result = sent.body { return true }
                        return false
                    default:
                        return false
                    }
                }
                // A SessionCredit is one-way: answered only when refused.
                if case .sessionCredit = envelope.body {
                    FuzzChecks.check(answers.count <= 1, "credit \(envelope.requestID) answered at most once, got \(answers.count)")
                } else if case .audioCredit = envelope.body {
                    FuzzChecks.check(answers.count <= 1, "credit \(envelope.requestID) answered at most once, got \(answers.count)")
                } else {
                    FuzzChecks.check(answers.count == 1, "request \(envelope.requestID) answered once, got \(answers.count)")
                }
            }
            apply(effects)
        case .deliverData(let channel, let payload):
            apply(car.receiveData(channel: channel, payload, from: target))
        case .deliverVideo(let channel, let header, let payload):
            apply(car.receiveVideo(channel: channel, header, payload, from: target, now: now))
        case .deliverMedia(let channel, let payload):
            apply(car.receiveMedia(channel: channel, payload, from: target))
        case .close(let code, _):
            connections[target] = nil
            apply(car.peerLeft(target, departure: .cutOff(code)))
            rejoinPhone(after: target)
        case .peerLeaving:
            connections[target] = nil
            apply(car.peerLeft(target, departure: .saidGoodbye))
            rejoinPhone(after: target)
        case .reply(let envelope):
            guard case .result(let result) = envelope.body, result.code != .ok else {
                FuzzChecks.fail("a connection-level reply is an error Result")
            }
        case .none, .pong, .ping, .join:
            break
        case .challenge, .authenticate, .pair, .pairStart:
            // ConnectionConfiguration() leaves TCP authentication off, and no peer here is a TCP phone.
            FuzzChecks.fail("authentication actions without authentication configured")
        }
    }

    /// HMI-only messages go to the HMI's connection; the rest (phone
    /// messages, control frames, garbage) to the phone's.
    func target(of frame: Frame) -> PeerID {
        if frame.header.kind == .data { return frame.payload.readableBytes % 2 == 0 ? Self.accessoryID : phone }
        guard frame.header.kind == .message, let envelope = try? EnvelopeCodec.decode(frame.payload) else { return phone }
        switch envelope.body {
        case .launchApp, .hmiInput, .setVehicleState, .closeApp, .getStatus, .watchVideo, .requestKeyframe, .watchAudio, .callInput,
            .carButton, .assistantInput, .notificationInput:
            return Self.hmiID
        case .serveProtocols, .answerSession:
            return Self.accessoryID
        case .closeSession, .sessionCredit:
            return envelope.requestID % 2 == 0 ? Self.accessoryID : phone
        default:
            return phone
        }
    }

    mutating func fireTimers(upTo time: UInt64) {
        while let (timer, due) = timers.min(by: { $0.value < $1.value }), due <= time {
            timers[timer] = nil
            now = max(now, due)
            trace("timer \(timer) fired")
            apply(car.timerFired(timer, nowMilliseconds: now))
        }
    }

    /// An envelope the car encoded itself.
    mutating func apply(_ effects: [CarEffect]) {
        for effect in effects {
            trace("  car: \(effect)")
            switch effect {
            case .send(let peer, let envelope):
                FuzzChecks.check(connections[peer] != nil, "the car sends only to connected peers (peer \(peer))")
                checkFrame(envelope)
                if peer == Self.hmiID { hmiReceives(envelope) }
            case .toHMIs(_, let envelope, let images):
                FuzzChecks.check(!car.hmiPeerIDs.isEmpty, "HMI state goes out only when an HMI is connected")
                // Section 12.6: every image the HMIs are shown can be sent to them.
                for ref in images { FuzzChecks.check(car.hmiImage(ref) != nil, "an image shown to the HMIs is held (\(ref))") }
                checkFrame(envelope)
                hmiReceives(envelope)
            case .hmiJoined(let peer, _):
                FuzzChecks.check(connections[peer] != nil, "a joining HMI is connected (peer \(peer))")
            case .close(let peer, let code, _):
                FuzzChecks.check(connections[peer] != nil, "the car closes only connected peers (peer \(peer))")
                connections[peer] = nil
                // As the server does: the closed connection leaves the car.
                apply(car.peerLeft(peer, departure: .cutOff(code)))
                rejoinPhone(after: peer)
            case .startTimer(let timer, let milliseconds):
                timers[timer] = now + milliseconds
            case .cancelTimer(let timer):
                timers[timer] = nil
            case .sendVideo(let peer, let channel, _):
                FuzzChecks.check(connections[peer] != nil && channel != 0, "video goes to a connected viewer on a channel (peer \(peer))")
            case .sendData(let peer, let channel, _):
                FuzzChecks.check(connections[peer] != nil && channel != 0, "session bytes go to a connected peer on a channel (peer \(peer))")
            case .sendMedia(let peer, let channel, _):
                FuzzChecks.check(connections[peer] != nil && channel != 0, "microphone samples go to a connected phone on a channel (peer \(peer))")
            case .audio:
                break  // the mixer's business (it runs off the loop in the server)
            case .refuseData, .refuseRequest:
                let peer: PeerID
                if case .refuseData(let from, _, _) = effect { peer = from } else if case .refuseRequest(let from, _, _) = effect { peer = from } else { continue }
                guard var connection = connections[peer] else { FuzzChecks.fail("a refused DATA frame or grant came from a connected peer") }
                let action: ConnectionAction
                switch effect {
                case .refuseData(_, let code, let message): action = connection.refuse(code, message, now: now)
                case .refuseRequest(_, let result, let requestID): action = connection.refuse(result, requestID: requestID, now: now)
                default: continue
                }
                connections[peer] = connection
                if case .close(let code, _) = action {
                    connections[peer] = nil
                    apply(car.peerLeft(peer, departure: .cutOff(code)))
                    rejoinPhone(after: peer)
                }
            }
        }
    }
}
