import ArgumentParser
import HeadUnitCore
import HeadUnitServer
import HeadUnitWire
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The entry point. The arguments systemd and the tests pass (`DaemonOptions.init?(plainArguments:)`)
/// are read directly; anything else, `--help` and every mistake included, goes to
/// swift-argument-parser. Its parse reflects the command and its own
/// completion-script commands at run time, each first dynamic cast a scan of the
/// binary's ~10,000 conformance records: 23.6 M of the 51.9 M instructions from
/// exec to READY (callgrind, issue 30 item 4).
@main
enum HeadUnitDaemonEntry {
    static func main() async {
        guard let options = DaemonOptions(plainArguments: Array(CommandLine.arguments.dropFirst())) else {
            await HeadUnitDaemon.main()
            return
        }
        do {
            try await HeadUnitDaemon.serve(options)
        } catch {
            HeadUnitDaemon.exit(withError: error)  // as ArgumentParser's main would: the same messages and exit codes
        }
    }
}

struct HeadUnitDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "headunitd",
        abstract: "The head unit (car) side of a CarPlay-style phone projection system.",
        discussion: """
            Listens on a Unix socket (phones over a USB bridge, and the car's HMI, \
            cluster and accessories) and on TCP (phones over Wi-Fi). Under systemd \
            socket activation it serves the sockets it is handed instead. \
            On start it prints one "listening <unix|tcp> <address>" line per \
            listener and then "ready" on standard output.
            """
    )

    @Option(name: .customLong("unix-socket"), help: "Unix socket path (default: $XDG_RUNTIME_DIR/headunitd/headunitd.sock, /run/headunitd/headunitd.sock as root, else /tmp/headunitd-$UID/headunitd.sock).")
    var unixSocket: String?

    @Option(name: .customLong("tcp"), help: "TCP listen address HOST:PORT (default 127.0.0.1:7420; port 0 picks one).")
    var tcp: String?

    @Flag(name: .customLong("no-tcp"), help: "Do not listen on TCP.")
    var noTCP = false

    @Option(name: .customLong("config"), help: "JSON configuration file (schema: Protocol/config.proto, HUDaemonConfig).")
    var configFile: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default notice: start, stop and problems only).")
    var logLevel: String?

    @Option(name: .customLong("max-payload"), help: "Largest frame payload accepted, in bytes.")
    var maxPayload: UInt32?

    @Flag(name: .customLong("print-default-config"), help: "Print the default configuration as JSON and exit.")
    var printDefaultConfig = false

    /// What was parsed, as plain values.
    var options: DaemonOptions {
        DaemonOptions(
            unixSocket: unixSocket, tcp: tcp, noTCP: noTCP, configFile: configFile,
            logLevel: logLevel, maxPayload: maxPayload, printDefaultConfig: printDefaultConfig)
    }

    func run() async throws {
        try await Self.serve(options)
    }

    static func serve(_ options: DaemonOptions) async throws {
        if options.printDefaultConfig {
            print(try DaemonConfig.printJSON(DaemonConfig.defaults()))
            return
        }
        var file = HUDaemonConfig()
        if let configFile = options.configFile {
            do {
                file = try DaemonConfig.load(path: configFile)
            } catch {
                throw ValidationError("\(error)")
            }
        }

        // Flags override the file; the file overrides the defaults.
        let levelText = options.logLevel ?? (file.logLevel.isEmpty ? "notice" : file.logLevel)
        guard let level = Logger.Level(rawValue: levelText.lowercased()) else {
            throw ValidationError("unknown log level \(levelText)")
        }
        SystemdSupport.bootstrapLogging(level: level)
        var logger = Logger(label: "headunitd")
        logger.logLevel = level

        var limits = ConnectionLimits()
        var fileLimits = file.limits
        if let maxPayload = options.maxPayload { fileLimits.maxPayloadBytes = maxPayload }
        // Every limit in its range, or no start (PROTOCOL.md section 20.6).
        do {
            try DaemonConfig.checkLimitRanges(fileLimits)
        } catch {
            throw ValidationError("\(error)")
        }
        if fileLimits.maxPayloadBytes > 0 { limits.maxPayloadBytes = fileLimits.maxPayloadBytes }
        if fileLimits.heartbeatIntervalMs > 0 { limits.heartbeatIntervalMilliseconds = UInt64(fileLimits.heartbeatIntervalMs) }
        if fileLimits.heartbeatTimeoutMs > 0 { limits.heartbeatTimeoutMilliseconds = UInt64(fileLimits.heartbeatTimeoutMs) }
        if fileLimits.handshakeTimeoutMs > 0 { limits.handshakeTimeoutMilliseconds = UInt64(fileLimits.handshakeTimeoutMs) }
        if fileLimits.completionTimeoutMs > 0 { limits.completionTimeoutMilliseconds = UInt64(fileLimits.completionTimeoutMs) }
        if fileLimits.maxErrorsPerSecond > 0 { limits.maxErrorsPerSecond = fileLimits.maxErrorsPerSecond }
        if fileLimits.maxRequestsPerSecond > 0 { limits.maxRequestsPerSecond = fileLimits.maxRequestsPerSecond }
        if fileLimits.maxStringBytes > 0 { limits.message.maxStringBytes = Int(fileLimits.maxStringBytes) }
        if fileLimits.maxImageBytes > 0 { limits.message.maxImageBytes = Int(fileLimits.maxImageBytes) }
        if fileLimits.maxMessageElements > 0 { limits.message.maxElements = Int(fileLimits.maxMessageElements) }
        if fileLimits.announceTimeoutMs > 0 { limits.announceTimeoutMilliseconds = UInt64(fileLimits.announceTimeoutMs) }
        if fileLimits.resumeGraceMs > 0 { limits.resumeGraceMilliseconds = UInt64(fileLimits.resumeGraceMs) }
        if fileLimits.authTimeoutMs > 0 { limits.authTimeoutMilliseconds = UInt64(fileLimits.authTimeoutMs) }
        if fileLimits.maxUnauthenticatedFrames > 0 { limits.maxUnauthenticatedFrames = fileLimits.maxUnauthenticatedFrames }

        let vehicle = file.hasVehicle ? file.vehicle : .standard
        var car = CarConfiguration(
            vehicle: vehicle,
            entitlements: DaemonConfig.entitlementPolicy(file),
            completionTimeoutMilliseconds: limits.completionTimeoutMilliseconds,
            announceTimeoutMilliseconds: limits.announceTimeoutMilliseconds,
            maxApps: fileLimits.maxApps > 0 ? Int(fileLimits.maxApps) : 64,
            resumeGraceMilliseconds: limits.resumeGraceMilliseconds
        )
        // Remote commands (PROTOCOL.md section 23).
        if fileLimits.maxPendingRemoteCommands > 0 { car.remoteCommandLimits.maxPending = Int(fileLimits.maxPendingRemoteCommands) }
        if fileLimits.remoteCommandTimeoutMs > 0 { car.remoteCommandLimits.timeoutMilliseconds = UInt64(fileLimits.remoteCommandTimeoutMs) }
        // Calls (PROTOCOL.md section 26.7).
        if fileLimits.maxCalls > 0 { car.calls.maxCalls = Int(fileLimits.maxCalls) }
        if fileLimits.maxCallActions > 0 { car.calls.maxActionsPerApp = Int(fileLimits.maxCallActions) }
        if fileLimits.callActionTimeoutMs > 0 { car.calls.actionTimeoutMilliseconds = UInt64(fileLimits.callActionTimeoutMs) }
        if fileLimits.callRingTimeoutMs > 0 { car.calls.ringTimeoutMilliseconds = UInt64(fileLimits.callRingTimeoutMs) }
        // The phone's assistant (PROTOCOL.md section 27).
        if fileLimits.assistantTimeoutMs > 0 { car.assistant.timeoutMilliseconds = UInt64(fileLimits.assistantTimeoutMs) }
        // What requests may add up to (PROTOCOL.md section 10.4): every state frame within max_payload_bytes.
        car.composed = ComposedLimits(
            maxFrameBytes: Int(limits.maxPayloadBytes),
            maxPhoneTemplateBytes: fileLimits.maxPhoneTemplateBytes > 0 ? Int(fileLimits.maxPhoneTemplateBytes) : ComposedLimits.defaultPhoneTemplateBytes)
        // Base-view video (PROTOCOL.md section 25.6).
        if fileLimits.maxVideoViewers > 0 { car.video.maxViewers = Int(fileLimits.maxVideoViewers) }
        if fileLimits.keyframeRequestIntervalMs > 0 { car.video.keyframeIntervalMilliseconds = UInt64(fileLimits.keyframeRequestIntervalMs) }
        var connection = ConnectionConfiguration(
            limits: limits, vehicle: vehicle, daemonName: file.daemonName.isEmpty ? "headunitd" : file.daemonName)
        connection.security = try DaemonConfig.security(file)

        // Listeners: systemd's when socket-activated, else our own.
        var listeners: [ListenerSpec] = []
        // The largest snapshot a process with these limits writes (section 22).
        let caps = ConnectionCaps()
        let maxConnections = fileLimits.maxConnections > 0 ? Int(fileLimits.maxConnections) : caps.maxTotal
        let (activated, restored) = SystemdSupport.activatedListeners(
            logger: logger, maxSnapshotBytes: SnapshotBounds.maximumBytes(
                composed: car.composed, maxConnections: maxConnections, iconBytes: car.maxApps * limits.message.maxImageBytes))
        if !activated.isEmpty {
            for listener in activated {
                switch listener.kind {
                case .unix(let path):
                    listeners.append(.adopted(fd: listener.fd, name: listener.name, transport: .unix, path: path))
                case .tcp:
                    listeners.append(.adopted(fd: listener.fd, name: listener.name, transport: .tcp, path: nil))
                }
            }
        } else {
            let path = options.unixSocket ?? (file.unixSocketPath.isEmpty ? DaemonConfig.defaultUnixSocketPath() : file.unixSocketPath)
            do {
                try DaemonConfig.makeSocketDirectory(for: path)
            } catch {
                throw ValidationError("\(error)")
            }
            listeners.append(.unix(path: path))
            let tcpDisabled = options.noTCP || (options.tcp == nil && file.tcpDisabled)
            if !tcpDisabled {
                let address = options.tcp ?? (file.tcpListen.isEmpty ? DaemonConfig.defaultTCP : file.tcpListen)
                do {
                    let (host, port) = try DaemonConfig.parseHostPort(address)
                    listeners.append(.tcp(host: host, port: port))
                } catch {
                    throw ValidationError("\(error)")
                }
            }
        }

        var serverConfiguration = ServerConfiguration(listeners: listeners, connection: connection, car: car)
        if fileLimits.maxOutboundBytes > 0 { serverConfiguration.maxOutboundBytes = Int(fileLimits.maxOutboundBytes) }
        if fileLimits.slowConsumerTimeoutMs > 0 { serverConfiguration.slowConsumerTimeoutMilliseconds = UInt64(fileLimits.slowConsumerTimeoutMs) }
        if fileLimits.videoViewerBufferBytes > 0 { serverConfiguration.videoViewerBufferLimit = Int(fileLimits.videoViewerBufferBytes) }
        if fileLimits.shutdownGraceMs > 0 { serverConfiguration.shutdownGraceMilliseconds = UInt64(fileLimits.shutdownGraceMs) }
        if fileLimits.maxConnections > 0 { serverConfiguration.connectionCaps.maxTotal = Int(fileLimits.maxConnections) }
        if fileLimits.maxUnixConnections > 0 { serverConfiguration.connectionCaps.maxUnix = Int(fileLimits.maxUnixConnections) }
        if fileLimits.maxTcpConnections > 0 { serverConfiguration.connectionCaps.maxTCP = Int(fileLimits.maxTcpConnections) }
        if fileLimits.maxTcpUnauthenticated > 0 { serverConfiguration.connectionCaps.maxTCPUnauthenticated = Int(fileLimits.maxTcpUnauthenticated) }
        if fileLimits.maxTcpUnauthenticatedPerSource > 0 {
            serverConfiguration.connectionCaps.maxTCPUnauthenticatedPerSource = Int(fileLimits.maxTcpUnauthenticatedPerSource)
        }
        if fileLimits.tcpEvictionsPerSourcePerSecond > 0 {
            serverConfiguration.connectionCaps.tcpEvictionsPerSourcePerSecond = Int(fileLimits.tcpEvictionsPerSourcePerSecond)
        }
        if fileLimits.unixReservedConnections > 0 { serverConfiguration.connectionCaps.unixReserved = Int(fileLimits.unixReservedConnections) }
        if fileLimits.maxTcpPerDevice > 0 { serverConfiguration.connectionCaps.maxTCPPerDevice = Int(fileLimits.maxTcpPerDevice) }
        if fileLimits.maxTcpFirstFlight > 0 { serverConfiguration.connectionCaps.maxTCPFirstFlight = Int(fileLimits.maxTcpFirstFlight) }
        if fileLimits.maxTcpFirstFlightPerSource > 0 {
            serverConfiguration.connectionCaps.maxTCPFirstFlightPerSource = Int(fileLimits.maxTcpFirstFlightPerSource)
        }
        if fileLimits.tcpFirstFlightTimeoutMs > 0 {
            serverConfiguration.connectionCaps.tcpFirstFlightTimeoutMilliseconds = UInt64(fileLimits.tcpFirstFlightTimeoutMs)
        }
        serverConfiguration.restored = restored
        do {
            try DaemonConfig.applyPairing(file, to: &serverConfiguration, logger: logger)
            try DaemonConfig.applyAudio(file, to: &serverConfiguration)
        } catch {
            throw ValidationError("\(error)")
        }

        let server = HeadUnitServer(configuration: serverConfiguration, logger: logger)
        server.onStatusChange { [logger] summary in
            logger.debug("status", metadata: ["status": "\(summary.text)"])
            SystemdSupport.notifyStatus(summary.text)
        }
        let bound: [BoundListener]
        do {
            bound = try await server.start()
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        if let interval = SystemdSupport.watchdogPingIntervalNanoseconds() {
            // From the serving loop: a wedged loop stops the pings and systemd restarts us.
            server.runPeriodically(every: .nanoseconds(interval)) { SystemdSupport.watchdogPing() }
        }
        // Ready is announced from inside the service group, once SIGTERM and
        // SIGINT are trapped: a supervisor that stops us right after READY=1
        // gets a graceful stop, not the default signal death.
        let readyLogger = logger  // a constant: the closure runs on another task
        let initialSummary = await server.summary()
        // systemd sends RestartKillSignal= (SIGUSR1 in headunitd.service) for a
        // restart job and SIGTERM for a stop: only a restart hands over.
        let restartRequested = RestartRequest()
        let service = DaemonService(server: server, logger: logger, restartRequested: restartRequested) {
            for listener in bound {
                print("listening \(listener.transport.rawValue) \(listener.address)")
            }
            print("ready")
            fflush(nil)  // every output stream (stdout is a C global Swift 6 will not touch)
            // Not zero after a restart that handed the session over.
            SystemdSupport.notifyStatus(initialSummary.text)
            SystemdSupport.notifyReady()
            readyLogger.notice(
                "started",
                metadata: [
                    "listeners": "\(bound.map { "\($0.transport.rawValue) \($0.address)" }.joined(separator: ", "))",
                    "protocol": "\(ProtocolVersion.minimum)...\(ProtocolVersion.maximum)",
                ])
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: service)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        let restartWatcher = Task {
            for await _ in await UnixSignalsSequence(trapping: .sigusr1) {
                restartRequested.flag.store(true, ordering: .sequentiallyConsistent)
                await group.triggerGracefulShutdown()
            }
        }
        defer { restartWatcher.cancel() }
        try await group.run()
    }
}

/// Set when the stop is a restart (SIGUSR1): the connections go to the next process.
final class RestartRequest: Sendable {
    let flag = Atomic<Bool>(false)
}

/// Keeps the daemon up until a graceful shutdown (SIGTERM, SIGINT), then
/// stops the server: Goodbye(SHUTTING_DOWN) to every peer, bounded wait.
/// Its own `description`: ServiceGroup names each service with `"\(service)"`,
/// and the default description reflects every stored property with dynamic
/// casts, each a scan of the binary's conformance records: 14.6 M of the 65 M
/// instructions from exec to READY (callgrind, issue 30 item 4).
struct DaemonService: Service, CustomStringConvertible {
    var description: String { "headunitd" }

    let server: HeadUnitServer
    let logger: Logger
    let restartRequested: RestartRequest
    /// Runs once the group traps the shutdown signals.
    let ready: @Sendable () -> Void

    func run() async throws {
        ready()
        // Returns when graceful shutdown is requested (or throws on cancellation).
        try? await gracefulShutdown()
        SystemdSupport.notifyStopping()
        let restarting = restartRequested.flag.load(ordering: .sequentiallyConsistent)
        if restarting, SystemdSupport.handoverCapacity > 0 {
            // A restart, and systemd keeps descriptors for us: hand the connections
            // and the Car to the next process instead of saying Goodbye (PROTOCOL.md section 22).
            logger.notice("restarting", metadata: ["handover": "fd store"])
            let report = await server.handOver(store: SystemdSupport.descriptorStore(logger: logger))
            if report.snapshotStored { return }
        } else {
            logger.notice("stopping", metadata: ["reason": restarting ? "restart without an fd store" : "signal"])
        }
        await server.shutdown(reason: "the daemon is stopping")
    }
}
