import HeadUnitCore
import HeadUnitWire
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Restarts that drop nobody (PROTOCOL.md section 22): on SIGTERM under a
// service manager that keeps descriptors (systemd's fd store), the daemon
// hands every phone, HMI and cluster connection and a snapshot of the Car to it
// instead of saying Goodbye, and the next process picks them up.

/// What a previous daemon process left in the fd store.
public struct RestoredState: Sendable {
    /// The serialized `HUDaemonSnapshot`; nil when none was stored.
    public var snapshot: [UInt8]?
    /// Stored connections by the peer id in their name ("conn-<id>").
    public var connections: [PeerID: CInt]
    /// Why the snapshot could not even be read (it is then treated as bad).
    public var readError: String?

    public init(snapshot: [UInt8]?, connections: [PeerID: CInt], readError: String? = nil) {
        self.snapshot = snapshot
        self.connections = connections
        self.readError = readError
    }

    /// The fd-store name of a connection, and back.
    public static func connectionName(_ peer: PeerID) -> String { "conn-\(peer)" }
    public static func peer(fromName name: String) -> PeerID? {
        guard name.hasPrefix("conn-") else { return nil }
        return PeerID(name.dropFirst(5))
    }
    public static let snapshotName = "snapshot"
}

/// What a handover did.
public struct HandoverReport: Sendable {
    /// Connections stored with their state.
    public var handedOver = 0
    /// Peers told to reconnect (roles a snapshot does not carry, handshakes
    /// not finished) or lost because their output would not drain in time.
    public var closed = 0
    /// False when the snapshot could not be stored: then nothing was handed over.
    public var snapshotStored = false
}

/// The service manager's descriptor store, as the daemon reaches it.
public struct DescriptorStore: Sendable {
    /// Stores one descriptor (a duplicate) under a name; false when refused.
    public var storeDescriptor: @Sendable (CInt, String) -> Bool
    /// Stores the serialized snapshot (as a memory file named "snapshot"); false when refused.
    public var storeSnapshot: @Sendable ([UInt8]) -> Bool

    public init(storeDescriptor: @escaping @Sendable (CInt, String) -> Bool, storeSnapshot: @escaping @Sendable ([UInt8]) -> Bool) {
        self.storeDescriptor = storeDescriptor
        self.storeSnapshot = storeSnapshot
    }
}

extension HeadUnitServer {
    /// Hands the connections and the Car to the service manager instead of
    /// stopping: listeners closed, reading stopped, what was read handled,
    /// what was written flushed (peers whose output does not drain within
    /// the shutdown grace are closed), then every phone, HMI and cluster connection
    /// and the snapshot stored through `store`, and the event loop stopped
    /// without a Goodbye. The caller exits afterwards. If the snapshot cannot
    /// be stored, falls back to a graceful shutdown (Goodbye to everyone).
    public func handOver(store: DescriptorStore) async -> HandoverReport {
        guard !stopped else { return HandoverReport() }
        stopped = true
        await closeListeners()
        let host = self.host
        let loop = eventLoop
        let grace = configuration.shutdownGraceMilliseconds
        let quiet: EventLoopFuture<Void> = loop.flatSubmit { host.beginHandover(grace: grace) }
        try? await quiet.get()
        let report = (try? await loop.submit { host.finishHandover(store: store) }.get()) ?? HandoverReport()
        if !report.snapshotStored {
            stopped = false
            await shutdown(reason: "the daemon is stopping")
            return report
        }
        // The mixer's output file is finished (a WAV's sizes); a blocked output is abandoned within a bound.
        host.audioEngine.stop()
        // The next process loads the paired devices from disk: the last list is there first.
        await finishDiskWrites()
        logger.notice("handed over", metadata: ["connections": "\(report.handedOver)", "closed": "\(report.closed)"])
        try? await group.shutdownGracefully()
        return report
    }

    /// Takes back what a previous process stored (called by `start()`).
    func restore(_ restored: RestoredState) async {
        let host = self.host
        let adopted: EventLoopFuture<Void> = eventLoop.flatSubmit { host.restore(restored, server: self) }
        try? await adopted.get()
    }

    /// A connection handed over by a previous process, back in a pipeline
    /// like an accepted one's (established as before when `restoring`, else
    /// waiting for its Hello), not reading until the restore turns reading on.
    func adoptConnection(fd: CInt, transport: Transport, restoring: RestoredConnection?) -> EventLoopFuture<Channel> {
        let high = configuration.writeHighWaterMark
        let pipeline = self.pipeline
        return ClientBootstrap(group: eventLoop)
            .channelOption(.autoRead, value: false)
            .channelOption(.writeBufferWaterMark, value: .init(low: high / 2, high: high))
            .channelOption(.recvAllocator, value: ConnectionPipeline.receiveAllocator)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try pipeline.configure(channel, transport: transport, restoring: restoring)
                }
            }
            .withConnectedSocket(fd)
    }
}

/// The host's life: serving, stopping (gracefully or for a handover), and
/// once its connections went to the next process, handed over.
struct HostLifecycle {
    /// Set once a graceful stop (or a handover) began: new connections are turned away.
    var stopping = false
    /// Set once the connections went to the next daemon process: nothing
    /// that happens to them afterwards is the Car's business.
    var handedOver = false
    /// Per connection being handed over: what it still read.
    var taps: [ObjectIdentifier: HandoverTap] = [:]
    /// A stop waiting for every connection to close.
    var allClosedPromise: EventLoopPromise<Void>?
}

/// A connection as the previous daemon process handed it over.
struct RestoredConnection {
    var peerID: PeerID
    var info: PeerInfo
    var version: UInt32
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

extension ConnectionHandler {
    /// First step of a handover: frames held back by backpressure are handled
    /// now (their answers written like any other), then nothing more is read
    /// (what the kernel had already given NIO lands in `tap`, in front of this
    /// handler) or timed. A partial frame stays until `handoverState` takes it.
    func beginHandover(tap: HandoverTap) -> EventLoopFuture<Void> {
        guard let context else { return host.eventLoop.makeFailedFuture(HandoverRefused.closed) }
        if lifecycle.isServing { serveHeld(context: context, evenIfBehind: true) }
        guard lifecycle.beginHandover() else { return host.eventLoop.makeFailedFuture(HandoverRefused.closed) }
        cancelTimers()
        do {
            try context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
            try context.pipeline.syncOperations.addHandler(tap, position: .first)
            return context.eventLoop.makeSucceededVoidFuture()
        } catch {
            return context.eventLoop.makeFailedFuture(error)
        }
    }

    /// Completes once everything written so far is in the kernel's socket
    /// buffer (writes complete in order: an empty write after them is the
    /// barrier); the lifecycle is then `drained`.
    func flushBarrier() -> EventLoopFuture<Void> {
        guard lifecycle.isHandingOver, let context else { return host.eventLoop.makeFailedFuture(HandoverRefused.closed) }
        output.flushed()
        writePending(context)
        let barrier = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)))
        barrier.assumeIsolated().whenSuccess { [weak self] in self?.lifecycle.drained() }
        return barrier
    }

    /// A peer the snapshot does not carry (cluster, accessory, a handshake
    /// in progress): Goodbye(SHUTTING_DOWN) and out of the Car now.
    func leaveForRestart(_ reason: String) {
        shutdown(reason: reason)
        if lifecycle.leaveCarNow() { host.connectionClosed(peerID, joined: true, departure: .cutOff(.shuttingDown)) }
    }

    /// The connection went to the next process: forget it without a word.
    func relinquish() {
        lifecycle.abort()
        machine.closed()
        cancelTimers()
    }

    /// Whether the connection can go to the next process with its socket: not
    /// over TLS, whose session state stays in this process (PROTOCOL.md
    /// section 22: a TLS phone reconnects and resumes).
    var canBeHandedOver: Bool { transport != .tcp }

    /// The state that goes with the socket: role, version and the bytes read
    /// but not yet parsed (the partial frame, then what the tap held).
    func handoverState(tap: HandoverTap) -> HUConnectionSnapshot? {
        guard lifecycle.isOpen else { return nil }
        // Version 0: a connection still waiting for its Hello (it starts afresh
        // in the next process, Hello bytes already sent included).
        guard let version = isAwaitingHello ? 0 : machine.negotiatedVersion else { return nil }
        // Amid an oversized frame's payload, dropped as it arrives: the next
        // process could not know where the next frame starts (closed; a phone resumes).
        guard !inbound.isSkippingOversized else { return nil }
        var state = HUConnectionSnapshot()
        state.peerID = peerID
        state.transport = transport.rawValue
        state.version = version
        var pending = inbound.takePartial() ?? ByteBuffer()
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
}

extension CarHost {
    // MARK: Handing over

    /// Quiets every connection: those the snapshot does not carry get
    /// Goodbye(SHUTTING_DOWN) now and leave the Car; the others stop reading,
    /// lose their decoder (after the frames it held were handled) and flush.
    /// Succeeds when that is done, or after `grace` ms at the latest.
    func beginHandover(grace: UInt64) -> EventLoopFuture<Void> {
        performDeferred()
        lifecycle.stopping = true
        for timer in timers.values { timer.cancel() }
        timers.removeAll()
        let reason = "the daemon is restarting and cannot carry this connection over: connect again"
        for (peer, handler) in connections.byPeer.sorted(by: { $0.key < $1.key }) {
            // Carried: phones, HMIs, clusters, and connections that have not sent
            // their Hello yet. Not: accessories, a TCP phone between Welcome
            // and Authenticate (its signature covers this connection's challenge).
            // A TLS connection's socket is useless without its TLS state: a
            // joined TLS phone stays in the snapshot without it (the next
            // process keeps its session for resumption), anything else over
            // TLS is told to connect again.
            let carried = car.peerInfo(peer).map { Car.survivesRestart($0.role) } ?? (handler.isAwaitingHello && handler.canBeHandedOver)
            if !carried { handler.leaveForRestart(reason) }
        }
        // A navigation alert is dismissed now, its app told (the next process does not carry it).
        perform(car.prepareForHandover())
        flush()
        // An HMI that was behind gets its latest state now, so the next process
        // need not know it was behind.
        catchUpHMIsBeforeHandover()
        var quieted: [EventLoopFuture<Void>] = []
        for handler in connections.values where !handler.lifecycle.isHandingOver {
            let tap = HandoverTap()
            lifecycle.taps[ObjectIdentifier(handler)] = tap
            quieted.append(handler.beginHandover(tap: tap).recover { _ in })
        }
        let loop = eventLoop
        let all = EventLoopFuture.andAllComplete(quieted, on: loop).flatMap { () -> EventLoopFuture<Void> in
            // Answers to the frames the decoders still held are written now; flush them all.
            self.flush()
            let barriers = self.connections.values.map { $0.flushBarrier().recover { _ in } }
            return EventLoopFuture.andAllComplete(barriers, on: loop)
        }
        let promise = loop.makePromise(of: Void.self)
        all.cascade(to: promise)
        let deadline = loop.scheduleTask(in: .milliseconds(Int64(clamping: grace))) { promise.succeed(()) }
        promise.futureResult.whenComplete { _ in deadline.cancel() }
        return promise.futureResult
    }

    /// Stores every quiet connection and the snapshot; nothing happens on
    /// the loop between taking the snapshot and storing, so nothing read or
    /// written is missing from either.
    func finishHandover(store: DescriptorStore) -> HandoverReport {
        var report = HandoverReport()
        // From here the Car is not changed any more: a peer whose output did
        // not drain (or that closed meanwhile) stays in the snapshot without
        // its connection, and the next process lets it go (`peerLeft(.lost)`)
        // and tells the others over connections that work. A phone gone this
        // way may even resume with the next process.
        lifecycle.handedOver = true
        var states: [PeerID: HUConnectionSnapshot] = [:]
        for (peer, handler) in connections.byPeer.sorted(by: { $0.key < $1.key }) {
            let tap = lifecycle.taps[ObjectIdentifier(handler)]
            if let tap, handler.lifecycle.isDrained, handler.canBeHandedOver, let state = handler.handoverState(tap: tap) {
                states[peer] = state
            } else {
                report.closed += 1
                handler.forceClose()
            }
        }
        var snapshot = HUDaemonSnapshot()
        snapshot.format = CarSnapshotFormat.current
        snapshot.car = car.snapshot()
        snapshot.nextPeerID = connections.nextPeerID
        snapshot.connections = states.keys.sorted().map { states[$0]! }
        let bytes: [UInt8]
        do {
            bytes = try snapshot.serializedBytes()
        } catch {
            logger.error("cannot serialize the snapshot: stopping instead", metadata: ["error": "\(error)"])
            lifecycle.handedOver = false
            return report
        }
        // The next process reads at most this much (section 22); the composed
        // bounds keep every snapshot below it, and should one ever be over,
        // everyone gets an orderly Goodbye rather than a restore that fails.
        let bound = SnapshotBounds.maximumBytes(
            composed: configuration.car.composed, maxConnections: configuration.connectionCaps.maxTotal,
            iconBytes: configuration.car.maxApps * configuration.connection.limits.message.maxImageBytes)
        let maximum = Self.testSnapshotMaximum.map { min($0, bound) } ?? bound
        guard bytes.count <= maximum else {
            logger.error("the snapshot is over the largest a restart reads: stopping instead", metadata: ["bytes": "\(bytes.count)", "limit": "\(maximum)"])
            lifecycle.handedOver = false
            return report
        }
        let descriptors = Self.descriptorsByCookie()
        var stored: [ConnectionHandler] = []
        for peer in states.keys.sorted() {
            guard let handler = connections[peer], let channel = handler.channel,
                let cookie = Self.cookie(of: channel), let fd = descriptors[cookie]
            else {
                logger.error("cannot find the descriptor of a connection to hand over", metadata: ["peer": "\(peer)"])
                continue
            }
            if store.storeDescriptor(fd, RestoredState.connectionName(peer)) {
                stored.append(handler)
            } else {
                logger.error("the service manager refused a connection (FileDescriptorStoreMax=?)", metadata: ["peer": "\(peer)"])
            }
        }
        guard store.storeSnapshot(bytes) else {
            logger.error("the service manager refused the snapshot: stopping instead")
            lifecycle.handedOver = false
            return report
        }
        report.snapshotStored = true
        report.handedOver = stored.count
        // Our copies close with the process; the service manager holds its own,
        // so the peers see nothing. Connections it refused leave with it (EOF).
        for handler in connections.values { handler.relinquish() }
        return report
    }

    // MARK: Taking back

    /// Restores the Car from the snapshot and adopts each stored connection;
    /// with no usable snapshot, every stored connection is told the session
    /// is lost (Goodbye) and closed, and the Car starts clean.
    func restore(_ restored: RestoredState, server: HeadUnitServer) -> EventLoopFuture<Void> {
        let snapshot: HUDaemonSnapshot
        let car: Car
        let effects: [CarEffect]
        do {
            guard let raw = restored.snapshot else {
                throw SnapshotError(restored.readError ?? "connections were stored without a snapshot")
            }
            do {
                snapshot = try HUDaemonSnapshot(serializedBytes: raw)
            } catch {
                throw SnapshotError("the snapshot does not parse: \(error)")
            }
            guard snapshot.format == CarSnapshotFormat.current else {
                throw SnapshotError("snapshot format \(snapshot.format), this daemon reads format \(CarSnapshotFormat.current)")
            }
            let pairing = self.pairing
            let global = configuration.car.entitlements
            (car, effects) = try Car.restoring(snapshot.car, configuration: configuration.car) { id in
                pairing.device(id).map {
                    AuthenticatedDevice(deviceID: $0.id, name: $0.name, entitlements: $0.entitlementPolicy(global: global))
                }
            }
        } catch {
            let reason = (error as? SnapshotError)?.reason ?? "\(error)"
            logger.error("cannot restore what the previous process handed over: starting clean", metadata: ["reason": "\(reason)"])
            for fd in restored.connections.values {
                Self.sayGoodbyeAndClose(fd, reason: "the daemon restarted and could not restore this session (\(reason)): connect again", maxPayload: maxPayload)
            }
            return eventLoop.makeSucceededVoidFuture()
        }
        self.car = car
        connections.continueAfter(snapshot.nextPeerID)
        var remaining = restored.connections
        var adoptions: [EventLoopFuture<(Channel, ByteBuffer)>] = []
        for state in snapshot.connections {
            guard let transport = Transport(rawValue: state.transport), let fd = remaining[state.peerID] else { continue }
            let pending = ByteBuffer(bytes: state.pendingInput)
            if state.version == 0 {
                // Still before its Hello: a fresh connection (a new id), its bytes so far kept.
                remaining[state.peerID] = nil
                adoptions.append(server.adoptConnection(fd: fd, transport: transport, restoring: nil).map { ($0, pending) })
                continue
            }
            guard let info = car.peerInfo(state.peerID) else { continue }
            remaining[state.peerID] = nil
            let connection = RestoredConnection(peerID: state.peerID, info: info, version: state.version)
            adoptions.append(server.adoptConnection(fd: fd, transport: transport, restoring: connection).map { ($0, pending) })
        }
        for (peer, fd) in remaining {
            Self.sayGoodbyeAndClose(fd, reason: "the daemon restarted and has no state for connection \(peer): connect again", maxPayload: maxPayload)
        }
        perform(effects)
        let loop = eventLoop
        return EventLoopFuture.whenAllComplete(adoptions, on: loop).map { results in
            var resumed = 0
            var channels: [(Channel, ByteBuffer)] = []
            for result in results {
                if case .success(let adopted) = result { channels.append(adopted) }
            }
            // Peers of the snapshot without a connection now are gone (as if lost).
            let present = Set(self.connections.keys)
            for peer in self.car.peerIDs where !present.contains(peer) {
                self.perform(self.car.peerLeft(peer, departure: .lost))
            }
            // What the restart ended is told now, before anything is read: the
            // phone's audio streams are closed (RESTARTED), so it knows their
            // credit is gone before its next MEDIA frame is looked at.
            self.perform(self.car.restoredConnectionsBack())
            // Reading starts only once every connection is back: whatever the
            // first request causes reaches every peer.
            for (channel, pending) in channels {
                if pending.readableBytes > 0 { channel.pipeline.fireChannelRead(pending) }
                channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                resumed += 1
            }
            self.checkStatus()
            self.flush()
            self.logger.notice("restored what the previous process handed over", metadata: ["connections": "\(resumed)"])
        }
    }

    // MARK: Descriptors

    /// Linux's SO_COOKIE: a socket's unique 64-bit id, how a NIO channel (which
    /// does not show its descriptor) is matched to one of our descriptors.
    private static let soCookie: CInt = 57

    static func cookie(of channel: Channel) -> UInt64? {
        guard let provider = channel as? SocketOptionProvider else { return nil }
        var value: UInt64?
        // On the channel's own loop the future is complete at once.
        let future: EventLoopFuture<UInt64> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(soCookie))
        future.assumeIsolated().whenSuccess { value = $0 }
        return value
    }

    /// Every open socket descriptor of the process by its cookie.
    static func descriptorsByCookie() -> [UInt64: CInt] {
        var result: [UInt64: CInt] = [:]
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        let highest = CInt(clamping: min(UInt64(limit.rlim_cur), 1 << 20))
        for fd in 0..<highest {
            var cookie: UInt64 = 0
            var length = socklen_t(MemoryLayout<UInt64>.size)
            if getsockopt(fd, SOL_SOCKET, soCookie, &cookie, &length) == 0 { result[cookie] = fd }
        }
        return result
    }

    /// For tests only (test_fdstore_handover.py's `oversized_snapshot_run`):
    /// `HEADUNITD_TEST_SNAPSHOT_MAX_BYTES` lowers the largest snapshot this
    /// process hands over, so the fallback above (an orderly stop, Goodbye to
    /// everyone) can be seen; it never raises the bound, so at worst a
    /// handover becomes a stop.
    static var testSnapshotMaximum: Int? {
        getenv("HEADUNITD_TEST_SNAPSHOT_MAX_BYTES").flatMap { Int(String(cString: $0)) }
    }

    /// The frame maximum every frame is checked against (section 10.4).
    private var maxPayload: Int { Int(configuration.connection.limits.maxPayloadBytes) }

    /// Goodbye(SHUTTING_DOWN, reason) written straight to a stored socket,
    /// then closed; within the maximum as every frame (`OutboundFrameCheck`).
    static func sayGoodbyeAndClose(_ fd: CInt, reason: String, maxPayload: Int) {
        let frame = OutboundFrameCheck.goodbye(.shuttingDown, reason, allocator: ByteBufferAllocator(), maxPayload: maxPayload)
        let bytes = Array(frame.readableBytesView)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT)) }
        close(fd)
    }
}

