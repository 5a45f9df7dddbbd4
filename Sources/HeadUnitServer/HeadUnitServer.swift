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
    let logger: Logger
    let host: CarHost
    /// Builds every connection's pipeline (listeners and handover alike).
    let pipeline: ConnectionPipeline
    private var serverChannels: [Channel] = []
    private var boundPaths: [String] = []
    var stopped = false

    /// One loop for every connection: the Car's state lives there and no
    /// request hops threads (DESIGN.md, performance budget).
    public init(configuration: ServerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.eventLoop = group.next()
        self.host = CarHost(eventLoop: eventLoop, configuration: configuration, logger: logger)
        self.pipeline = ConnectionPipeline(host: host, maxPayload: configuration.connection.limits.maxPayloadBytes)
    }

    /// Called on the event loop whenever the phone, app or scene count changes.
    public func onStatusChange(_ callback: @escaping @Sendable (StatusSummary) -> Void) {
        eventLoop.execute { self.host.onStatusChange = callback }
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
        logger.notice("stopped")
        try? await group.shutdownGracefully()
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
    private var lastLogged: UInt64 = 0
    private var unlogged = 0

    init(logger: Logger, transport: Transport) {
        self.logger = logger
        self.transport = transport
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let now = monotonicMilliseconds()
        unlogged += 1
        if lastLogged == 0 || now >= lastLogged + 1_000 {
            logger.error(
                "accepting a connection failed", metadata: ["transport": "\(transport.rawValue)", "error": "\(error)", "failures": "\(unlogged)"])
            lastLogged = now
            unlogged = 0
        }
        context.fireErrorCaught(error)
    }
}
