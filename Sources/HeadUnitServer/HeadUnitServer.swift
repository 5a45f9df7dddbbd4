import HeadUnitCore
import HeadUnitWire
import Logging
import NIOCore
import NIOPosix

/// The daemon's network side: listeners on one event loop, one pipeline per
/// connection (ConnectionHandler, which cuts frames itself), the Car hosted on the same
/// loop. Start with `start()`, stop with `shutdown()`.
// @unchecked: its channels and host live on one event loop; start/shutdown hop there.
public final class HeadUnitServer: @unchecked Sendable {
    // @unchecked: mutable state is touched only on `eventLoop` (or before start).
    public let configuration: ServerConfiguration
    public let eventLoop: EventLoop
    let group: MultiThreadedEventLoopGroup
    /// Disk writes (the paired devices), so that no fsync runs on the serving loop.
    let diskThreads: NIOThreadPool
    let logger: Logger
    let host: CarHost
    /// Builds every connection's pipeline (listeners and handover alike).
    let pipeline: ConnectionPipeline
    private var serverChannels: [Channel] = []
    private var boundPaths: [String] = []
    var stopped = false

    /// One loop for every connection: the Car's state lives there and no
    /// request hops threads (ARCHITECTURE.md, "Threads").
    public convenience init(configuration: ServerConfiguration, logger: Logger) {
        self.init(configuration: configuration, logger: logger, disk: nil)
    }

    /// `disk` stands in for `configuration.pairingStore` on the disk thread
    /// (a test's slow disk); nil: that store, if there is one.
    init(configuration: ServerConfiguration, logger: Logger, disk: (any PairedDeviceDisk)?) {
        self.configuration = configuration
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.eventLoop = group.next()
        // One thread: writes to the one file go one at a time anyway (PairingWrites orders them).
        let diskThreads = NIOThreadPool(numberOfThreads: 1)
        diskThreads.start()
        self.diskThreads = diskThreads
        let disk = disk ?? configuration.pairingStore.map { PairingStoreOnThreads(store: $0, threads: diskThreads) }
        self.host = CarHost(eventLoop: eventLoop, configuration: configuration, logger: logger, disk: disk)
        self.pipeline = ConnectionPipeline(host: host, maxPayload: configuration.connection.limits.maxPayloadBytes)
    }

    /// Called on the event loop whenever the phone, app or scene count changes.
    public func onStatusChange(_ callback: @escaping @Sendable (StatusSummary) -> Void) {
        eventLoop.execute { self.host.reportStatus(to: callback) }
    }

    /// Runs `body` on the serving loop every `interval`: a watchdog ping from
    /// there proves the loop doing the work is alive.
    @discardableResult
    public func runPeriodically(every interval: TimeAmount, _ body: @escaping @Sendable () -> Void) -> RepeatedTask {
        eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: interval) { _ in body() }
    }

    /// Binds (or adopts) every listener. Returns what is listening, in order.
    /// On failure, whatever was already bound is closed again.
    public func start() async throws -> [BoundListener] {
        var bound: [BoundListener] = []
        if let identity = configuration.carIdentity {
            try pipeline.useTLS(identity: identity)
        }
        // Connections a previous process handed over are back before anyone
        // new is accepted (their peer ids come first).
        if let restored = configuration.restored { await restore(restored) }
        do {
            for spec in configuration.listeners {
                bound.append(try await startListener(spec))
            }
        } catch {
            await closeListeners()
            try? await diskThreads.shutdownGracefully()
            try? await group.shutdownGracefully()
            throw error
        }
        return bound
    }

    private func bootstrap(transport: Transport) -> ServerBootstrap {
        let host = self.host
        let pipeline = self.pipeline
        // Writability flips early enough to notice a peer that does not read
        // long before its queue reaches the hard limit.
        let high = configuration.writeHighWaterMark
        return ServerBootstrap(group: eventLoop)
            // The kernel caps this at net.core.somaxconn (4096 on current kernels): a
            // burst of connects waits in the queue instead of failing with EAGAIN.
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                // accept() failing (EMFILE when out of descriptors) is logged; NIO's
                // accept backoff, which stays in the pipeline, pauses accepting meanwhile.
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptErrorLogger(logger: host.logger, transport: transport))
                }
            }
            .childChannelOption(.writeBufferWaterMark, value: .init(low: high / 2, high: high))
            .childChannelOption(
                .recvAllocator, value: transport == .tcp ? ConnectionPipeline.tcpReceiveAllocator : ConnectionPipeline.receiveAllocator)
            .childChannelOption(.maxMessagesPerRead, value: transport == .tcp ? ConnectionPipeline.tcpReadsPerTurn : ConnectionPipeline.unixReadsPerTurn)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try pipeline.configure(channel, transport: transport, restoring: nil)
                }
            }
    }

    private func startListener(_ spec: ListenerSpec) async throws -> BoundListener {
        switch spec {
        case .unix(let path):
            try SocketFiles.prepareUnixSocketPath(path)
            let channel = try await SocketFiles.withPrivateUmask {
                bootstrap(transport: .unix).bind(unixDomainSocketPath: path)
            }.get()
            SocketFiles.chmodPrivate(path)
            serverChannels.append(channel)
            boundPaths.append(path)
            return BoundListener(transport: .unix, address: path, port: 0, adopted: false)
        case .tcp(let hostName, let port):
            let channel = try await bootstrap(transport: .tcp).bind(host: hostName, port: port).get()
            serverChannels.append(channel)
            let actualPort = channel.localAddress?.port ?? port
            return BoundListener(transport: .tcp, address: "\(hostName):\(actualPort)", port: actualPort, adopted: false)
        case .adopted(let fd, let name, let transport, let path):
            let channel = try await bootstrap(transport: transport).withBoundSocket(fd).get()
            SocketFiles.restoreBacklog(fd)
            serverChannels.append(channel)
            let port = channel.localAddress?.port ?? 0
            let address = path ?? channel.localAddress.flatMap { local in local.ipAddress.map { "\($0):\(port)" } } ?? name
            return BoundListener(transport: transport, address: address, port: port, adopted: true)
        }
    }

    func closeListeners() async {
        let channels = serverChannels
        serverChannels.removeAll()
        for channel in channels { try? await channel.close() }
        // Only sockets we bound ourselves: an activated socket belongs to systemd.
        for path in boundPaths { SocketFiles.unlinkSocket(path) }
        boundPaths.removeAll()
    }

    /// Graceful stop: no new connections, the Car says Goodbye(SHUTTING_DOWN)
    /// to every peer, and whatever is still open after the grace period is
    /// closed. Then the event loop stops. Safe to call more than once.
    public func shutdown(reason: String = "the daemon is stopping") async {
        guard !stopped else { return }
        stopped = true
        await closeListeners()
        let host = self.host
        let grace = configuration.shutdownGraceMilliseconds
        let loop = eventLoop
        let allClosed: EventLoopFuture<Void> = loop.flatSubmit {
            let done = host.beginShutdown(reason: reason)
            let deadline = loop.scheduleTask(in: .milliseconds(Int64(clamping: grace))) { host.forceCloseAll() }
            done.whenComplete { _ in deadline.cancel() }
            return done
        }
        try? await allClosed.get()
        // The mixer finishes its output file (the WAV's sizes) and its thread ends.
        host.audioEngine.stop()
        await finishDiskWrites()
        logger.notice("stopped")
        try? await group.shutdownGracefully()
    }

    /// Waits for the paired-device list still on its way to disk (the next
    /// process reads it at start), then stops the disk thread. At most the
    /// shutdown grace period: a disk that hangs does not hold the stop (the
    /// file keeps the list it had, PairingStore.save renames a whole new one).
    func finishDiskWrites() async {
        let host = self.host
        let loop = eventLoop
        let grace = TimeAmount.milliseconds(Int64(clamping: configuration.shutdownGraceMilliseconds))
        let written: EventLoopFuture<Bool> = loop.flatSubmit {
            let done = loop.makePromise(of: Bool.self)
            let deadline = loop.scheduleTask(in: grace) { done.succeed(false) }
            host.pairing.writes.idle().whenSuccess {
                deadline.cancel()
                done.succeed(true)
            }
            return done.futureResult
        }
        guard (try? await written.get()) == true else {
            // The write's thread is left to the process's exit.
            logger.error("the paired-device list was still being written at the stop; the file keeps its previous list")
            return
        }
        try? await diskThreads.shutdownGracefully()
    }

    /// The current counts (read on the loop).
    public func summary() async -> StatusSummary {
        let host = self.host
        return (try? await eventLoop.submit { host.summary }.get()) ?? StatusSummary(phones: 0, apps: 0, scenes: 0)
    }
}

/// Logs accept failures on a listener, at most once a second with a count.
final class AcceptErrorLogger: ChannelInboundHandler {
    typealias InboundIn = Channel
    let logger: Logger
    let transport: Transport
    private var failures = FloodLog()

    init(logger: Logger, transport: Transport) {
        self.logger = logger
        self.transport = transport
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let failures = failures.note(now: context.eventLoop.nowMilliseconds) {
            logger.error(
                "accepting a connection failed", metadata: ["transport": "\(transport.rawValue)", "error": "\(error)", "failures": "\(failures)"])
        }
        context.fireErrorCaught(error)
    }
}
