import HeadUnitClient
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The metadata stream under load (issue 8): one phone updates maneuvers,
/// trip estimates and now-playing elapsed time as fast as it can while
/// `subscribers` clusters listen, one of them stalled (it never reads).
/// Reports the daemon's RSS over time, whether every reading subscriber ends
/// at the latest state, and the latency from an update's send to its receipt.
struct ClusterBench {
    let endpoint: HeadUnitEndpoint
    let socketPath: String
    let daemonPID: pid_t?
    let subscribers: Int
    let seconds: Double
    let inFlight: Int
    /// Updates per second, one at a time (0: unpaced, `inFlight` outstanding).
    var hz = 0.0
    /// The subscribers in a process of their own (this binary again, `--cluster-subscribe-only`).
    var apart = false

    static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// "<counter>@<ns>" -> ns
    static func stamp(_ text: String) -> Int64? {
        guard let at = text.firstIndex(of: "@") else { return nil }
        return Int64(text[text.index(after: at)...])
    }

    func run() async throws {
        let phone = try await PhoneSession.connect(to: endpoint, deviceName: "bench-phone")
        let hmi = try await HMISession.connect(to: endpoint, name: "bench-hmi")
        let maps = HUAppInfo.with { $0.appID = "com.example.maps"; $0.displayName = "Maps"; $0.entitlements = ["com.apple.developer.carplay-maps"] }
        let radio = HUAppInfo.with { $0.appID = "com.example.radio"; $0.displayName = "Radio"; $0.entitlements = ["com.apple.developer.carplay-audio"] }
        let decisions = try await phone.announce([maps, radio])
        guard decisions.allSatisfy(\.accepted) else { throw Failure("apps refused: \(decisions)") }
        try await hmi.launch(radio.appID)
        let radioScene = try await phone.waitForScene(appID: radio.appID).sceneID
        try await hmi.launch(maps.appID)
        let controller = try await phone.waitForScene(appID: maps.appID)
        try await controller.setRootTemplate(HUTemplate.with { $0.id = "map"; $0.map = HUMapTemplate() })
        let trip = HUTrip.with {
            $0.id = "work"
            $0.destination = HUPlace.with { $0.name = "Work" }
            $0.routeChoices = [HURouteChoice.with { $0.id = "fast"; $0.summaryVariants = ["Fast"] }]
        }
        try await phone.connection.request(.navigationRequest(HUNavigationRequest.with { $0.appID = maps.appID; $0.start = HUStartNavigation.with { $0.trip = trip } }))

        // The subscribers: one stalled (raw socket, never reads), the others reading.
        let local: ClusterSubscribers?
        let child: SubscriberProcess?
        if apart {
            child = try SubscriberProcess.start(socketPath: socketPath, subscribers: subscribers)
            local = nil
        } else {
            local = try await ClusterSubscribers.connect(endpoint: endpoint, socketPath: socketPath, count: subscribers)
            child = nil
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        let rssStart = daemonPID.flatMap { readRSSKiB(pid: $0) }
        let daemonCPUStart = daemonPID.flatMap { LeanAccessoryBench.cpuSeconds(pid: $0) }

        let counter = Counter()
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .milliseconds(Int64(seconds * 1000))
        let rssSampler = Task { () -> [(Double, Int)] in
            var samples: [(Double, Int)] = []
            for mark in [1.0, 10.0, 30.0, 60.0, 120.0] where mark <= seconds {
                let target = start + .milliseconds(Int64(mark * 1000))
                try? await Task.sleep(until: target, clock: clock)
                if let pid = daemonPID, let rss = readRSSKiB(pid: pid) { samples.append((mark, rss)) }
            }
            return samples
        }
        let connection = phone.connection
        let workers = hz > 0 ? 1 : inFlight
        let period = hz > 0 ? Duration.nanoseconds(Int64(1e9 / hz)) : .zero
        let (done, errors) = await withTaskExecutorPreference(connection.taskExecutor) {
            await withTaskGroup(of: (Int, Int).self) { group in
                for _ in 0..<workers {
                    group.addTask {
                        var done = 0, errors = 0
                        // Paced: one update per period, each sent at its tick (a late one is not made up for).
                        var tick = clock.now
                        while clock.now < deadline {
                            if hz > 0 {
                                tick = max(tick + period, clock.now - period)
                                try? await Task.sleep(until: tick, clock: clock)
                            }
                            let k = counter.next()
                            let body = Self.update(k, stamp: Self.monotonicNanoseconds(), radioScene: radioScene)
                            do {
                                let result = try await connection.resultOf(body)
                                if result.code != .ok { errors += 1 }
                            } catch { errors += 1 }
                            done += 1
                        }
                        return (done, errors)
                    }
                }
                var total = (0, 0)
                for await (d, e) in group { total.0 += d; total.1 += e }
                return total
            }
        }
        let elapsed = Double(nanoseconds(clock.now - start)) / 1e9
        let daemonCPU = daemonPID.flatMap { LeanAccessoryBench.cpuSeconds(pid: $0) }.flatMap { end in daemonCPUStart.map { end - $0 } }
        // One last update of each kind with a known value: every reader must end there.
        let last = counter.next()
        for offset in 0..<3 {
            _ = try? await connection.resultOf(Self.update(last + offset, stamp: Self.monotonicNanoseconds(), radioScene: radioScene, kind: offset))
        }
        let finalManeuver = "\(last)@"
        let finalTitle = "\(last + 2)@"
        let figures: SubscriberFigures
        if let child {
            figures = try child.finish(last: last + 2)
        } else {
            figures = await local!.finish(finalManeuver: finalManeuver, finalTitle: finalTitle)
        }
        let rssSamples = await rssSampler.value
        let rssEnd = daemonPID.flatMap { readRSSKiB(pid: $0) }
        await phone.close()
        await hmi.close()

        print("")
        let pace = hz > 0 ? "\(format1(hz)) updates/s, one at a time" : "\(inFlight) updates in flight (unpaced)"
        print("headunitd metadata stream: \(subscribers) subscribers (1 stalled) in \(apart ? "a process of their own" : "the benchmark's process"), \(pace), \(format1(elapsed)) s")
        print(row("measure", "value"))
        print(row(String(repeating: "-", count: 44), String(repeating: "-", count: 20)))
        print(row("updates/s (maneuvers, estimates, elapsed)", "\(Int(Double(done) / elapsed))"))
        print(row("update errors", "\(errors)"))
        if let daemonCPU { print(row("daemon CPU per update (fan-out included)", format1(daemonCPU / Double(max(1, done)) * 1e6) + " us, \(format1(daemonCPU / elapsed * 100))% of a core")) }
        print(row("frames received per reading subscriber", "\(figures.framesPerReader) (of \(done) updates)"))
        print(row("reading subscribers at the latest state", "\(figures.latest) of \(figures.readers)"))
        print(row("latency update -> receipt p50", format1(figures.p50) + " us"))
        print(row("latency p99", format1(figures.p99) + " us" + (hz > 0 ? "  (target <= 2000 us)" : "")))
        print(row("latency p999", format1(figures.p999) + " us"))
        print(row("latency max", format1(figures.max) + " us"))
        print(row("latency samples", "\(figures.samples)"))
        print(row("stalled subscriber still connected", figures.stalledAlive ? "yes" : "no"))
        if let rssStart { print(row("daemon RSS before the updates", formatMiB(rssStart))) }
        for (mark, rss) in rssSamples { print(row("daemon RSS at \(Int(mark)) s", formatMiB(rss))) }
        if let rssEnd { print(row("daemon RSS at the end", formatMiB(rssEnd))) }
    }

    /// Update `k`: maneuvers, trip estimates or now playing, in turn (or `kind`).
    static func update(_ k: Int, stamp: Int64, radioScene: UInt32, kind: Int? = nil) -> HUEnvelope.OneOf_Body {
        switch kind ?? (k % 3) {
        case 0:
            let maneuver = HUManeuver.with {
                $0.id = "m\(k % 2)"
                $0.instructionVariants = ["\(k)@\(stamp)"]
                $0.symbol = HUImage.with { $0.asset = "turn-right"; $0.widthPx = 100; $0.heightPx = 100 }
                $0.estimates = HUTravelEstimates.with { $0.distanceRemainingM = 800; $0.timeRemainingS = 90 }
            }
            return .navigationRequest(HUNavigationRequest.with {
                $0.appID = "com.example.maps"
                $0.updateManeuvers = HUManeuverUpdate.with { $0.maneuvers = [maneuver] }
            })
        case 1:
            // 20 m apart each time: always a significant change.
            return .navigationRequest(HUNavigationRequest.with {
                $0.appID = "com.example.maps"
                $0.updateEstimates = HUEstimatesUpdate.with {
                    $0.estimates = HUTravelEstimates.with { $0.distanceRemainingM = Double(5000 + (k % 100) * 200); $0.timeRemainingS = 600 }
                }
            })
        default:
            var nowPlaying = HUNowPlayingTemplate()
            nowPlaying.title = "\(k)@\(stamp)"
            nowPlaying.artist = "Artist"
            nowPlaying.elapsedSeconds = Double(k)
            nowPlaying.durationSeconds = 1_000_000
            nowPlaying.playbackRate = 1
            return .templateRequest(HUTemplateRequest.with {
                $0.appID = "com.example.radio"
                $0.sceneID = radioScene
                $0.updateNowPlaying = nowPlaying
            })
        }
    }
}

// @unchecked: `value` is only touched under `lock`.
final class Counter: @unchecked Sendable {
    private var value = 0
    private let lock = NSLockish()
    func next() -> Int { lock.withLock { value += 1; return value } }
}

/// A tiny mutex (pthread) so the bench needs no Foundation.
// @unchecked: a pthread mutex, which is made for sharing between threads.
final class NSLockish: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }
    func withLock<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }
}

/// A cluster that subscribes and then never reads: a raw blocking socket. It
/// pings the daemon every few seconds (any frame proves it alive) so the
/// heartbeat does not close it; the daemon's answers pile up unread.
// @unchecked: `fd` is immutable; `pinger` is set in init and cancelled in close, from the bench's one driving task.
final class StalledSubscriber: @unchecked Sendable {
    let fd: Int32
    private var pinger: Task<Void, Never>?

    init(path: String, role: HURole = .cluster) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket failed") }
        self.fd = fd
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw Failure("connect \(path) failed: errno \(errno)") }
        // Small receive buffer: it fills sooner, as a stuck reader's would.
        var size: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        try write(.hello(HUHello.with { $0.minVersion = 1; $0.maxVersion = 1; $0.role = role; $0.name = "bench-stalled" }), id: 1)
        // A cluster asks for the metadata stream; an HMI is sent screens as it is.
        if role == .cluster { try write(.subscribeMetadata(HUSubscribeMetadata()), id: 2) }
        pinger = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 4_000_000_000)
                var ping = ByteBufferAllocator().buffer(capacity: 12)
                ping.writeFrame(kind: .ping, payload: ByteBuffer())
                let bytes = Array(ping.readableBytesView)
                _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    private func write(_ body: HUEnvelope.OneOf_Body, id: UInt32) throws {
        var envelope = HUEnvelope()
        envelope.requestID = id
        envelope.body = body
        let bytes = Array(EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator()).readableBytesView)
        let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw Failure("send failed") }
    }

    /// Still connected: the daemon has not closed it (a peek would read, so poll for HUP only).
    func isOpen() -> Bool {
        let readHangUp: Int16 = 0x2000  // POLLRDHUP (Linux), not exported to Swift
        var pfd = pollfd(fd: fd, events: readHangUp, revents: 0)
        _ = poll(&pfd, 1, 0)
        return pfd.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) == 0
    }

    func close() {
        pinger?.cancel()
        _ = Glibc.close(fd)
    }
}

/// What the subscribers saw, in microseconds.
struct SubscriberFigures {
    var framesPerReader = 0
    var readers = 0
    var latest = 0
    var stalledAlive = false
    var p50 = 0.0, p99 = 0.0, p999 = 0.0, max = 0.0
    var samples = 0

    /// One line, for a subscriber process to hand its figures to the benchmark.
    var line: String {
        "figures \(framesPerReader) \(readers) \(latest) \(stalledAlive ? 1 : 0) \(p50) \(p99) \(p999) \(max) \(samples)"
    }

    init() {}

    /// The percentiles, maximum and count of `latencies` (nanoseconds).
    mutating func take(latencies: [Int64]) {
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double {
            sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
        }
        p50 = percentile(0.50)
        p99 = percentile(0.99)
        p999 = percentile(0.999)
        max = Double(sorted.last ?? 0) / 1000
        samples = sorted.count
    }

    init?(line: String) {
        let fields = line.split(separator: " ")
        guard fields.count == 10, fields[0] == "figures", let frames = Int(fields[1]), let readers = Int(fields[2]), let latest = Int(fields[3]),
            let p50 = Double(fields[5]), let p99 = Double(fields[6]), let p999 = Double(fields[7]), let max = Double(fields[8]), let samples = Int(fields[9])
        else { return nil }
        self.framesPerReader = frames
        self.readers = readers
        self.latest = latest
        self.stalledAlive = fields[4] == "1"
        self.p50 = p50
        self.p99 = p99
        self.p999 = p999
        self.max = max
        self.samples = samples
    }
}

/// `count` cluster subscribers of the metadata stream: one stalled (never
/// reads), the others applying every update and recording, for each stamp
/// they see, the time from the app's send (CLOCK_MONOTONIC, the same clock
/// in every process) to its receipt.
final class ClusterSubscribers {
    /// A reading subscriber: applies updates and records latencies (ns) of the stamps it sees.
    // @unchecked: written only by its own `task`, read after that task has been awaited.
    final class Reader: @unchecked Sendable {
        let session: ClusterSession
        var model = MetadataModel()
        var latencies: [Int64] = []
        var frames = 0
        var task: Task<Void, Never>?
        init(session: ClusterSession) { self.session = session }
    }

    private let stalled: StalledSubscriber
    private let readers: [Reader]

    private init(stalled: StalledSubscriber, readers: [Reader]) {
        self.stalled = stalled
        self.readers = readers
    }

    static func connect(endpoint: HeadUnitEndpoint, socketPath: String, count: Int) async throws -> ClusterSubscribers {
        let stalled = try StalledSubscriber(path: socketPath)
        var readers: [Reader] = []
        for index in 0..<(count - 1) {
            let session = try await ClusterSession.connect(to: endpoint, name: "bench-cluster-\(index)")
            try await session.subscribe()
            let reader = Reader(session: session)
            reader.task = Task {
                for await update in session.updates {
                    let now = ClusterBench.monotonicNanoseconds()
                    reader.frames += 1
                    let changed = reader.model.apply(update)
                    if changed.contains("maneuvers"), let text = reader.model.state.maneuvers.maneuvers.first?.instructionVariants.first, let sent = ClusterBench.stamp(text) {
                        reader.latencies.append(now - sent)
                    }
                    if changed.contains("now_playing"), let sent = ClusterBench.stamp(reader.model.state.nowPlaying.title) {
                        reader.latencies.append(now - sent)
                    }
                }
            }
            readers.append(reader)
        }
        return ClusterSubscribers(stalled: stalled, readers: readers)
    }

    /// Waits (5 s at most) for every reader to hold the last update, then closes all and returns the figures.
    func finish(finalManeuver: String, finalTitle: String) async -> SubscriberFigures {
        let clock = ContinuousClock()
        let settle = clock.now + .seconds(5)
        func atLatest(_ reader: Reader) -> Bool {
            (reader.model.state.maneuvers.maneuvers.first?.instructionVariants.first?.hasPrefix(finalManeuver) ?? false)
                && reader.model.state.nowPlaying.title.hasPrefix(finalTitle)
        }
        while clock.now < settle, !readers.allSatisfy(atLatest) {
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        var figures = SubscriberFigures()
        figures.latest = readers.filter(atLatest).count
        figures.readers = readers.count
        figures.stalledAlive = stalled.isOpen()
        figures.take(latencies: readers.flatMap(\.latencies))
        figures.framesPerReader = readers.map(\.frames).reduce(0, +) / max(1, readers.count)
        for reader in readers { reader.task?.cancel(); await reader.session.close() }
        stalled.close()
        return figures
    }

}

/// `HeadUnitBench --cluster-subscribe-only PATH`: the subscribers alone, in
/// a process of their own, as lean as the lean client (issue 30): one
/// thread, raw Unix sockets and `poll`, no envelope decoded during the run.
/// Each frame's stamps ("<counter>@<ns>") are found in its bytes; the one
/// with the highest counter is the newest update the frame carries, and its
/// latency counts when the subscriber had not seen that update yet. Driven
/// over stdin/stdout by the benchmark that started it: "ready" out;
/// "final COUNTER" in (the last update's counter), the figures' line out
/// once every reader has seen it (5 s at most).
enum LeanSubscribers {
    /// `role` .cluster: metadata subscribers; .hmi: HMIs, sent the screens as they change.
    static func serve(socketPath: String, count: Int, role: HURole = .cluster) throws {
        let stalled = try StalledSubscriber(path: socketPath, role: role)
        var readers: [LeanConnection] = []
        var newest = [Int](repeating: 0, count: count - 1)
        var frames = [Int](repeating: 0, count: count - 1)
        var latencies: [Int64] = []
        latencies.reserveCapacity(1 << 20)
        for index in 0..<(count - 1) {
            let reader = try LeanConnection.connect(socketPath)
            try reader.handshake(role, name: "bench-\(role == .hmi ? "hmi" : "cluster")-\(index)")
            if role == .cluster { try reader.request(.subscribeMetadata(HUSubscribeMetadata())) }
            reader.onRawMessage = { bytes in
                let now = ClusterBench.monotonicNanoseconds()
                frames[index] += 1
                if let (counter, sent) = newestStamp(in: bytes), counter > newest[index] {
                    newest[index] = counter
                    latencies.append(now - sent)
                }
            }
            try reader.setNonBlocking()
            readers.append(reader)
        }
        print("ready")
        fflush(nil)  // every output stream (stdout itself is not concurrency-safe to name)
        var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0)] + readers.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        var last: Int?
        var settle = Double.infinity
        while true {
            if let last, newest.allSatisfy({ $0 >= last }) || LeanAccessoryBench.now() > settle { break }
            for (index, reader) in readers.enumerated() {
                fds[index + 1].events = Int16(POLLIN) | (reader.hasOutput ? Int16(POLLOUT) : 0)
                fds[index + 1].revents = 0
            }
            fds[0].revents = 0
            if last != nil { fds[0].events = 0 }
            let ready = poll(&fds, nfds_t(fds.count), 100)
            if ready < 0, errno != EINTR { throw Failure("poll: \(String(cString: strerror(errno)))") }
            if fds[0].revents != 0, last == nil {
                guard let line = readLine(), case let fields = line.split(separator: " "), fields.count == 2, fields[0] == "final", let counter = Int(fields[1]) else {
                    throw Failure("the benchmark did not say which update was the last")
                }
                last = counter
                settle = LeanAccessoryBench.now() + 5
            }
            for (index, reader) in readers.enumerated() {
                let events = Int32(fds[index + 1].revents)
                if events & Int32(POLLOUT) != 0 { try reader.flush() }
                if events & Int32(POLLIN | POLLHUP | POLLERR) != 0 { try reader.readAvailable() }
            }
        }
        var figures = SubscriberFigures()
        figures.readers = readers.count
        figures.latest = newest.filter { $0 >= (last ?? .max) }.count
        figures.stalledAlive = stalled.isOpen()
        figures.take(latencies: latencies)
        figures.framesPerReader = frames.reduce(0, +) / max(1, readers.count)
        for reader in readers { reader.close() }
        stalled.close()
        print(figures.line)
        fflush(nil)
    }

    /// The stamp with the highest counter in a frame's bytes: "<digits>@<digits>".
    static func newestStamp(in bytes: [UInt8]) -> (counter: Int, sent: Int64)? {
        var best: (counter: Int, sent: Int64)?
        let at = UInt8(ascii: "@"), zero = UInt8(ascii: "0"), nine = UInt8(ascii: "9")
        for index in bytes.indices where bytes[index] == at {
            var start = index
            while start > 0, (zero...nine).contains(bytes[start - 1]) { start -= 1 }
            var end = index + 1
            while end < bytes.count, (zero...nine).contains(bytes[end]) { end += 1 }
            guard start < index, end > index + 1 else { continue }
            var counter = 0, sent: Int64 = 0
            for digit in bytes[start..<index] { counter = counter * 10 + Int(digit - zero) }
            for digit in bytes[(index + 1)..<end] { sent = sent * 10 + Int64(digit - zero) }
            if counter > (best?.counter ?? -1) { best = (counter, sent) }
        }
        return best
    }
}

/// The subscribers in a process of their own: this binary again, with
/// `--cluster-subscribe-only`, its stdin and stdout piped to us.
final class SubscriberProcess {
    let pid: pid_t
    private let input: UnsafeMutablePointer<FILE>
    private let output: UnsafeMutablePointer<FILE>

    private init(pid: pid_t, input: UnsafeMutablePointer<FILE>, output: UnsafeMutablePointer<FILE>) {
        self.pid = pid
        self.input = input
        self.output = output
    }

    static func start(socketPath: String, subscribers: Int, role: HURole = .cluster) throws -> SubscriberProcess {
        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : (currentDirectory() + "/" + CommandLine.arguments[0])
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw Failure("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        for fd in [toChild[0], toChild[1], fromChild[0], fromChild[1]] { posix_spawn_file_actions_addclose(&actions, fd) }
        let arguments = [me, role == .hmi ? "--hmi-subscribe-only" : "--cluster-subscribe-only", socketPath, "--cluster-subscribers", "\(subscribers)"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, me, &actions, nil, argv, environ)
        Glibc.close(toChild[0])
        Glibc.close(fromChild[1])
        guard rc == 0, let input = fdopen(toChild[1], "w"), let output = fdopen(fromChild[0], "r") else {
            throw Failure("cannot start the subscriber process: errno \(rc)")
        }
        let process = SubscriberProcess(pid: pid, input: input, output: output)
        guard process.readLine() == "ready" else { throw Failure("the subscriber process did not get ready") }
        return process
    }

    private func readLine() -> String? {
        var line = [CChar](repeating: 0, count: 4096)
        guard fgets(&line, Int32(line.count), output) != nil else { return nil }
        return String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .trimmingSuffix("\n")
    }

    /// Tells it the last update's counter, takes its figures and waits for it to exit.
    func finish(last: Int) throws -> SubscriberFigures {
        fputs("final \(last)\n", input)
        fflush(input)
        let answer = readLine()
        fclose(input)
        fclose(output)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard let answer, let figures = SubscriberFigures(line: answer) else {
            throw Failure("the subscriber process sent no figures (\(answer ?? "nothing"))")
        }
        return figures
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
