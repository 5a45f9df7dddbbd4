import HeadUnitWire
import NIOCore

/// What the connection handler must do after feeding an input to the
/// connection state machine. Exactly one action per input.
public enum ConnectionAction: Sendable, Equatable {
    /// Nothing to do (a PONG, a frame after closing began...).
    case none
    /// An envelope the peer's role may send: hand it to the Car.
    /// With what the limits' walk found of unknown enum values, for `Car.receive`.
    case deliver(HUEnvelope, unknownEnum: KnownEnums.Walked)
    /// External Accessory session bytes on a channel: hand them to the Car.
    case deliverData(channel: UInt32, ByteBuffer)
    /// A phone's VIDEO frame (section 25), header checked: hand it to the Car's video routes.
    case deliverVideo(channel: UInt32, VideoFrameHeader, ByteBuffer)
    /// An audio stream's MEDIA frame (section 24): hand it to the Car.
    case deliverMedia(channel: UInt32, ByteBuffer)
    /// Handshake done: send `welcome`, then tell the Car the peer joined.
    case join(PeerInfo, welcome: HUEnvelope)
    /// A non-fatal error: send this Result envelope; the connection stays open.
    case reply(HUEnvelope)
    /// Answer a PING with a PONG carrying this payload.
    case pong(ByteBuffer)
    /// The heartbeat: send a PING with this payload.
    case ping(ByteBuffer)
    /// A fatal error: send Goodbye(code, reason), then close.
    case close(HUErrorCode, String)
    /// The peer said Goodbye: close without answering.
    case peerLeaving(HUGoodbye)
    /// A phone on TCP: send `welcome` (it carries the challenge) but do not
    /// join the Car until it authenticates (PROTOCOL.md section 20).
    case challenge(welcome: HUEnvelope)
    /// Verify `authenticate.signature` over `message` with the device's key,
    /// then call `authenticated` or `authenticationFailed`.
    case authenticate(HUAuthenticate, requestID: UInt32, message: [UInt8])
    /// Pair a new key (the registry answers; the peer stays unauthenticated).
    case pair(HUPair, requestID: UInt32)
    /// Start a pairing attempt (SPAKE2, section 20.2); the server answers.
    case pairStart(HUPairStart, requestID: UInt32)
}

/// One connection's protocol rules, as a value: handshake, frame checks,
/// role table, error budget, handshake and heartbeat timeouts. No channel,
/// no clock: the handler passes monotonic milliseconds in and performs the
/// returned action.
public struct ConnectionStateMachine: Sendable {
    public enum State: Sendable, Equatable {
        case awaitingHello(since: UInt64)
        case established(PeerInfo, version: UInt32)
        /// Welcome sent to a TCP phone that must still authenticate (section 20).
        case authenticating(PeerInfo, version: UInt32, since: UInt64)
        case closing
    }

    public private(set) var state: State
    public let connectionID: UInt64
    public let transport: Transport
    private let configuration: ConnectionConfiguration
    private var limits: ConnectionLimits { configuration.limits }
    private var errors: ErrorBudget
    private var requests: RequestRate
    /// When the peer last sent any frame.
    private var lastHeard: UInt64
    /// When the next heartbeat PING is due (established only).
    private var nextPing: UInt64 = 0
    /// PINGs the daemon sent that no PONG answered yet: a PONG beyond them is
    /// unsolicited and counts as a protocol error (section 6).
    private var pingsUnanswered: UInt32 = 0
    /// A TCP phone that must authenticate must be done by then (nil: no such deadline).
    private let authDeadline: UInt64?
    /// What is left of the frame budget between Welcome and authentication.
    private var unauthenticatedFramesLeft: UInt32
    /// Set by the server before the first frame: the Unix peer's SO_PEERCRED
    /// credentials, and the random bytes a TCP phone must sign.
    public var peerCredentials: PeerCredentials?
    public var authChallenge: [UInt8] = []

    public init(connectionID: UInt64, transport: Transport, configuration: ConnectionConfiguration, now: UInt64) {
        self.connectionID = connectionID
        self.transport = transport
        self.configuration = configuration
        self.state = .awaitingHello(since: now)
        self.errors = ErrorBudget(maxPerSecond: configuration.limits.maxErrorsPerSecond)
        self.requests = RequestRate(perSecond: configuration.limits.maxRequestsPerSecond, now: now)
        self.lastHeard = now
        self.unauthenticatedFramesLeft = configuration.limits.maxUnauthenticatedFrames
        // Only TCP can carry a phone that must authenticate (car roles are Unix only).
        self.authDeadline = transport == .tcp && configuration.security.authenticatePhonesOverTCP
            ? now + configuration.limits.authTimeoutMilliseconds : nil
    }

    /// A connection a previous daemon process handed over (systemd's fd store,
    /// PROTOCOL.md section 22): established as it was, with its heartbeat
    /// counted from now (the restart's pause is not the peer's silence).
    public mutating func restoreEstablished(_ info: PeerInfo, version: UInt32, now: UInt64) {
        state = .established(info, version: version)
        lastHeard = now
        nextPing = now + limits.heartbeatIntervalMilliseconds
        // The previous process's last PING may still be answered here.
        pingsUnanswered = 1
    }

    /// The negotiated version of an established connection.
    public var negotiatedVersion: UInt32? {
        if case .established(_, let version) = state { return version }
        return nil
    }

    public var peer: PeerInfo? {
        if case .established(let info, _) = state { return info }
        return nil
    }

    // MARK: - Inputs

    /// A frame arrived that waits its turn (backpressure, PROTOCOL.md section
    /// 10.2): not served yet, but the peer is alive.
    public mutating func heard(now: UInt64) {
        lastHeard = max(lastHeard, now)
    }

    /// A whole frame arrived.
    public mutating func receive(_ frame: Frame, now: UInt64) -> ConnectionAction {
        // Any frame, even a bad one, proves the peer is alive.
        lastHeard = now
        switch state {
        case .closing:
            return .none
        case .awaitingHello, .authenticating:
            // Before the peer is known, an oversized header is fatal (section 2,
            // vector `handshake-length-over-max`): nothing is refused alone yet.
            if frame.isOversized {
                return close(.frameTooLarge, "frame payload of \(frame.header.length) bytes exceeds the maximum of \(limits.maxPayloadBytes)")
            }
            if case .authenticating = state { return receiveWhileAuthenticating(frame, now: now) }
            return receiveBeforeHandshake(frame, now: now)
        case .established(let info, _):
            return receiveEstablished(frame, peer: info, now: now)
        }
    }

    /// The frame decoder gave up on the byte stream (bad magic, frame too large).
    public mutating func framingFailed(_ error: FramingError) -> ConnectionAction {
        if case .closing = state { return .none }
        return close(error.code, error.reason)
    }

    /// The server is stopping. Normally the Car says Goodbye(SHUTTING_DOWN)
    /// to established peers; this covers connections that never joined it.
    public mutating func shutdown(reason: String) -> ConnectionAction {
        if case .closing = state { return .none }
        return close(.shuttingDown, reason)
    }

    /// The server turns the connection away before the handshake (a connection cap).
    public mutating func refuseConnection(_ code: HUErrorCode, _ reason: String) -> ConnectionAction {
        if case .closing = state { return .none }
        return close(code, reason)
    }

    /// The connection is being closed for a reason decided elsewhere (the Car, backpressure).
    public mutating func closed() {
        state = .closing
    }

    /// Timers: call at (or after) `nextDeadline`. Returns a PING to send, a
    /// timeout, or nothing.
    public mutating func tick(now: UInt64) -> ConnectionAction {
        switch state {
        case .closing:
            return .none
        case .awaitingHello(let since):
            if let authDeadline, now >= authDeadline, authDeadline < since + limits.handshakeTimeoutMilliseconds {
                return close(.handshakeTimeout, "no Hello within auth_timeout_ms (\(limits.authTimeoutMilliseconds) ms) of connecting")
            }
            guard now >= since + limits.handshakeTimeoutMilliseconds else { return .none }
            return close(.handshakeTimeout, "no Hello within \(limits.handshakeTimeoutMilliseconds) ms of connecting")
        case .authenticating(_, _, let since):
            if let authDeadline, now >= authDeadline, authDeadline < since + limits.handshakeTimeoutMilliseconds {
                return close(.authRequired, "not authenticated within auth_timeout_ms (\(limits.authTimeoutMilliseconds) ms) of connecting")
            }
            guard now >= since + limits.handshakeTimeoutMilliseconds else { return .none }
            return close(.authRequired, "not authenticated within \(limits.handshakeTimeoutMilliseconds) ms of Welcome")
        case .established:
            if limits.heartbeatTimeoutMilliseconds > 0, now >= lastHeard + limits.heartbeatTimeoutMilliseconds {
                return close(.heartbeatTimeout, "nothing received for \(now - lastHeard) ms (limit \(limits.heartbeatTimeoutMilliseconds) ms)")
            }
            if limits.heartbeatIntervalMilliseconds > 0, now >= nextPing {
                nextPing = now + limits.heartbeatIntervalMilliseconds
                pingsUnanswered = min(pingsUnanswered + 1, 16)
                var payload = ByteBuffer()
                payload.writeInteger(now)
                return .ping(payload)
            }
            return .none
        }
    }

    /// When `tick` next has something to do, or nil when never.
    public var nextDeadline: UInt64? {
        switch state {
        case .closing:
            return nil
        case .awaitingHello(let since), .authenticating(_, _, let since):
            return min(since + limits.handshakeTimeoutMilliseconds, authDeadline ?? .max)
        case .established:
            var deadline: UInt64? = nil
            if limits.heartbeatTimeoutMilliseconds > 0 { deadline = lastHeard + limits.heartbeatTimeoutMilliseconds }
            if limits.heartbeatIntervalMilliseconds > 0 { deadline = min(deadline ?? .max, nextPing) }
            return deadline
        }
    }

    // MARK: - Before the handshake

    private mutating func receiveBeforeHandshake(_ frame: Frame, now: UInt64) -> ConnectionAction {
        // Strict: until Hello, the only acceptable frame is a clean MESSAGE
        // frame carrying Hello. Anything else means the peer does not speak
        // this protocol (or not yet), so there is nothing to keep the line open for.
        guard frame.header.kind == .message, frame.header.flags == 0, frame.header.channel == 0 else {
            return close(.handshakeRequired, "the first frame must be a MESSAGE frame carrying Hello (got kind 0x\(String(frame.header.kindByte, radix: 16)))")
        }
        let envelope: HUEnvelope
        do {
            envelope = try EnvelopeCodec.decode(frame.payload)
        } catch {
            return close(.handshakeRequired, "the first frame must carry Hello; its payload is not a valid Envelope")
        }
        guard case .hello(let hello) = envelope.body else {
            let what = envelope.body.map(RolePolicy.name(of:)) ?? "an empty Envelope"
            return close(.handshakeRequired, "Hello required before anything else, got \(what)")
        }
        guard let version = ProtocolVersion.negotiate(clientMin: hello.minVersion, clientMax: hello.maxVersion) else {
            return close(
                .noCommonVersion,
                "this daemon speaks protocol versions \(ProtocolVersion.minimum)...\(ProtocolVersion.maximum), the client offered \(hello.minVersion)...\(hello.maxVersion)"
            )
        }
        guard RolePolicy.isAllowed(hello.role, over: transport) else {
            let reason: String
            switch hello.role {
            case .unspecified, .UNRECOGNIZED:
                reason = "role \(RolePolicy.name(of: hello.role)) is not one of phone, hmi, cluster, accessory"
            case .phone, .hmi, .cluster, .accessory:
                reason = "role \(RolePolicy.name(of: hello.role)) may only connect over the Unix socket, not \(transport.rawValue)"
            }
            return close(.roleNotAllowed, reason)
        }
        let nameBytes = hello.name.utf8.count
        guard nameBytes <= limits.message.maxStringBytes else {
            return close(.helloTooLarge, "Hello.name is \(nameBytes) bytes, over max_string_bytes (\(limits.message.maxStringBytes))")
        }
        // Section 10.3's bytes limit holds for Hello's one bytes field too, although it is unused.
        guard hello.auth.count <= limits.message.maxImageBytes else {
            return close(.helloTooLarge, "Hello.auth is \(hello.auth.count) bytes, over max_image_bytes (\(limits.message.maxImageBytes))")
        }
        // Credentials exist on the Unix socket only; a TCP phone authenticates instead.
        if transport == .unix, let refusal = configuration.security.access.refusal(role: hello.role, credentials: peerCredentials) {
            return close(.peerNotAllowed, refusal)
        }
        let info = PeerInfo(role: hello.role, name: hello.name, transport: transport)
        if configuration.security.requiresAuthentication(role: hello.role, transport: transport) {
            state = .authenticating(info, version: version, since: now)
            return .challenge(welcome: welcome(version: version, requestID: envelope.requestID, challenge: authChallenge))
        }
        state = .established(info, version: version)
        lastHeard = now
        nextPing = now + limits.heartbeatIntervalMilliseconds
        return .join(info, welcome: welcome(version: version, requestID: envelope.requestID, challenge: nil))
    }

    private func welcome(version: UInt32, requestID: UInt32, challenge: [UInt8]?) -> HUEnvelope {
        var welcome = HUWelcome()
        welcome.version = version
        welcome.daemonMinVersion = ProtocolVersion.minimum
        welcome.daemonMaxVersion = ProtocolVersion.maximum
        welcome.limits = limits.wire
        welcome.vehicle = configuration.vehicle
        welcome.daemonName = configuration.daemonName
        welcome.connectionID = connectionID
        if let challenge {
            welcome.authRequired = true
            welcome.authChallenge = .init(challenge)
        }
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = .welcome(welcome)
        return envelope
    }

    // MARK: - Authenticating (a phone on TCP, PROTOCOL.md section 20)

    /// Strict, like before Hello: only Pair, Authenticate, Goodbye and the
    /// heartbeat frames; anything else means the peer will not authenticate.
    private mutating func receiveWhileAuthenticating(_ frame: Frame, now: UInt64) -> ConnectionAction {
        // A handful of frames, whatever they are: a stranger cannot make the
        // daemon do more for it than an honest phone needs (section 10.2).
        guard unauthenticatedFramesLeft > 0 else {
            return close(
                .tooManyRequests,
                "more than max_unauthenticated_frames (\(limits.maxUnauthenticatedFrames)) frames before authenticating")
        }
        unauthenticatedFramesLeft -= 1
        guard frame.header.flags == 0, frame.header.channel == 0, let kind = frame.header.kind, kind != .data, kind != .video, kind != .media else {
            // The reason names what was sent (section 20.1), so the phone's developer sees the mistake.
            let what: String
            if let kind = frame.header.kind, kind == .data || kind == .video || kind == .media {
                what = "a \(Self.streamName(kind)) frame on channel \(frame.header.channel)"
            } else if frame.header.kind == nil {
                what = "a frame of unknown kind 0x\(String(frame.header.kindByte, radix: 16))"
            } else if frame.header.flags != 0 {
                what = "a frame with flags 0x\(String(frame.header.flags, radix: 16))"
            } else {
                what = "a frame on channel \(frame.header.channel)"
            }
            return close(.authRequired, "authenticate first: got \(what); only Pair, Authenticate, Goodbye, PING and PONG are accepted before authentication")
        }
        switch kind {
        case .ping:
            guard frame.payload.readableBytes <= FrameHeader.maxPingPayload else {
                return close(.authRequired, "authenticate first: PING payload over \(FrameHeader.maxPingPayload) bytes")
            }
            return .pong(frame.payload)
        case .pong:
            return .none
        case .data, .video, .media:
            return close(.authRequired, "authenticate first: \(Self.streamName(kind)) before authentication")
        case .message:
            break
        }
        guard let envelope = try? EnvelopeCodec.decode(frame.payload), let body = envelope.body else {
            return close(.authRequired, "authenticate first: the frame does not carry an Envelope with a known body")
        }
        switch body {
        case .authenticate(let authenticate):
            return .authenticate(
                authenticate, requestID: envelope.requestID,
                message: AuthenticationChallenge.signedMessage(challenge: authChallenge, connectionID: connectionID))
        case .pair(let pair):
            return .pair(pair, requestID: envelope.requestID)
        case .pairStart(let start):
            return .pairStart(start, requestID: envelope.requestID)
        case .goodbye(let goodbye):
            state = .closing
            return .peerLeaving(goodbye)
        default:
            return close(.authRequired, "a phone on TCP must send Authenticate (or Pair) after Welcome; got \(RolePolicy.name(of: body))")
        }
    }

    /// The signature checked out: the phone joins the Car with its device's
    /// entitlements; `Result{OK, pairing.device_id}` answers the Authenticate.
    public mutating func authenticated(_ device: AuthenticatedDevice, requestID: UInt32, now: UInt64) -> ConnectionAction {
        guard case .authenticating(var info, let version, _) = state else { return .none }
        info.device = device
        state = .established(info, version: version)
        lastHeard = now
        nextPing = now + limits.heartbeatIntervalMilliseconds
        var result = HUResult()
        result.pairing.deviceID = device.deviceID
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = .result(result)
        return .join(info, welcome: envelope)
    }

    /// Unknown device or bad signature: fatal.
    public mutating func authenticationFailed(_ reason: String) -> ConnectionAction {
        guard case .authenticating = state else { return .none }
        return close(.authFailed, reason)
    }

    // MARK: - Established

    private mutating func receiveEstablished(_ frame: Frame, peer: PeerInfo, now: UInt64) -> ConnectionAction {
        guard let kind = frame.header.kind else {
            return protocolError(.unknownFrameKind, "unknown frame kind 0x\(String(frame.header.kindByte, radix: 16)); frame skipped", requestID: 0, now: now)
        }
        guard frame.header.flags == 0 else {
            return protocolError(.reservedFlags, "header flags must be 0, got 0x\(String(frame.header.flags, radix: 16)); frame skipped", requestID: 0, now: now)
        }
        switch kind {
        case .message, .ping, .pong:
            guard frame.header.channel == 0 else {
                return protocolError(.reservedFlags, "channel must be 0 on a \(kind) frame, got \(frame.header.channel); frame skipped", requestID: 0, now: now)
            }
        case .data, .video, .media:
            break
        }

        // Requests are rate limited. A DATA frame takes a sixteenth of a token
        // (credit bounds its bytes, this how many of them); a credit grant of a
        // useful size takes none here (checked once decoded, in
        // `receiveMessage`: a grant needs bytes the other side sent, so credit
        // already bounds how many come, 18.5); a PONG is bounded by the PINGs
        // the daemon sent.
        let creditFrame = kind == .message && !frame.isOversized && Self.isSessionCredit(frame)
        switch kind {
        case .message where creditFrame:
            break
        case .message, .ping, .data, .video, .media:
            // VIDEO and MEDIA frames cost what a DATA frame does (sections 24.4, 25.4).
            let streamFrame = kind == .data || kind == .video || kind == .media
            let cost = streamFrame ? RequestRate.dataFrame : RequestRate.request
            guard requests.take(now: now, cost: cost) else {
                let what = streamFrame ? "\(Self.streamName(kind)) frame not taken (a sixteenth of a request each)" : "request not served"
                return protocolError(
                    .tooManyRequests, "over max_requests_per_second (\(requests.perSecond)); \(what)",
                    requestID: Self.requestID(of: frame), now: now, cutOffCode: .tooManyRequests)
            }
        case .pong:
            guard pingsUnanswered > 0 else {
                // Not answered (a PONG never is, section 3), but counted: a
                // stream of them is a flood like any other.
                return silentProtocolError("more PONGs than the daemon sent PINGs", now: now)
            }
            pingsUnanswered -= 1
        }
        if frame.isOversized { return refuseOversized(frame, kind: kind, peer: peer, now: now) }
        switch kind {
        case .ping:
            guard frame.payload.readableBytes <= FrameHeader.maxPingPayload else {
                return protocolError(.malformedPayload, "PING payload of \(frame.payload.readableBytes) bytes exceeds \(FrameHeader.maxPingPayload)", requestID: 0, now: now)
            }
            return .pong(frame.payload)
        case .pong:
            return .none
        case .data:
            // Session bytes go to the Car, which knows the sessions (and refuses
            // a channel without one through `refuse`). Roles that may never
            // send DATA get NOT_FOR_ROLE here.
            guard RolePolicy.maySendData(role: peer.role) else {
                return protocolError(.notForRole, "a \(RolePolicy.name(of: peer.role)) may not send DATA frames", requestID: 0, now: now)
            }
            return .deliverData(channel: frame.header.channel, frame.payload)
        case .video:
            // Section 25.4's order: role, then the video header; the channel is the Car's to judge.
            guard RolePolicy.maySendVideo(role: peer.role) else {
                return protocolError(.notForRole, "a \(RolePolicy.name(of: peer.role)) may not send VIDEO frames", requestID: 0, now: now)
            }
            switch VideoFrameHeader.parse(frame.payload) {
            case .success(let header):
                return .deliverVideo(channel: frame.header.channel, header, frame.payload)
            case .failure(let problem):
                return protocolError(.badVideoFrame, "VIDEO frame on channel \(frame.header.channel): \(problem.reason); frame dropped", requestID: 0, now: now)
            }
        case .media:
            // Audio streams are the phone's (section 24); the Car knows them.
            guard peer.role == .phone else {
                return protocolError(.notForRole, "a \(RolePolicy.name(of: peer.role)) may not send MEDIA frames", requestID: 0, now: now)
            }
            return .deliverMedia(channel: frame.header.channel, frame.payload)
        case .message:
            return receiveMessage(frame.payload, peer: peer, now: now, charged: !creditFrame)
        }
    }

    /// A frame over `max_payload_bytes` whose header is otherwise sound, its
    /// payload skipped as it arrives (`Frame.isOversized`; section 2, step 3):
    /// refused alone once its header passed the checks every frame meets
    /// (kind, flags, channel, rate), counted towards the error budget. What
    /// the refusal is depends on the kind (section 10): only DATA ends the
    /// connection, since a session's byte stream cannot skip bytes (18.4).
    private mutating func refuseOversized(_ frame: Frame, kind: FrameKind, peer: PeerInfo, now: UInt64) -> ConnectionAction {
        let length = frame.header.length, maximum = limits.maxPayloadBytes
        let over = "\(length) bytes, over max_payload_bytes (\(maximum)); skipped"
        switch kind {
        case .message:
            var answer = Self.result(.messageTooLarge, "MESSAGE frame of \(over)", requestID: Self.requestID(of: frame))
            answer.result.limit = "max_payload_bytes"
            answer.result.limitValue = maximum
            return protocolError(answer, now: now)
        case .ping:
            return protocolError(.malformedPayload, "PING payload of \(length) bytes exceeds \(FrameHeader.maxPingPayload); skipped", requestID: 0, now: now)
        case .pong:
            return silentProtocolError("a PONG of \(over)", now: now)
        case .video:
            // Section 25.4's order: role, then the frame itself.
            guard RolePolicy.maySendVideo(role: peer.role) else {
                return protocolError(.notForRole, "a \(RolePolicy.name(of: peer.role)) may not send VIDEO frames", requestID: 0, now: now)
            }
            var answer = Self.result(.badVideoFrame, "VIDEO frame on channel \(frame.header.channel) of \(over) (max_frame_bytes)", requestID: 0)
            answer.result.limit = "max_frame_bytes"
            answer.result.limitValue = maximum
            return protocolError(answer, now: now)
        case .media:
            guard peer.role == .phone else {
                return protocolError(.notForRole, "a \(RolePolicy.name(of: peer.role)) may not send MEDIA frames", requestID: 0, now: now)
            }
            var answer = Self.result(.badMediaFrame, "MEDIA frame on channel \(frame.header.channel) of \(over)", requestID: 0)
            answer.result.limit = "max_payload_bytes"
            answer.result.limitValue = maximum
            return protocolError(answer, now: now)
        case .data:
            return close(.frameTooLarge, "DATA frame on channel \(frame.header.channel) of \(length) bytes exceeds the maximum of \(maximum): a session's bytes cannot be skipped")
        }
    }

    private mutating func receiveMessage(_ payload: ByteBuffer, peer: PeerInfo, now: UInt64, charged: Bool = true) -> ConnectionAction {
        let envelope: HUEnvelope
        do {
            envelope = try EnvelopeCodec.decode(payload)
        } catch {
            return protocolError(.malformedPayload, "payload is not a valid Envelope", requestID: 0, now: now)
        }
        let checked = limits.message.checkAll(envelope)
        if let violation = checked.violation {
            var result = Self.result(.messageTooLarge, violation.message, requestID: envelope.requestID)
            result.result.limit = violation.limit
            result.result.limitValue = UInt32(clamping: violation.limitValue)
            return protocolError(result, now: now)
        }
        var freeGrant = false
        if case .sessionCredit(let credit) = envelope.body, credit.bytes >= Self.grantWithoutToken { freeGrant = true }
        if !charged, !freeGrant, !requests.take(now: now) {
            return protocolError(
                .tooManyRequests, "over max_requests_per_second (\(requests.perSecond)); request not served (a SessionCredit counts only under \(Self.grantWithoutToken) bytes)",
                requestID: envelope.requestID, now: now, cutOffCode: .tooManyRequests)
        }
        guard let body = envelope.body else {
            return protocolError(.unknownMessage, "Envelope has no body this daemon knows (empty, or from a newer protocol version)", requestID: envelope.requestID, now: now)
        }
        switch body {
        case .hello:
            return protocolError(.alreadyHandshaken, "Hello was already accepted on this connection", requestID: envelope.requestID, now: now)
        case .pair, .pairStart, .authenticate:
            return protocolError(
                .notForRole, "\(RolePolicy.name(of: body)) is only accepted from a phone on TCP between Welcome and authentication",
                requestID: envelope.requestID, now: now)
        case .goodbye(let goodbye):
            state = .closing
            return .peerLeaving(goodbye)
        case .welcome, .result, .announceApps, .templateRequest, .completeEvent, .appClosed, .resumeSession,
            .sceneConnected, .sceneDisconnected, .appEvent, .sessionConfiguration,
            .launchApp, .hmiInput, .setVehicleState, .getStatus, .closeApp, .homeScreen, .screenUpdate, .getImage, .imageData,
            .serveProtocols, .accessoryAvailability, .openSession, .sessionRequested, .answerSession,
            .sessionOpened, .closeSession, .sessionClosed, .sessionCredit, .sessionFinished,
            .navigationRequest, .navigationEvent, .navigationInput, .subscribeMetadata, .metadataUpdate, .clusterInput,
            .startPairing, .listPairedDevices, .removePairedDevice, .pairingAttempt,
            .remoteCommands, .sendRemoteCommand, .carButton, .remoteCommandEvent, .remoteCommandAnswer,
            .watchVideo, .videoStreams, .requestKeyframe,
            .openAudioStream, .closeAudioStream, .audioCredit, .audioStreamClosed, .microphoneStarted, .watchAudio,
            .callReport, .callRequest, .callActionEvent, .callActionAnswer, .callActionTimedOut, .callInput,
            .assistantInput, .assistantEvent, .assistantUpdate, .postNotification, .notificationInput:
            guard RolePolicy.maySend(body, role: peer.role) else {
                return protocolError(
                    .notForRole,
                    "a \(RolePolicy.name(of: peer.role)) may not send \(RolePolicy.name(of: body))",
                    requestID: envelope.requestID, now: now
                )
            }
            return .deliver(envelope, unknownEnum: checked.unknownEnum)
        }
    }

    // MARK: - Errors

    /// A non-fatal error found above the connection layer (a DATA frame the Car
    /// refused): answered like the connection's own, within the same budget.
    public mutating func refuse(_ code: HUErrorCode, _ message: String, now: UInt64) -> ConnectionAction {
        guard case .established = state else { return .none }
        return protocolError(code, message, requestID: 0, now: now)
    }

    /// A refused one-way message (a SessionCredit the Car refused): its
    /// Result counts against the error budget like the connection's own errors.
    public mutating func refuse(_ result: HUResult, requestID: UInt32, now: UInt64) -> ConnectionAction {
        guard case .established = state else { return .none }
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = .result(result)
        return protocolError(envelope, now: now)
    }

    /// A non-fatal error: answered with a Result, unless the peer has used up
    /// its error budget, in which case it is cut off.
    private mutating func protocolError(
        _ code: HUErrorCode, _ message: String, requestID: UInt32, now: UInt64, cutOffCode: HUErrorCode = .tooManyErrors
    ) -> ConnectionAction {
        protocolError(Self.result(code, message, requestID: requestID), now: now, cutOffCode: cutOffCode)
    }

    /// An error that gets no answer (an unsolicited PONG) but counts in the same budget.
    private mutating func silentProtocolError(_ message: String, now: UInt64) -> ConnectionAction {
        guard errors.record(now: now) else {
            return close(.tooManyErrors, "more than \(errors.maxPerSecond) protocol errors in one second (last: \(message))")
        }
        return .none
    }

    /// A refused request that keeps coming (over the rate) is cut off with its own code.
    private mutating func protocolError(_ answer: HUEnvelope, now: UInt64, cutOffCode: HUErrorCode = .tooManyErrors) -> ConnectionAction {
        guard errors.record(now: now) else {
            return close(cutOffCode, "more than \(errors.maxPerSecond) protocol errors in one second (last: \(answer.result.message))")
        }
        return .reply(answer)
    }

    /// Grants of at least this many bytes take no token from the request rate.
    public static let grantWithoutToken: UInt32 = 4096

    /// Whether a MESSAGE frame carries a SessionCredit (Envelope field 88),
    /// read from the first bytes without decoding: request_id (field 1) if
    /// present, then the body's tag. A frame that lies about it is decoded
    /// and, if it is not a SessionCredit after all, charged then.
    static func isSessionCredit(_ frame: Frame) -> Bool {
        var payload = frame.payload
        if payload.getInteger(at: payload.readerIndex, as: UInt8.self) == 0x08 {
            payload.moveReaderIndex(forwardBy: 1)
            var length = 0
            while let byte = payload.readInteger(as: UInt8.self) {
                length += 1
                if byte & 0x80 == 0 { break }
                if length == 5 { return false }
            }
        }
        // Field 88, wire type 2: the varint 706 = 0xC2 0x05.
        return payload.readInteger(as: UInt8.self) == 0xC2 && payload.readInteger(as: UInt8.self) == 0x05
    }

    /// The request id of a MESSAGE frame, read without decoding the whole
    /// Envelope (field 1, a varint, comes first when present); 0 otherwise.
    static func requestID(of frame: Frame) -> UInt32 {
        guard frame.header.kind == .message else { return 0 }
        var payload = frame.payload
        guard payload.readInteger(as: UInt8.self) == 0x08 else { return 0 }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 35, let byte = payload.readInteger(as: UInt8.self) {
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return UInt32(truncatingIfNeeded: value) }
            shift += 7
        }
        return 0
    }

    private mutating func close(_ code: HUErrorCode, _ reason: String) -> ConnectionAction {
        state = .closing
        return .close(code, reason)
    }

    public static func result(_ code: HUErrorCode, _ message: String, requestID: UInt32) -> HUEnvelope {
        var result = HUResult()
        result.code = code
        result.message = message
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = .result(result)
        return envelope
    }

    public static func goodbye(_ code: HUErrorCode, _ reason: String) -> HUEnvelope {
        var goodbye = HUGoodbye()
        goodbye.code = code
        goodbye.reason = reason
        var envelope = HUEnvelope()
        envelope.body = .goodbye(goodbye)
        return envelope
    }
}

extension ConnectionStateMachine {
    /// A frame kind as reasons name it ("DATA", "VIDEO", "MEDIA").
    static func streamName(_ kind: FrameKind) -> String {
        switch kind {
        case .message: "MESSAGE"
        case .ping: "PING"
        case .pong: "PONG"
        case .data: "DATA"
        case .media: "MEDIA"
        case .video: "VIDEO"
        }
    }
}
