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
        let stalled = try StalledSubscriber(path: socketPath)
        var readers: [Reader] = []
        for index in 0..<(subscribers - 1) {
            let session = try await ClusterSession.connect(to: endpoint, name: "bench-cluster-\(index)")
            try await session.subscribe()
            let reader = Reader(session: session)
            reader.task = Task {
                for await update in session.updates {
                    let now = Self.monotonicNanoseconds()
                    reader.frames += 1
                    let changed = reader.model.apply(update)
                    if changed.contains("maneuvers"), let text = reader.model.state.maneuvers.maneuvers.first?.instructionVariants.first, let sent = Self.stamp(text) {
                        reader.latencies.append(now - sent)
                    }
                    if changed.contains("now_playing"), let sent = Self.stamp(reader.model.state.nowPlaying.title) {
                        reader.latencies.append(now - sent)
                    }
                }
            }
            readers.append(reader)
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        let rssStart = daemonPID.flatMap { readRSSKiB(pid: $0) }

        // The phone: `inFlight` workers, each keeping one update outstanding.
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
        let (done, errors) = await withTaskExecutorPreference(connection.taskExecutor) {
            await withTaskGroup(of: (Int, Int).self) { group in
                for _ in 0..<inFlight {
                    group.addTask {
                        var done = 0, errors = 0
                        while clock.now < deadline {
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
        // One last update of each kind with a known value: every reader must end there.
        let last = counter.next()
        for offset in 0..<3 {
            _ = try? await connection.resultOf(Self.update(last + offset, stamp: Self.monotonicNanoseconds(), radioScene: radioScene, kind: offset))
        }
        let finalManeuver = "\(last)@"
        let finalTitle = "\(last + 2)@"
        let settle = clock.now + .seconds(5)
        func atLatest(_ reader: Reader) -> Bool {
            (reader.model.state.maneuvers.maneuvers.first?.instructionVariants.first?.hasPrefix(finalManeuver) ?? false)
                && reader.model.state.nowPlaying.title.hasPrefix(finalTitle)
        }
        while clock.now < settle, !readers.allSatisfy(atLatest) {
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        let latest = readers.filter(atLatest).count
        let rssSamples = await rssSampler.value
        let rssEnd = daemonPID.flatMap { readRSSKiB(pid: $0) }
        let stalledAlive = stalled.isOpen()

        var all: [Int64] = readers.flatMap(\.latencies)
        all.sort()
        func percentile(_ p: Double) -> Double {
            all.isEmpty ? 0 : Double(all[min(all.count - 1, Int(Double(all.count) * p))]) / 1000
        }
        let frames = readers.map(\.frames).reduce(0, +)

        for reader in readers { reader.task?.cancel(); await reader.session.close() }
        stalled.close()
        await phone.close()
        await hmi.close()

        print("")
        print("headunitd metadata stream: \(subscribers) subscribers (1 stalled), \(inFlight) updates in flight, \(format1(elapsed)) s")
        print(row("measure", "value"))
        print(row(String(repeating: "-", count: 44), String(repeating: "-", count: 20)))
        print(row("updates/s (maneuvers, estimates, elapsed)", "\(Int(Double(done) / elapsed))"))
        print(row("update errors", "\(errors)"))
        print(row("frames received per reading subscriber", "\(frames / max(1, readers.count)) (of \(done) updates)"))
        print(row("reading subscribers at the latest state", "\(latest) of \(readers.count)"))
        print(row("latency update -> receipt p50", format1(percentile(0.50)) + " us"))
        print(row("latency p99", format1(percentile(0.99)) + " us"))
        print(row("latency p999", format1(percentile(0.999)) + " us"))
        print(row("latency samples", "\(all.count)"))
        print(row("stalled subscriber still connected", stalledAlive ? "yes" : "no"))
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

    init(path: String) throws {
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
        try write(.hello(HUHello.with { $0.minVersion = 1; $0.maxVersion = 1; $0.role = .cluster; $0.name = "bench-stalled" }), id: 1)
        try write(.subscribeMetadata(HUSubscribeMetadata()), id: 2)
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
