import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 23's admission and flood findings, over real sockets against the
/// real daemon (PROTOCOL.md sections 10.1, 10.2, 20.5): strangers holding or
/// spraying TCP connections cannot keep a paired phone out, unauthenticated
/// connections cannot flood the serving loop, and a local user without a
/// configured role cannot keep the HMI out or act as the phone.
// Serialized, and the two attacks run their blocking part on threads of their
// own: Swift Testing's cooperative pool has one thread per core, and other
// suites' async clients must still get their turn (DaemonLauncher.swift).
@Suite("Admission and flood control before authentication", .serialized, .ownThread)
struct AdmissionSocketTests {
    /// Runs blocking socket work on a thread of its own, not the cooperative
    /// pool. `body` records no issues (it returns what the test then checks).
    static func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    /// A value that crosses to that thread and back, used by one side at a time.
    // @unchecked: handed over through `offThePool`, never used by both threads at once.
    final class Handed<Value>: @unchecked Sendable {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    /// A stop flag and counters shared with attacker threads.
    // @unchecked: every field is read and written under `lock`.
    final class Attack: @unchecked Sendable {
        private let lock = NSLock()
        private var stopped = false
        private var counts: [String: Int] = [:]

        var isStopped: Bool { lock.withLock { stopped } }
        func stop() { lock.withLock { stopped = true } }
        func count(_ what: String) { lock.withLock { counts[what, default: 0] += 1 } }
        func count(of what: String) -> Int { lock.withLock { counts[what] ?? 0 } }

        /// Runs `body` on `threads` threads until stopped; returns a join.
        func run(threads: Int, _ body: @escaping @Sendable (Int) -> Void) -> () -> Void {
            let done = DispatchGroup()
            for index in 0..<threads {
                done.enter()
                Thread.detachNewThread {
                    body(index)
                    done.leave()
                }
            }
            return { self.stop(); done.wait() }
        }
    }

    /// What a connection heard before it closed: the Goodbye's code, if any.
    static func goodbyeCode(_ client: RawSocketClient, timeout: Double) -> HUErrorCode? {
        let deadline = RawSocketClient.now() + timeout
        while let frame = try? client.readFrame(timeout: max(0, deadline - RawSocketClient.now())) {
            guard frame.kind == FrameKind.message.rawValue,
                let envelope = try? EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
            else { continue }
            if case .goodbye(let goodbye) = envelope.body { return goodbye.code }
        }
        return nil
    }

    /// Pairs `identity` through the HMI's window and a TCP connection.
    static func pair(_ daemon: TestDaemon, _ identity: PhoneIdentity) throws {
        let code = try AuthenticationTests.startPairing(daemon)
        let phone = try daemon.connectTCP()
        _ = try phone.handshake(role: .phone)
        #expect(try AuthenticationTests.pair(phone, code: code, identity: identity).code == .ok)
        phone.close()
    }

    /// Connects from 127.0.0.1, authenticates; nil (and why) when turned away.
    static func authenticated(_ daemon: TestDaemon, _ identity: PhoneIdentity) -> (RawSocketClient?, String) {
        do {
            let phone = try daemon.connectTCP()
            // A phone evicted before its TLS handshake completed sees only a
            // close (section 10.1): it gives a Welcome half a second, then tries again.
            let welcome = try phone.handshake(role: .phone, timeout: 0.5)
            try AuthenticationTests.authenticate(phone, welcome: welcome, identity: identity)
            let (id, result) = try phone.readResult(timeout: 2)
            guard id == 3, result.code == .ok else { return (nil, "authenticate: \(result.code) \(result.message)") }
            return (phone, "")
        } catch {
            return (nil, "\(error)")
        }
    }

    // MARK: - TCP: the owner's phone is never locked out

    /// Issue 23's attack: 8 connections that never send a byte, refreshed by
    /// ~20 connects a second from other hosts, plus 8 more hosts that
    /// reconnect the moment they are evicted. The paired phone drops its link
    /// and comes back 12 times: every time it is in within 1 s and resumes
    /// its session (section 21).
    struct SprayOutcome: Sendable {
        var times: [Double] = []
        var failures: [String] = []
        var connects = 0
        var evicted = 0
        var retries = 0
        /// The last connection answered a PING after the attack: the session went on.
        var lastAnswers = false
    }

    @Test func aPairedPhoneReconnectsAndResumesThroughSilentConnectionsAndASpray() async throws {
        let daemon = try TestDaemon.launch(limits: ["authTimeoutMs": 3_000], pairing: true)
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        let alice = PhoneIdentity()
        try Self.pair(daemon, alice)
        let (first, why) = Self.authenticated(daemon, alice)
        guard let first else { Issue.record("first authentication: \(why)"); return }
        try AuthenticationTests.announce(first)
        let token = try AuthenticationTests.readResult(first, requestID: 10).appDecisions.resumptionToken
        #expect(token.count == 32)
        let phone = Handed(first)
        let outcome = try await Self.offThePool { Self.spray(daemon, port: port, alice, phone, token: token) }
        print("admission spray: \(outcome.connects) attacker connects, \(outcome.evicted) evicted, phone back in \(outcome.times.map { Int($0 * 1000) }) ms, \(outcome.retries) retries")
        if !outcome.failures.isEmpty {
            // Why the daemon closed the phone's connections (a busy-core CI run saw one closed while it resumed).
            let closes = daemon.log.split(separator: "\n").filter { ($0.contains("closing") && !$0.contains("connectionEvicted")) || $0.contains("authenticat") || $0.contains("goodbye") }
            print("admission spray, the daemon's last closes:\n" + closes.suffix(30).joined(separator: "\n"))
        }
        #expect(outcome.failures.isEmpty, "\(outcome.failures)")
        #expect(outcome.times.count == 12)
        // Back at once: the median under a second, none over three (a CI run at
        // load average 8, the spray's threads and the daemon on 2 cores, saw one 1.4 s).
        #expect(outcome.times.sorted()[outcome.times.count / 2] < 1 && outcome.times.allSatisfy { $0 < 3 }, "\(outcome.times)")
        // The attack really ran: strangers were evicted, told why.
        #expect(outcome.evicted > 12)
        #expect(outcome.connects > 100)
        // The session went on: the last connection still carries the apps.
        #expect(outcome.lastAnswers)
    }

    /// The attack and the phone's 12 returns; `phone` ends as the last connection.
    static func spray(_ daemon: TestDaemon, port: Int, _ alice: PhoneIdentity, _ phone: Handed<RawSocketClient>, token: String) -> SprayOutcome {
        var token = token
        let attack = Attack()
        // Hosts 127.0.0.2-9: silent connections, each reconnecting as soon as it is evicted or timed out.
        let holders = attack.run(threads: 8) { index in
            while !attack.isStopped {
                // Bare TCP, never starting TLS: the issue's attack (costs the attacker nothing).
                guard let client = try? RawSocketClient.plainTCP(port: port, from: "127.0.0.\(2 + index)") else { continue }
                attack.count("connects")
                // It never sends a ClientHello, so it never reaches admission: closed after
                // tcp_first_flight_timeout_ms (2 s), or sooner when newer connections need its room (section 10.1).
                if client.waitForClose(timeout: 3) { attack.count("closed") }
                client.close()
                Thread.sleep(forTimeInterval: 0.005)  // a shared test machine: aggressive, not a busy loop
            }
        }
        // Hosts 127.0.1.x: 20 connects a second, each kept (silent) until the next 8 replace it.
        let spray = attack.run(threads: 1) { _ in
            var open: [RawSocketClient] = []
            var host = 0
            while !attack.isStopped {
                host += 1
                if let client = try? RawSocketClient.plainTCP(port: port, from: "127.0.1.\(1 + host % 250)") {
                    attack.count("connects")
                    open.append(client)
                    if open.count > 8 { open.removeFirst().close() }
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            for client in open { client.close() }
        }
        Thread.sleep(forTimeInterval: 1)

        var outcome = SprayOutcome()
        for attempt in 0..<12 {
            phone.value.close()  // the link drops, no Goodbye: the session waits (section 21)
            Thread.sleep(forTimeInterval: 0.3)
            let start = RawSocketClient.now()
            // Told CONNECTION_EVICTED before it authenticated, a phone connects again at once (section 10.1).
            // It keeps trying for as long as the bound below allows (3 s).
            var (back, why) = Self.authenticated(daemon, alice)
            while back == nil, RawSocketClient.now() - start < 3 {
                outcome.retries += 1
                (back, why) = Self.authenticated(daemon, alice)
            }
            guard let back else {
                outcome.failures.append("attempt \(attempt): \(why)")
                continue
            }
            do {
                let result = try ResumptionTests.resume(back, token: token, requestID: 20)
                let elapsed = RawSocketClient.now() - start
                guard result.code == .ok else {
                    outcome.failures.append("attempt \(attempt): resume \(result.code) \(result.message)")
                    continue
                }
                outcome.times.append(elapsed)
                token = result.resumed.resumptionToken
                phone.value = back
            } catch {
                outcome.failures.append("attempt \(attempt): \(error)")
            }
        }
        outcome.lastAnswers = outcome.failures.isEmpty && (try? phone.value.pingRoundTrip()) == true
        spray()
        holders()
        outcome.connects = attack.count(of: "connects")
        outcome.evicted = attack.count(of: "closed")
        return outcome
    }

    /// Past the unauthenticated cap the oldest stranger is evicted, told
    /// `CONNECTION_EVICTED`; one address evicts its own oldest first; a TCP
    /// side full of authenticated phones refuses with `TOO_MANY_CONNECTIONS`.
    @Test func theOldestUnauthenticatedConnectionIsEvictedAndToldWhy() throws {
        let daemon = try TestDaemon.launch(limits: ["maxTcpUnauthenticated": 2, "maxTcpConnections": 3], pairing: true)
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        let a = try RawSocketClient.tcp(port: port, from: "127.0.0.2")
        Thread.sleep(forTimeInterval: 0.2)
        let b = try RawSocketClient.tcp(port: port, from: "127.0.0.3")
        Thread.sleep(forTimeInterval: 0.2)
        let c = try RawSocketClient.tcp(port: port, from: "127.0.0.4")
        let goodbye = try a.readGoodbye()
        #expect(goodbye.code == .connectionEvicted)
        #expect(goodbye.reason.contains("oldest"))
        #expect(a.waitForClose())
        // The newcomer was taken, not refused; once it has said Hello, silent b goes before it.
        _ = try c.handshake(role: .phone)
        // From one address, a third unauthenticated connection replaces that address's oldest.
        let d = try RawSocketClient.tcp(port: port, from: "127.0.0.4")
        Thread.sleep(forTimeInterval: 0.2)
        let e = try RawSocketClient.tcp(port: port, from: "127.0.0.4")
        #expect(try b.readGoodbye().code == .connectionEvicted)
        let own = try c.readGoodbye()
        #expect(own.code == .connectionEvicted)
        #expect(own.reason.contains("same address"))
        _ = (d, e)
    }

    @Test func aTCPSideFullOfAuthenticatedPhonesRefusesNewcomers() throws {
        // A bench: a TCP phone is authenticated (joined) at its Welcome.
        let daemon = try TestDaemon.launch(limits: ["maxTcpConnections": 2])
        defer { _ = try? daemon.terminate() }
        let one = try daemon.connectTCP()
        _ = try one.handshake(role: .phone)
        let two = try daemon.connectTCP()
        _ = try two.handshake(role: .phone)
        // Refused at accept, before its TLS handshake: no frame can reach it
        // in clear, so it is closed (section 10.1, "Over TLS").
        if let three = try? daemon.connectTCP() {
            #expect(three.waitForClose(timeout: 5))
        }
        #expect(try one.pingRoundTrip() && two.pingRoundTrip())
    }

    /// Issue 23: one paired device could hold all 8 TCP slots and keep the
    /// owner's phone out. A device holds at most `max_tcp_per_device` (2)
    /// authenticated connections: its third evicts its own oldest
    /// (Goodbye{CONNECTION_EVICTED}), never another device's, and another
    /// paired phone still gets in.
    @Test func onePairedDeviceCannotHoldEveryTCPSlot() throws {
        let daemon = try TestDaemon.launch(limits: ["maxTcpConnections": 4], pairing: true)
        defer { _ = try? daemon.terminate() }
        let greedy = PhoneIdentity()
        let owner = PhoneIdentity()
        try Self.pair(daemon, greedy)
        try Self.pair(daemon, owner)
        var held: [RawSocketClient] = []
        for _ in 0..<2 {
            let (phone, why) = Self.authenticated(daemon, greedy)
            guard let phone else { Issue.record("refused: \(why)"); return }
            held.append(phone)
        }
        // The oldest carries the device's apps (a link that dropped without the car noticing).
        try AuthenticationTests.announce(held[0])
        let token = try AuthenticationTests.readResult(held[0], requestID: 10).appDecisions.resumptionToken
        let (third, why) = Self.authenticated(daemon, greedy)
        guard let third else { Issue.record("refused: \(why)"); return }
        #expect(Self.goodbyeCode(held[0], timeout: 5) == .connectionEvicted)
        #expect(try held[1].pingRoundTrip())
        // Its session waits for it, and the newest connection resumes it.
        var resume = HUResumeSession()
        resume.resumptionToken = token
        try third.send(.resumeSession(resume), requestID: 20)
        let resumed = try AuthenticationTests.readResult(third, requestID: 20)
        #expect(resumed.code == .ok, "\(resumed.code) \(resumed.message)\n\((try? String(contentsOfFile: daemon.logPath, encoding: .utf8)) ?? "")")
        // Four more from the same device: still two slots at most; the owner gets in.
        for _ in 0..<4 { _ = Self.authenticated(daemon, greedy) }
        let (ownerPhone, ownerWhy) = Self.authenticated(daemon, owner)
        #expect(ownerPhone != nil, "the owner was refused: \(ownerWhy)")
        #expect(try ownerPhone?.pingRoundTrip() == true)
    }

    /// Issue 48, Q1: a phone whose one connection is stale (the car has not
    /// noticed) authenticates a second and sends ResumeSession: the right
    /// token from the same paired device takes the session over at once (the
    /// stale connection gets Goodbye{CONNECTION_EVICTED}); a wrong token, or
    /// the right one from another device, is RESUME_REFUSED and changes nothing.
    @Test func theSameDevicesNewerConnectionTakesItsSessionOverFromAStaleOne() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        let alice = PhoneIdentity()
        let mallory = PhoneIdentity()
        try Self.pair(daemon, alice)
        try Self.pair(daemon, mallory)
        let (stale, why) = Self.authenticated(daemon, alice)
        guard let stale else { Issue.record("refused: \(why)"); return }
        try AuthenticationTests.announce(stale)
        let token = try AuthenticationTests.readResult(stale, requestID: 10).appDecisions.resumptionToken
        // Another device with the right token: refused, the session stays with its connection.
        let (other, otherWhy) = Self.authenticated(daemon, mallory)
        guard let other else { Issue.record("refused: \(otherWhy)"); return }
        #expect(try ResumptionTests.resume(other, token: token, requestID: 20).code == .resumeRefused)
        // The same device with a wrong token: refused too.
        let (fresh, freshWhy) = Self.authenticated(daemon, alice)
        guard let fresh else { Issue.record("refused: \(freshWhy)"); return }
        #expect(try ResumptionTests.resume(fresh, token: String(repeating: "0", count: 32), requestID: 21).code == .resumeRefused)
        #expect(try stale.pingRoundTrip())
        // The same device with the right token: resumed here, the stale connection let go.
        let resumed = try ResumptionTests.resume(fresh, token: token, requestID: 22)
        #expect(resumed.code == .ok, "\(resumed.code) \(resumed.message)")
        #expect(resumed.resumed.apps.count == 1)
        #expect(Self.goodbyeCode(stale, timeout: 30) == .connectionEvicted)
        #expect(try fresh.pingRoundTrip())
    }

    /// An address that reconnects as fast as it is evicted may make room only
    /// `tcp_evictions_per_source_per_second` times a second; then it is refused.
    @Test func anAddressThatKeepsEvictingIsRefused() throws {
        let daemon = try TestDaemon.launch(
            limits: ["maxTcpUnauthenticated": 2, "maxTcpUnauthenticatedPerSource": 2, "tcpEvictionsPerSourcePerSecond": 1], pairing: true)
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        var held = [try RawSocketClient.tcp(port: port, from: "127.0.0.2"), try RawSocketClient.tcp(port: port, from: "127.0.0.3")]
        Thread.sleep(forTimeInterval: 0.1)
        var closed: [Bool] = []
        for index in 0..<3 {
            // 127.0.0.9 connects, then closes at once; an evicted holder comes back.
            // A refusal at accept comes before TLS: the connection just closes (section 10.1).
            let attacker = try? RawSocketClient.tcp(port: port, from: "127.0.0.9")
            closed.append(attacker.map { $0.waitForClose(timeout: 0.3) } ?? true)
            attacker?.close()
            held.append(try RawSocketClient.tcp(port: port, from: "127.0.0.\(4 + index)"))
            Thread.sleep(forTimeInterval: 0.05)
        }
        // Admitted once (silent until the test's long handshake timeout), then refused until its budget refills.
        // (The third may find the budget refilled: TLS handshakes take their time.)
        #expect(Array(closed.prefix(2)) == [false, true], "\(closed)")
        _ = held
    }

    /// A TCP phone that must authenticate has `auth_timeout_ms` from connecting.
    @Test func aTCPPhoneThatDoesNotAuthenticateInTimeIsClosed() throws {
        let daemon = try TestDaemon.launch(limits: ["authTimeoutMs": 400], pairing: true)
        defer { _ = try? daemon.terminate() }
        let silent = try daemon.connectTCP()
        let slow = try daemon.connectTCP()
        _ = try slow.handshake(role: .phone)
        let noHello = try silent.readGoodbye(timeout: 5)
        #expect(noHello.code == .handshakeTimeout)
        #expect(noHello.reason.contains("auth_timeout_ms"))
        let noAuthenticate = try slow.readGoodbye(timeout: 5)
        #expect(noAuthenticate.code == .authRequired)
        #expect(noAuthenticate.reason.contains("auth_timeout_ms"))
    }

    // MARK: - Every frame counts

    /// Between Welcome and authentication a phone has a handful of frames,
    /// PINGs, PONGs and `Pair` alike; one more is `TOO_MANY_REQUESTS`.
    @Test func aPhoneHasAHandfulOfFramesBeforeAuthenticating() throws {
        let daemon = try TestDaemon.launch(limits: ["maxUnauthenticatedFrames": 5], pairing: true)
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectTCP()
        _ = try phone.handshake(role: .phone)
        try phone.sendFrame(.ping, payload: [1])
        try phone.sendFrame(.pong, payload: [2])
        try phone.send(.pair(HUPair.with { $0.code = "000000" }), requestID: 4)
        try phone.sendFrame(.ping, payload: [3])
        try phone.send(.pair(HUPair.with { $0.code = "000000" }), requestID: 5)
        try phone.sendFrame(.ping, payload: [4])
        var pongs = 0, results = 0
        var goodbye: HUGoodbye?
        while goodbye == nil, let frame = try phone.readFrame() {
            switch FrameKind(rawValue: frame.kind) {
            case .pong: pongs += 1
            case .message:
                let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                if case .goodbye(let bye) = envelope.body { goodbye = bye } else if case .result = envelope.body { results += 1 }
            default: break
            }
        }
        #expect(pongs == 2 && results == 2)
        #expect(goodbye?.code == .tooManyRequests)
        #expect(goodbye?.reason.contains("max_unauthenticated_frames") == true)
    }

    /// A PONG the daemon did not ask for gets no answer, but counts: a stream
    /// of them is cut off like any flood (`TOO_MANY_ERRORS`).
    @Test func unsolicitedPongsAreCutOff() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let hmi = try daemon.connectUnix()
        _ = try hmi.handshake(role: .hmi)
        // One is harmless (section 3: a PONG is never answered).
        try hmi.sendFrame(.pong, payload: [9])
        #expect(try hmi.pingRoundTrip())
        let flood = RawSocketClient.frameBytes(kind: FrameKind.pong.rawValue, payload: [9])
        try hmi.send(Array([[UInt8]](repeating: flood, count: 5_000).joined()))
        let goodbye = try hmi.readGoodbye()
        #expect(goodbye.code == .tooManyErrors)
        #expect(goodbye.reason.contains("PONG"))
    }

    /// Empty DATA frames are not free: each takes a sixteenth of a request token.
    @Test func emptyDataFramesTakeFromTheRate() throws {
        let daemon = try TestDaemon.launch(limits: ["maxRequestsPerSecond": 10, "maxErrorsPerSecond": 1_000])
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        _ = try phone.handshake(role: .phone)
        let empty = RawSocketClient.frameBytes(kind: FrameKind.data.rawValue, channel: 5, payload: [])
        try phone.send(Array([[UInt8]](repeating: empty, count: 400).joined()))
        var codes: [HUErrorCode] = []
        while codes.count < 400 { codes.append(try phone.readResult().result.code) }
        // 160 (10 tokens) reach the Car, which has no session on channel 5 (plus what
        // refills, 1.6 a millisecond, while the daemon reads them); then the rate refuses.
        let firstRefusal = codes.firstIndex(of: .tooManyRequests) ?? codes.count
        #expect((160..<240).contains(firstRefusal), "\(firstRefusal)")
        #expect(codes.prefix(firstRefusal).allSatisfy { $0 == .notConnected })
        #expect(codes.filter { $0 == .tooManyRequests }.count > 100)
    }

    /// Issue 23: 8 unauthenticated connections flooding PINGs, PONGs and
    /// `Pair` held the HMI's PING round trip at p99 0.34 s (release) and 3.9 s
    /// (debug). Each is now cut off after a handful of frames, so what they
    /// can make the serving loop do is a few frames per connect.
    @Test func theHMIsPingStaysFastWhileUnauthenticatedConnectionsFlood() async throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        let hmi = try daemon.connectUnix()
        _ = try hmi.handshake(role: .hmi)
        var burst: [UInt8] = RawSocketClient.envelopeBytes(HUEnvelope.with { $0.requestID = 1; $0.body = RawSocketClient.hello(role: .phone) })
        var pair = HUEnvelope()
        pair.requestID = 2
        pair.body = .pair(HUPair.with { $0.code = "123456"; $0.publicKey = Data(repeating: 7, count: 32); $0.deviceName = "flood" })
        let pairBytes = RawSocketClient.envelopeBytes(pair)
        for index in 0..<200 {
            switch index % 3 {
            case 0: burst += RawSocketClient.frameBytes(kind: FrameKind.ping.rawValue, payload: [1, 2, 3, 4])
            case 1: burst += RawSocketClient.frameBytes(kind: FrameKind.pong.rawValue, payload: [1, 2, 3, 4])
            default: burst += pairBytes
            }
        }
        let flood = burst
        let handed = Handed(hmi)
        let (idle, rtts, connects, cutOff, unanswered) = try await Self.offThePool { () -> ([Double], [Double], Int, Int, Int) in
            let hmi = handed.value
            // The same probe without the flood first: what this machine gives now.
            var idle: [Double] = []
            for index in 0..<200 {
                let payload = withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
                let start = RawSocketClient.now()
                _ = try? hmi.pingRoundTrip(payload)
                idle.append(RawSocketClient.now() - start)
                Thread.sleep(forTimeInterval: 0.005)
            }
            let attack = Attack()
            let flooders = attack.run(threads: 8) { index in
                while !attack.isStopped {
                    guard let client = try? RawSocketClient.tcp(port: port, from: "127.0.0.\(2 + index)") else { continue }
                    attack.count("connects")
                    try? client.send(flood)
                    if Self.goodbyeCode(client, timeout: 1) == .tooManyRequests { attack.count("cut off") }
                    client.close()
                }
            }
            Thread.sleep(forTimeInterval: 0.5)
            var rtts: [Double] = []
            var unanswered = 0
            for index in 0..<400 {
                let payload = withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
                let start = RawSocketClient.now()
                if (try? hmi.pingRoundTrip(payload)) != true { unanswered += 1 }
                rtts.append(RawSocketClient.now() - start)
                Thread.sleep(forTimeInterval: 0.005)
            }
            flooders()
            return (idle.sorted(), rtts.sorted(), attack.count(of: "connects"), attack.count(of: "cut off"), unanswered)
        }
        #expect(unanswered == 0)
        let p50 = rtts[rtts.count / 2] * 1000, p99 = rtts[rtts.count * 99 / 100] * 1000
        let idleP99 = idle[idle.count * 99 / 100] * 1000
        print("flood: \(connects) connects, \(cutOff) cut off; HMI PING p50 \(p50) ms, p99 \(p99) ms (\(idleP99) ms without the flood)")
        // Most flooding connections were cut off with TOO_MANY_REQUESTS. A
        // share, not a count: how many connects fit in the probe's 2 s
        // depends on the machine's load (137 with a core kept busy, 92 cut off).
        #expect(cutOff >= 20 && cutOff * 2 > connects, "\(cutOff) of \(connects) connects cut off")
        // The design target is p99 < 10 ms (release daemon: see PROTOCOL.md
        // section 10.2). A debug build on a 2-core machine running the
        // flooders too gets a wide margin, 100 ms or 8x what the same probe
        // saw without the flood when other work loads the machine (181 ms
        // once at load average 7-14, 115 ms at 8): 250 ms or 8x, still far
        // below the 3.9 s it was.
        #expect(p99 < max(250, 8 * idleP99), "p99 \(p99) ms, \(idleP99) ms without the flood")
    }

    /// A TLS 1.3 ClientHello (X25519 key share, as any client offers), made
    /// by Python's ssl module into memory: the spray below replays it.
    static func clientHello() throws -> [UInt8] {
        let script = """
            import ssl
            c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            c.check_hostname = False
            c.verify_mode = ssl.CERT_NONE
            c.minimum_version = ssl.TLSVersion.TLSv1_3
            i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
            s = c.wrap_bio(i, o)
            try:
                s.do_handshake()
            except ssl.SSLWantReadError:
                pass
            print(o.read().hex())
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        process.waitUntilExit()
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex, let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex) {
            bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        guard bytes.count > 100, bytes.first == 0x16 else { throw RawClientError.unexpected("no ClientHello from python3: \(text)") }
        return bytes
    }

    /// Whether any byte arrives on a plain socket within `timeout` (the car's ServerHello).
    static func answered(_ client: RawSocketClient, timeout: Double) -> Bool {
        var poller = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { return false }
        var buffer = [UInt8](repeating: 0, count: 4096)
        return recv(client.fd, &buffer, buffer.count, 0) > 0
    }

    /// TLS handshakes run on the daemon's event loop (the car's). 8 hosts
    /// replaying a ClientHello as fast as the car answers it (each one makes
    /// the car do an X25519 exchange and an ECDSA P-256 signature, then
    /// closing) must not hold up the HMI's PING round trip: measured against
    /// the same probe without the spray, in the same run (BENCHMARKS.md, TLS).
    @Test func theHMIsPingStaysFastUnderAClientHelloSpray() async throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        let hello = try Self.clientHello()
        let hmi = try daemon.connectUnix()
        _ = try hmi.handshake(role: .hmi)
        let handed = Handed(hmi)
        let (idle, rtts, connects, answered, unanswered) = try await Self.offThePool { () -> ([Double], [Double], Int, Int, Int) in
            let hmi = handed.value
            var idle: [Double] = []
            for index in 0..<200 {
                let payload = withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
                let start = RawSocketClient.now()
                _ = try? hmi.pingRoundTrip(payload)
                idle.append(RawSocketClient.now() - start)
                Thread.sleep(forTimeInterval: 0.005)
            }
            let attack = Attack()
            let sprayers = attack.run(threads: 8) { index in
                while !attack.isStopped {
                    guard let client = try? RawSocketClient.plainTCP(port: port, from: "127.0.0.\(40 + index)") else { continue }
                    attack.count("connects")
                    try? client.send(hello)
                    if Self.answered(client, timeout: 1) { attack.count("answered") }
                    client.close()
                }
            }
            Thread.sleep(forTimeInterval: 0.5)
            var rtts: [Double] = []
            var unanswered = 0
            for index in 0..<400 {
                let payload = withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
                let start = RawSocketClient.now()
                if (try? hmi.pingRoundTrip(payload)) != true { unanswered += 1 }
                rtts.append(RawSocketClient.now() - start)
                Thread.sleep(forTimeInterval: 0.005)
            }
            sprayers()
            return (idle.sorted(), rtts.sorted(), attack.count(of: "connects"), attack.count(of: "answered"), unanswered)
        }
        #expect(unanswered == 0)
        let p50 = rtts[rtts.count / 2] * 1000, p99 = rtts[rtts.count * 99 / 100] * 1000
        let idleP50 = idle[idle.count / 2] * 1000, idleP99 = idle[idle.count * 99 / 100] * 1000
        print(
            "ClientHello spray: \(connects) connects, \(answered) answered by the car (TLS handshakes); HMI PING p50 \(p50) ms, p99 \(p99) ms (idle p50 \(idleP50) ms, p99 \(idleP99) ms)"
        )
        // The car really did the handshakes (else the test measured nothing).
        #expect(answered > 100)
        // Target p99 < 10 ms with a release daemon; the same margin as the flood test for a debug one.
        #expect(p99 < max(100, 8 * idleP99), "p99 \(p99) ms, \(idleP99) ms without the spray")
    }

    // MARK: - Unix: credentials at accept, a reserve for the configured users

    /// Runs perl as uid/gid 4242 (no groups) with the socket opened to it;
    /// `script` gets the socket path as $ARGV[0] and `arguments` after it.
    static func asStranger(_ daemon: TestDaemon, _ script: String, _ arguments: [String] = []) throws -> Process {
        // The test daemon's directory and socket are private to root; a unit
        // shipping `SocketMode=0666` looks like this.
        chmod(daemon.directory, 0o755)
        chmod(daemon.unixSocketPath, 0o666)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=4242", "--regid=4242", "--clear-groups", "/usr/bin/perl", "-e", script, daemon.unixSocketPath] + arguments
        return process
    }

    static let perlPrelude = """
        use strict; use warnings; use IO::Socket::UNIX; use IO::Select;
        $| = 1;
        sub conn { IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die "connect: $!"; }
        sub drain { my ($s, $t) = @_; my $sel = IO::Select->new($s); my $all = '';
          while ($sel->can_read($t)) { my $n = sysread($s, my $buf, 65536); last unless $n; $all .= $buf; } return unpack('H*', $all); }
        """

    /// Bytes (hex) the daemon sent: the first frame's Envelope.
    static func firstEnvelope(_ hex: Substring) throws -> HUEnvelope {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), let byte = UInt8(hex[index..<next], radix: 16) {
            bytes.append(byte)
            index = next
        }
        guard bytes.count >= FrameHeader.size else { throw RawClientError.unexpected("no frame: \(hex)") }
        let length = Int(bytes[8]) << 24 | Int(bytes[9]) << 16 | Int(bytes[10]) << 8 | Int(bytes[11])
        return try EnvelopeCodec.decode(ByteBuffer(bytes: bytes[12..<(12 + length)]))
    }

    /// A user no rule names fills every Unix slot it can: the HMI's uid
    /// (named by `hmi_access`) still connects, into the reserved share.
    @Test func aUidWithoutACarRoleCannotKeepTheAllowedHMIOut() throws {
        let daemon = try TestDaemon.launch(
            limits: ["maxUnixConnections": 20, "unixReservedConnections": 5],
            configJSON: "\"hmiAccess\": {\"uids\": [\(getuid())]}")
        defer { _ = try? daemon.terminate() }
        let stranger = try Self.asStranger(
            daemon,
            Self.perlPrelude + """
                my @held; for (1..30) { push @held, conn(); }
                select(undef, undef, undef, 0.5);
                my $refused = 0; for my $s (@held) { $refused++ if drain($s, 0.01) ne ''; }
                print "refused $refused\\n"; <STDIN>;
                """)
        let input = Pipe(), output = Pipe()
        stranger.standardInput = input
        stranger.standardOutput = output
        try stranger.run()
        defer { try? input.fileHandleForWriting.close(); stranger.waitUntilExit() }
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        // 15 unreserved slots: the other 15 were told TOO_MANY_CONNECTIONS.
        #expect(line.hasPrefix("refused 15"), "\(line)")
        #expect(daemon.log.contains("uid 4242"))
        // The HMI restarts: its uid is named, the reserve takes it.
        let hmi = try daemon.connectUnix()
        let welcome = try hmi.handshake(role: .hmi)
        #expect(welcome.version == 1)
        #expect(try hmi.pingRoundTrip())
    }

    /// `phone_access`: a local user it does not name cannot act as the phone,
    /// so it cannot end a paired phone's waiting session (section 21).
    @Test func aUidWithoutPhoneAccessCannotReplaceThePhone() throws {
        let daemon = try TestDaemon.launch(configJSON: "\"phoneAccess\": {\"uids\": [\(getuid())]}")
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        _ = try phone.handshake(role: .phone)
        try AuthenticationTests.announce(phone)
        let token = try AuthenticationTests.readResult(phone, requestID: 10).appDecisions.resumptionToken
        phone.close()  // lost: the session waits
        Thread.sleep(forTimeInterval: 0.2)

        // The stranger says Hello as a phone and would announce its own apps.
        let hello = RawSocketClient.envelopeBytes(HUEnvelope.with { $0.requestID = 1; $0.body = RawSocketClient.hello(role: .phone) })
        let hex = hello.map { String(format: "%02x", $0) }.joined()
        let stranger = try Self.asStranger(
            daemon, Self.perlPrelude + "my $s = conn(); syswrite($s, pack('H*', $ARGV[1])); print drain($s, 3), \"\\n\";", [hex])
        let output = Pipe()
        stranger.standardOutput = output
        try stranger.run()
        stranger.waitUntilExit()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let envelope = try Self.firstEnvelope(answer.split(separator: "\n").first ?? "")
        guard case .goodbye(let goodbye) = envelope.body else { Issue.record("expected Goodbye, got \(envelope)"); return }
        #expect(goodbye.code == .peerNotAllowed)
        #expect(goodbye.reason.contains("uid 4242") && goodbye.reason.contains("phone"))

        // The owner's phone (an allowed uid) comes back and resumes.
        let back = try daemon.connectUnix()
        _ = try back.handshake(role: .phone)
        #expect(try ResumptionTests.resume(back, token: token).code == .ok)
    }
}
