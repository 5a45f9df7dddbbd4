import ArgumentParser
import HeadUnitClient
import HeadUnitWire
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Measures headunitd as a phone sees it: request round trips, pipelined
/// throughput and the daemon's memory. Not a test: prints a table.
@main
struct HeadUnitBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "HeadUnitBench",
        abstract: "Benchmark headunitd over its Unix socket: RTT percentiles, pipelined requests/s, RSS."
    )

    @Option(name: .customLong("unix-socket"), help: "A running daemon's Unix socket.")
    var unixSocket: String?

    @Option(help: "Start this headunitd binary on a temporary socket, as a separate process.")
    var spawn: String?

    @Option(name: .customLong("daemon-arg"), help: "Arguments for the spawned daemon ({socket} and {config} are replaced by the socket path and a config raising max_requests_per_second); default: --unix-socket {socket} --no-tcp --config {config}.")
    var daemonArgs: [String] = []

    @Option(help: "Measured requests for the latency test (push and pop alternate).")
    var requests = 20_000

    @Option(help: "Warm-up requests before measuring.")
    var warmup = 2_000

    @Option(help: "Requests in flight for the throughput test.")
    var inFlight = 64

    @Option(help: "Duration of the throughput test, seconds.")
    var seconds = 5.0

    @Option(help: "The phone's transport, for the floor and the daemon alike: unix, tcp (loopback; the daemon's HMIs stay on its Unix socket), or both, one after the other (a floor and a daemon each).")
    var transport: PhoneTransport = .both

    @Option(help: "Items in the pushed list.")
    var items = 12

    @Option(help: "HMIs connected while measuring (each reads and drops what it gets; see DrainHMI).")
    var hmis = 1

    @Option(help: "Idle connections (cluster peers that never subscribe) held open while measuring; the spawned daemon's caps are raised to fit.")
    var idleConnections = 0

    @Option(name: .customLong("accessory-mib"), help: "Also send this many MiB each way through one External Accessory session (0: skip).")
    var accessoryMiB = 0

    @Option(name: .customLong("accessory-grant-mib"), help: "Also stream this many MiB from an accessory to a phone that grants credit every 16 KiB (0: skip).")
    var accessoryGrantMiB = 0

    @Option(name: .customLong("accessory-lean-mib"), help: "Also send this many MiB each way through one External Accessory session with a lean client (one thread, raw sockets, pre-built frames), beside a bare socket pair (0: skip).")
    var accessoryLeanMiB = 0

    @Option(name: .customLong("accessory-frame-kib"), help: "DATA payload per frame for --accessory-lean-mib, KiB.")
    var accessoryFrameKiB = 64

    @Option(name: .customLong("accessory-rounds"), help: "Rounds --accessory-lean-mib is split into: each moves its share through a new session and through both socket pairs (the session's own ends, and the bare one), the order alternating from round to round; the ratios printed are the medians of the rounds'.")
    var accessoryRounds = 9

    @Option(name: .customLong("accessory-window-kib"), help: "The receive window each side of --accessory-lean-mib widens to, KiB (the daemon's cap: its peer budget, max_outbound_bytes / 8).")
    var accessoryWindowKiB = 512

    @Option(name: .customLong("accessory-sessions"), help: "With --accessory-lean-mib: open this many bulk sessions at once instead (one phone, one accessory peer, an app per session) and move --accessory-lean-mib MiB each way in all, split evenly across them, all sessions at once, beside the other session's echo; one round, then the socket pair with the session's ends. Senders half-close when done; receivers grant back whole frames every --accessory-grant-kib. Prints aggregate and per-session throughput, daemon CPU per GiB and RSS (issue 30, item 5). (Windows over 64 KiB stalled 16 or more sessions until the daemon's fix in b73a627: BENCHMARKS.md.) At most 255: the daemon's cap of 256 sessions per phone (fixed, AccessoryHub), one of them the echo. 0: the single-session rounds.")
    var accessorySessions = 0

    @Option(name: .customLong("accessory-grant-kib"), help: "With --accessory-lean-mib: receivers grant back every this many KiB a session consumed (default: a quarter window; with --accessory-sessions, one frame: a larger step can stall several sessions towards one peer, their 64 KiB initial credits filling its budget).")
    var accessoryGrantKiB: Int?

    @Option(help: "Instead of the RTT run: the metadata stream with this many cluster subscribers (one stalled), e.g. 100.")
    var clusterSubscribers = 0

    @Option(help: "Duration of the metadata-stream run, seconds.")
    var clusterSeconds = 60.0

    @Option(help: "The metadata-stream run's app paced at this many updates per second, one at a time (0: unpaced, --in-flight outstanding).")
    var clusterHz = 0.0

    @Flag(help: "The metadata-stream run's subscribers in a process of their own (this binary again), lean (one thread, raw sockets, stamps found in the frames' bytes) instead of the SDK's.")
    var clusterSubscribersApart = false

    @Option(name: .customLong("cluster-subscribe-only"), help: .hidden)
    var clusterSubscribeOnly: String?

    @Option(name: .customLong("hmi-subscribe-only"), help: .hidden)
    var hmiSubscribeOnly: String?

    @Option(name: .customLong("screen-hmis"), help: "Instead of the RTT run: screens to this many HMIs (one stalled; lean, in a process of their own) while the app pushes and pops a list at --cluster-hz (100 by default) for --cluster-seconds: the latency from the app's send to each HMI's receipt (issue 30, item 3).")
    var screenHMIs = 0

    @Flag(inversion: .prefixedNo, help: "Measure the floor first (a bare SwiftNIO echo server, its own process, same client) and print the daemon as ratios to it.")
    var floor = true

    @Flag(name: .customLong("floor-only"), help: "Measure the floor alone, with no daemon (scripts/callgrind-pushpop.sh counts its instructions per request this way).")
    var floorOnly = false

    @Option(name: .customLong("floor-arg"), help: "A command to run the floor under, a word each (valgrind and its options); the floor's own command follows them.")
    var floorArgs: [String] = []

    @Flag(inversion: .prefixedNo, help: "Also measure floor and daemon with the lean client (one thread, pre-encoded frames; Unix socket only; issue 30).")
    var lean = true

    @Option(name: .customLong("audio-seconds"), help: "Instead of the RTT run: the audio path with --spawn's daemon (issue 27): this many seconds of beeps for the latency distribution, then ducking, a burst of delay, a lost link, and CPU and bytes per stream (AudioBench).")
    var audioSeconds = 0.0

    @Option(name: .customLong("video-seconds"), help: "Instead of the RTT run: the base-view video path with --spawn's daemon (issue 28): bytes per window, an HMI's control RTT idle and while three windows stream, daemon CPU per frame and per HMI, a 2x slower HMI; this many seconds per streaming run (VideoBench).")
    var videoSeconds = 0.0

    @Option(help: "Seconds to wait for a spawned daemon's socket (raise it under valgrind).")
    var startupTimeout = 15.0

    @Option(name: .customLong("flood-probe"), help: "Instead of the RTT run: spawn this headunitd (pairing required) and measure the HMI's PING round trip alone, then while 8 unauthenticated TLS connections flood PINGs, PONGs and Pair (issue 23).")
    var floodProbe: String?

    @Option(name: .customLong("echo-server"), help: .hidden)
    var echoServer: String?

    func validate() throws {
        if echoServer != nil || floodProbe != nil || clusterSubscribeOnly != nil || hmiSubscribeOnly != nil { return }
        if !floorOnly, (unixSocket == nil) == (spawn == nil) { throw ValidationError("give --unix-socket PATH or --spawn PATH_TO_headunitd") }
        if accessorySessions != 0 {
            guard accessoryLeanMiB > 0 else { throw ValidationError("--accessory-sessions needs --accessory-lean-mib") }
            guard (1...255).contains(accessorySessions) else { throw ValidationError("--accessory-sessions: 1 to 255 (the daemon's 256 sessions per phone, one of them the echo)") }
            // Credit then moves in whole frames: the 64 KiB initial window, the budget and the widened window are all whole frames.
            guard accessoryFrameKiB > 0, 64 % accessoryFrameKiB == 0, accessoryWindowKiB % 64 == 0 else {
                throw ValidationError("--accessory-sessions: --accessory-frame-kib must divide 64 and --accessory-window-kib be a multiple of 64")
            }
            if let grant = accessoryGrantKiB, grant <= 0 || grant % accessoryFrameKiB != 0 {
                throw ValidationError("--accessory-sessions: --accessory-grant-kib must be a multiple of --accessory-frame-kib")
            }
        }
    }

    func run() async throws {
        if videoSeconds > 0, let spawn {
            try await VideoBench(binary: spawn, seconds: videoSeconds).run()
            return
        }
        if audioSeconds > 0, let spawn {
            try await AudioBench(binary: spawn, seconds: audioSeconds).run()
            return
        }
        if let hmiSubscribeOnly {
            try LeanSubscribers.serve(socketPath: hmiSubscribeOnly, count: clusterSubscribers, role: .hmi)
            return
        }
        if let clusterSubscribeOnly {
            try LeanSubscribers.serve(socketPath: clusterSubscribeOnly, count: clusterSubscribers)
            return
        }
        if let floodProbe {
            try FloodProbe(binary: floodProbe, seconds: 2, port: try freeTCPPort()).run()
            return
        }
        if let echoServer {
            if echoServer.hasPrefix("tcp:"), let port = Int(echoServer.dropFirst(4)) { try EchoFloor.serve(tcpPort: port) }
            try EchoFloor.serve(unixPath: echoServer)
        }
        // The accessory and metadata-stream runs are about the daemon, not the
        // phone's transport: once, on the Unix socket (as is a daemon given by --unix-socket).
        let transports: [PhoneTransport] =
            accessoryMiB > 0 || accessoryGrantMiB > 0 || accessoryLeanMiB > 0 || clusterSubscribers > 0 || screenHMIs > 0 || spawn == nil ? [.unix] : (transport == .both ? [.unix, .tcp] : [transport])
        for phoneTransport in transports { try await measure(phoneTransport) }
    }

    /// One floor and one daemon, the phone on `transport`.
    func measure(_ transport: PhoneTransport) async throws {
        // `run` measures TCP only with a spawned daemon (whose port this picks).
        let phoneTCPPort = transport == .tcp ? try freeTCPPort() : nil
        let floorResult = (floor || floorOnly) && clusterSubscribers == 0 && screenHMIs == 0 ? try await measureFloor(transport) : nil
        if floorOnly {
            if let floorResult {
                print("the floor alone: RTT p50 \(format1(floorResult.latency.p50)) us, p99 \(format1(floorResult.latency.p99)) us, \(floorResult.latency.count) requests")
            }
            return
        }
        var daemon: SpawnedDaemon?
        let socketPath: String
        if let spawn {
            if idleConnections > 0 { raiseOpenFileLimit() }
            // The N-session run's phone announces an app per session and the echo's.
            let spawned = try SpawnedDaemon.start(
                binary: spawn, arguments: daemonArgs, connections: idleConnections, tcpPort: phoneTCPPort, apps: accessorySessions + 1)
            daemon = spawned
            socketPath = spawned.socketPath
            print("spawned \(spawn) as pid \(spawned.pid) on \(socketPath) (log: \(spawned.logPath))")
        } else {
            socketPath = unixSocket!
        }
        defer { daemon?.stop() }

        let endpoint = HeadUnitEndpoint.unix(path: socketPath)
        try await waitForSocket(endpoint)
        // The phone's way in: the Unix socket, or the daemon's TCP listener.
        let phoneEndpoint = phoneTCPPort.map { HeadUnitEndpoint.tcp(host: "127.0.0.1", port: $0) } ?? endpoint
        if phoneEndpoint != endpoint { try await waitForSocket(phoneEndpoint) }
        // Idle: listening, nobody connected (this probe connection closed).
        try await Task.sleep(nanoseconds: 200_000_000)
        let idleRSS = daemon.flatMap { readRSSKiB(pid: $0.pid) }
        if screenHMIs > 0 {
            try await ScreenFanoutBench(
                endpoint: endpoint, socketPath: socketPath, daemonPID: daemon?.pid, hmis: screenHMIs, seconds: clusterSeconds,
                hz: clusterHz > 0 ? clusterHz : 100
            ).run()
            return
        }
        if clusterSubscribers > 0 {
            try await ClusterBench(
                endpoint: endpoint, socketPath: socketPath, daemonPID: daemon?.pid, subscribers: clusterSubscribers,
                seconds: clusterSeconds, inFlight: inFlight, hz: clusterHz, apart: clusterSubscribersApart
            ).run()
            return
        }

        // Connect to Welcome, 50 times (on TCP: TCP connect, the TLS 1.3
        // handshake, Hello, Welcome), median and p90.
        var handshakes: [Double] = []
        for _ in 0..<50 {
            let start = NIODeadline.now().uptimeNanoseconds
            let probe = try await HeadUnitConnection.connect(to: phoneEndpoint, configuration: .init(role: .phone, name: "bench-probe"))
            handshakes.append(Double(NIODeadline.now().uptimeNanoseconds - start) / 1000)
            await probe.close()
        }
        handshakes.sort()

        let hmi = try await HMISession.connect(to: endpoint, name: "bench-hmi")
        let phone = try await PhoneSession.connect(to: phoneEndpoint, deviceName: "bench-phone")
        var app = HUAppInfo()
        app.appID = "com.example.bench"
        app.displayName = "Bench"
        app.entitlements = ["com.apple.developer.carplay-audio"]
        let decisions = try await phone.announce([app])
        guard decisions.first?.accepted == true else { throw Failure("the daemon refused the bench app: \(decisions)") }
        try await hmi.launch(app.appID)
        let controller = try await phone.waitForScene(appID: app.appID)
        try await controller.setRootTemplate(Self.listTemplate(id: "root", items: items, tag: 0))
        // The decoding HMI launched the app; the HMIs measured with only drain.
        await hmi.close()
        var drains: [DrainHMI] = []
        for _ in 0..<hmis { drains.append(try await DrainHMI.connect(unixPath: socketPath, group: MultiThreadedEventLoopGroup.singleton)) }
        var idle: [DrainHMI] = []
        for _ in 0..<idleConnections {
            idle.append(try await DrainHMI.connect(unixPath: socketPath, group: MultiThreadedEventLoopGroup.singleton, role: .cluster))
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        let connectedRSS = daemon.flatMap { readRSSKiB(pid: $0.pid) }

        // Run the client side of each request on the phone connection's event
        // loop: no thread hop on the client, so the numbers are the daemon's.
        let executor = phone.connection.taskExecutor
        let pushed = Self.listTemplate(id: "pushed", items: items, tag: 1)
        let latency = try await withTaskExecutorPreference(executor) {
            try await measureLatency(serverPID: daemon?.pid) { i in
                if i % 2 == 0 { try await controller.pushTemplate(pushed, animated: false) } else { try await controller.popTemplate(animated: false) }
            }
        }
        let variants = (0..<items).map { Self.listTemplate(id: "root", items: items, tag: $0) }
        let throughput = try await withTaskExecutorPreference(executor) {
            try await measureThroughput { i in try await controller.updateTemplate(variants[i % variants.count]) }
        }
        let afterRSS = daemon.flatMap { readRSSKiB(pid: $0.pid) }

        await phone.close()
        // The lean client on the same daemon, the same HMIs draining (its own app, launched by it).
        var leanDaemon: LeanResult?
        if lean, phoneTCPPort == nil, let daemon {
            leanDaemon = try await measureLean(unixPath: socketPath, serverPID: daemon.pid, daemon: true)
        }
        for drain in drains + idle { await drain.close() }

        print("")
        print("headunitd benchmark (phone on \(phoneEndpoint), client and daemon as separate processes; \(items)-item lists, \(hmis) HMI(s), \(idleConnections) idle connections)")
        print(row("measure", "value"))
        print(row(String(repeating: "-", count: 44), String(repeating: "-", count: 20)))
        print(row("connect to Welcome p50 (\(phoneTCPPort == nil ? "Unix" : "TCP + TLS 1.3"))", format1(handshakes[handshakes.count / 2]) + " us"))
        print(row("connect to Welcome p90", format1(handshakes[handshakes.count * 9 / 10]) + " us"))
        print(row("RTT p50 (push/pop of a \(items)-item list)", String(format1(latency.p50)) + " us"))
        print(row("RTT p99", format1(latency.p99) + " us"))
        print(row("RTT p999", format1(latency.p999) + " us"))
        print(row("RTT max", format1(latency.max) + " us"))
        print(row("requests measured", "\(latency.count)"))
        if let cpu = latency.serverCPU { print(row("daemon CPU per request", format1(cpu) + " us")) }
        if let cpu = latency.clientCPU { print(row("client CPU per request (phone + HMI)", format1(cpu) + " us")) }
        print(row("pipelined updates/s (\(inFlight) in flight)", "\(Int(throughput.perSecond))"))
        print(row("pipelined errors", "\(throughput.errors)"))
        if let idleRSS { print(row("daemon RSS idle", formatMiB(idleRSS))) }
        if let connectedRSS { print(row("daemon RSS with phone + \(hmis) HMI(s) + \(idleConnections) idle", formatMiB(connectedRSS))) }
        if let afterRSS { print(row("daemon RSS after the run", formatMiB(afterRSS))) }
        if daemon == nil { print(row("daemon RSS", "n/a (use --spawn)")) }
        if let floorResult {
            print("")
            print("against the floor (bare SwiftNIO echo of the same frames, its own process, same client; same run)")
            print(row("measure", "floor / headunitd / ratio"))
            print(row(String(repeating: "-", count: 44), String(repeating: "-", count: 30)))
            func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? format1(a / b) + "x" : "-" }
            print(row("RTT p50", "\(format1(floorResult.latency.p50)) us / \(format1(latency.p50)) us / \(ratio(latency.p50, floorResult.latency.p50))  (target <= 3x)"))
            print(row("RTT p99", "\(format1(floorResult.latency.p99)) us / \(format1(latency.p99)) us / \(ratio(latency.p99, floorResult.latency.p99))  (target <= 6x)"))
            if let floorCPU = floorResult.latency.serverCPU, let cpu = latency.serverCPU {
                print(row("server CPU per request", "\(format1(floorCPU)) us / \(format1(cpu)) us / \(ratio(cpu, floorCPU))"))
            }
            if let floorCPU = floorResult.latency.clientCPU, let cpu = latency.clientCPU {
                print(row("client CPU per request", "\(format1(floorCPU)) us / \(format1(cpu)) us / \(ratio(cpu, floorCPU))"))
            }
            let share = floorResult.throughput.perSecond > 0 ? Int((throughput.perSecond / floorResult.throughput.perSecond * 100).rounded()) : 0
            print(row("pipelined msgs/s (\(inFlight) in flight)", "\(Int(floorResult.throughput.perSecond)) / \(Int(throughput.perSecond)) / \(share)%  (target >= 15%)"))
            if let floorRSS = floorResult.idleRSS, let idleRSS {
                print(row("idle RSS", "\(formatMiB(floorRSS)) / \(formatMiB(idleRSS)) / \(ratio(Double(idleRSS), Double(floorRSS)))  (target <= 1.5x)"))
            }
        }
        if let leanDaemon { printLean(floor: floorResult?.lean, daemon: leanDaemon) }

        if accessoryMiB > 0 {
            let beforeRSS = daemon.flatMap { readRSSKiB(pid: $0.pid) }
            let report = try await AccessoryBench(endpoint: endpoint, megabytes: accessoryMiB).run()
            let peakRSS = daemon.flatMap { readRSSKiB(pid: $0.pid) }
            let bytes = Double(accessoryMiB) * 2
            let rtts = report.echoRTTs.sorted()
            func percentile(_ p: Double) -> Double { rtts.isEmpty ? 0 : rtts[min(rtts.count - 1, Int(Double(rtts.count) * p))] }
            print("")
            print("External Accessory session: \(accessoryMiB) MiB each way at once through one session")
            print(row("bytes intact (FNV-1a both ends)", report.intact ? "yes" : "NO"))
            print(row("session throughput (both ways)", format1(bytes / report.sessionSeconds) + " MiB/s"))
            print(row("bare AF_UNIX socket pair (same bytes)", format1(bytes / report.rawSeconds) + " MiB/s"))
            print(row("second session RTT p50 during it", format1(percentile(0.5)) + " us (\(rtts.count) round trips)"))
            print(row("second session RTT p99 during it", format1(percentile(0.99)) + " us"))
            if let beforeRSS, let peakRSS { print(row("daemon RSS before / after", formatMiB(beforeRSS) + " / " + formatMiB(peakRSS))) }
        }

        if accessoryLeanMiB > 0, accessorySessions > 0 {
            try measureConcurrentSessions(socketPath: socketPath, daemonPID: daemon?.pid)
        } else if accessoryLeanMiB > 0 {
            // On a shared machine the pair's own speed moves by half from one
            // second to the next: rounds, each a ratio of its own, and their median.
            let rounds = max(1, accessoryRounds)
            let roundMiB = max(1, accessoryLeanMiB / rounds)
            var roundReports: [LeanAccessoryBench.Report] = []
            for round in 0..<rounds {
                roundReports.append(
                    try LeanAccessoryBench(
                        socketPath: socketPath, megabytes: roundMiB, frameBytes: accessoryFrameKiB << 10, window: accessoryWindowKiB << 10, daemonPID: daemon?.pid,
                        grantStep: accessoryGrantKiB.map { $0 << 10 }
                    ).run(pairFirst: round % 2 == 1))
            }
            let report = LeanAccessoryBench.Report.combining(roundReports)
            let bytes = Double(roundMiB * rounds) * 2
            let rtts = report.echoRTTs.sorted()
            func percentile(_ p: Double) -> Double { rtts.isEmpty ? 0 : rtts[min(rtts.count - 1, Int(Double(rtts.count) * p))] }
            let session = bytes / report.sessionSeconds, raw = bytes / report.rawSeconds, checked = bytes / report.checkedFloorSeconds
            func median(_ values: [Double]) -> Double {
                let sorted = values.sorted()
                return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
            }
            let checkedRatios = roundReports.map { $0.checkedFloorSeconds / $0.sessionSeconds * 100 }
            let rawRatios = roundReports.map { $0.rawSeconds / $0.sessionSeconds * 100 }
            func percents(_ values: [Double]) -> String { values.map { format1($0) + "%" }.joined(separator: " ") }
            print("")
            print("External Accessory session, lean client: \(roundMiB * rounds) MiB each way at once in \(rounds) rounds, \(accessoryFrameKiB) KiB DATA frames, \(accessoryWindowKiB) KiB windows")
            print(row("bytes intact (memcmp both ends)", report.intact && report.checkedFloorIntact ? "yes" : "NO"))
            print(row("session throughput (both ways)", format1(session) + " MiB/s"))
            print(row("socket pair, the session's ends", format1(checked) + " MiB/s (same ring, same reads, memcmp)"))
            print(row("bare socket pair (64 KiB constant, unchecked)", format1(raw) + " MiB/s"))
            print(row("session / pair with the same ends, median", format1(median(checkedRatios)) + "%  (target >= 50%)"))
            print(row("  each round, in order", percents(checkedRatios)))
            print(row("session / bare pair, median", format1(median(rawRatios)) + "%"))
            print(row("  each round, in order", percents(rawRatios)))
            print(row("second session RTT p50 during it", format1(percentile(0.5)) + " us (\(rtts.count) round trips)"))
            print(row("second session RTT p99 during it", format1(percentile(0.99)) + " us  (target < 5000 us)"))
            print(row("client thread CPU", format1(report.clientCPUSeconds / report.sessionSeconds * 100) + "% of the transfer"))
            if let cpu = report.daemonCPUSeconds {
                print(row("daemon CPU", format1(cpu / report.sessionSeconds * 100) + "% of the transfer, " + format2(cpu / (bytes / 1024)) + " s per GiB"))
            }
            if let before = report.rssBeforeKiB, let peak = report.rssMaxKiB, let after = report.rssAfterKiB {
                print(row("daemon RSS before / max / after", formatMiB(before) + " / " + formatMiB(peak) + " / " + formatMiB(after)))
            }
            if let cpu = report.daemonCPUSeconds {
                // Per GiB moved (both ways together): what the machine pays, whatever else runs on it.
                let gib = bytes / 1024
                let session = (cpu + report.clientCPUSeconds) / gib, floor = report.floorCPUSeconds / gib
                let checkedFloor = report.checkedFloorCPUSeconds / gib
                print(row("CPU per GiB: pair (same ends) / session", format2(checkedFloor) + " s / " + format2(session) + " s (client + daemon): \(format1(checkedFloor / session * 100))%"))
                print(row("CPU per GiB: bare pair", format2(floor) + " s"))
            }
            print(row("frames / grants", "\(report.frames) / \(report.grants)"))
            var load = [Double](repeating: 0, count: 3)
            if getloadavg(&load, 3) == 3 { print(row("load average after", load.map { format1($0) }.joined(separator: " "))) }
        }

        if accessoryGrantMiB > 0 {
            let (seconds, bytes, intact) = try await AccessoryBench(endpoint: endpoint, megabytes: accessoryGrantMiB).streamWithSmallGrants(grantBytes: 16 << 10)
            print("")
            print("External Accessory session: \(accessoryGrantMiB) MiB one way, the reader granting every 16 KiB")
            print(row("bytes intact (FNV-1a both ends)", intact ? "yes" : "NO"))
            print(row("streamed", "\(bytes >> 20) MiB in \(format1(seconds)) s, \(format1(Double(bytes >> 20) / seconds)) MiB/s, \(bytes / (16 << 10)) grants"))
        }
    }

    /// `--accessory-sessions N`: N bulk sessions at once through the daemon,
    /// `--accessory-lean-mib` each way in all (issue 30, item 5).
    func measureConcurrentSessions(socketPath: String, daemonPID: pid_t?) throws {
        let bench = LeanAccessoryBench(
            socketPath: socketPath, megabytes: accessoryLeanMiB, frameBytes: accessoryFrameKiB << 10, window: accessoryWindowKiB << 10,
            daemonPID: daemonPID, sessions: accessorySessions, concurrent: true, grantStep: accessoryGrantKiB.map { $0 << 10 })
        let report = try bench.run()
        let perSession = (accessoryLeanMiB << 20) / accessorySessions / (accessoryFrameKiB << 10) * (accessoryFrameKiB << 10)
        let eachWay = Double(perSession * accessorySessions) / Double(1 << 20)
        let rtts = report.echoRTTs.sorted()
        func percentile(_ p: Double) -> Double { rtts.isEmpty ? 0 : rtts[min(rtts.count - 1, Int(Double(rtts.count) * p))] }
        let rates = report.sessionRates.sorted()
        let slowest = rates.first ?? 0, fastest = rates.last ?? 0
        print("")
        print("External Accessory sessions, lean client: \(accessorySessions) at once, \(format1(eachWay)) MiB each way in all (\(format1(Double(perSession) / Double(1 << 20))) MiB each way per session), \(accessoryFrameKiB) KiB DATA frames, \(accessoryWindowKiB) KiB windows, grants every \(accessoryGrantKiB ?? accessoryFrameKiB) KiB")
        print(row("sessions at once", "\(accessorySessions)"))
        print(row("bytes intact (memcmp both ends)", report.intact && report.checkedFloorIntact ? "yes" : "NO"))
        print(row("aggregate throughput, each way", format1(eachWay / report.sessionSeconds) + " MiB/s (" + format1(2 * eachWay / report.sessionSeconds) + " MiB/s both ways)"))
        print(row("socket pair, the session's ends", format1(2 * eachWay / report.checkedFloorSeconds) + " MiB/s both ways: the sessions " + format1(report.checkedFloorSeconds / report.sessionSeconds * 100) + "%"))
        print(row("per session, slowest / fastest", format1(slowest) + " / " + format1(fastest) + " MiB/s both ways: " + format1(fastest > 0 ? slowest / fastest * 100 : 0) + "%"))
        if let least = report.slowestAtFirstDone {
            print(row("when the first session was done, the least", format1(least * 100) + "% of its bytes"))
        }
        print(row("second session RTT p50 during it", format1(percentile(0.5)) + " us (\(rtts.count) round trips)"))
        print(row("second session RTT p99 during it", format1(percentile(0.99)) + " us"))
        print(row("client thread CPU", format1(report.clientCPUSeconds / report.sessionSeconds * 100) + "% of the transfer"))
        if let cpu = report.daemonCPUSeconds {
            print(row("daemon CPU", format1(cpu / report.sessionSeconds * 100) + "% of the transfer, " + format2(cpu / (2 * eachWay / 1024)) + " s per GiB"))
        }
        if let open = report.rssBeforeOpenKiB, let before = report.rssBeforeKiB, let peak = report.rssMaxKiB, let after = report.rssAfterKiB {
            print(row("daemon RSS pre-open / open / max / after", [open, before, peak, after].map(formatMiB).joined(separator: " / ")))
            // Its app and the three connections included.
            print(row("daemon RSS added per session opened", format1(Double(before - open) / Double(accessorySessions)) + " KiB"))
        }
        print(row("frames / grants", "\(report.frames) / \(report.grants)"))
        var load = [Double](repeating: 0, count: 3)
        if getloadavg(&load, 3) == 3 { print(row("load average after", load.map { format1($0) }.joined(separator: " "))) }
    }

    struct Latency {
        var count: Int
        var p50: Double, p99: Double, p999: Double, max: Double
        /// CPU time (user + system) per measured request, microseconds: the
        /// server's process and this client process. nil when unreadable.
        var serverCPU: Double?
        var clientCPU: Double?
    }

    /// One request at a time; every round trip is one sample. `request(i)`
    /// sends the i-th request (push and pop alternate for the daemon).
    func measureLatency(serverPID: pid_t?, _ request: (Int) async throws -> Void) async throws -> Latency {
        for i in 0..<warmup { try await request(i) }
        // An even number of warm-up requests leaves the stack as it was.
        if warmup % 2 == 1 { try await request(warmup) }
        var samples = [Int64](repeating: 0, count: requests)
        let clock = ContinuousClock()
        let serverBefore = serverPID.flatMap(readCPUMicroseconds), clientBefore = readCPUMicroseconds(pid: getpid())
        for i in 0..<requests {
            let start = clock.now
            try await request(i)
            samples[i] = nanoseconds(clock.now - start)
        }
        let serverAfter = serverPID.flatMap(readCPUMicroseconds), clientAfter = readCPUMicroseconds(pid: getpid())
        func perRequest(_ before: Double?, _ after: Double?) -> Double? {
            guard let before, let after, requests > 0 else { return nil }
            return (after - before) / Double(requests)
        }
        if requests % 2 == 1 { try await request(requests) }
        samples.sort()
        func percentile(_ p: Double) -> Double {
            samples.isEmpty ? 0 : Double(samples[min(samples.count - 1, Int(Double(samples.count) * p))]) / 1000
        }
        return Latency(
            count: samples.count, p50: percentile(0.50), p99: percentile(0.99), p999: percentile(0.999), max: Double(samples.last ?? 0) / 1000,
            serverCPU: perRequest(serverBefore, serverAfter), clientCPU: perRequest(clientBefore, clientAfter))
    }

    struct Throughput {
        var perSecond: Double
        var errors: Int
    }

    /// `inFlight` workers each keep one request outstanding for `seconds`
    /// (for the daemon: updates of the root list in place, order-independent,
    /// unlike push/pop, which would race into the depth limit).
    func measureThroughput(_ request: @escaping @Sendable (Int) async throws -> Void) async throws -> Throughput {
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int64(seconds * 1000))
        let start = clock.now
        let (done, errors) = await withTaskGroup(of: (Int, Int).self) { group in
            for worker in 0..<inFlight {
                group.addTask {
                    var done = 0, errors = 0, i = worker
                    while clock.now < deadline {
                        do {
                            try await request(i)
                        } catch {
                            errors += 1
                        }
                        done += 1
                        i += 1
                    }
                    return (done, errors)
                }
            }
            var total = (0, 0)
            for await (d, e) in group { total.0 += d; total.1 += e }
            return total
        }
        let elapsed = Double(nanoseconds(clock.now - start)) / 1e9
        return Throughput(perSecond: Double(done) / elapsed, errors: errors)
    }

    struct FloorResult {
        var latency: Latency
        var throughput: Throughput
        var idleRSS: Int?
        var lean: LeanResult?
    }

    /// The same requests, frames and client against the bare echo server.
    func measureFloor(_ transport: PhoneTransport) async throws -> FloorResult {
        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : (currentDirectory() + "/" + CommandLine.arguments[0])
        let port = transport == .tcp ? try freeTCPPort() : nil
        let command = floorArgs + [me, "--echo-server", port.map { "tcp:\($0)" } ?? "{socket}"]
        let server = try SpawnedDaemon.start(binary: command[0], arguments: Array(command.dropFirst()))
        defer { server.stop() }
        let endpoint = port.map { HeadUnitEndpoint.tcp(host: "127.0.0.1", port: $0) } ?? .unix(path: server.socketPath)
        print("spawned the floor (bare SwiftNIO echo) as pid \(server.pid) on \(endpoint)")
        try await waitForSocket(endpoint)
        try await Task.sleep(nanoseconds: 200_000_000)
        let idleRSS = readRSSKiB(pid: server.pid)
        let connection = try await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "bench-floor"))
        defer { Task { await connection.close() } }
        let push = HUEnvelope.OneOf_Body.templateRequest(HUTemplateRequest.with {
            $0.appID = "com.example.bench"
            $0.sceneID = 1
            $0.op = .push(Self.listTemplate(id: "pushed", items: items, tag: 1))
        })
        let pop = HUEnvelope.OneOf_Body.templateRequest(HUTemplateRequest.with { $0.appID = "com.example.bench"; $0.sceneID = 1; $0.op = .pop(HUPopTemplate()) })
        let executor = connection.taskExecutor
        let latency = try await withTaskExecutorPreference(executor) {
            try await measureLatency(serverPID: server.pid) { i in _ = try await connection.roundTrip(i % 2 == 0 ? push : pop) }
        }
        let updates = (0..<items).map { tag in
            HUEnvelope.OneOf_Body.templateRequest(HUTemplateRequest.with {
                $0.appID = "com.example.bench"
                $0.sceneID = 1
                $0.op = .update(Self.listTemplate(id: "root", items: items, tag: tag))
            })
        }
        let throughput = try await withTaskExecutorPreference(executor) {
            try await measureThroughput { i in _ = try await connection.roundTrip(updates[i % updates.count]) }
        }
        await connection.close()
        let lean = lean && transport == .unix ? try await measureLean(unixPath: server.socketPath, serverPID: server.pid, daemon: false) : nil
        return FloorResult(latency: latency, throughput: throughput, idleRSS: idleRSS, lean: lean)
    }

    /// A list whose item `tag % items` says "now", so successive updates differ.
    static func listTemplate(id: String, items: Int, tag: Int, title: String = "Stations") -> HUTemplate {
        var section = HUListSection()
        section.id = "\(id)-section"
        section.items = (0..<items).map { index in
            var general = HUGeneralItem()
            general.text = index == tag % max(items, 1) ? "Station \(index) (now)" : "Station \(index)"
            general.detailText = "Live radio, 128 kbit/s"
            var item = HUListItem()
            item.id = "\(id)-item-\(index)"
            item.kind = .general(general)
            return item
        }
        var list = HUListTemplate()
        list.title = title
        list.sections = [section]
        var template = HUTemplate()
        template.id = id
        template.kind = .list(list)
        return template
    }

    func waitForSocket(_ endpoint: HeadUnitEndpoint) async throws {
        let clock = ContinuousClock()
        let giveUp = clock.now + .seconds(startupTimeout)
        while true {
            do {
                let probe = try await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "bench-probe"))
                await probe.close()
                return
            } catch {
                if clock.now > giveUp { throw Failure("the daemon did not answer on \(endpoint): \(error)") }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}

func row(_ name: String, _ value: String) -> String {
    name + String(repeating: " ", count: max(1, 46 - name.count)) + value
}

func format1(_ value: Double) -> String {
    String(format1: value)
}

func formatMiB(_ kib: Int) -> String {
    "\(format1(Double(kib) / 1024)) MiB"
}

/// VmRSS from /proc/PID/status, in KiB.
/// Idle-connection runs need a descriptor per connection on both sides; the
/// spawned daemon inherits the raised limit.
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// utime + stime of a process (/proc/PID/stat fields 14 and 15), microseconds.
func readCPUMicroseconds(pid: pid_t) -> Double? {
    guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 1024)
    guard fgets(&line, Int32(line.count), file) != nil else { return nil }
    let text = String(cString: line)
    // The command name (field 2) is in parentheses and may contain spaces.
    guard let close = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // fields[0] is field 3 (state), so utime (14) and stime (15) are 11 and 12.
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) * 1_000_000 / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func readRSSKiB(pid: pid_t) -> Int? {
    guard let file = fopen("/proc/\(pid)/status", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 512)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(cString: line)
        if text.hasPrefix("VmRSS:") {
            return Int(text.dropFirst(6).filter { $0.isNumber })
        }
    }
    return nil
}

/// headunitd started as a child process on a socket in a fresh temp directory.
struct SpawnedDaemon {
    var pid: pid_t
    var socketPath: String
    var logPath: String
    var directory: String

    /// `tcpPort`: the daemon also listens on 127.0.0.1:tcpPort and lets
    /// unpaired phones in there (the benchmark's phone does not pair).
    /// `extraConfig`: more members of the config's JSON object ({dir}: the daemon's directory).
    /// `apps`: the phone's apps, over the default 64 (`max_apps` raised to fit).
    static func start(binary: String, arguments: [String], connections: Int = 0, tcpPort: Int? = nil, extraConfig: String? = nil, apps: Int = 0) throws -> SpawnedDaemon {
        var template = Array("/tmp/headunit-bench.XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template) else { throw Failure("mkdtemp failed") }
        let directory = String(cString: dir)
        let socketPath = directory + "/headunitd.sock"
        let logPath = directory + "/headunitd.log"
        // The benchmark sends far more than a phone's 1000 requests a second
        // (PROTOCOL.md section 10.2): its daemon gets the limit raised.
        let configPath = directory + "/bench-config.json"
        if let file = fopen(configPath, "w") {
            // Room for the idle connections of a scaling run, over the default caps.
            let caps = (connections > 400 ? ", \"maxConnections\": \(connections + 64), \"maxUnixConnections\": \(connections + 32)" : "")
                + (apps > 64 ? ", \"maxApps\": \(apps)" : "")
            let unpaired = tcpPort == nil ? "" : "\"allowUnpairedTcp\": true, "
            let extra = extraConfig.map { $0.replacingAll("{dir}", with: directory) + ", " } ?? ""
            fputs("{\(unpaired)\(extra)\"limits\": {\"maxRequestsPerSecond\": 1000000000\(caps)}}\n", file)
            fclose(file)
        }
        let tcp = tcpPort.map { ["--tcp", "127.0.0.1:\($0)"] } ?? ["--no-tcp"]
        let args = (arguments.isEmpty ? ["--unix-socket", "{socket}"] + tcp + ["--config", "{config}"] : arguments).map {
            $0.replacingAll("{socket}", with: socketPath).replacingAll("{config}", with: configPath)
        }
        // XDG_RUNTIME_DIR too, so a daemon that ignores the flag still lands in the temp dir.
        var environment: [String] = []
        var env = environ
        while let entry = env.pointee {
            let text = String(cString: entry)
            if !text.hasPrefix("XDG_RUNTIME_DIR=") { environment.append(text) }
            env += 1
        }
        environment.append("XDG_RUNTIME_DIR=\(directory)")

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        let argv: [UnsafeMutablePointer<CChar>?] = ([binary] + args).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, binary, &actions, nil, argv, envp)
        guard rc == 0 else { throw Failure("cannot start \(binary): errno \(rc)") }
        return SpawnedDaemon(pid: pid, socketPath: socketPath, logPath: logPath, directory: directory)
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        // Up to 30 s: a daemon under valgrind takes a while to stop and write its profile.
        for _ in 0..<300 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(100_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }
}

extension String {
    func replacingAll(_ target: String, with replacement: String) -> String {
        var result = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}

func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    return getcwd(&buffer, buffer.count).map { String(cString: $0) } ?? "."
}


/// Where the benchmark's phone (and the floor's client) connects.
enum PhoneTransport: String, ExpressibleByArgument, CaseIterable {
    case unix, tcp, both
}

/// A loopback TCP port nobody listens on now (bound to port 0, then released).
func freeTCPPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw Failure("socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw Failure("bind: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}
