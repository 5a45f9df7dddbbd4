import HeadUnitCore
import HeadUnitWire
import Logging
import NIOCore
import NIOTLS

/// The thin per-connection handler: cuts what is read into frames, feeds
/// them and timer ticks to the `ConnectionStateMachine` and performs the
/// action it returns. Established envelopes go to the `CarHost`. Lives on
/// the host's event loop.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let host: CarHost
    private let transport: Transport
    private var logger: Logger
    private var machine: ConnectionStateMachine!
    private var context: ChannelHandlerContext?
    private(set) var peerID: PeerID = 0
    private var joined = false
    /// How the connection ended, for the Car: a phone lost without a Goodbye may resume.
    private var departure = PeerDeparture.lost
    private var open = false
    private var needsFlush = false
    /// Envelopes framed by `send` and not yet written (see `send`).
    private var pending: ByteBuffer?
    private var tick: Scheduled<Void>?
    private var tickDeadline: UInt64 = .max
    private var slowConsumerTimer: Scheduled<Void>?
    /// Bytes handed to the channel so far: less what still waits in it, what
    /// the peer took (section 10.5's clock measures progress by it).
    private var bytesWritten = 0
    /// Counted in the host's connection caps (released when the connection ends).
    private var admitted = false
    /// TCP only: the TLS handshake completed (before it, nothing can be sent to the peer).
    private var tlsEstablished = false
    /// The peer's address (TCP), for pairing's per-source backoff.
    private var source = "local"
    /// Frames read while the peer's answers wait above the high-water mark
    /// (PROTOCOL.md section 10.2): served once they drain. Bounded by what
    /// one read batch held, since nothing more is read meanwhile.
    private var held = CircularBuffer<Frame>()
    /// Frames are cut here, not by a decoder in front: one handler less
    /// on every read (PROTOCOL.md "Framing"; section 22 takes its partial frame).
    private var assembler: FrameAssembler
    /// A framing error ended the stream: what follows is not read as frames.
    private var framingFailed = false
    /// Set while a read's frames are served; a read delivered meanwhile
    /// (TLS can hand one over from inside a write) waits in `reentered`.
    private var serving = false
    private var reentered: [ByteBuffer] = []

    /// A connection a previous daemon process handed over (PROTOCOL.md section 22).
    private let restoring: RestoredConnection?
    /// Set once the connection is being handed to the next process: nothing
    /// more is read (the tap holds what arrives), timed or caught up here.
    private(set) var handingOver = false
    /// Everything written before the handover's barrier reached the kernel.
    private(set) var isDrained = false

    /// TCP: the paired device whose verified admission ticket came in the
    /// ClientHello (FirstFlightGate); nil for a stranger.
    private let claimedDevice: String?

    init(host: CarHost, transport: Transport, maxPayload: UInt32, restoring: RestoredConnection? = nil, claimedDevice: String? = nil) {
        self.claimedDevice = claimedDevice
        self.host = host
        self.transport = transport
        // Until the peer joins, an oversized header is fatal (section 2); `refuseOversizedAlone` then.
        self.assembler = FrameAssembler(maxPayload: maxPayload)
        self.logger = host.logger
        self.restoring = restoring
    }

    /// The peer joined: from now a frame over the maximum is refused alone,
    /// its bytes skipped, up to 4 x `max_payload_bytes` (section 2, step 3).
    /// Past that the header says nothing trustworthy (a stream out of step,
    /// garbage after a valid magic): FRAME_TOO_LARGE, fatal.
    private func refuseOversizedAlone() {
        assembler.skipOversizedUpTo = UInt32(clamping: 4 * UInt64(assembler.maxPayload))
    }

    // MARK: - Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let restoring {
            // Established already: same peer id, role and version as before the restart.
            peerID = restoring.peerID
            host.adopt(self, as: peerID)
            logger[metadataKey: "peer"] = "\(peerID)"
            let now = monotonicMilliseconds()
            machine = ConnectionStateMachine(
                connectionID: peerID, transport: transport, configuration: host.configuration.connection, now: now)
            machine.restoreEstablished(restoring.info, version: restoring.version, now: now)
            refuseOversizedAlone()
            if transport == .unix { machine.peerCredentials = PeerCredentialsReader.read(context.channel) }
            joined = true
            open = context.channel.isActive
            if open { connected(context: context) }
            return
        }
        peerID = host.register(self)
        logger[metadataKey: "peer"] = "\(peerID)"
        machine = ConnectionStateMachine(
            connectionID: peerID, transport: transport, configuration: host.configuration.connection, now: monotonicMilliseconds())
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
        open = context.channel.isActive
        if open { connected(context: context) }
    }

    /// The TLS handshake of a TCP connection completed: frames can reach the peer.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { tlsEstablished = true }
        context.fireUserInboundEventTriggered(event)
    }

    func channelActive(context: ChannelHandlerContext) {
        if !open {
            open = true
            connected(context: context)
        }
        context.fireChannelActive()
    }

    private func connected(context: ChannelHandlerContext) {
        logger.debug(
            "connected",
            metadata: [
                "transport": "\(transport.rawValue)",
                "remote": "\(context.remoteAddress.map { "\($0)" } ?? "-")",
                "credentials": "\(machine.peerCredentials.map { "\($0)" } ?? "-")",
            ])
        // Who it is, for admission: credentials were read in handlerAdded, before this decision.
        let who: AdmissionPeer
        switch transport {
        case .tcp:
            let address = AdmissionSource.key(context.remoteAddress)
            who = claimedDevice.map { .pairedTCP(address: address, device: $0) } ?? .tcp(address: address)
        case .unix: who = .unix(machine.peerCredentials)
        }
        if restoring != nil {
            // Admitted before the restart: counted again, never turned away.
            host.readmit(peerID, who)
            admitted = true
            scheduleTick()
            return
        }
        if let refusal = host.admit(peerID, who) {
            host.noteRefusedConnection(refusal)
            // On TCP this is a bare close: no TLS handshake yet (closeWithGoodbye).
            perform(machine.refuseConnection(.tooManyConnections, refusal))
            return
        }
        admitted = true
        if host.stopping {
            perform(machine.shutdown(reason: "the daemon is stopping"))
            return
        }
        scheduleTick()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        guard !serving else {
            reentered.append(bytes)
            return
        }
        serving = true
        defer { serving = false }
        serveFrames(in: bytes, context: context)
        while !reentered.isEmpty { serveFrames(in: reentered.removeFirst(), context: context) }
    }

    /// Every whole frame of a read, in order; the start of one cut short is kept for the next.
    private func serveFrames(in bytes: ByteBuffer, context: ChannelHandlerContext) {
        guard !framingFailed else { return }  // the Goodbye is already on its way
        var bytes = bytes
        do {
            while let frame = try assembler.next(from: &bytes, allocator: context.channel.allocator) {
                serve(frame, context: context)
            }
        } catch {
            framingFailed = true
            logger.debug("framing error", metadata: ["reason": "\(error.reason)"])
            perform(machine.framingFailed(error))
        }
    }

    private func serve(_ frame: Frame, context: ChannelHandlerContext) {
        // Backpressure (section 10.2): while this peer's answers wait above
        // the high-water mark, its next requests wait too, in order.
        guard held.isEmpty, context.channel.isWritable || !open else {
            held.append(frame)
            machine.heard(now: monotonicMilliseconds())
            return
        }
        receive(frame, now: monotonicMilliseconds())
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
    private func serveHeld(context: ChannelHandlerContext, evenIfBehind: Bool = false) -> Bool {
        while !held.isEmpty, open, evenIfBehind || context.channel.isWritable {
            receive(held.removeFirst(), now: monotonicMilliseconds())
        }
        if !open { held.removeAll(keepingCapacity: false) }
        return held.isEmpty
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
            slowConsumerTimer?.cancel()
            slowConsumerTimer = nil
            if open, !handingOver {
                // Not read meanwhile: a fresh heartbeat window from now.
                machine.heard(now: monotonicMilliseconds())
                // Serve what it sent meanwhile; read again once that is done;
                // (for an HMI) send the latest state of what it skipped.
                let drained = serveHeld(context: context)
                if drained, open {
                    context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                    context.read()
                }
                host.caughtUp(peerID)
                host.flush()
            }
        } else if open, !handingOver {
            // Requests in flight are bounded by what the peer reads: while its
            // answers pile up, its next requests wait in its own socket.
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            // Not reading for a while is tolerated; not reading for long is cut off.
            fellBehind()
        }
        context.fireChannelWritabilityChanged()
    }

    /// Output waits for this peer and it was not taking it: its writes passed
    /// the high-water mark, or a frame shared with other peers was dropped or
    /// deferred for it (video, the car's audio, a metadata update: they never
    /// pile up, so they never make it unwritable). Section 10.5's clock runs
    /// from now, whatever the output is: the one slow-consumer rule.
    private func fellBehind() {
        guard slowConsumerTimer == nil, open, !handingOver, let context else { return }
        armSlowConsumerTimer(context: context)
    }

    /// What the peer took of what it was sent (TLS adds a few bytes a record
    /// in the channel, so this only errs towards "took nothing").
    private func bytesTaken(_ context: ChannelHandlerContext) -> Int {
        bytesWritten - ((try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0)
    }

    /// Cuts the peer off once it took nothing for `slow_consumer_timeout_ms`
    /// while output waited for it (section 10.5). A peer that took some bytes
    /// meanwhile is slow, not stalled: the clock starts again; one with
    /// nothing waiting any more caught up: the clock stops.
    private func armSlowConsumerTimer(context: ChannelHandlerContext) {
        let timeout = host.configuration.slowConsumerTimeoutMilliseconds
        let taken = bytesTaken(context)
        slowConsumerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(clamping: timeout))) { [weak self] in
            guard let self else { return }
            self.slowConsumerTimer = nil
            guard self.open, !self.handingOver, let context = self.context, self.hasUnsentBytes else { return }
            if self.bytesTaken(context) > taken {
                self.armSlowConsumerTimer(context: context)
            } else {
                self.cutOffSlowConsumer("the peer took no data for \(timeout) ms")
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        open = false
        held.removeAll(keepingCapacity: false)
        if let cut = assembler.takePartial() {
            // The peer closed mid-frame: nothing to answer, just clean up.
            logger.debug("connection ended inside a frame", metadata: ["bytes": "\(cut.readableBytes)"])
        }
        tick?.cancel()
        tick = nil
        slowConsumerTimer?.cancel()
        slowConsumerTimer = nil
        machine.closed()
        if admitted {
            admitted = false
            host.release(peerID)
        }
        logger.debug("disconnected", metadata: joined ? ["role": "\(machine.peer.map { RolePolicy.name(of: $0.role) } ?? "-")"] : [:])
        let wasJoined = joined
        joined = false
        host.connectionClosed(peerID, joined: wasJoined, departure: departure)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Actions

    /// Consumed: the switch moves the payloads out instead of copying the action.
    private func perform(_ action: consuming ConnectionAction, now: UInt64? = nil) {
        switch consume action {
        case .none:
            break
        case .deliver(let envelope, let unknownEnum, let template):
            host.deliver(envelope, from: peerID, now: now ?? monotonicMilliseconds(), unknownEnum: unknownEnum, template: template)
        case .deliverData(let channel, let payload):
            host.deliverData(channel: channel, payload, wire: nil, from: peerID)
        case .deliverVideo(let channel, let header, let payload):
            host.deliverVideo(channel: channel, header, payload, from: peerID, now: now ?? monotonicMilliseconds())
        case .deliverMedia(let channel, let payload):
            host.deliverMedia(channel: channel, payload, from: peerID)
        case .join(var info, let welcome):
            joined = true
            refuseOversizedAlone()
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
            departure = .saidGoodbye
            logger.debug("peer said goodbye", metadata: ["code": "\(goodbye.code)", "reason": "\(goodbye.reason)"])
            forceClose()
        case .challenge(let welcome):
            logger.debug("phone must authenticate")
            host.greeted(peerID)
            send(welcome)
            rescheduleTickIfSooner()
        case .pair(let request, let requestID):
            send(host.pair(request, requestID: requestID, from: peerID, now: now ?? monotonicMilliseconds()))
        case .pairStart(let request, let requestID):
            send(host.pairStart(request, requestID: requestID, from: peerID, source: source, now: now ?? monotonicMilliseconds()))
        case .authenticate(let request, let requestID, let message):
            switch host.verify(request, message: message) {
            case .success(let device):
                logger.notice("phone authenticated", metadata: ["device": "\(device.deviceID)", "name": "\(device.name)"])
                host.pairingConnectionClosed(peerID)
                perform(machine.authenticated(device, requestID: requestID, now: now ?? monotonicMilliseconds()))
            case .failure(let failure):
                logger.notice("phone authentication failed", metadata: ["reason": "\(failure.reason)"])
                perform(machine.authenticationFailed(failure.reason))
            }
        }
    }

    // MARK: - Output (called by the host too)

    /// Frames this peer's envelopes straight into `pending`: everything it is
    /// sent between flushes goes to the pipeline as one buffer, one write.
    func send(_ envelope: HUEnvelope) {
        guard open, let context else { return }
        appendToPending(context) { encode(envelope, into: &$0) }
    }

    /// `send` of an envelope the car encoded itself (`CarEffect.sendEncodedAnswer`):
    /// framed as it is, with section 10.4's size check.
    func sendEncoded(_ payload: [UInt8]) {
        guard open, let context else { return }
        guard fitsOrCloses(payload.count, .message) else { return }
        appendToPending(context) { buffer in
            buffer.writeFrameHeader(FrameHeader(kind: .message, length: UInt32(payload.count)))
            buffer.writeBytes(payload)
        }
    }

    /// `sendEncoded` of several envelopes, framed already: one append to `pending`.
    func sendEncoded(_ envelopes: EncodedEnvelopes) {
        guard open, let context else { return }
        guard fitsOrCloses(envelopes.longestEnvelope, .message) else { return }
        appendToPending(context) { $0.writeBytes(envelopes.frames) }
    }

    /// Adds to `pending` and asks the host for a flush at the end of the round.
    private func appendToPending(_ context: ChannelHandlerContext, _ write: (inout ByteBuffer) -> Void) {
        var buffer = pending ?? context.channel.allocator.buffer(capacity: 512)
        pending = nil  // so the buffer is uniquely referenced while it grows
        write(&buffer)
        pending = buffer
        if !needsFlush {
            needsFlush = true
            host.markDirty(self)
        }
        // Past the high-water mark the bytes go to the channel now, so its
        // writability (and backpressure, section 10.2) sees them.
        if buffer.readableBytes >= host.configuration.writeHighWaterMark { writePending(context) }
    }

    /// What `send` framed since the last write, written before anything else
    /// goes out so the order is kept.
    private func writePending(_ context: ChannelHandlerContext) {
        guard let buffer = pending else { return }
        pending = nil
        if buffer.readableBytes > 0 { write(buffer, context: context) }
    }

    /// Whether the peer takes what it is sent (an HMI that does not is sent
    /// state later, coalesced).
    var isKeepingUp: Bool { open && (context?.channel.isWritable ?? false) }

    /// The frame for `envelope` shared by several peers, or nil when it
    /// would be over the frame limit (the caller closes the recipients:
    /// `closeOversized`). Checked by `OutboundFrameCheck`, as every frame.
    func encode(_ envelope: HUEnvelope) -> ByteBuffer? {
        guard let context else { return nil }
        return OutboundFrameCheck.frame(envelope, allocator: context.channel.allocator, maxPayload: maxPayload)
    }

    private var maxPayload: Int { Int(host.configuration.connection.limits.maxPayloadBytes) }

    /// Appends the frame to `buffer` through the one outbound check (section
    /// 10.4): an answer over the maximum becomes Result{ANSWER_TOO_LARGE};
    /// anything else over it is not sent and the peer is told (Goodbye
    /// FRAME_TOO_LARGE), never left with a silent gap.
    private func encode(_ envelope: HUEnvelope, into buffer: inout ByteBuffer) {
        switch OutboundFrameCheck.write(envelope, into: &buffer, maxPayload: maxPayload) {
        case .fits:
            break
        case .answerRefused(let bytes):
            logger.error("an answer over max_payload_bytes refused", metadata: ["bytes": "\(bytes)", "limit": "\(maxPayload)"])
        case .oversized(let bytes):
            // After the current write: `send` is still assembling `pending`.
            let reason = OutboundFrameCheck.goodbyeReason(envelope, bytes: bytes, maxPayload: maxPayload)
            context?.eventLoop.assumeIsolated().execute { [weak self] in self?.closeOversized(reason) }
        }
    }

    /// A frame for this peer could not be sent within the maximum (a daemon bug: section 10.4).
    func closeOversized(_ reason: String) {
        logger.error("a frame over max_payload_bytes: closing its recipient", metadata: ["reason": "\(reason)"])
        closeWithGoodbye(.frameTooLarge, reason)
    }

    /// A frame encoded once for several peers (the bytes are not copied).
    func writeShared(_ frame: ByteBuffer) {
        guard open, let context else { return }
        // Section 10.4's one size check, for the frames HMIHub shares (state,
        // catch-up, images): the composed bounds keep them within the maximum.
        guard fitsOrCloses(frame.readableBytes - FrameHeader.size, .message) else { return }
        write(frame, context: context)
    }

    /// Writes a frame shared with other peers (the bytes are not copied).
    /// Nothing is told when it has gone to the socket: `hasUnsentBytes` says
    /// so later, and `whenDrained` is for a peer that is behind. (A promise
    /// per frame cost a metadata update as much as its writes, per subscriber.)
    func sendShared(_ frame: ByteBuffer, flushNow: Bool) {
        guard open, let context else { return }
        // Section 10.4's one size check, as in `writeShared`.
        guard fitsOrCloses(frame.readableBytes - FrameHeader.size, .message) else { return }
        writePending(context)
        context.write(wrapOutboundOut(frame), promise: nil)
        bytesWritten += frame.readableBytes
        if flushNow {
            context.flush()
        } else if !needsFlush {
            needsFlush = true
            host.markDirty(self)
        }
    }

    /// Whether some of what this peer was sent is not in the kernel yet
    /// (queued in NIO, or not even handed to it); false once closed.
    var hasUnsentBytes: Bool {
        guard open, let context else { return false }
        if let pending, pending.readableBytes > 0 { return true }
        return ((try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0) > 0
    }

    /// `drained` runs on the loop, on a later tick, once everything written
    /// to this peer so far has gone to the socket, or the connection closed
    /// (writes complete in order: an empty write after them is the marker).
    func whenDrained(_ drained: @escaping () -> Void) {
        guard open, let context else {
            host.eventLoop.assumeIsolated().execute(drained)
            return
        }
        let loop = context.eventLoop.assumeIsolated()
        writePending(context)
        // Something waits for this peer to take its output (ClusterHub's
        // deferred update): the slow-consumer clock runs meanwhile.
        fellBehind()
        let marker = context.eventLoop.makePromise(of: Void.self)
        // Not inside the write's completion: what `drained` writes goes out on the next tick.
        marker.futureResult.assumeIsolated().whenComplete { _ in loop.execute(drained) }
        context.write(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: marker)
        if !needsFlush {
            needsFlush = true
            host.markDirty(self)
        }
    }

    /// PING (8 bytes of our clock) and PONG (the payload of the peer's PING:
    /// at most 64 bytes, section 2): checked like every frame all the same.
    private func sendFrame(kind: FrameKind, payload: ByteBuffer) {
        guard open, let context else { return }
        guard fitsOrCloses(payload.readableBytes, kind) else { return }
        var buffer = context.channel.allocator.buffer(capacity: FrameHeader.size + payload.readableBytes)
        buffer.writeFrame(kind: kind, payload: payload)
        write(buffer, context: context)
    }

    /// Session bytes: the frame as it was read when there is one (the same
    /// kind, channel and length: nothing to build), else a new header and
    /// the payload as it came.
    func sendData(channel: UInt32, _ payload: ByteBuffer, wire: ByteBuffer? = nil) {
        guard open, let context else { return }
        guard fitsOrCloses(payload.readableBytes, .data) else { return }
        if let wire {
            write(wire, context: context)
            return
        }
        var header = context.channel.allocator.buffer(capacity: FrameHeader.size)
        header.writeFrameHeader(FrameHeader(kind: .data, flags: 0, channel: channel, length: UInt32(payload.readableBytes)))
        write(header, context: context)
        write(payload, context: context)
    }

    /// A VIDEO frame for a viewer (section 25.5): written, header new and
    /// payload shared, only while less than `videoViewerBufferBytes` waits
    /// unsent for this peer; else dropped (false), so video never piles up
    /// in front of its control messages. A frame over the maximum (the daemon
    /// takes none, section 2) is not "behind": the viewer is closed with
    /// Goodbye FRAME_TOO_LARGE, as for any frame (true: nothing to ask a
    /// keyframe for).
    func sendVideo(channel: UInt32, _ payload: ByteBuffer) -> Bool {
        guard open, let context else { return true }
        guard fitsOrCloses(payload.readableBytes, .video) else { return true }
        writePending(context)
        let waiting = (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        guard waiting < host.configuration.videoViewerBufferBytes, context.channel.isWritable else {
            fellBehind()
            return false
        }
        var header = context.channel.allocator.buffer(capacity: FrameHeader.size)
        header.writeFrameHeader(FrameHeader(kind: .video, flags: 0, channel: channel, length: UInt32(payload.readableBytes)))
        write(header, context: context)
        write(payload, context: context)
        return true
    }

    /// The car's microphone samples (section 24): a MEDIA frame on the
    /// stream's channel (8 bytes of timestamp and 20 ms of 16 kHz mono PCM,
    /// 648 bytes; checked like every frame).
    func sendMedia(channel: UInt32, _ payload: ByteBuffer) {
        guard open, let context else { return }
        guard fitsOrCloses(payload.readableBytes, .media) else { return }
        var header = context.channel.allocator.buffer(capacity: FrameHeader.size)
        header.writeFrameHeader(FrameHeader(kind: .media, flags: 0, channel: channel, length: UInt32(payload.readableBytes)))
        write(header, context: context)
        write(payload, context: context)
    }

    /// A chunk of the car's output for a watcher (section 24.7): written only
    /// while less than `audioWatcherBufferBytes` waits unsent for this peer,
    /// else skipped (latest wins: stale audio is never queued).
    func sendAudioOutput(_ payload: ByteBuffer) {
        guard open, let context else { return }
        writePending(context)
        let waiting = (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        guard waiting < CarHost.audioWatcherBufferBytes, context.channel.isWritable else {
            fellBehind()
            return
        }
        sendMedia(channel: AudioTap.channel, payload)
    }

    /// Section 10.4's check of a payload written as it is: true when it fits;
    /// else nothing is written and the peer is closed with Goodbye
    /// FRAME_TOO_LARGE, never left with a silent gap.
    private func fitsOrCloses(_ payloadBytes: Int, _ kind: FrameKind) -> Bool {
        guard OutboundFrameCheck.payloadFits(payloadBytes, maxPayload: maxPayload) else {
            closeOversized("the daemon cannot send you a \(kind) frame of \(payloadBytes) bytes (over max_payload_bytes \(maxPayload)); reconnect")
            return false
        }
        return true
    }

    /// The Car refused a DATA frame of this peer.
    func refuseData(_ code: HUErrorCode, _ message: String) {
        perform(machine.refuse(code, message, now: monotonicMilliseconds()))
    }

    /// The Car refused a one-way message of this peer (a SessionCredit).
    func refuse(_ result: HUResult, requestID: UInt32) {
        perform(machine.refuse(result, requestID: requestID, now: monotonicMilliseconds()))
    }

    private func write(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        writePending(context)
        context.write(wrapOutboundOut(buffer), promise: nil)
        bytesWritten += buffer.readableBytes
        if !needsFlush {
            needsFlush = true
            host.markDirty(self)
        }
        // Bound what a peer that does not read can make us hold. A peer that
        // reads is never over it: its requests wait while its answers pass
        // the high-water mark (at most `max_outbound_bytes`), so they pass it
        // by one frame at most (section 10.5).
        let limit = host.configuration.maxOutboundBytes + Int(host.configuration.connection.limits.maxPayloadBytes) + FrameHeader.size
        if !context.channel.isWritable,
            let pending = try? context.channel.syncOptions?.getOption(.bufferedWritableBytes),
            pending > limit
        {
            cutOffSlowConsumer("\(pending) bytes waiting for the peer (limit \(host.configuration.maxOutboundBytes) and one frame)")
        }
    }

    func flushIfNeeded() {
        guard needsFlush else { return }
        guard let context else {
            needsFlush = false
            return
        }
        // While `needsFlush` is still set: `write` would otherwise mark this
        // peer dirty again, and the host's pass flush it a second time for nothing.
        writePending(context)
        needsFlush = false
        context.flush()
    }

    /// Goodbye(code, reason), then close once it is written.
    func closeWithGoodbye(_ code: HUErrorCode, _ reason: String) {
        guard open, let context else { return }
        open = false
        machine.closed()
        tick?.cancel()
        if departure == .lost { departure = .cutOff(code) }
        logger.debug("closing", metadata: ["code": "\(code)", "reason": "\(reason)"])
        guard transport == .unix || tlsEstablished else {
            // TCP is TLS (section 20.8): before the handshake no frame can reach
            // the peer in clear, so the close is all it gets (section 10.1, "Over TLS").
            context.close(promise: nil)
            return
        }
        let goodbye = OutboundFrameCheck.goodbye(code, reason, allocator: context.channel.allocator, maxPayload: maxPayload)
        needsFlush = false
        writePending(context)  // what it was sent before, then the Goodbye
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(goodbye)).whenComplete { _ in
            channel.close(promise: nil)
        }
        // A peer that reads nothing would keep the Goodbye (and us) waiting.
        channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }

    /// The peer does not read. Nothing more is queued for it and nothing more
    /// read from it; its Goodbye goes behind what it has not read yet (at most
    /// the write buffer's high-water mark plus one frame, since HMI state is
    /// coalesced), and the connection closes once the Goodbye is written, or
    /// after `slowConsumerGoodbyeMilliseconds` if the peer never reads again.
    private func cutOffSlowConsumer(_ reason: String) {
        guard open, let context else { return }
        logger.notice("cutting off slow consumer", metadata: ["reason": "\(reason)"])
        departure = .cutOff(.slowConsumer)
        open = false
        machine.closed()
        tick?.cancel()
        needsFlush = false
        pending = nil  // nothing more is queued for it
        let channel = context.channel
        channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        let goodbye = OutboundFrameCheck.goodbye(.slowConsumer, reason, allocator: channel.allocator, maxPayload: maxPayload)
        context.writeAndFlush(wrapOutboundOut(goodbye)).whenComplete { _ in channel.close(promise: nil) }
        let grace = host.configuration.slowConsumerGoodbyeMilliseconds
        channel.eventLoop.scheduleTask(in: .milliseconds(Int64(clamping: grace))) { channel.close(promise: nil) }
        // The Car forgets the peer now, not when the socket finally closes (on
        // the next turn of the loop: this may run inside the Car's effects).
        if joined {
            joined = false
            let host = self.host, peer = peerID
            channel.eventLoop.execute { host.connectionClosed(peer, joined: true, departure: .cutOff(.slowConsumer)) }
        }
    }

    func shutdown(reason: String) {
        guard open else { return }
        perform(machine.shutdown(reason: reason))
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

    func forceClose() {
        open = false
        pending = nil
        machine.closed()
        context?.close(promise: nil)
    }

    // MARK: - Timers

    private func scheduleTick() {
        guard let context, let deadline = machine.nextDeadline else { return }
        tick?.cancel()
        tickDeadline = deadline
        tick = context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(deadline * 1_000_000)) { [weak self] in
            self?.tickFired()
        }
    }

    private func rescheduleTickIfSooner() {
        if let deadline = machine.nextDeadline, deadline < tickDeadline { scheduleTick() }
    }

    private func tickFired() {
        tick = nil
        tickDeadline = .max
        let now = monotonicMilliseconds()
        // While its output waits above the high-water mark the peer is not
        // read (section 10.2): its PONGs wait too. Silence is not judged then;
        // a peer that takes nothing is cut off as a slow consumer instead.
        if let context, !context.channel.isWritable { machine.heard(now: now) }
        perform(machine.tick(now: now), now: now)
        host.flush()
        if open { scheduleTick() }
    }
}

// MARK: - Restart handover (PROTOCOL.md section 22)

/// A connection as the previous daemon process handed it over.
struct RestoredConnection {
    var peerID: PeerID
    var info: PeerInfo
    var version: UInt32
}

extension ConnectionHandler {
    /// First step of a handover: nothing more is read (what the kernel had
    /// already given NIO lands in `tap`, in front of this handler), the
    /// heartbeat stops, and frames held back are handled now (their answers
    /// are written like any other). A partial frame stays in the assembler
    /// until `handoverState` takes it.
    func beginHandover(tap: HandoverTap) -> EventLoopFuture<Void> {
        guard open, let context else { return host.eventLoop.makeFailedFuture(HandoverRefused.closed) }
        handingOver = true
        tick?.cancel()
        tick = nil
        tickDeadline = .max
        slowConsumerTimer?.cancel()
        slowConsumerTimer = nil
        let channel = context.channel
        // Frames held back by backpressure are handled now, like the decoder's.
        serveHeld(context: context, evenIfBehind: true)
        do {
            try channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
            try channel.pipeline.syncOperations.addHandler(tap, position: .first)
            return channel.eventLoop.makeSucceededVoidFuture()
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
    }

    /// Completes once everything written so far is in the kernel's socket
    /// buffer (writes complete in order: an empty write after them is the
    /// barrier); then `isDrained`.
    func flushBarrier() -> EventLoopFuture<Void> {
        guard open, let context else { return host.eventLoop.makeFailedFuture(HandoverRefused.closed) }
        needsFlush = false
        writePending(context)
        let barrier = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)))
        barrier.assumeIsolated().whenSuccess { [weak self] in self?.isDrained = true }
        return barrier
    }

    /// A peer the snapshot does not carry (cluster, accessory, a handshake
    /// in progress): Goodbye(SHUTTING_DOWN) and out of the Car now.
    func leaveForRestart(_ reason: String) {
        if joined {
            perform(machine.shutdown(reason: reason))
            joined = false
            host.connectionClosed(peerID, joined: true, departure: .cutOff(.shuttingDown))
        } else {
            shutdown(reason: reason)
        }
    }

    /// Whether the connection can go to the next process with its socket: not
    /// over TLS, whose session state stays in this process (PROTOCOL.md
    /// section 22: a TLS phone reconnects and resumes).
    var canBeHandedOver: Bool { transport != .tcp }

    /// The state that goes with the socket: role, version and the bytes read
    /// but not yet parsed (the assembler's partial frame, then what the tap held).
    func handoverState(tap: HandoverTap) -> HUConnectionSnapshot? {
        guard open else { return nil }
        // Version 0: a connection still waiting for its Hello (it starts afresh
        // in the next process, Hello bytes already sent included).
        guard let version = isAwaitingHello ? 0 : machine.negotiatedVersion else { return nil }
        // Amid an oversized frame's payload, dropped as it arrives: the next
        // process could not know where the next frame starts (closed; a phone resumes).
        guard assembler.skipping == 0 else { return nil }
        var state = HUConnectionSnapshot()
        state.peerID = peerID
        state.transport = transport.rawValue
        state.version = version
        var pending = assembler.takePartial() ?? ByteBuffer()
        for var chunk in tap.held { pending.writeBuffer(&chunk) }
        state.pendingInput = .init(pending.readableBytesView)
        return state
    }

    /// Connected, no Hello yet: nothing to carry but the bytes.
    var isAwaitingHello: Bool {
        if case .awaitingHello = machine.state { return true }
        return false
    }

    /// The channel, for the server to find its descriptor; nil when closed.
    var channel: Channel? { context?.channel }

    /// The connection went to the next process: forget it without a word.
    func relinquish() {
        open = false
        machine.closed()
        tick?.cancel()
        slowConsumerTimer?.cancel()
    }
}

enum HandoverRefused: Error {
    case closed
}

/// Put in front of a connection's pipeline for a handover: holds whatever is
/// still read from the socket (at most a read NIO had already asked for) so
/// it goes to the next process with the socket.
final class HandoverTap: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private(set) var held: [ByteBuffer] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        held.append(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {}
}
