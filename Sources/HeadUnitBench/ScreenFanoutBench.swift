import HeadUnitClient
import HeadUnitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Screens to many HMIs (issue 30, item 3, "screens to 10 HMIs the same
/// way" as the metadata stream): an app pushes a 12-item list whose title
/// carries a stamp ("<counter>@<ns>") and pops it, `hz` changes a second,
/// one at a time, while `hmis` HMIs (one stalled) in a process of their own
/// (`LeanSubscribers`, role HMI) find the newest stamp in each screen frame.
struct ScreenFanoutBench {
    let endpoint: HeadUnitEndpoint
    let socketPath: String
    let daemonPID: pid_t?
    let hmis: Int
    let seconds: Double
    let hz: Double

    func run() async throws {
        let hmi = try await HMISession.connect(to: endpoint, name: "bench-hmi")
        let phone = try await PhoneSession.connect(to: endpoint, deviceName: "bench-phone")
        let app = HUAppInfo.with { $0.appID = "com.example.bench"; $0.displayName = "Bench"; $0.entitlements = ["com.apple.developer.carplay-audio"] }
        let decisions = try await phone.announce([app])
        guard decisions.first?.accepted == true else { throw Failure("the daemon refused the bench app: \(decisions)") }
        try await hmi.launch(app.appID)
        let controller = try await phone.waitForScene(appID: app.appID)
        try await controller.setRootTemplate(Self.list(title: "Stations", id: "root"))
        // The launching HMI goes; the measured ones are the lean process's.
        await hmi.close()
        let child = try SubscriberProcess.start(socketPath: socketPath, subscribers: hmis, role: .hmi)
        try await Task.sleep(nanoseconds: 300_000_000)
        let rssStart = daemonPID.flatMap { readRSSKiB(pid: $0) }
        let cpuStart = daemonPID.flatMap { LeanAccessoryBench.cpuSeconds(pid: $0) }

        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .milliseconds(Int64(seconds * 1000))
        let period = Duration.nanoseconds(Int64(1e9 / hz))
        var tick = clock.now
        var counter = 0, errors = 0, done = 0
        let executor = phone.connection.taskExecutor
        try await withTaskExecutorPreference(executor) {
            while clock.now < deadline || counter % 2 == 1 {
                // Paced: one change per period, each sent at its tick (a late one is not made up for).
                tick = max(tick + period, clock.now - period)
                try? await Task.sleep(until: tick, clock: clock)
                counter += 1
                do {
                    if counter % 2 == 1 {
                        try await controller.pushTemplate(Self.list(title: "\(counter)@\(ClusterBench.monotonicNanoseconds())"), animated: false)
                    } else {
                        try await controller.popTemplate(animated: false)
                    }
                } catch { errors += 1 }
                done += 1
            }
            // The last change shown with a stamp: one more push.
            counter += 1
            try await controller.pushTemplate(Self.list(title: "\(counter)@\(ClusterBench.monotonicNanoseconds())"), animated: false)
        }
        let elapsed = Double(nanoseconds(clock.now - start)) / 1e9
        let cpu = daemonPID.flatMap { LeanAccessoryBench.cpuSeconds(pid: $0) }.flatMap { end in cpuStart.map { end - $0 } }
        let figures = try child.finish(last: counter)
        let rssEnd = daemonPID.flatMap { readRSSKiB(pid: $0) }
        await phone.close()

        print("")
        print("headunitd screens: \(hmis) HMIs (1 stalled; lean, in a process of their own), the app pushing and popping a 12-item list, \(format1(hz)) changes/s, one at a time, \(format1(elapsed)) s")
        print(row("measure", "value"))
        print(row(String(repeating: "-", count: 44), String(repeating: "-", count: 20)))
        print(row("changes/s (push, pop)", "\(Int(Double(done) / elapsed))"))
        print(row("change errors", "\(errors)"))
        if let cpu { print(row("daemon CPU per change (fan-out included)", format1(cpu / Double(max(1, done)) * 1e6) + " us, \(format1(cpu / elapsed * 100))% of a core")) }
        print(row("frames received per reading HMI", "\(figures.framesPerReader) (of \(done) changes)"))
        print(row("reading HMIs at the last screen", "\(figures.latest) of \(figures.readers)"))
        print(row("latency push -> screen p50", format1(figures.p50) + " us"))
        print(row("latency p99", format1(figures.p99) + " us  (target <= 2000 us)"))
        print(row("latency p999", format1(figures.p999) + " us"))
        print(row("latency max", format1(figures.max) + " us"))
        print(row("latency samples (pushes x HMIs)", "\(figures.samples)"))
        print(row("stalled HMI still connected", figures.stalledAlive ? "yes" : "no"))
        if let rssStart, let rssEnd { print(row("daemon RSS before / after", formatMiB(rssStart) + " / " + formatMiB(rssEnd))) }
    }

    /// The push/pop benchmark's 12-item list, titled with a stamp.
    static func list(title: String, id: String = "pushed") -> HUTemplate {
        HeadUnitBench.listTemplate(id: id, items: 12, tag: 0, title: title)
    }
}
