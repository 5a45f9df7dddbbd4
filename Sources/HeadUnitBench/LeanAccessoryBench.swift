import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 25's speed target measured with a client that is not the
/// bottleneck: one thread, raw non-blocking Unix sockets and `poll`, DATA
/// frames built once (a fixed header and payloads that are slices of a
/// pattern ring, written with `writev`), received bytes checked with `memcmp`
/// against the same ring (stream offset by stream offset, so a lost,
/// repeated or reordered byte is caught), grants sent every quarter window.
/// The phone and two accessory peers (a bulk one and an echo one) are all
/// served by this one loop: `megabytes` go each way at once through one
/// session while another session of the same phone does a one-byte echo
/// round trip every 5 ms. Beside it, in the same run, the same bytes each way
/// through one socket pair with nothing between, written and checked as the
/// session's ends do (`checkedSocketPair`), and through a bare socket pair
/// moving a constant 64 KiB buffer unchecked (`AccessoryBench.rawSocketPair`).
///
/// With `concurrent` (`--accessory-sessions N`, issue 30, item 5) the bytes go
/// through `sessions` bulk sessions at once instead, an equal share each: one
/// app per session (the phone announces N + 1 apps), all of them on the one
/// bulk accessory peer, so every session towards the phone shares the phone's
/// budget and every session towards the accessory the accessory's (18.5).
/// Each sender half-closes (`CloseSession{half}`) once it has queued its last
/// byte, so credit it will not use goes back to the budget; receivers grant
/// back whole frames every `grantStep` bytes (see `grantStep`).
struct LeanAccessoryBench {
    let socketPath: String
    let megabytes: Int
    /// DATA payload per frame.
    let frameBytes: Int
    /// The receive window each side widens its direction to (at most the
    /// daemon's cap, 18.5: the receiving peer's budget, 512 KiB by default).
    let window: Int
    /// The spawned daemon, for its RSS and CPU time during the transfer.
    let daemonPID: pid_t?
    /// Bulk sessions the bytes are split across (1 unless `concurrent`).
    var sessions = 1
    /// The N-session measure: `sessions` bulk sessions at once, each sender
    /// half-closing when done, grants in whole frames.
    var concurrent = false
    /// A receiver grants back what a session consumed once it reaches this
    /// many bytes (nil: a quarter window; with `concurrent`, one frame).
    /// With several sessions towards one peer a step over the 64 KiB initial
    /// window can stall: eight sessions' 64 KiB initial credits fill the
    /// peer's 512 KiB budget, and no receiver reaches its step to grant back.
    var grantStep: Int?

    static let ringBytes = 4 << 20 + 4096 * 3  // not a multiple of the frame size: frames start at varying ring offsets

    struct Report {
        var sessionSeconds: Double
        var rawSeconds: Double
        var intact: Bool
        var echoRTTs: [Double]
        var clientCPUSeconds: Double
        var daemonCPUSeconds: Double?
        var rssBeforeKiB: Int?
        var rssMaxKiB: Int?
        var rssAfterKiB: Int?
        var grants: Int
        var frames: Int
        /// User + system time of the socket pair's four threads.
        var floorCPUSeconds: Double
        /// The socket pair with the session's ends (`checkedSocketPair`): its time, CPU and whether its bytes arrived intact.
        var checkedFloorSeconds = 0.0
        var checkedFloorCPUSeconds = 0.0
        var checkedFloorIntact = true
        /// Per bulk session: both directions' bytes over the time its last byte arrived, MiB/s.
        var sessionRates: [Double] = []
        /// When the first session had all its bytes: the least any session had of its own, 0-1.
        var slowestAtFirstDone: Double?
        /// The daemon's RSS before the transfer's connections and sessions were opened.
        var rssBeforeOpenKiB: Int?

        /// Rounds added up: times, CPU, frames and round trips summed; RSS from the first round's start to the last's end.
        static func combining(_ rounds: [Report]) -> Report {
            func sum(_ value: (Report) -> Double) -> Double { rounds.reduce(0) { $0 + value($1) } }
            let daemonCPU = rounds.allSatisfy { $0.daemonCPUSeconds != nil } ? sum { $0.daemonCPUSeconds ?? 0 } : nil
            return Report(
                sessionSeconds: sum(\.sessionSeconds), rawSeconds: sum(\.rawSeconds), intact: rounds.allSatisfy(\.intact),
                echoRTTs: rounds.flatMap(\.echoRTTs), clientCPUSeconds: sum(\.clientCPUSeconds), daemonCPUSeconds: daemonCPU,
                rssBeforeKiB: rounds.first?.rssBeforeKiB, rssMaxKiB: rounds.compactMap(\.rssMaxKiB).max(), rssAfterKiB: rounds.last?.rssAfterKiB,
                grants: rounds.reduce(0) { $0 + $1.grants }, frames: rounds.reduce(0) { $0 + $1.frames }, floorCPUSeconds: sum(\.floorCPUSeconds),
                checkedFloorSeconds: sum(\.checkedFloorSeconds), checkedFloorCPUSeconds: sum(\.checkedFloorCPUSeconds),
                checkedFloorIntact: rounds.allSatisfy(\.checkedFloorIntact), sessionRates: rounds.flatMap(\.sessionRates),
                slowestAtFirstDone: rounds.compactMap(\.slowestAtFirstDone).min(), rssBeforeOpenKiB: rounds.first?.rssBeforeOpenKiB)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// One round: the session's transfer and the socket pair's, the pair first
    /// when `pairFirst` (rounds alternate the order, so the machine's drift
    /// during a round does not favour either side).
    func run(pairFirst: Bool = false) throws -> Report {
        // Whole frames per session, an equal share each.
        let total = (megabytes << 20) / max(1, sessions) / frameBytes * frameBytes * max(1, sessions)
        var floorSeconds = 0.0, floorCPU = 0.0
        var checked = (seconds: 0.0, cpu: 0.0, intact: false)
        func floors() throws {
            // The floors' CPU: this process does nothing else meanwhile.
            var before = Self.processCPUSeconds()
            let result = try Self.checkedSocketPair(total: total, frameBytes: frameBytes)
            checked = (result.seconds, Self.processCPUSeconds() - before, result.intact)
            before = Self.processCPUSeconds()
            floorSeconds = try AccessoryBench.rawSocketPair(total)
            floorCPU = Self.processCPUSeconds() - before
        }
        if pairFirst { try floors() }
        var report = try transfer(total: total)
        if !pairFirst { try floors() }
        report.rawSeconds = floorSeconds
        report.floorCPUSeconds = floorCPU
        report.checkedFloorSeconds = checked.seconds
        report.checkedFloorCPUSeconds = checked.cpu
        report.checkedFloorIntact = checked.intact
        return report
    }

    /// `total` bytes each way at once through one socket pair, nothing
    /// between, with the session's ends: each writer sends the same ring's
    /// bytes as the session's sender, one frame's payload per `write`; each
    /// reader reads up to 1 MiB at a time and checks every byte with
    /// `memcmp`, as `LeanConnection` and `Direction.check` do. Four threads.
    /// The ratio to it is what the relay costs, the ends' work being equal.
    static func checkedSocketPair(total: Int, frameBytes: Int) throws -> (seconds: Double, intact: Bool) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw Failure("socketpair failed") }
        defer { Glibc.close(fds[0]); Glibc.close(fds[1]) }
        let up = Direction(total: total, seed: 1, frameBytes: frameBytes, channel: 0)
        let down = Direction(total: total, seed: 2, frameBytes: frameBytes, channel: 0)
        defer { up.release(); down.release() }
        let start = now()
        var threads: [pthread_t] = []
        for job in [
            CheckedPairJob(fd: fds[0], direction: up, writes: true), CheckedPairJob(fd: fds[1], direction: up, writes: false),
            CheckedPairJob(fd: fds[1], direction: down, writes: true), CheckedPairJob(fd: fds[0], direction: down, writes: false),
        ] {
            var thread = pthread_t()
            pthread_create(&thread, nil, { context in
                Unmanaged<CheckedPairJob>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, Unmanaged.passRetained(job).toOpaque())
            threads.append(thread)
        }
        for thread in threads { pthread_join(thread, nil) }
        return (now() - start, up.received == total && down.received == total)
    }

    /// One thread of `checkedSocketPair`: a direction's writer or its reader.
    final class CheckedPairJob {
        let fd: Int32, direction: Direction, writes: Bool
        init(fd: Int32, direction: Direction, writes: Bool) { self.fd = fd; self.direction = direction; self.writes = writes }

        func run() {
            if writes {
                // Only the writer reads `ring` and only the reader touches the counters.
                var sent = 0
                while sent < direction.total {
                    let at = (direction.start + sent) % LeanAccessoryBench.ringBytes
                    let count = Glibc.write(fd, direction.ring.baseAddress! + at, min(direction.frameBytes, direction.total - sent))
                    if count <= 0 { return }
                    sent += count
                }
            } else {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
                defer { buffer.deallocate() }
                while direction.received < direction.total {
                    let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
                    if count <= 0 { return }
                    if !direction.check(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<count])) { return }
                }
            }
        }
    }

    /// One bulk session of the transfer: both directions, and when its last byte arrived.
    final class BulkSession {
        let channel: UInt32
        /// Phone to accessory, and back.
        let up: Direction, down: Direction
        /// Seconds from the transfer's start.
        var doneAt: Double?
        init(channel: UInt32, up: Direction, down: Direction) {
            self.channel = channel
            self.up = up
            self.down = down
        }
    }

    private func transfer(total: Int) throws -> Report {
        let count = max(1, sessions)
        let concurrent = concurrent
        let perSession = total / count
        let step = grantStep ?? (concurrent ? frameBytes : window / 4)
        // With several sessions grants are whole frames, so credit comes in
        // whole frames too and none is left stranded below a frame's size.
        let unit = concurrent ? frameBytes : 1
        let rssBeforeOpen = daemonPID.flatMap { readRSSKiB(pid: $0) }
        let bulkECU = try LeanConnection.connect(socketPath)
        let echoECU = try LeanConnection.connect(socketPath)
        let phone = try LeanConnection.connect(socketPath)
        defer { bulkECU.close(); echoECU.close(); phone.close() }
        try bulkECU.handshake(.accessory, name: "lean bench performance ECU")
        try echoECU.handshake(.accessory, name: "lean bench climate ECU")
        try phone.handshake(.phone, name: "lean bench phone")
        try bulkECU.request(.serveProtocols(HUServeProtocols.with { $0.protocols = [AccessoryBench.bulkProtocol] }))
        try echoECU.request(.serveProtocols(HUServeProtocols.with { $0.protocols = [AccessoryBench.echoProtocol] }))
        // One app per bulk session (a session per app and protocol, 18.3).
        let bulkApps = (0..<count).map { $0 == 0 ? "com.example.laps" : "com.example.laps.\($0)" }
        let apps = (bulkApps.map { ($0, AccessoryBench.bulkProtocol) } + [("com.example.comfort", AccessoryBench.echoProtocol)]).map { app in
            HUAppInfo.with { $0.appID = app.0; $0.displayName = app.0; $0.entitlements = ["com.apple.developer.carplay-protocols"]; $0.accessoryProtocols = [app.1] }
        }
        try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "lean bench phone"; $0.apps = apps }))
        let echo = try open(app: "com.example.comfort", AccessoryBench.echoProtocol, phone: phone, accessory: echoECU)

        let upRing = Ring(seed: 1, frameBytes: frameBytes), downRing = Ring(seed: 2, frameBytes: frameBytes)
        var opened: [(BulkSession, OpenSession)] = []
        defer {
            for (session, _) in opened { session.up.release(); session.down.release() }
            upRing.release()
            downRing.release()
        }
        for (index, app) in bulkApps.enumerated() {
            let opening = try open(app: app, AccessoryBench.bulkProtocol, phone: phone, accessory: bulkECU)
            // Each session's streams start at a place of their own in the ring (the first at its start).
            let start = index * 1_000_003
            opened.append((BulkSession(
                channel: opening.channel,
                up: Direction(total: perSession, ring: upRing, start: start, frameBytes: frameBytes, channel: opening.channel),
                down: Direction(total: perSession, ring: downRing, start: start, frameBytes: frameBytes, channel: opening.channel)), opening))
        }
        let list = opened.map(\.0)
        let byChannel = Dictionary(uniqueKeysWithValues: list.enumerated().map { ($1.channel, $0) })
        // Each receiver widens its window to the largest outstanding credit,
        // once (after every session opened: a grant passed on during the
        // setup would reach a sender that is not counting yet).
        for (session, opening) in opened {
            let widen = UInt32(max(window, Int(opening.window))) - opening.window
            if widen > 0 {
                phone.enqueue(.sessionCredit(HUSessionCredit.with { $0.channel = session.channel; $0.bytes = widen }))
                bulkECU.enqueue(.sessionCredit(HUSessionCredit.with { $0.channel = session.channel; $0.bytes = widen }))
            }
            session.up.credit = Int(opening.phoneCredit)
            session.down.credit = Int(opening.accessoryCredit)
        }

        var echoSentAt: Double?
        var nextEcho = Self.now()
        var rtts: [Double] = []
        var echoRound: UInt8 = 0
        var grants = 0

        // Who does what with the bytes and messages each connection receives.
        phone.onData = { channel, bytes in
            if let index = byChannel[channel] {
                if !list[index].down.check(bytes) { throw Failure("the phone received bytes that differ from what the accessory sent") }
            } else if channel == echo.channel, let sentAt = echoSentAt {
                rtts.append((Self.now() - sentAt) * 1e6)
                echoSentAt = nil
            }
        }
        bulkECU.onData = { channel, bytes in
            guard let index = byChannel[channel] else { return }
            if !list[index].up.check(bytes) { throw Failure("the accessory received bytes that differ from what the phone sent") }
        }
        echoECU.onData = { channel, bytes in
            // One byte back, as it came (a 1-byte frame needs no credit bookkeeping here: 64 KiB lasts 65,536 rounds).
            var header = ByteBuffer()
            header.writeFrameHeader(FrameHeader(kind: .data, channel: channel, length: UInt32(bytes.count)))
            echoECU.enqueue(copying: Array(header.readableBytesView) + Array(bytes))
        }
        for connection in [phone, bulkECU, echoECU] {
            connection.onMessage = { envelope in
                switch envelope.body {
                case .sessionCredit(let grant):
                    guard let index = byChannel[grant.channel] else { break }
                    if connection === phone { list[index].up.credit += Int(grant.bytes) } else if connection === bulkECU { list[index].down.credit += Int(grant.bytes) }
                case .goodbye(let goodbye): throw Failure("the daemon said goodbye: \(goodbye.code) \(goodbye.reason)")
                case .result(let result) where result.code != .ok: throw Failure("the daemon refused: \(result.code) \(result.message)")
                case .sessionClosed(let closed) where concurrent && closed.reason == .finished && byChannel[closed.channel] != nil:
                    break  // both of its senders half-closed
                case .sessionClosed(let closed): throw Failure("session \(closed.channel) closed: \(closed.reason) \(closed.detail)")
                default: break
                }
            }
        }
        for connection in [phone, bulkECU, echoECU] { try connection.setNonBlocking() }

        // Senders queue whole frames while they have credit; with several
        // sessions each then half-closes, so credit it will not use goes back
        // to its receiver's budget, for the other sessions.
        func send(_ direction: Direction, channel: UInt32, on sender: LeanConnection) {
            direction.queueFrames(on: sender)
            if concurrent, !direction.finishSent, direction.queued >= direction.total {
                sender.enqueue(.closeSession(HUCloseSession.with { $0.channel = channel; $0.half = true }))
                direction.finishSent = true
            }
        }
        // Receivers grant back every `step` bytes consumed (in whole `unit`s).
        func grant(_ direction: Direction, channel: UInt32, from receiver: LeanConnection) {
            guard !direction.done, direction.ungranted >= step else { return }
            let bytes = direction.ungranted / unit * unit
            receiver.enqueue(.sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(bytes) }))
            direction.ungranted -= bytes
            grants += 1
        }

        let rssBefore = daemonPID.flatMap { readRSSKiB(pid: $0) }
        var rssMax = rssBefore
        var nextRSS = Self.now()
        let daemonCPUBefore = daemonPID.flatMap { Self.cpuSeconds(pid: $0) }
        let clientCPUBefore = Self.threadCPUSeconds()
        let start = Self.now()
        var remaining = list.count
        var slowestAtFirstDone: Double?
        var lastReceived = 0, lastProgress = start
        var fds = [phone, bulkECU, echoECU].map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        while remaining > 0 {
            for session in list where session.doneAt == nil {
                send(session.up, channel: session.channel, on: phone)
                send(session.down, channel: session.channel, on: bulkECU)
                grant(session.down, channel: session.channel, from: phone)
                grant(session.up, channel: session.channel, from: bulkECU)
            }
            let now = Self.now()
            if echoSentAt == nil, now >= nextEcho {
                echoRound &+= 1
                var header = ByteBuffer()
                header.writeFrameHeader(FrameHeader(kind: .data, channel: echo.channel, length: 1))
                phone.enqueue(copying: Array(header.readableBytesView) + [echoRound])
                echoSentAt = now
                nextEcho = now + 0.005
            }
            if let pid = daemonPID, now >= nextRSS {
                if let rss = readRSSKiB(pid: pid) { rssMax = max(rssMax ?? 0, rss) }
                nextRSS = now + 0.1
            }
            for (index, connection) in [phone, bulkECU, echoECU].enumerated() {
                fds[index].events = Int16(POLLIN) | (connection.hasOutput ? Int16(POLLOUT) : 0)
                fds[index].revents = 0
            }
            let timeout = echoSentAt == nil ? max(0, Int32((nextEcho - now) * 1000)) : 100
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0, errno != EINTR { throw Failure("poll: \(String(cString: strerror(errno)))") }
            for (index, connection) in [phone, bulkECU, echoECU].enumerated() {
                let events = Int32(fds[index].revents)
                if events & Int32(POLLOUT) != 0 { try connection.flush() }
                if events & Int32(POLLIN | POLLHUP | POLLERR) != 0 { try connection.readAvailable() }
            }
            let after = Self.now()
            var received = 0
            for session in list {
                received += session.up.received + session.down.received
                guard session.doneAt == nil, session.up.done, session.down.done else { continue }
                session.doneAt = after - start
                remaining -= 1
                if slowestAtFirstDone == nil {
                    slowestAtFirstDone = list.map { Double($0.up.received + $0.down.received) / Double(2 * perSession) }.min()
                }
            }
            if received > lastReceived {
                lastReceived = received
                lastProgress = after
            } else if after - lastProgress > 10 {
                // Nothing arrived for 10 s: say where the credit is.
                func state(_ direction: Direction) -> String {
                    direction.done ? "done" : "\(direction.received >> 10)/\(direction.total >> 10) KiB, credit \(direction.credit >> 10), not granted back \(direction.ungranted >> 10)"
                }
                let states = list.filter { $0.doneAt == nil }.prefix(8).map { "channel \($0.channel): up \(state($0.up)); down \(state($0.down))" }
                throw Failure(
                    "stalled: no session byte for 10 s, \(list.count - remaining) of \(list.count) sessions done (grant step \(step >> 10) KiB); "
                        + states.joined(separator: " | "))
            }
            if after - start > 600 { throw Failure("the transfer took over 10 minutes") }
        }
        let seconds = Self.now() - start
        let clientCPU = Self.threadCPUSeconds() - clientCPUBefore
        let daemonCPU = daemonPID.flatMap { Self.cpuSeconds(pid: $0) }.flatMap { after in daemonCPUBefore.map { after - $0 } }
        let rssAfter = daemonPID.flatMap { readRSSKiB(pid: $0) }
        let intact = list.allSatisfy { $0.up.received == perSession && $0.down.received == perSession }
        return Report(
            sessionSeconds: seconds, rawSeconds: 0, intact: intact, echoRTTs: rtts, clientCPUSeconds: clientCPU,
            daemonCPUSeconds: daemonCPU, rssBeforeKiB: rssBefore, rssMaxKiB: rssMax, rssAfterKiB: rssAfter,
            grants: grants, frames: list.reduce(0) { $0 + $1.up.framesSent + $1.down.framesSent }, floorCPUSeconds: 0,
            sessionRates: list.map { Double(2 * perSession) / Double(1 << 20) / ($0.doneAt ?? seconds) },
            slowestAtFirstDone: slowestAtFirstDone, rssBeforeOpenKiB: rssBeforeOpen)
    }

    struct OpenSession {
        var channel: UInt32
        /// What each side may send at first, and the window it was given.
        var phoneCredit: UInt32
        var accessoryCredit: UInt32
        var window: UInt32
    }

    /// OpenSession, the accessory accepts, SessionOpened.
    private func open(app: String, _ name: String, phone: LeanConnection, accessory: LeanConnection) throws -> OpenSession {
        let result = try phone.request(.openSession(HUOpenSession.with { $0.appID = app; $0.protocol = name }))
        let channel = result.accessorySession.channel
        let requested = try accessory.waitFor { envelope -> HUSessionRequested? in
            if case .sessionRequested(let requested) = envelope.body, requested.channel == channel { return requested }
            return nil
        }
        try accessory.request(.answerSession(HUAnswerSession.with { $0.channel = channel; $0.accept = true }))
        let opened = try phone.waitFor { envelope -> HUSessionOpened? in
            if case .sessionOpened(let opened) = envelope.body, opened.channel == channel { return opened }
            return nil
        }
        return OpenSession(channel: channel, phoneCredit: opened.initialCredit, accessoryCredit: requested.initialCredit, window: opened.window)
    }

    /// The random bytes every stream of one direction is cut from; the tail
    /// past `ringBytes` repeats the start, so a frame is one contiguous slice.
    final class Ring {
        let bytes: UnsafeMutableRawBufferPointer

        init(seed: UInt64, frameBytes: Int) {
            bytes = .allocate(byteCount: LeanAccessoryBench.ringBytes + frameBytes, alignment: 16)
            var state = seed &* 0x9E37_79B9_7F4A_7C15
            for offset in stride(from: 0, to: bytes.count - 7, by: 8) {
                // splitmix64
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                bytes.storeBytes(of: z ^ (z >> 31), toByteOffset: offset, as: UInt64.self)
            }
            for offset in 0..<frameBytes { bytes[LeanAccessoryBench.ringBytes + offset] = bytes[offset] }
        }

        /// Explicit, not in deinit: the connections' handlers keep their directions alive.
        func release() { bytes.deallocate() }
    }

    /// One direction of a bulk session: the sender's credit and frames, the receiver's check.
    final class Direction {
        let total: Int
        let frameBytes: Int
        let pattern: Ring
        /// Stream offset `s` carries `ring[(start + s) % ringBytes]`: sessions
        /// sharing a ring start at different places, so bytes delivered on
        /// the wrong channel do not match.
        let start: Int
        var ring: UnsafeMutableRawBufferPointer { pattern.bytes }
        /// The one header every frame of this direction has (same channel, same length).
        let header: UnsafeMutableRawBufferPointer
        var credit = 0
        var queued = 0
        var framesSent = 0
        var received = 0
        var ungranted = 0
        /// The sender's CloseSession{half} is queued.
        var finishSent = false
        /// This direction owns its ring (a direction of its own, not one of N sessions').
        private let ownsRing: Bool

        init(total: Int, ring: Ring, start: Int = 0, frameBytes: Int, channel: UInt32, ownsRing: Bool = false) {
            self.total = total
            self.frameBytes = frameBytes
            pattern = ring
            self.start = start % LeanAccessoryBench.ringBytes
            self.ownsRing = ownsRing
            header = .allocate(byteCount: FrameHeader.size, alignment: 8)
            var buffer = ByteBuffer()
            buffer.writeFrameHeader(FrameHeader(kind: .data, channel: channel, length: UInt32(frameBytes)))
            buffer.withUnsafeReadableBytes { header.copyMemory(from: $0) }
        }

        /// A direction with a ring of its own.
        convenience init(total: Int, seed: UInt64, frameBytes: Int, channel: UInt32) {
            self.init(total: total, ring: Ring(seed: seed, frameBytes: frameBytes), frameBytes: frameBytes, channel: channel, ownsRing: true)
        }

        func release() {
            if ownsRing { pattern.release() }
            header.deallocate()
        }

        var done: Bool { received >= total }

        /// Queues as many whole frames as the credit allows (no copy: the header and a slice of the ring).
        func queueFrames(on connection: LeanConnection) {
            while credit >= frameBytes, queued < total {
                let start = (self.start + queued) % LeanAccessoryBench.ringBytes
                connection.enqueue(UnsafeRawPointer(header.baseAddress!), FrameHeader.size)
                connection.enqueue(UnsafeRawPointer(ring.baseAddress! + start), frameBytes)
                credit -= frameBytes
                queued += frameBytes
                framesSent += 1
            }
        }

        /// The next bytes of the stream, compared with what was sent.
        func check(_ bytes: UnsafeRawBufferPointer) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let at = (start + received + offset) % LeanAccessoryBench.ringBytes
                let count = min(bytes.count - offset, LeanAccessoryBench.ringBytes - at)
                if memcmp(bytes.baseAddress! + offset, ring.baseAddress! + at, count) != 0 { return false }
                offset += count
            }
            received += bytes.count
            ungranted += bytes.count
            return received <= total
        }
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func threadCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// utime + stime of a process, from /proc/PID/stat.
    static func cpuSeconds(pid: pid_t) -> Double? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 4096)
        guard fgets(&line, Int32(line.count), file) != nil else { return nil }
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14, stime 15 (1-based in proc(5)).
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// A raw Unix-socket connection to the daemon for the lean benchmark:
/// blocking for the setup, then non-blocking in `poll`. Output is a queue of
/// segments written with `writev`; frames are parsed as bytes arrive and DATA
/// payloads handed over in place, never copied.
final class LeanConnection {
    let fd: Int32
    var onData: (UInt32, UnsafeRawBufferPointer) throws -> Void = { _, _ in }
    var onMessage: (HUEnvelope) throws -> Void = { _ in }
    /// When set, MESSAGE frames go here as bytes, not decoded (`onMessage` is not called).
    var onRawMessage: (([UInt8]) throws -> Void)?
    private var inbox: [HUEnvelope] = []
    private var nextRequestID: UInt32 = 0

    private struct Segment {
        var base: UnsafeRawPointer
        var length: Int
        /// Set when the segment owns its bytes (freed once written).
        var owned: UnsafeMutableRawPointer?
    }
    private var segments: [Segment] = []
    private var head = 0
    var hasOutput: Bool { head < segments.count }

    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
    private var header = [UInt8](repeating: 0, count: FrameHeader.size)
    private var headerCount = 0
    private var kind: UInt8 = 0
    private var channel: UInt32 = 0
    private var remaining = 0
    private var message: [UInt8] = []

    private init(fd: Int32) { self.fd = fd }

    static func connect(_ path: String) throws -> LeanConnection {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LeanAccessoryBench.Failure("socket failed") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw LeanAccessoryBench.Failure("connect \(path): \(String(cString: strerror(errno)))")
        }
        return LeanConnection(fd: fd)
    }

    func close() {
        for index in head..<segments.count { segments[index].owned?.deallocate() }
        segments = []
        head = 0
        readBuffer.deallocate()
        Glibc.close(fd)
    }

    func setNonBlocking() throws {
        let flags = fcntl(fd, F_GETFL)
        guard fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { throw LeanAccessoryBench.Failure("fcntl failed") }
    }

    // MARK: - Setup (blocking)

    func handshake(_ role: HURole, name: String) throws {
        enqueue(.hello(HUHello.with { $0.role = role; $0.name = name; $0.minVersion = 1; $0.maxVersion = 1 }))
        try flush()
        _ = try waitFor { envelope -> HUWelcome? in
            if case .welcome(let welcome) = envelope.body { return welcome }
            return nil
        }
    }

    /// Sends a request and waits for its Result, which must be OK.
    @discardableResult
    func request(_ body: HUEnvelope.OneOf_Body) throws -> HUResult {
        nextRequestID += 1
        let id = nextRequestID
        enqueue(body, requestID: id)
        try flush()
        let result = try waitFor { envelope -> HUResult? in
            if case .result(let result) = envelope.body, envelope.requestID == id { return result }
            return nil
        }
        guard result.code == .ok else { throw LeanAccessoryBench.Failure("request refused: \(result.code) \(result.message)") }
        return result
    }

    /// Reads (blocking, 30 s at most) until `match` takes an envelope; others are dropped.
    func waitFor<T>(_ match: (HUEnvelope) -> T?) throws -> T {
        let deadline = LeanAccessoryBench.now() + 30
        while true {
            while !inbox.isEmpty {
                let envelope = inbox.removeFirst()
                if case .goodbye(let goodbye) = envelope.body { throw LeanAccessoryBench.Failure("goodbye during setup: \(goodbye.reason)") }
                if let found = match(envelope) { return found }
            }
            guard LeanAccessoryBench.now() < deadline else { throw LeanAccessoryBench.Failure("timed out during setup") }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 1000)
            if descriptor.revents != 0 { try readAvailable() }
        }
    }

    // MARK: - Output

    func enqueue(_ body: HUEnvelope.OneOf_Body, requestID: UInt32 = 0) {
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = body
        let frame = EnvelopeCodec.frame(envelope, allocator: ByteBufferAllocator())
        enqueue(copying: Array(frame.readableBytesView))
    }

    func enqueue(copying bytes: [UInt8]) {
        let owned = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { owned.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        segments.append(Segment(base: UnsafeRawPointer(owned), length: bytes.count, owned: owned))
    }

    /// Bytes that stay valid until written (the benchmark's rings and headers).
    func enqueue(_ base: UnsafeRawPointer, _ length: Int) {
        segments.append(Segment(base: base, length: length, owned: nil))
    }

    /// Writes what the socket takes now, up to 64 segments per `writev`.
    func flush() throws {
        while head < segments.count {
            let count = min(64, segments.count - head)
            var vectors = (head..<(head + count)).map { iovec(iov_base: UnsafeMutableRawPointer(mutating: segments[$0].base), iov_len: segments[$0].length) }
            let written = writev(fd, &vectors, Int32(count))
            if written < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                if errno == EINTR { continue }
                throw LeanAccessoryBench.Failure("writev: \(String(cString: strerror(errno)))")
            }
            var left = written
            while left > 0 {
                if segments[head].length <= left {
                    left -= segments[head].length
                    segments[head].owned?.deallocate()
                    head += 1
                } else {
                    segments[head].base += left
                    segments[head].length -= left
                    left = 0
                }
            }
            if head == segments.count || head > 4096 {
                segments.removeFirst(head)
                head = 0
            }
            if written < vectors.reduce(0, { $0 + $1.iov_len }) { return }
        }
    }

    // MARK: - Input

    /// Reads what is there (at most 1 MiB) and handles every complete part of it.
    func readAvailable() throws {
        let count = read(fd, readBuffer.baseAddress, readBuffer.count)
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            throw LeanAccessoryBench.Failure("read: \(String(cString: strerror(errno)))")
        }
        if count == 0 { throw LeanAccessoryBench.Failure("the daemon closed the connection") }
        var offset = 0
        while offset < count {
            if headerCount < FrameHeader.size {
                let take = min(FrameHeader.size - headerCount, count - offset)
                for index in 0..<take { header[headerCount + index] = readBuffer[offset + index] }
                headerCount += take
                offset += take
                guard headerCount == FrameHeader.size else { break }
                guard header[0] == 0x48, header[1] == 0x55 else { throw LeanAccessoryBench.Failure("bad magic from the daemon") }
                kind = header[2]
                channel = UInt32(header[4]) << 24 | UInt32(header[5]) << 16 | UInt32(header[6]) << 8 | UInt32(header[7])
                remaining = Int(header[8]) << 24 | Int(header[9]) << 16 | Int(header[10]) << 8 | Int(header[11])
                message.removeAll(keepingCapacity: true)
                if remaining == 0 { try frameEnded() }
                continue
            }
            let take = min(remaining, count - offset)
            let bytes = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(readBuffer)[offset..<(offset + take)])
            if kind == FrameKind.data.rawValue {
                try onData(channel, bytes)
            } else {
                message.append(contentsOf: bytes)
            }
            remaining -= take
            offset += take
            if remaining == 0 { try frameEnded() }
        }
    }

    private func frameEnded() throws {
        headerCount = 0
        switch FrameKind(rawValue: kind) {
        case .message:
            if let onRawMessage {
                try onRawMessage(message)
                return
            }
            let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: message))
            inbox.append(envelope)
            try onMessage(envelope)
            // During the transfer nothing waits on the inbox.
            if inbox.count > 64 { inbox.removeFirst(inbox.count - 64) }
        case .ping:
            var pong = ByteBuffer()
            pong.writeFrame(kind: .pong, payload: ByteBuffer(bytes: message))
            enqueue(copying: Array(pong.readableBytesView))
        default:
            break
        }
    }
}
