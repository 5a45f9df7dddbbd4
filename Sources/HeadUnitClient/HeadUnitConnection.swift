import HeadUnitWire

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HeadUnitSecurity
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// One connection to headunitd: handshake, automatic PONG, requests matched to
/// their answers by request_id, and everything else delivered as events.
///
/// Threading: all mutable state lives on the connection's event loop and is
/// only touched there. Requests made from a task already running on that loop
/// (see `taskExecutor`) go out without any thread hop; requests from elsewhere
/// hop onto the loop once. Writes are coalesced and flushed once per loop tick,
/// so many requests in flight cost one syscall per batch, not one each.
// @unchecked: mutable state is confined to `eventLoop` (every public method hops there); `welcome` is written once on the loop before `connect` returns it.
public final class HeadUnitConnection: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var role: HURole
        public var name: String
        /// A request with no answer after this long fails with `.timedOut`.
        public var requestTimeout: TimeAmount = .seconds(10)
        public var connectTimeout: TimeAmount = .seconds(5)
        /// Largest frame accepted from the daemon.
        public var maxPayloadBytes: UInt32 = 16 << 20
        public var minVersion: UInt32 = ProtocolVersion.minimum
        public var maxVersion: UInt32 = ProtocolVersion.maximum
        /// A phone's key: used when the Welcome says authentication is required
        /// (TCP, PROTOCOL.md section 20).
        public var identity: PhoneIdentity?
        /// Pair the identity with this code (shown by the car) before
        /// authenticating (SPAKE2 over TLS, PROTOCOL.md section 20.2).
        public var pairingCode: String?
        /// How long pairing may take in all, waiting for the car when it
        /// answers PAIRING_THROTTLED with how long to wait (its rate holds
        /// guesses from everyone, so a phone under a guessing flood waits its
        /// turn): each wait past this deadline fails with that refusal.
        public var pairingTimeout: TimeAmount = .seconds(120)
        /// Told before each such wait: how long, and the car's reason.
        public var pairingWait: (@Sendable (TimeAmount, String) -> Void)?
        /// TCP is TLS: the car's key (SPKI DER) this phone pinned when it
        /// paired; nil: the identity's (`PhoneIdentity.carKey`). Without a pin
        /// (and to pair) any car key is accepted for the TLS handshake, and
        /// only pairing binds it.
        public var carKey: [UInt8]?
        /// Without `identity`: when the car asks, use the key `headunitctl
        /// pair-phone` stored (PhoneIdentity.defaultPath). Read only then, so
        /// a car that asks for nothing never touches the file.
        public var useStoredIdentity = false

        public init(role: HURole, name: String) {
            self.role = role
            self.name = name
        }

        /// The car key to pin: `carKey`, else the identity's (given, or the
        /// stored one when `useStoredIdentity`).
        /// The identity that signs the admission ticket: the given one, else
        /// the stored one when `useStoredIdentity`; nil when it has no car
        /// key, or `carKey` pins another car than it paired with.
        var admissionIdentity: PhoneIdentity? {
            var chosen = identity
            if chosen == nil, useStoredIdentity { chosen = (try? PhoneIdentity.load(path: PhoneIdentity.defaultPath)) ?? nil }
            guard let chosen, let paired = chosen.carKey else { return nil }
            if let carKey, carKey != paired { return nil }
            return chosen
        }

        var pinnedCarKey: [UInt8]? {
            if let carKey { return carKey }
            if let identity { return identity.carKey }
            if useStoredIdentity { return (try? PhoneIdentity.load(path: PhoneIdentity.defaultPath))??.carKey }
            return nil
        }
    }

    public let eventLoop: EventLoop
    public let configuration: Configuration
    /// The daemon's Welcome (version, limits, vehicle profile).
    public private(set) var welcome = HUWelcome()
    /// TCP: the key (SPKI DER) the car presented in the TLS handshake; after
    /// a successful pairing, the key to pin (`PhoneIdentity.carKey`).
    public var carPublicKey: [UInt8] { tlsCarKey.withLockedValue { $0 } }
    private let tlsCarKey = NIOLockedValueBox<[UInt8]>([])
    /// Envelopes that are not answers to this client's requests (events,
    /// notifications, non-fatal errors with request_id 0). Not used when a
    /// session installed its own handler (PhoneSession, HMISession).
    public let events: AsyncStream<HUEnvelope>

    private let eventContinuation: AsyncStream<HUEnvelope>.Continuation

    // ---- loop-confined state
    private var channel: Channel?
    private var pending: [UInt32: Pending] = [:]
    private var nextRequestID: UInt32 = 1
    private var outbound: ByteBuffer
    private var flushScheduled = false
    /// Written to the channel (a large DATA payload, as it is) and not flushed yet.
    private var writtenUnflushed = false
    private var closeReason: HeadUnitError?
    private var isClosed = false
    private var sweepTask: RepeatedTask?
    /// Called on the event loop for every incoming non-answer envelope.
    var eventHandler: ((HUEnvelope) -> Void)?
    /// Called on the event loop once, when the connection is gone.
    var closeHandler: ((HeadUnitError) -> Void)?
    /// Called on the event loop for every DATA frame (External Accessory session bytes).
    var dataHandler: ((UInt32, ByteBuffer) -> Void)?
    /// Called on the event loop for every VIDEO frame (a watched screen's base view, PROTOCOL.md section 25).
    var videoHandler: ((UInt32, ByteBuffer) -> Void)?
    /// The screens this connection watches (`HMISession.watchVideo`): gets VIDEO frames and `VideoStreams`.
    var videoWatch: VideoWatch?
    /// Per video channel: frames written and not yet taken by the socket (latest frame wins, section 25.5).
    private var videoInFlight: [UInt32: Int] = [:]
    /// Called on the event loop for every MEDIA frame (the car's microphone, PROTOCOL.md section 24).
    var mediaHandler: ((UInt32, ByteBuffer) -> Void)?
    /// The car's output this connection hears (`HMISession.watchAudio`, section 24.7).
    var audioWatch: AudioWatch?

    private struct Pending {
        var continuation: CheckedContinuation<HUEnvelope, Error>
        var deadline: NIODeadline
        /// Runs on the loop when the answer arrives, before any later frame is handled.
        var onAnswer: (@Sendable (HUEnvelope) -> Void)?
    }

    init(eventLoop: EventLoop, configuration: Configuration) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.outbound = ByteBufferAllocator().buffer(capacity: 4096)
        (self.events, self.eventContinuation) = AsyncStream.makeStream(of: HUEnvelope.self, bufferingPolicy: .bufferingNewest(4096))
    }

    // MARK: connecting

    /// Connects, says Hello and waits for Welcome. Throws `HeadUnitError`
    /// (origin `.goodbye` with the daemon's reason when it refuses).
    public static func connect(
        to endpoint: HeadUnitEndpoint,
        configuration: Configuration,
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> HeadUnitConnection {
        try await connect(to: endpoint, configuration: configuration, group: group, beforeHandshake: { _ in })
    }

    public static func connect(unixPath: String, role: HURole, name: String) async throws -> HeadUnitConnection {
        try await connect(to: .unix(path: unixPath), configuration: Configuration(role: role, name: name))
    }

    public static func connect(host: String, port: Int, role: HURole, name: String) async throws -> HeadUnitConnection {
        try await connect(to: .tcp(host: host, port: port), configuration: Configuration(role: role, name: name))
    }

    /// `beforeHandshake` runs on the event loop once the socket is up, before
    /// Hello: sessions install their handlers there so no event is missed.
    /// Pairing that the car throttles waits the time the car states
    /// (`Result.limit_value`, PROTOCOL.md section 20.2) and tries again on a
    /// new connection (auth_timeout_ms counts from connecting), until
    /// `pairingTimeout`.
    static func connect(
        to endpoint: HeadUnitEndpoint,
        configuration: Configuration,
        group: EventLoopGroup,
        beforeHandshake: @escaping @Sendable (HeadUnitConnection) -> Void
    ) async throws -> HeadUnitConnection {
        guard configuration.pairingCode != nil else {
            return try await connectOnce(to: endpoint, configuration: configuration, group: group, pairStartAt: nil, beforeHandshake: beforeHandshake)
        }
        let deadline = NIODeadline.now() + configuration.pairingTimeout
        var pairStartAt: NIODeadline?
        while true {
            do {
                return try await connectOnce(
                    to: endpoint, configuration: configuration, group: group, pairStartAt: pairStartAt, beforeHandshake: beforeHandshake)
            } catch let refusal as HeadUnitError where refusal.code == .pairingThrottled && refusal.origin == .result {
                // The car says how long; a connection that used its attempts connects again (not in a spin).
                let wait: TimeAmount = refusal.limit == PairingLimitNames.retryAfter ? .milliseconds(Int64(refusal.limitValue)) : .milliseconds(100)
                let at = NIODeadline.now() + wait
                guard at < deadline else {
                    var late = refusal
                    late.message += " (waiting would pass the pairing timeout of \(configuration.pairingTimeout.nanoseconds / 1_000_000_000) s)"
                    throw late
                }
                configuration.pairingWait?(wait, refusal.message)
                // Connect again shortly before that time, so PairStart goes out at it.
                let reconnectLead = TimeAmount.milliseconds(500)
                if wait > reconnectLead { try await Task.sleep(nanoseconds: UInt64((wait - reconnectLead).nanoseconds)) }
                pairStartAt = at
            }
        }
    }

    /// One connection: TLS on TCP, Hello, and authentication (pairing first,
    /// its PairStart not before `pairStartAt`) when the Welcome asks for it.
    private static func connectOnce(
        to endpoint: HeadUnitEndpoint,
        configuration: Configuration,
        group: EventLoopGroup,
        pairStartAt: NIODeadline?,
        beforeHandshake: @escaping @Sendable (HeadUnitConnection) -> Void
    ) async throws -> HeadUnitConnection {
        let loop = group.next()
        let connection = HeadUnitConnection(eventLoop: loop, configuration: configuration)
        let maxPayload = configuration.maxPayloadBytes
        // TCP is TLS 1.3 (PROTOCOL.md section 1); the car's key is pinned once paired.
        var tls: (NIOSSLContext, [UInt8]?)?
        // A paired phone names itself in its first flight, so no stranger can evict it (section 10.1).
        var ticket: String?
        if case .tcp = endpoint {
            do {
                tls = (try TLSSetup.clientContext(), configuration.pairingCode != nil ? nil : configuration.pinnedCarKey)
                if configuration.pairingCode == nil { ticket = configuration.admissionIdentity?.admissionTicket() }
            } catch {
                throw HeadUnitError(code: .notConnected, message: "cannot set up TLS: \(error)", origin: .connectionClosed)
            }
        }
        let seen = connection.tlsCarKey
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(configuration.connectTimeout)
            .channelInitializer { [tls, ticket] channel in
                do {
                    if let (context, pin) = tls {
                        let handler = try TLSSetup.clientHandler(context: context, pinnedCarKey: pin, serverName: ticket) { key in
                            seen.withLockedValue { $0 = key }
                        }
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maxPayload: maxPayload)))
                    try channel.pipeline.syncOperations.addHandler(ClientHandler(connection: connection))
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
        let channel: Channel
        do {
            switch endpoint {
            case .unix(let path):
                channel = try await bootstrap.connect(unixDomainSocketPath: path).get()
            case .tcp(let host, let port):
                channel = try await bootstrap.connect(host: host, port: port).get()
            }
        } catch {
            throw HeadUnitError(code: .notConnected, message: "cannot connect to \(endpoint): \(error)", origin: .connectionClosed)
        }
        try await loop.submit {
            connection.channel = channel
            connection.startSweeping()
            beforeHandshake(connection)
        }.get()

        var hello = HUHello()
        hello.minVersion = configuration.minVersion
        hello.maxVersion = configuration.maxVersion
        hello.role = configuration.role
        hello.name = configuration.name
        let answer: HUEnvelope
        do {
            answer = try await connection.roundTrip(.hello(hello))
        } catch {
            await connection.close()
            throw error
        }
        switch answer.body {
        case .welcome(let welcome):
            connection.welcome = welcome
            if welcome.authRequired {
                do {
                    try await connection.authenticate(configuration: configuration, pairStartAt: pairStartAt)
                } catch {
                    await connection.close()
                    throw error
                }
            } else if configuration.pairingCode != nil {
                // Pair is only accepted while authentication is pending: say so
                // rather than report a pairing that never happened.
                await connection.close()
                throw HeadUnitError(
                    code: .notForRole,
                    message: "this connection needs no pairing (Welcome.auth_required is false: a Unix socket, or a car with allowUnpairedTcp)",
                    origin: .usage)
            }
            return connection
        case .goodbye(let goodbye):
            await connection.close()
            throw HeadUnitError(goodbye: goodbye)
        default:
            await connection.close()
            throw HeadUnitError(code: .unknownMessage, message: "expected Welcome, got \(answer)", origin: .unexpectedAnswer)
        }
    }

    /// After a Welcome that requires it: Pair (when a code is given), then
    /// sign the challenge. Refusals throw the daemon's typed error.
    private func authenticate(configuration: Configuration, pairStartAt: NIODeadline?) async throws {
        var identity = configuration.identity
        if identity == nil, configuration.useStoredIdentity {
            do {
                identity = try PhoneIdentity.load(path: PhoneIdentity.defaultPath)
            } catch {
                throw HeadUnitError(code: .authRequired, message: "the car requires authentication and the stored phone key is unusable: \(error)", origin: .usage)
            }
        }
        guard let identity else {
            throw HeadUnitError(
                code: .authRequired,
                message: "the car requires phones on TCP to be paired and to authenticate; give the connection a PhoneIdentity (headunitctl pair-phone)",
                origin: .usage)
        }
        if let code = configuration.pairingCode {
            try await pair(identity: identity, code: code, deviceName: configuration.name, startAt: pairStartAt)
        }
        let authenticate = try identity.authenticate(challenge: Array(welcome.authChallenge), connectionID: welcome.connectionID)
        try await request(.authenticate(authenticate))
    }

    /// SPAKE2 pairing (PROTOCOL.md section 20.2): PairStart, check the car's
    /// confirmation (which proves it knows the code *and* that the TLS key this
    /// phone saw is the car's), then Pair with this phone's confirmation,
    /// key and signature. A wrong code or a man in the middle fails here.
    private func pair(identity: PhoneIdentity, code: String, deviceName: String, startAt: NIODeadline?) async throws {
        let exchange: SPAKE2Exchange
        do {
            exchange = try SPAKE2Exchange(role: .phone, password: Array(code.utf8))
        } catch {
            throw HeadUnitError(code: .invalidArgument, message: "SPAKE2: \(error)", origin: .usage)
        }
        var start = HUPairStart()
        start.spake2Message = .init(exchange.message)
        // The time the car said its next attempt is free (never earlier: it would be throttled again).
        if let startAt, startAt > .now() { try await Task.sleep(nanoseconds: UInt64((startAt - .now()).nanoseconds)) }
        let answer = try await request(.pairStart(start)).pairing
        let seenKey = carPublicKey
        guard !seenKey.isEmpty, PairingKeySchedule.constantTimeEqual(Array(answer.carPublicKey), seenKey) else {
            throw HeadUnitError(
                code: .badPairingCode, message: "the car's key in the pairing answer is not the key of this TLS session: someone is in between",
                origin: .unexpectedAnswer)
        }
        let key: [UInt8]
        do {
            key = try exchange.finish(peerMessage: Array(answer.spake2Message))
        } catch {
            throw HeadUnitError(code: .badPairingCode, message: "the car's SPAKE2 message is not valid: \(error)", origin: .unexpectedAnswer)
        }
        let transcript = PairingKeySchedule.transcriptHash(phoneMessage: exchange.message, carMessage: Array(answer.spake2Message), carPublicKey: seenKey)
        guard PairingKeySchedule.constantTimeEqual(PairingKeySchedule.carConfirmation(spakeKey: key, transcript: transcript), Array(answer.carConfirmation)) else {
            throw HeadUnitError(
                code: .badPairingCode,
                message: "the car's pairing confirmation does not verify: the code is wrong, or someone is between this phone and the car (the car shows the attempt)",
                origin: .unexpectedAnswer)
        }
        var pair = HUPair()
        pair.publicKey = .init(identity.publicKey)
        pair.deviceName = deviceName
        pair.confirmation = .init(
            PairingKeySchedule.phoneConfirmation(spakeKey: key, transcript: transcript, publicKey: identity.publicKey, deviceName: deviceName))
        pair.signature = .init(try identity.privateKey.signature(for: PairingKeySchedule.signedMessage(transcript: transcript)))
        try await request(.pair(pair))
    }

    // MARK: requests

    /// Sends a request and returns its Result; a non-OK code throws
    /// `HeadUnitError` with origin `.result`.
    @discardableResult
    public func request(_ body: HUEnvelope.OneOf_Body) async throws -> HUResult {
        let result = try await resultOf(body)
        guard result.code == .ok else { throw HeadUnitError(result: result) }
        return result
    }

    /// Like `request`, and `onAnswer` runs on the event loop with the Result
    /// as it arrives, before any frame that follows it is handled (for state
    /// the following events depend on).
    @discardableResult
    public func request(_ body: HUEnvelope.OneOf_Body, onAnswer: @escaping @Sendable (HUResult) -> Void) async throws -> HUResult {
        let answer = try await roundTrip(body) { envelope in
            if case .result(let result)? = envelope.body, result.code == .ok { onAnswer(result) }
        }
        switch answer.body {
        case .result(let result):
            guard result.code == .ok else { throw HeadUnitError(result: result) }
            return result
        case .goodbye(let goodbye):
            throw HeadUnitError(goodbye: goodbye)
        default:
            throw HeadUnitError(code: .unknownMessage, message: "expected a Result, got \(answer)", origin: .unexpectedAnswer)
        }
    }

    /// Sends a request and returns its Result whatever the code; throws only
    /// when the connection fails or the answer is not a Result.
    public func resultOf(_ body: HUEnvelope.OneOf_Body) async throws -> HUResult {
        let answer = try await roundTrip(body)
        switch answer.body {
        case .result(let result):
            return result
        case .goodbye(let goodbye):
            throw HeadUnitError(goodbye: goodbye)
        default:
            throw HeadUnitError(code: .unknownMessage, message: "expected a Result, got \(answer)", origin: .unexpectedAnswer)
        }
    }

    /// Sends a request and returns the whole answer envelope.
    public func roundTrip(_ body: HUEnvelope.OneOf_Body, onAnswer: (@Sendable (HUEnvelope) -> Void)? = nil) async throws -> HUEnvelope {
        try await withCheckedThrowingContinuation { continuation in
            if eventLoop.inEventLoop {
                startRequest(body, continuation, onAnswer)
            } else {
                eventLoop.execute { self.startRequest(body, continuation, onAnswer) }
            }
        }
    }

    /// Sends an envelope that wants no answer (request_id 0).
    public func send(_ body: HUEnvelope.OneOf_Body) {
        onLoop {
            var envelope = HUEnvelope()
            envelope.body = body
            self.enqueue(envelope)
        }
    }

    private func startRequest(
        _ body: HUEnvelope.OneOf_Body, _ continuation: CheckedContinuation<HUEnvelope, Error>, _ onAnswer: (@Sendable (HUEnvelope) -> Void)? = nil
    ) {
        if isClosed {
            continuation.resume(throwing: closeReason ?? Self.closedError)
            return
        }
        let id = nextRequestID
        // Wraps after 4 billion requests, skipping 0 (reserved for events).
        nextRequestID = nextRequestID == .max ? 1 : nextRequestID + 1
        pending[id] = Pending(continuation: continuation, deadline: .now() + configuration.requestTimeout, onAnswer: onAnswer)
        var envelope = HUEnvelope()
        envelope.requestID = id
        envelope.body = body
        enqueue(envelope)
    }

    private func enqueue(_ envelope: HUEnvelope) {
        EnvelopeCodec.writeFrame(envelope, into: &outbound)
        scheduleFlush()
    }

    /// One flush per loop tick: everything written during the tick (a batch of
    /// resumed requests, PONGs) leaves in one write.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        eventLoop.execute { self.flushNow() }
    }

    private func flushNow() {
        flushScheduled = false
        guard let channel, !isClosed else { return }
        if outbound.readableBytes > 0 {
            let bytes = outbound
            outbound = channel.allocator.buffer(capacity: 4096)
            channel.writeAndFlush(bytes, promise: nil)
        } else if writtenUnflushed {
            channel.flush()
        }
        writtenUnflushed = false
    }

    // MARK: closing

    /// Closes the socket without a Goodbye, as a lost network would (the
    /// daemon keeps a phone's session for resumption, PROTOCOL.md section 21).
    public func drop() async {
        let channel: Channel? = try? await eventLoop.submit { self.channel }.get()
        try? await channel?.close()
    }

    /// Says Goodbye and closes. Pending requests fail with `.connectionClosed`.
    public func close(reason: String = "client closing") async {
        let future: EventLoopFuture<Void>? = try? await eventLoop.submit { () -> EventLoopFuture<Void>? in
            guard let channel = self.channel, !self.isClosed else { return nil }
            var goodbye = HUGoodbye()
            goodbye.code = .ok
            goodbye.reason = reason
            var envelope = HUEnvelope()
            envelope.body = .goodbye(goodbye)
            self.enqueue(envelope)
            self.flushNow()
            return channel.close()
        }.get()
        _ = try? await future?.get()
        _ = try? await channel?.closeFuture.get()
    }

    /// Completes when the connection is closed, by either side.
    public var closeFuture: EventLoopFuture<Void> {
        eventLoop.flatSubmit { self.channel?.closeFuture ?? self.eventLoop.makeSucceededVoidFuture() }
    }

    /// Why the connection closed, once it has (a Goodbye from the daemon, or nil).
    public func closedReason() async -> HeadUnitError? {
        await onLoopAsync { self.isClosed ? (self.closeReason ?? Self.closedError) : nil }
    }

    static let closedError = HeadUnitError(code: .notConnected, message: "connection closed", origin: .connectionClosed)

    // MARK: inbound (event loop)

    fileprivate func received(_ envelope: HUEnvelope) {
        if envelope.requestID != 0, let entry = pending.removeValue(forKey: envelope.requestID) {
            entry.onAnswer?(envelope)
            entry.continuation.resume(returning: envelope)
            return
        }
        if case .goodbye(let goodbye) = envelope.body {
            // The daemon is closing on us: every waiter learns why.
            closeReason = HeadUnitError(goodbye: goodbye)
            failAll(closeReason!)
        }
        if case .videoStreams(let streams) = envelope.body { videoWatch?.received(streams) }
        deliver(envelope)
    }

    fileprivate func receivedData(channel: UInt32, _ payload: ByteBuffer) {
        dataHandler?(channel, payload)
    }

    fileprivate func receivedMedia(channel: UInt32, _ payload: ByteBuffer) {
        mediaHandler?(channel, payload)
        audioWatch?.received(channel: channel, payload)
    }

    /// On the loop: session bytes in one DATA frame (the caller keeps within its credit),
    /// or one audio unit in a MEDIA frame (`kind` .media).
    func sendData(channel: UInt32, _ payload: ByteBuffer, kind: FrameKind = .data) {
        eventLoop.preconditionInEventLoop()
        guard !isClosed else { return }
        outbound.writeFrameHeader(FrameHeader(kind: kind, channel: channel, length: UInt32(payload.readableBytes)))
        if payload.readableBytes >= 4096, let socket = self.channel {
            // A large payload goes out as it is, behind what is pending: not copied.
            socket.write(outbound, promise: nil)
            socket.write(payload, promise: nil)
            outbound = socket.allocator.buffer(capacity: 4096)
            writtenUnflushed = true
        } else {
            outbound.writeImmutableBuffer(payload)
        }
        scheduleFlush()
    }

    fileprivate func receivedVideo(channel: UInt32, _ payload: ByteBuffer) {
        videoHandler?(channel, payload)
        videoWatch?.received(channel: channel, payload)
    }

    /// On the loop: one VIDEO frame (section 25.3) unless the previous frame
    /// of this channel still waits for the socket: then nothing is sent and
    /// false comes back (the caller skips the frame, and makes its next one a
    /// keyframe), so video never piles up in front of requests.
    func sendVideo(channel: UInt32, _ header: VideoFrameHeader, accessUnit: ByteBuffer) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard !isClosed, let socket = self.channel, videoInFlight[channel, default: 0] == 0, socket.isWritable else { return false }
        var head = socket.allocator.buffer(capacity: FrameHeader.size + VideoFrameHeader.size)
        head.writeFrameHeader(FrameHeader(kind: .video, channel: channel, length: UInt32(VideoFrameHeader.size + accessUnit.readableBytes)))
        header.write(into: &head)
        // Requests already queued go first; the frame is written as it is, not copied.
        socket.write(outbound, promise: nil)
        outbound = socket.allocator.buffer(capacity: 4096)
        socket.write(head, promise: nil)
        videoInFlight[channel, default: 0] += 1
        let promise = eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { _ in self.videoInFlight[channel, default: 1] -= 1 }
        socket.write(accessUnit, promise: promise)
        writtenUnflushed = true
        scheduleFlush()
        return true
    }

    /// On the loop: an envelope with request_id 0 (a one-way message such as SessionCredit).
    func sendOneWay(_ body: HUEnvelope.OneOf_Body) {
        eventLoop.preconditionInEventLoop()
        guard !isClosed else { return }
        var envelope = HUEnvelope()
        envelope.body = body
        enqueue(envelope)
    }

    fileprivate func receivedPing(_ payload: ByteBuffer) {
        outbound.writeFrame(kind: .pong, payload: payload)
        scheduleFlush()
    }

    fileprivate func channelClosed() {
        guard !isClosed else { return }
        isClosed = true
        sweepTask?.cancel()
        sweepTask = nil
        let reason = closeReason ?? Self.closedError
        failAll(reason)
        eventContinuation.finish()
        closeHandler?(reason)
        closeHandler = nil
        videoWatch?.connectionClosed()
        videoWatch = nil
        audioWatch?.connectionClosed()
        audioWatch = nil
        eventHandler = nil
        dataHandler = nil
        mediaHandler = nil
    }

    fileprivate func failed(_ error: Error) {
        if closeReason == nil {
            closeReason = HeadUnitError(code: .malformedPayload, message: "\(error)", origin: .connectionClosed)
        }
    }

    private func deliver(_ envelope: HUEnvelope) {
        if let eventHandler {
            eventHandler(envelope)
        } else {
            eventContinuation.yield(envelope)
        }
    }

    private func failAll(_ error: HeadUnitError) {
        let waiting = pending
        pending.removeAll()
        for (_, entry) in waiting { entry.continuation.resume(throwing: error) }
    }

    /// One timer for all request timeouts rather than one per request.
    private func startSweeping() {
        sweepTask = eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { [weak self] _ in
            guard let self else { return }
            let now = NIODeadline.now()
            let expired = self.pending.filter { $0.value.deadline <= now }
            for (id, entry) in expired {
                self.pending.removeValue(forKey: id)
                entry.continuation.resume(throwing: HeadUnitError(code: .ok, message: "no answer to request \(id)", origin: .timedOut))
            }
        }
    }

    // MARK: loop helpers

    func onLoop(_ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }

    func onLoopAsync<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        if eventLoop.inEventLoop { return body() }
        return try! await eventLoop.submit(body).get()
    }
}

/// The NIO side: frames in, calls into the connection; nothing else.
private final class ClientHandler: ChannelInboundHandler {
    typealias InboundIn = Frame
    let connection: HeadUnitConnection

    init(connection: HeadUnitConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.header.kind {
        case .message:
            // An undecodable envelope from the daemon is dropped: it cannot be
            // matched to a request, and the timeout covers the waiter.
            if let envelope = try? EnvelopeCodec.decode(frame.payload) {
                connection.received(envelope)
            }
        case .ping:
            connection.receivedPing(frame.payload)
        case .data:
            connection.receivedData(channel: frame.header.channel, frame.payload)
        case .video:
            connection.receivedVideo(channel: frame.header.channel, frame.payload)
        case .media:
            connection.receivedMedia(channel: frame.header.channel, frame.payload)
        case .pong, .none:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.channelClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        connection.failed(error)
        context.close(promise: nil)
    }
}

/// A session object made on the event loop inside `connect`'s
/// `beforeHandshake` and read once `connect` returns (a lock: once per
/// connection, and the compiler checks it).
final class MadeOnLoop<T: Sendable>: Sendable {
    private let box = NIOLockedValueBox<T?>(nil)
    var value: T? {
        get { box.withLockedValue { $0 } }
        set { box.withLockedValue { $0 = newValue } }
    }
}

