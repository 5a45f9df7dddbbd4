import HeadUnitCore
import HeadUnitWire
import NIOCore

/// What a connection framed and wrote, between its handler and the channel.
struct OutboundWrites {
    /// Envelopes framed by `send` and not yet written: everything a peer is
    /// sent between flushes goes to the pipeline as one buffer, one write.
    private var pending: ByteBuffer?
    /// Bytes handed to the channel so far: less what still waits in it, what
    /// the peer took (section 10.5's clock measures progress by it).
    private(set) var bytesWritten = 0
    /// Flush bookkeeping: written to since the last flush, so on the host's
    /// list of connections flushed at the end of the batch (once each).
    private(set) var onFlushList = false
    /// Section 10.5's clock, while output waits for a peer that is not taking it.
    var slowConsumerTimer: Scheduled<Void>?

    var slowConsumerClockRuns: Bool { slowConsumerTimer != nil }

    mutating func stopSlowConsumerClock() {
        slowConsumerTimer?.cancel()
        slowConsumerTimer = nil
    }

    /// Appends to `pending`; true when the connection must join the flush list.
    mutating func append(allocator: @autoclosure () -> ByteBufferAllocator, _ write: (inout ByteBuffer) -> Void) -> Bool {
        // The allocator is asked only for a new buffer (reaching it through
        // the channel cost as much as a small frame's encoding).
        var buffer = pending ?? allocator().buffer(capacity: 512)
        pending = nil  // so the buffer is uniquely referenced while it grows
        write(&buffer)
        pending = buffer
        return markWritten()
    }

    var pendingBytes: Int { pending?.readableBytes ?? 0 }

    mutating func takePending() -> ByteBuffer? {
        defer { pending = nil }
        return pending
    }

    /// `bytes` went to the channel; true when the connection must join the flush list.
    mutating func wrote(_ bytes: Int) -> Bool {
        bytesWritten += bytes
        return markWritten()
    }

    /// `bytes` went to the channel and were flushed with it.
    mutating func count(_ bytes: Int) {
        bytesWritten += bytes
    }

    /// True when the connection must join the flush list.
    mutating func markWritten() -> Bool {
        guard !onFlushList else { return false }
        onFlushList = true
        return true
    }

    mutating func flushed() {
        onFlushList = false
    }

    /// Nothing more goes to the peer (closed, or cut off as a slow consumer).
    mutating func discard() {
        pending = nil
        onFlushList = false
    }

    /// What the peer took of what it was sent (TLS adds a few bytes a record
    /// in the channel, so this only errs towards "took nothing").
    func bytesTaken(_ channel: Channel) -> Int {
        bytesWritten - Self.waiting(in: channel)
    }

    /// Bytes written to the channel that it has not passed to the kernel yet.
    static func waiting(in channel: Channel) -> Int {
        (try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }
}

// MARK: - Output (called by the host and its hubs)

extension ConnectionHandler {
    /// Frames this peer's envelopes straight into `pending`: everything it is
    /// sent between flushes goes to the pipeline as one buffer, one write.
    func send(_ envelope: HUEnvelope) {
        guard lifecycle.isOpen, let context else { return }
        appendToPending(context) { encode(envelope, into: &$0) }
    }

    /// Adds to `pending` and asks the host for a flush at the end of the round.
    private func appendToPending(_ context: ChannelHandlerContext, _ write: (inout ByteBuffer) -> Void) {
        if output.append(allocator: context.channel.allocator, write) { host.markDirty(self) }
        // Past the high-water mark the bytes go to the channel now, so its
        // writability (and backpressure, section 10.2) sees them.
        if output.pendingBytes >= host.configuration.writeHighWaterMark { writePending(context) }
    }

    /// What `send` framed since the last write, written before anything else
    /// goes out so the order is kept.
    func writePending(_ context: ChannelHandlerContext) {
        guard let buffer = output.takePending(), buffer.readableBytes > 0 else { return }
        write(buffer, context: context)
    }

    /// Whether the peer takes what it is sent (an HMI that does not is sent
    /// state later, coalesced).
    var isKeepingUp: Bool { lifecycle.isOpen && (context?.channel.isWritable ?? false) }

    /// The frame for `envelope` shared by several peers, or nil when it
    /// would be over the frame limit (the caller closes the recipients:
    /// `closeOversized`). Checked by `OutboundFrameCheck`, as every frame.
    func encode(_ envelope: HUEnvelope) -> ByteBuffer? {
        guard let context else { return nil }
        return OutboundFrameCheck.frame(envelope, allocator: context.channel.allocator, maxPayload: maxPayload)
    }

    var maxPayload: Int { Int(host.configuration.connection.limits.maxPayloadBytes) }

    /// Appends the frame to `buffer` through the one outbound check (section
    /// 10.4): an answer over the maximum becomes Result{ANSWER_TOO_LARGE};
    /// anything else over it is not sent and the peer is told (Goodbye
    /// FRAME_TOO_LARGE), never left with a silent gap.
    private func encode(_ envelope: HUEnvelope, into buffer: inout ByteBuffer) {
        switch OutboundFrameCheck.write(envelope, into: &buffer, maxPayload: maxPayload, writer: &host.frameWriter.writer) {
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

    /// A frame encoded once for several peers (the bytes are not copied).
    func writeShared(_ frame: ByteBuffer) {
        guard lifecycle.isOpen, let context else { return }
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
        guard lifecycle.isOpen, let context else { return }
        // Section 10.4's one size check, as in `writeShared`.
        guard fitsOrCloses(frame.readableBytes - FrameHeader.size, .message) else { return }
        writePending(context)
        context.write(wrapOutboundOut(frame), promise: nil)
        if flushNow {
            output.count(frame.readableBytes)
            context.flush()
        } else if output.wrote(frame.readableBytes) {
            host.markDirty(self)
        }
    }

    /// Whether some of what this peer was sent is not in the kernel yet
    /// (queued in NIO, or not even handed to it); false once closed.
    var hasUnsentBytes: Bool {
        guard lifecycle.isOpen, let context else { return false }
        return output.pendingBytes > 0 || OutboundWrites.waiting(in: context.channel) > 0
    }

    /// `drained` runs on the loop, on a later tick, once everything written
    /// to this peer so far has gone to the socket, or the connection closed
    /// (writes complete in order: an empty write after them is the marker).
    func whenDrained(_ drained: @escaping () -> Void) {
        guard lifecycle.isOpen, let context else {
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
        if output.markWritten() { host.markDirty(self) }
    }

    /// PING (8 bytes of our clock) and PONG (the payload of the peer's PING:
    /// at most 64 bytes, section 2): checked like every frame all the same.
    func sendFrame(kind: FrameKind, payload: ByteBuffer) {
        guard lifecycle.isOpen, let context else { return }
        guard fitsOrCloses(payload.readableBytes, kind) else { return }
        var buffer = context.channel.allocator.buffer(capacity: FrameHeader.size + payload.readableBytes)
        buffer.writeFrame(kind: kind, payload: payload)
        write(buffer, context: context)
    }

    /// Session bytes: the frame as it was read when there is one (the same
    /// kind, channel and length: nothing to build), else a new header and
    /// the payload as it came.
    func sendData(channel: UInt32, _ payload: ByteBuffer, wire: ByteBuffer? = nil) {
        guard lifecycle.isOpen, let context else { return }
        guard fitsOrCloses(payload.readableBytes, .data) else { return }
        if let wire {
            write(wire, context: context)
            return
        }
        writeWithHeader(kind: .data, channel: channel, payload, context: context)
    }

    /// A VIDEO frame for a viewer (section 25.5): written, header new and
    /// payload shared, only while less than `videoViewerBufferBytes` waits
    /// unsent for this peer; else dropped (false), so video never piles up
    /// in front of its control messages. A frame over the maximum (the daemon
    /// takes none, section 2) is not "behind": the viewer is closed with
    /// Goodbye FRAME_TOO_LARGE, as for any frame (true: nothing to ask a
    /// keyframe for).
    func sendVideo(channel: UInt32, _ payload: ByteBuffer) -> Bool {
        guard lifecycle.isOpen, let context else { return true }
        guard fitsOrCloses(payload.readableBytes, .video) else { return true }
        writePending(context)
        guard OutboundWrites.waiting(in: context.channel) < host.configuration.videoViewerBufferBytes, context.channel.isWritable else {
            fellBehind()
            return false
        }
        writeWithHeader(kind: .video, channel: channel, payload, context: context)
        return true
    }

    /// The car's microphone samples (section 24): a MEDIA frame on the
    /// stream's channel (8 bytes of timestamp and 20 ms of 16 kHz mono PCM,
    /// 648 bytes; checked like every frame).
    func sendMedia(channel: UInt32, _ payload: ByteBuffer) {
        guard lifecycle.isOpen, let context else { return }
        guard fitsOrCloses(payload.readableBytes, .media) else { return }
        writeWithHeader(kind: .media, channel: channel, payload, context: context)
    }

    /// A chunk of the car's output for a watcher (section 24.7): written only
    /// while less than `audioWatcherBufferBytes` waits unsent for this peer,
    /// else skipped (latest wins: stale audio is never queued).
    func sendAudioOutput(_ payload: ByteBuffer) {
        guard lifecycle.isOpen, let context else { return }
        writePending(context)
        guard OutboundWrites.waiting(in: context.channel) < CarHost.audioWatcherBufferBytes, context.channel.isWritable else {
            fellBehind()
            return
        }
        sendMedia(channel: AudioTap.channel, payload)
    }

    /// A new header, then the payload as it came (shared, not copied).
    private func writeWithHeader(kind: FrameKind, channel: UInt32, _ payload: ByteBuffer, context: ChannelHandlerContext) {
        var header = context.channel.allocator.buffer(capacity: FrameHeader.size)
        header.writeFrameHeader(FrameHeader(kind: kind, flags: 0, channel: channel, length: UInt32(payload.readableBytes)))
        write(header, context: context)
        write(payload, context: context)
    }

    private func write(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        writePending(context)
        context.write(wrapOutboundOut(buffer), promise: nil)
        if output.wrote(buffer.readableBytes) { host.markDirty(self) }
        // Bound what a peer that does not read can make us hold. A peer that
        // reads is never over it: its requests wait while its answers pass
        // the high-water mark (at most `max_outbound_bytes`), so they pass it
        // by one frame at most (section 10.5).
        let limit = host.configuration.maxOutboundBytes + Int(host.configuration.connection.limits.maxPayloadBytes) + FrameHeader.size
        if !context.channel.isWritable {
            let waiting = OutboundWrites.waiting(in: context.channel)
            if waiting > limit {
                cutOffSlowConsumer("\(waiting) bytes waiting for the peer (limit \(host.configuration.maxOutboundBytes) and one frame)")
            }
        }
    }

    /// The host's flush at the end of a batch.
    func flushIfNeeded() {
        guard output.onFlushList else { return }
        guard let context else {
            output.flushed()
            return
        }
        // While still on the list: `write` would otherwise put this peer on
        // it again, and the host's pass flush it a second time for nothing.
        writePending(context)
        output.flushed()
        context.flush()
    }

    // MARK: - The slow-consumer rule (section 10.5)

    /// The peer does not read. Nothing more is queued for it and nothing more
    /// read from it; its Goodbye goes behind what it has not read yet (at most
    /// the write buffer's high-water mark plus one frame, since HMI state is
    /// coalesced), and the connection closes once the Goodbye is written, or
    /// after `slowConsumerGoodbyeMilliseconds` if the peer never reads again.
    func cutOffSlowConsumer(_ reason: String) {
        guard let context else { return }
        let close = lifecycle.close(.slowConsumer)
        guard close != .none else { return }
        logger.notice("cutting off slow consumer", metadata: ["reason": "\(reason)"])
        machine.closed()
        cancelTimers()
        output.discard()  // nothing more is queued for it
        let channel = context.channel
        channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        if close == .goodbye {
            let goodbye = OutboundFrameCheck.goodbye(.slowConsumer, reason, allocator: channel.allocator, maxPayload: maxPayload)
            context.writeAndFlush(wrapOutboundOut(goodbye)).whenComplete { _ in channel.close(promise: nil) }
            let grace = host.configuration.slowConsumerGoodbyeMilliseconds
            channel.eventLoop.scheduleTask(in: .milliseconds(Int64(clamping: grace))) { channel.close(promise: nil) }
        } else {
            context.close(promise: nil)
        }
        // The Car forgets the peer now, not when the socket finally closes (on
        // the next turn of the loop: this may run inside the Car's effects).
        if lifecycle.leaveCarNow() {
            let host = self.host, peer = peerID
            channel.eventLoop.execute { host.connectionClosed(peer, joined: true, departure: .cutOff(.slowConsumer)) }
        }
    }

    /// Output waits for this peer and it was not taking it: its writes passed
    /// the high-water mark, or a frame shared with other peers was dropped or
    /// deferred for it (video, the car's audio, a metadata update: they never
    /// pile up, so they never make it unwritable). Section 10.5's clock runs
    /// from now, whatever the output is: the one slow-consumer rule.
    func fellBehind() {
        guard !output.slowConsumerClockRuns, lifecycle.isServing, let context else { return }
        armSlowConsumerTimer(context: context)
    }

    /// Cuts the peer off once it took nothing for `slow_consumer_timeout_ms`
    /// while output waited for it (section 10.5). A peer that took some bytes
    /// meanwhile is slow, not stalled: the clock starts again; one with
    /// nothing waiting any more caught up: the clock stops.
    private func armSlowConsumerTimer(context: ChannelHandlerContext) {
        let timeout = host.configuration.slowConsumerTimeoutMilliseconds
        let taken = output.bytesTaken(context.channel)
        output.slowConsumerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(clamping: timeout))) { [weak self] in
            guard let self else { return }
            self.output.slowConsumerTimer = nil
            guard self.lifecycle.isServing, let context = self.context, self.hasUnsentBytes else { return }
            if self.output.bytesTaken(context.channel) > taken {
                self.armSlowConsumerTimer(context: context)
            } else {
                self.cutOffSlowConsumer("the peer took no data for \(timeout) ms")
            }
        }
    }

    // MARK: - Refusals the Car decided

    /// The Car refused a DATA frame of this peer.
    func refuseData(_ code: HUErrorCode, _ message: String) {
        perform(machine.refuse(code, message, now: now))
    }

    /// The Car refused a one-way message of this peer (a SessionCredit).
    func refuse(_ result: HUResult, requestID: UInt32) {
        perform(machine.refuse(result, requestID: requestID, now: now))
    }
}
