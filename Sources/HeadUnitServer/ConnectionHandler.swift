import HeadUnitCore
import HeadUnitWire
import Logging
import NIOCore
import NIOTLS

/// One connection, on the host's event loop. Its life (admitted, TLS up,
/// joined, handed over, closing) is one `ConnectionLifecycle` value; what is
/// read is cut into frames (`InboundFrames`), fed with timer ticks to the
/// protocol's `ConnectionStateMachine`, and the action it returns performed:
/// established envelopes go to the `CarHost`. Output, its flushing and the
/// slow-consumer rule are in ConnectionOutput.swift (`OutboundWrites`), the
/// restart handover in Handover.swift. Time is the event loop's
/// (`nowMilliseconds`), so a test's loop drives every timer.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let host: CarHost
    let transport: Transport
    let peerID: PeerID
    private(set) var logger: Logger
    private(set) var context: ChannelHandlerContext?
    // Changed only by this class, here, in ConnectionOutput.swift and in
    // Handover.swift (Swift has no narrower scope that spans files):
    /// The protocol's rules for this connection: handshake, frame checks, heartbeat.
    var machine: ConnectionStateMachine
    var lifecycle: ConnectionLifecycle
    /// What was framed but not written yet, flush bookkeeping, the slow-consumer clock.
    var output = OutboundWrites()
    var inbound: InboundFrames
    /// The protocol timers' next tick on the loop, and its deadline (ms).
    private var tick: (task: Scheduled<Void>, deadline: UInt64)?
    /// The peer's address (TCP), for pairing's per-source backoff.
    private var source = "local"
    /// TCP: the paired device whose verified admission ticket came in the
    /// ClientHello (FirstFlightGate); nil for a stranger.
    private let claimedDevice: String?

    /// `restoring`: a connection a previous daemon process handed over (PROTOCOL.md section 22).
    init(host: CarHost, transport: Transport, maxPayload: UInt32, restoring: RestoredConnection? = nil, claimedDevice: String? = nil) {
        self.host = host
        self.transport = transport
        self.claimedDevice = claimedDevice
        self.logger = host.logger
        self.inbound = InboundFrames(maxPayload: maxPayload)
        let now = host.eventLoop.nowMilliseconds
        // The id is taken now: the protocol's state machine (its Welcome) carries it.
        peerID = restoring?.peerID ?? host.allocatePeerID()
        machine = ConnectionStateMachine(connectionID: peerID, transport: transport, configuration: host.configuration.connection, now: now)
        lifecycle = ConnectionLifecycle(transport: transport, restored: restoring != nil)
        if let restoring {
            // Established already: same peer id, role and version as before the restart.
            machine.restoreEstablished(restoring.info, version: restoring.version, now: now)
            inbound.refuseOversizedAlone()
        }
        logger[metadataKey: "peer"] = "\(peerID)"
    }

    var now: UInt64 { host.eventLoop.nowMilliseconds }

    // MARK: - Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        host.register(self, as: peerID)
        switch transport {
        case .tcp:
            // Fresh per connection: a signature can only ever prove this one.
            machine.authChallenge = PhoneKeys.challenge()
            source = context.remoteAddress?.ipAddress ?? "unknown"
        case .unix:
            // Who is on the other end, by the kernel's word (checked against
            // the car roles' uids/gids at Hello).
            machine.peerCredentials = PeerCredentialsReader.read(context.channel)
        }
        if context.channel.isActive { activate(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        activate(context)
        context.fireChannelActive()
    }

    /// Admission (PROTOCOL.md section 10.1), once active; the credentials it
    /// looks at were read in handlerAdded.
    private func activate(_ context: ChannelHandlerContext) {
        let activation = lifecycle.activate()
        guard activation != .none else { return }
        logger.debug(
            "connected",
            metadata: [
                "transport": "\(transport.rawValue)",
                "remote": "\(context.remoteAddress.map { "\($0)" } ?? "-")",
                "credentials": "\(machine.peerCredentials.map { "\($0)" } ?? "-")",
            ])
        let who: AdmissionPeer
        switch transport {
        case .tcp:
            let address = AdmissionSource.key(context.remoteAddress)
            who = claimedDevice.map { .pairedTCP(address: address, device: $0) } ?? .tcp(address: address)
        case .unix: who = .unix(machine.peerCredentials)
        }
        switch activation {
        case .none:
            return
        case .readmit:
            // Admitted before the restart: counted again, never turned away.
            host.readmit(peerID, who)
        case .admit:
            if let refusal = host.admit(peerID, who) {
                host.noteRefusedConnection(refusal)
                // On TCP this is a bare close: no TLS handshake yet (`ConnectionLifecycle.close`).
                perform(machine.refuseConnection(.tooManyConnections, refusal))
                return
            }
            _ = lifecycle.admitted()
            if host.lifecycle.stopping {
                perform(machine.shutdown(reason: "the daemon is stopping"))
                return
            }
        }
        scheduleTick()
    }

    /// TCP: the TLS handshake completed, frames can reach the peer (NIOSSL
    /// says so before it passes on any data read).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { lifecycle.tlsEstablished() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A read delivered while one is served (TLS can hand one over from
        // inside a write) is queued and served after it, never re-entered.
        var next = inbound.beginRead(unwrapInboundIn(data))
        while let bytes = next {
            serveFrames(in: bytes, context: context)
            next = inbound.nextRead()
        }
    }

    /// Every whole frame of a read, in order, while the connection serves
    /// (closing, nothing more is read as frames).
    private func serveFrames(in bytes: ByteBuffer, context: ChannelHandlerContext) {
        var bytes = bytes
        do {
            while lifecycle.isServing, let frame = try inbound.nextFrame(from: &bytes, allocator: context.channel.allocator) {
                serve(frame, context: context)
            }
        } catch {
            logger.debug("framing error", metadata: ["reason": "\(error.reason)"])
            perform(machine.framingFailed(error))
        }
    }

    private func serve(_ frame: Frame, context: ChannelHandlerContext) {
        // Backpressure (section 10.2): while this peer's answers wait above
        // the high-water mark, or an answer to an earlier request is still
        // owed (section 4), its next requests wait too, in order.
        guard !inbound.isHolding, context.channel.isWritable else {
            inbound.hold(frame)
            machine.heard(now: now)
            return
        }
        receive(frame, now: now)
    }

    private func receive(_ frame: Frame, now: UInt64) {
        let action = machine.receive(frame, now: now)
        // Session bytes go on as they were read, header included (18.5).
        if case .deliverData(let channel, let payload) = action {
            host.deliverData(channel: channel, payload, wire: frame.wire, from: peerID)
        } else {
            perform(action, now: now)
        }
    }

    /// Serves held frames while the peer takes its answers; true when none is left.
    @discardableResult
    func serveHeld(context: ChannelHandlerContext, evenIfBehind: Bool = false) -> Bool {
        while lifecycle.isServing, evenIfBehind || context.channel.isWritable, let frame = inbound.nextHeld() {
            receive(frame, now: now)
        }
        if !lifecycle.isServing { inbound.dropHeld() }
        return !inbound.isHolding
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // One flush per read batch, for this peer and every peer the batch wrote to.
        host.flush()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("connection error", metadata: ["error": "\(error)"])
        forceClose()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            output.stopSlowConsumerClock()
            if lifecycle.isServing {
                // Not read meanwhile: a fresh heartbeat window from now.
                machine.heard(now: now)
                // Serve what it sent meanwhile; read again once that is done;
                // (for an HMI) send the latest state of what it skipped.
                if serveHeld(context: context), lifecycle.isServing {
                    context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                    context.read()
                }
                host.caughtUp(peerID)
                host.flush()
            }
        } else if lifecycle.isServing {
            // Requests in flight are bounded by what the peer reads: while its
            // answers pile up, its next requests wait in its own socket.
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            // Not reading for a while is tolerated; not reading for long is cut off.
            fellBehind()
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbound.dropHeld()
        if let cut = inbound.takePartial() {
            // The peer closed mid-frame: nothing to answer, just clean up.
            logger.debug("connection ended inside a frame", metadata: ["bytes": "\(cut.readableBytes)"])
        }
        cancelTimers()
        output.discard()
        let role = machine.peer.map { RolePolicy.name(of: $0.role) } ?? "-"
        machine.closed()
        if let ended = lifecycle.channelInactive() {
            if ended.membership != .none { host.release(peerID) }
            let joined = ended.membership == .joined
            logger.debug("disconnected", metadata: joined ? ["role": "\(role)"] : [:])
            host.connectionClosed(peerID, joined: joined, departure: ended.departure)
        }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Actions

    /// Consumed: the switch moves the payloads out instead of copying the action.
    func perform(_ action: consuming ConnectionAction, now: UInt64? = nil) {
        switch consume action {
        case .none:
            break
        case .deliver(let envelope, let unknownEnum):
            host.deliver(envelope, from: peerID, now: now ?? self.now, unknownEnum: unknownEnum)
        case .deliverData(let channel, let payload):
            host.deliverData(channel: channel, payload, wire: nil, from: peerID)
        case .deliverVideo(let channel, let header, let payload):
            host.deliverVideo(channel: channel, header, payload, from: peerID, now: now ?? self.now)
        case .deliverMedia(let channel, let payload):
            host.deliverMedia(channel: channel, payload, from: peerID)
        case .join(var info, let welcome):
            // Only a connection awaiting its handshake joins (NIOSSL passes no data on before TLS is up).
            guard lifecycle.joined() else { return }
            inbound.refuseOversizedAlone()
            if info.role == .phone { info.resumptionToken = Self.makeResumptionToken() }
            logger.debug("peer joined", metadata: ["role": "\(RolePolicy.name(of: info.role))", "name": "\(info.name)", "transport": "\(info.transport.rawValue)"])
            send(welcome)
            rescheduleTickIfSooner()
            host.peerJoined(peerID, info: info)
        case .reply(let envelope):
            send(envelope)
        case .pong(let payload):
            sendFrame(kind: .pong, payload: payload)
        case .ping(let payload):
            sendFrame(kind: .ping, payload: payload)
        case .close(let code, let reason):
            closeWithGoodbye(code, reason)
        case .peerLeaving(let goodbye):
            lifecycle.peerSaidGoodbye()
            logger.debug("peer said goodbye", metadata: ["code": "\(goodbye.code)", "reason": "\(goodbye.reason)"])
            forceClose()
        case .challenge(let welcome):
            logger.debug("phone must authenticate")
            host.greeted(peerID)
            send(welcome)
            rescheduleTickIfSooner()
        case .pair(let request, let requestID):
            switch host.pair(request, requestID: requestID, from: peerID, now: now ?? self.now) {
            case .now(let answer): send(answer)
            case .later(let answer): holdUntilAnswered(answer)
            }
        case .pairStart(let request, let requestID):
            send(host.pairStart(request, requestID: requestID, from: peerID, source: source, now: now ?? self.now))
        case .authenticate(let request, let requestID, let message):
            switch host.verify(request, message: message) {
            case .success(let device):
                logger.notice("phone authenticated", metadata: ["device": "\(device.deviceID)", "name": "\(device.name)"])
                host.pairingConnectionClosed(peerID)
                perform(machine.authenticated(device, requestID: requestID, now: now ?? self.now))
            case .failure(let failure):
                logger.notice("phone authentication failed", metadata: ["reason": "\(failure.reason)"])
                perform(machine.authenticationFailed(failure.reason))
            }
        }
    }

    /// An answer the host gives later (a `Pair` waiting for the disk, PROTOCOL.md
    /// section 20.2): until it is sent this peer is not read and what it sent
    /// meanwhile is held, so its answers keep the order of its requests
    /// (section 4). Every other peer is served as usual.
    private func holdUntilAnswered(_ answer: EventLoopFuture<HUEnvelope>) {
        guard let context else { return }
        inbound.awaitAnswer()
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        answer.assumeIsolated().whenSuccess { [weak self] envelope in self?.answered(envelope) }
    }

    /// The owed answer, then what the peer sent meanwhile, in order; reading
    /// resumes unless its answers wait above the high-water mark (10.2).
    private func answered(_ envelope: HUEnvelope) {
        inbound.answerSent()
        send(envelope)  // a connection closed meanwhile is not answered
        if let context, lifecycle.isServing, serveHeld(context: context), lifecycle.isServing, context.channel.isWritable {
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            context.read()
        }
        // Not in a read batch: flushed here.
        host.flush()
    }

    /// 128 random bits from the system's CSPRNG (getrandom), as hex: a phone
    /// proves with it that a new connection continues its lost session.
    static func makeResumptionToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let word = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - word.count) + word
        }.joined()
    }

    // MARK: - Closing

    /// Goodbye(code, reason), then close once it is written.
    func closeWithGoodbye(_ code: HUErrorCode, _ reason: String) {
        guard let context else { return }
        let close = lifecycle.close(code)
        guard close != .none else { return }
        machine.closed()
        cancelTimers()
        logger.debug("closing", metadata: ["code": "\(code)", "reason": "\(reason)"])
        guard close == .goodbye else {
            // TCP is TLS (section 20.8): before the handshake no frame can reach
            // the peer in clear, so the close is all it gets (section 10.1, "Over TLS").
            context.close(promise: nil)
            return
        }
        let goodbye = OutboundFrameCheck.goodbye(code, reason, allocator: context.channel.allocator, maxPayload: maxPayload)
        output.flushed()
        writePending(context)  // what it was sent before, then the Goodbye
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(goodbye)).whenComplete { _ in
            channel.close(promise: nil)
        }
        // A peer that reads nothing would keep the Goodbye (and us) waiting.
        channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }

    func shutdown(reason: String) {
        guard lifecycle.isOpen else { return }
        perform(machine.shutdown(reason: reason))
    }

    /// Closed without a word: an error, the end of the shutdown grace, a
    /// handover that could not carry it, or the peer's own Goodbye.
    func forceClose() {
        lifecycle.abort()
        output.discard()
        machine.closed()
        cancelTimers()
        context?.close(promise: nil)
    }

    // MARK: - Timers

    /// The protocol's timers (handshake, authentication, heartbeat), at the
    /// state machine's next deadline on the loop's clock.
    private func scheduleTick() {
        guard let context, let deadline = machine.nextDeadline else { return }
        tick?.task.cancel()
        let task: Scheduled<Void> = context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(deadline * 1_000_000)) { [weak self] in
            self?.tickFired()
        }
        tick = (task, deadline)
    }

    private func rescheduleTickIfSooner() {
        if let deadline = machine.nextDeadline, deadline < tick?.deadline ?? .max { scheduleTick() }
    }

    private func tickFired() {
        tick = nil
        let now = self.now
        // While its output waits above the high-water mark (section 10.2), or
        // an answer to it is owed, the peer is not read: its PONGs wait too.
        // Silence is not judged then; a peer that takes nothing is cut off as
        // a slow consumer instead.
        if let context, !context.channel.isWritable || inbound.isAwaitingAnswer { machine.heard(now: now) }
        perform(machine.tick(now: now), now: now)
        host.flush()
        if lifecycle.isServing { scheduleTick() }
    }

    func cancelTimers() {
        tick?.task.cancel()
        tick = nil
        output.stopSlowConsumerClock()
    }
}
