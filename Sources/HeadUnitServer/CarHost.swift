import HeadUnitCore
import HeadUnitSecurity
import HeadUnitWire
import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Owns the `Car` and every connection's handler, on the one event loop that
/// serves them all: no locks, no hops. Dispatches what the connections pass
/// it to the Car and performs the Car's effects, batched (`Batch`): sends
/// are written at once and flushed once per read batch; closes say Goodbye
/// first; timers go on the loop. The other concerns are values or objects
/// of their own it composes: admission, pairing, the observers (HMIs,
/// clusters, the service manager's status), its lifecycle, the audio engine.
// @unchecked: confined to `eventLoop`; every entry point runs there.
final class CarHost: @unchecked Sendable {
    let eventLoop: EventLoop
    let logger: Logger
    let configuration: ServerConfiguration
    var car: Car
    /// Every connection's handler by peer id, and the next id to give.
    var connections = ConnectionTable()
    /// What to flush, and what the batch's requests caused for the others.
    private var batch = Batch()
    var timers: [CarTimer: Scheduled<Void>] = [:]
    /// Running, stopping or handed over (Handover.swift).
    var lifecycle = HostLifecycle()
    /// The HMIs' screens, the clusters' metadata stream, the service manager's status line.
    private(set) var observers: Observers
    /// Connection caps, the unauthenticated TCP set, the Unix reserve and the TCP
    /// connections waiting for their first flight (PROTOCOL.md section 10.1; HostAdmission.swift).
    var admission: HostAdmission
    /// Paired phones, the pairing window, attempts in progress and the list's
    /// way to disk (PROTOCOL.md section 20; Pairing.swift).
    var pairing: HostPairing
    /// Decoding and mixing, off this loop (PROTOCOL.md section 24.5).
    let audioEngine: AudioEngine
    /// Output waiting unsent for a watcher past which its chunks are skipped (section 24.7).
    static let audioWatcherBufferBytes = 64 * 1024

    /// `disk`: where the paired devices are written (the server's thread pool
    /// writing `configuration.pairingStore`); nil keeps them in memory only.
    init(eventLoop: EventLoop, configuration: ServerConfiguration, logger: Logger, disk: (any PairedDeviceDisk)?) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.logger = logger
        self.car = Car(configuration: configuration.car)
        self.observers = Observers(cluster: ClusterHub(maxPayload: Int(configuration.connection.limits.maxPayloadBytes)))
        self.admission = HostAdmission(counts: Admission(caps: configuration.connectionCaps, access: configuration.connection.security.access))
        self.pairing = HostPairing(
            registry: PairingRegistry(devices: configuration.pairedDevices, codeValidMilliseconds: configuration.pairingCodeValidMilliseconds),
            writes: PairingWrites(disk: disk, eventLoop: eventLoop, logger: logger))
        // The engine reports back through the loop: credit and microphone samples are the Car's.
        let box = WeakHost()
        self.audioEngine = AudioEngine(
            configuration: configuration.audio, jitterMilliseconds: configuration.car.audio.jitterMilliseconds,
            windowMilliseconds: configuration.car.audio.windowMilliseconds, logger: logger
        ) { [eventLoop] report in
            eventLoop.execute { box.host?.audioReport(report) }
        }
        box.host = self
    }

    /// The engine's way back to the host without keeping it alive.
    // @unchecked: `host` is set once in init, before the engine can run, and read on the loop.
    private final class WeakHost: @unchecked Sendable {
        weak var host: CarHost?
    }

    /// The mixer played frames (credit back to the apps) and the microphone captured chunks.
    func audioReport(_ report: AudioReport) {
        performDeferred()
        if let output = report.outputStatus { car.audioOutput = output }
        if !report.played.isEmpty { perform(car.audioPlayed(report.played)) }
        for chunk in report.captured {
            perform(car.microphoneCaptured(stream: chunk.stream, timestamp: chunk.timestamp, pcm: chunk.pcm))
        }
        // The output's chunks, one buffer shared by every watcher (section 24.7).
        for payload in report.output {
            for peer in car.audioTap.watchers { connections[peer]?.sendAudioOutput(payload) }
        }
        flush()
    }

    func deliverMedia(channel: UInt32, _ payload: ByteBuffer, from peer: PeerID) {
        performDeferred()
        perform(car.receiveMedia(channel: channel, payload, from: peer))
    }

    var connectionCount: Int { connections.count }
    /// Where a connection's answers and events, and the HMIs' screens, are encoded.
    var frameWriter: FrameWriter { batch.frames }

    // MARK: - Connections

    /// A new connection's peer id, taken when its handler is made (its Welcome carries it).
    func allocatePeerID() -> PeerID {
        eventLoop.preconditionInEventLoop()
        return connections.allocatePeerID()
    }

    /// The handler serves `peer` from now: a new connection's id, or one a
    /// previous process handed over (PROTOCOL.md section 22), never reused.
    func register(_ handler: ConnectionHandler, as peer: PeerID) {
        eventLoop.preconditionInEventLoop()
        connections.register(handler, as: peer)
    }

    func peerJoined(_ peer: PeerID, info: PeerInfo) {
        // Joined means authenticated where that is required: never evicted as
        // a stranger from now on; a device past its share evicts its own oldest.
        if let (victim, reason) = admission.counts.authenticated(peer, device: info.device?.deviceID) {
            noteEviction(reason)
            connections[victim]?.closeWithGoodbye(.connectionEvicted, reason)
            // The Car lets it go now, not when its TLS close completes (a
            // dead link never answers close_notify): a session it carried
            // waits for the newcomer to resume it (section 21).
            performDeferred()
            perform(car.peerLeft(victim, departure: .cutOff(.connectionEvicted)))
        }
        performDeferred()
        perform(car.peerJoined(peer, info: info))
        checkStatus()
    }

    func deliver(_ envelope: HUEnvelope, from peer: PeerID, now: UInt64, unknownEnum: KnownEnums.Walked = .notYet) {
        if answerPairingRequest(envelope, from: peer, now: now) { return }
        // An HMI's own screens go out before its Result, as they always did.
        guard !car.hmiPeerIDs.contains(peer) else {
            performDeferred()
            perform(car.receive(envelope, from: peer, nowMilliseconds: now, unknownEnum: unknownEnum))
            checkStatus()
            return
        }
        let effects = car.receive(envelope, from: peer, nowMilliseconds: now, publishingScreens: false, unknownEnum: unknownEnum)
        // A credit grant (one per quarter window of a streaming session, 18.5)
        // changes no screen, status or metadata: nothing to publish after it.
        let grant = if case .sessionCredit = envelope.body { true } else { false }
        if !grant { batch.screensPending = true }
        // The requester's own effects now, in order; the others' after the read batch.
        var dropped: [(PeerID, UInt32)] = []
        for effect in effects {
            let recipient: PeerID?
            switch effect {
            case .send(let to, _), .close(let to, _, _), .sendData(let to, _, _), .refuseData(let to, _, _),
                .refuseRequest(let to, _, _), .sendVideo(let to, _, _), .sendMedia(let to, _, _):
                recipient = to
            case .audio:
                recipient = peer  // the mixer hears it at once
            case .toHMIs:
                recipient = nil
            case .hmiJoined(let to, _):
                recipient = to
            case .startTimer, .cancelTimer:
                recipient = peer
            }
            if recipient == peer { perform(effect, dropped: &dropped) } else { batch.deferred.append(effect) }
        }
        videoDropped(dropped)
        if !grant { batch.statusPending = true }
    }

    /// A DATA frame: checked by the Car (no bytes go there), then `wire`,
    /// the frame as it was read, goes to the receiver as it is.
    func deliverData(channel: UInt32, _ payload: ByteBuffer, wire: ByteBuffer?, from peer: PeerID) {
        performDeferred()
        switch car.routeData(channel: channel, byteCount: payload.readableBytes, from: peer) {
        case .relay(let receiver):
            connections[receiver]?.sendData(channel: channel, payload, wire: wire)
        case .handled(let effects):
            if !effects.isEmpty { perform(effects) }
        }
    }

    /// A phone's VIDEO frame (section 25): written at once to every viewer
    /// that takes it, the payload shared, never queued here.
    func deliverVideo(channel: UInt32, _ header: VideoFrameHeader, _ payload: ByteBuffer, from peer: PeerID, now: UInt64) {
        performDeferred()
        perform(car.receiveVideo(channel: channel, header, payload, from: peer, now: now))
    }

    /// The connection is gone; `joined` says whether the Car knew it.
    func connectionClosed(_ peer: PeerID, joined: Bool, departure: PeerDeparture) {
        connections.remove(peer)
        pairingConnectionClosed(peer)
        observers.remove(peer)
        // Once handed over, the Car's state is the next process's: it learns
        // of a peer that did not make it from the snapshot.
        if joined, !lifecycle.handedOver {
            performDeferred()
            perform(car.peerLeft(peer, departure: departure))
            checkStatus()
        }
        // Not inside a read batch: whatever this close queued for the others
        // goes out now, from the Car or not (a pairing attempt the connection
        // abandoned reached the HMIs only with their next heartbeat, issue 48).
        flush()
        if connections.isEmpty, let promise = lifecycle.allClosedPromise {
            lifecycle.allClosedPromise = nil
            promise.succeed(())
        }
    }

    // MARK: - Pairing and authentication (PROTOCOL.md section 20)

    /// The HMI's pairing requests (role already checked): answered from the
    /// registry, never seen by the Car.
    private func answerPairingRequest(_ envelope: HUEnvelope, from peer: PeerID, now: UInt64) -> Bool {
        var result = HUResult()
        switch envelope.body {
        case .startPairing(let start):
            switch pairing.registry.open(code: PhoneKeys.pairingCode(), allowedEntitlements: start.allowedEntitlements, now: now) {
            case .success(let info):
                result.pairing = info
                logger.notice(
                    "pairing window opened",
                    metadata: ["valid_ms": "\(info.validMs)", "by": "\(peer)", "entitlements": "\(start.allowedEntitlements)"])
            case .failure(let violation):
                result.code = violation.code
                result.message = violation.message
            }
        case .listPairedDevices:
            result.pairing = pairing.registry.wire
        case .removePairedDevice(let remove):
            if pairing.registry.remove(remove.deviceID) {
                admission.counts.forgetTickets(of: remove.deviceID)
                // Answered at once, like every HMI request; the disk follows (a failure is logged).
                _ = pairing.writes.save(pairing.registry.devices)
                logger.notice("paired device removed", metadata: ["device": "\(remove.deviceID)"])
            } else {
                result.code = .unknownDevice
                result.message = "no paired device has the id '\(remove.deviceID)'"
            }
        default:
            return false
        }
        var answer = HUEnvelope()
        answer.requestID = envelope.requestID
        answer.body = .result(result)
        connections[peer]?.send(answer)
        return true
    }

    /// A phone's Authenticate: the device must be paired and the signature
    /// over this connection's challenge valid.
    func verify(_ request: HUAuthenticate, message: [UInt8]) -> Result<AuthenticatedDevice, AuthenticationFailure> {
        guard let device = pairing.device(request.deviceID) else {
            return .failure(AuthenticationFailure(reason: "device '\(request.deviceID)' is not paired with this car: pair it first (`headunitctl pair` on the car)"))
        }
        guard PhoneKeys.isValidSignature(Array(request.signature), publicKey: device.publicKey, message: message) else {
            return .failure(AuthenticationFailure(reason: "the signature does not verify with device '\(device.id)''s key"))
        }
        return .success(
            AuthenticatedDevice(deviceID: device.id, name: device.name, entitlements: device.entitlementPolicy(global: configuration.car.entitlements)))
    }

    struct AuthenticationFailure: Error {
        var reason: String
    }

    func unixMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    // MARK: - Effects

    func perform(_ effects: [CarEffect]) {
        performNow(effects)
    }

    private func performNow(_ effects: [CarEffect]) {
        var dropped: [(PeerID, UInt32)] = []
        for effect in effects { perform(effect, dropped: &dropped) }
        videoDropped(dropped)
    }

    /// Video frames a viewer was behind for (`sendVideo`): the Car learns of them after the effects that sent them.
    private func videoDropped(_ dropped: [(PeerID, UInt32)]) {
        guard !dropped.isEmpty else { return }
        let now = eventLoop.nowMilliseconds
        for (peer, channel) in dropped { performNow(car.videoDropped(channel: channel, viewer: peer, now: now)) }
    }

    /// Consumed: the switch moves the payloads out instead of copying the effect.
    private func perform(_ effect: consuming CarEffect, dropped: inout [(PeerID, UInt32)]) {
        switch consume effect {
        case .send(let peer, let envelope):
            connections[peer]?.send(envelope)
        case .toHMIs(let stream, let envelope, let images):
            observers.hmi.publish(stream, envelope, images: images, car: &car, connections: connections.byPeer, writer: frameWriter)
        case .hmiJoined(let peer, let streams):
            observers.hmi.joined(peer, streams: streams, car: &car, handler: connections[peer])
        case .close(let peer, let code, let reason):
            connections[peer]?.closeWithGoodbye(code, reason)
        case .startTimer(let timer, let milliseconds):
            timers[timer]?.cancel()
            timers[timer] = eventLoop.scheduleTask(in: .milliseconds(Int64(clamping: milliseconds))) { [weak self] in
                self?.timerFired(timer)
            }
        case .cancelTimer(let timer):
            timers.removeValue(forKey: timer)?.cancel()
        case .sendData(let peer, let channel, let payload):
            connections[peer]?.sendData(channel: channel, payload)
        case .sendVideo(let peer, let channel, let payload):
            guard let connection = connections[peer] else { return }
            if !connection.sendVideo(channel: channel, payload) {
                // Behind: this frame is dropped for it (latest frame wins) and it waits for a keyframe.
                dropped.append((peer, channel))
            }
        case .refuseData(let peer, let code, let message):
            connections[peer]?.refuseData(code, message)
        case .refuseRequest(let peer, let result, let requestID):
            connections[peer]?.refuse(result, requestID: requestID)
        case .audio(let command):
            if !audioEngine.submit(command) {
                logger.error("audio handoff full: command dropped", metadata: ["capacity": "\(AudioEngine.capacity)"])
            }
        case .sendMedia(let peer, let channel, let payload):
            connections[peer]?.sendMedia(channel: channel, payload)
        }
    }

    private func timerFired(_ timer: CarTimer) {
        timers[timer] = nil
        performDeferred()
        perform(car.timerFired(timer, nowMilliseconds: eventLoop.nowMilliseconds))
        checkStatus()
        flush()
    }

    // MARK: - HMI fan-out

    /// The HMI can take writes again: the latest state of what it skipped
    /// (HMIHub). (The phone's owed state goes out with the flush that follows.)
    func caughtUp(_ peer: PeerID) {
        performDeferred()
        guard let handler = connections[peer], car.hmiPeerIDs.contains(peer) else { return }
        observers.hmi.caughtUp(peer, car: &car, handler: handler)
        flush()
    }

    func catchUpHMIsBeforeHandover() {
        performDeferred()
        observers.hmi.catchUpAll(car: &car, connections: connections.byPeer)
        flush()
    }

    // MARK: - Flushing

    func markDirty(_ handler: ConnectionHandler) {
        batch.dirty.append(handler)
    }

    /// One flush per written connection, at the end of a read batch (or a timer).
    /// Answers first, then what the batch's requests caused for the others.
    func flush() {
        flushDirty()
        let deferredSent = performDeferred()
        let owedSent = sendOwedToPhone()
        guard deferredSent || owedSent else { return }
        flushDirty()
    }

    /// The state the phone is owed (accessory availability, 18.2), after
    /// everything else of the batch, and only while its connection takes
    /// writes: a phone behind gets the latest state when it is writable
    /// again (`caughtUp` flushes), never a queue of every change.
    private func sendOwedToPhone() -> Bool {
        let owed = car.takeOwedToPhone { [connections = connections.byPeer] phone in connections[phone]?.isKeepingUp ?? false }
        guard !owed.isEmpty else { return false }
        performNow(owed)
        return true
    }

    /// Sends what earlier requests deferred; false when there was nothing.
    @discardableResult
    func performDeferred() -> Bool {
        guard batch.hasDeferred else { return false }
        var (effects, screens) = batch.takeDeferred()
        if screens {
            let screens = car.publishScreenChanges()
            // Usually nothing else waits: the screens' array is taken as it is, not copied in.
            if effects.isEmpty { effects = screens } else { effects.append(contentsOf: screens) }
        }
        performNow(effects)
        if batch.statusPending {
            batch.statusPending = false
            checkStatus()
        }
        return true
    }

    private func flushDirty() {
        // A flush can come back here (a peer writable again): that inner call
        // returns, and this pass, which reads `dirty.count` afresh, flushes
        // whatever was marked meanwhile before it empties the list.
        guard batch.beginFlush() else { return }
        // By index, not through a copy (which left `dirty` shared: emptying it
        // allocated anew every time).
        var index = 0
        while index < batch.dirty.count {
            batch.dirty[index].flushIfNeeded()
            index += 1
        }
        batch.endFlush()
    }

    // MARK: - Status

    /// After every input: the metadata stream's snapshots and changes (ClusterHub).
    private func publishMetadata() {
        let taken = car.takeMetadata()
        // Nothing new for anyone (after most inputs): the hub already holds
        // the car's feed as of its last change (the version moves only with one).
        guard !taken.snapshots.isEmpty || !taken.changed.isEmpty else { return }
        observers.cluster.publish(snapshots: taken.snapshots, changed: taken.changed, feed: car.clusterFeed, connections: connections.byPeer)
    }

    func checkStatus() {
        publishMetadata()
        // Through inout: a getter called on this class's stored Car copies the whole Car first.
        let counts = { (car: inout Car) in car.counts }(&car)
        let summary = StatusSummary(phones: counts.phones, apps: counts.apps, scenes: counts.scenes)
        // Called outside `update`: the callback may read the host.
        if observers.status.update(summary) { observers.status.onChange?(summary) }
    }

    var summary: StatusSummary { observers.status.last }

    /// The service manager's status line (systemd's STATUS=), told of every change from now.
    func reportStatus(to callback: @escaping (StatusSummary) -> Void) {
        observers.status.onChange = callback
    }

    // MARK: - Shutdown

    /// Tells the Car, which says Goodbye(SHUTTING_DOWN) to its peers; whoever
    /// is still open afterwards (not handshaken, or not closed by the Car)
    /// gets the same Goodbye from here. Succeeds when every connection is gone.
    func beginShutdown(reason: String) -> EventLoopFuture<Void> {
        lifecycle.stopping = true
        performDeferred()
        perform(car.shutdown(reason: reason))
        for timer in timers.values { timer.cancel() }
        timers.removeAll()
        for handler in connections.values { handler.shutdown(reason: reason) }
        // Connections that sent nothing yet are owed nothing: closed.
        admission.closeFirstFlights()
        flush()
        if connections.isEmpty { return eventLoop.makeSucceededVoidFuture() }
        let promise = lifecycle.allClosedPromise ?? eventLoop.makePromise(of: Void.self)
        lifecycle.allClosedPromise = promise
        return promise.futureResult
    }

    /// After the grace period: drop whoever did not go.
    func forceCloseAll() {
        for handler in connections.values { handler.forceClose() }
    }
}

/// Every connection's handler by peer id, and the next id to give: ids
/// are never reused, not even across a restart (section 22).
struct ConnectionTable {
    private(set) var byPeer: [PeerID: ConnectionHandler] = [:]
    private(set) var nextPeerID: PeerID = 1

    subscript(peer: PeerID) -> ConnectionHandler? { byPeer[peer] }
    var count: Int { byPeer.count }
    var isEmpty: Bool { byPeer.isEmpty }
    var values: Dictionary<PeerID, ConnectionHandler>.Values { byPeer.values }
    var keys: Dictionary<PeerID, ConnectionHandler>.Keys { byPeer.keys }

    mutating func allocatePeerID() -> PeerID {
        defer { nextPeerID += 1 }
        return nextPeerID
    }

    mutating func register(_ handler: ConnectionHandler, as peer: PeerID) {
        byPeer[peer] = handler
        nextPeerID = max(nextPeerID, peer + 1)
    }

    mutating func remove(_ peer: PeerID) {
        byPeer[peer] = nil
    }

    /// A restored snapshot's next id: later ids stay above every id the previous process gave.
    mutating func continueAfter(_ next: PeerID) {
        nextPeerID = max(nextPeerID, next)
    }
}

/// A read batch's bookkeeping. Connections written to are flushed once at
/// its end. What a phone's (or cluster's) request caused for other peers
/// is deferred, in order, and sent at the end of the batch once the
/// requester's answer is flushed: the answer does not wait for the HMIs'
/// screens to be encoded, and the metadata stream is rebuilt once per
/// batch, not once per request. Per connection the order of messages is unchanged.
struct Batch {
    /// Connections written to since the last flush.
    var dirty: [ConnectionHandler] = []
    /// Where every frame written to a connection's pending buffer is encoded.
    let frames = FrameWriter()
    /// True while the host walks `dirty`.
    private var flushing = false
    var deferred: [CarEffect] = []
    var statusPending = false
    /// The Car's screens were not published after the batch's requests yet:
    /// rendered once per batch, after their answers.
    var screensPending = false

    var hasDeferred: Bool { !deferred.isEmpty || statusPending || screensPending }

    /// The deferred effects, and whether the screens are to be published after them.
    mutating func takeDeferred() -> (effects: [CarEffect], screens: Bool) {
        // Taken, not copied: copying left `deferred` shared, so emptying it allocated anew.
        var effects: [CarEffect] = []
        swap(&effects, &deferred)
        defer { screensPending = false }
        return (effects, screensPending)
    }

    /// Starts a pass over `dirty`; false when nothing is dirty or a pass is
    /// under way (the outer pass flushes what was marked meanwhile).
    mutating func beginFlush() -> Bool {
        guard !dirty.isEmpty, !flushing else { return false }
        flushing = true
        return true
    }

    mutating func endFlush() {
        dirty.removeAll(keepingCapacity: true)
        flushing = false
    }
}

/// Who watches the car besides the peers that drive it: the HMIs' state
/// streams (HMIHub), the clusters' metadata stream (ClusterHub) and the
/// service manager's status line (StatusReport).
struct Observers {
    let hmi = HMIHub()
    let cluster: ClusterHub
    var status = StatusReport()

    init(cluster: ClusterHub) {
        self.cluster = cluster
    }

    func remove(_ peer: PeerID) {
        hmi.remove(peer)
        cluster.remove(peer)
    }
}
