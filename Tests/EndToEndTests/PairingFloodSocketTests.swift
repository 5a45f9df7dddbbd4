import Foundation
import HeadUnitClient
import HeadUnitSecurity
import HeadUnitWire
import TestSupport
import Testing

/// Issue 47 item 6 and issue 48 bug 5, over real sockets against the real
/// daemon: a throttled PairStart says how long to wait (PROTOCOL.md section
/// 20.2), the SDK waits that long and pairs under a guessing flood, and what
/// a connection's end causes for the HMIs reaches them at once.
@Suite("Pairing under a guessing flood, and what a close tells the HMIs", .serialized)
struct PairingFloodSocketTests {
    typealias Attack = AdmissionSocketTests.Attack

    /// A PairStart with `code`'s SPAKE2 message; its Result.
    static func pairStart(_ phone: RawSocketClient, code: String, requestID: UInt32) throws -> HUResult {
        var start = HUPairStart()
        start.spake2Message = Data(try SPAKE2Exchange(role: .phone, password: Array(code.utf8)).message)
        try phone.send(.pairStart(start), requestID: requestID)
        return try AuthenticationTests.readResult(phone, requestID: requestID)
    }

    /// The wait a throttled PairStart states is machine-readable and exact:
    /// a phone that waits `limit_value` ms gets its next attempt on the same
    /// connection; a connection past its 2 attempts is told so by name.
    @Test func aThrottledPairStartStatesTheWaitAndWaitingItIsEnough() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(pairing: true)
            defer { _ = try? daemon.terminate() }
            let code = try AuthenticationTests.startPairing(daemon)
            let wrong = code == "000000" ? "000001" : "000000"
            let phone = try daemon.connectTCP()
            _ = try phone.handshake(role: .phone)
            #expect(try AuthenticationTests.pair(phone, code: wrong, identity: PhoneIdentity(), requestID: 2).code == .badPairingCode)
            let throttled = try Self.pairStart(phone, code: wrong, requestID: 3)
            #expect(throttled.code == .pairingThrottled)
            #expect(throttled.limit == PairingLimitNames.retryAfter)
            // This address's backoff after one attempt: 1 s, less what has passed.
            #expect(throttled.limitValue > 0 && throttled.limitValue <= 1_000, "\(throttled.limitValue)")
            #expect(throttled.message.contains("try again in \(throttled.limitValue) ms"))
            Thread.sleep(forTimeInterval: Double(throttled.limitValue) / 1000)
            // The refusal used none of the connection's attempts: the second one starts.
            #expect(try AuthenticationTests.pair(phone, code: wrong, identity: PhoneIdentity(), requestID: 4).code == .badPairingCode)
            let spent = try Self.pairStart(phone, code: code, requestID: 5)
            #expect(spent.code == .pairingThrottled)
            #expect(spent.limit == PairingLimitNames.attemptsPerConnection)
            #expect(spent.limitValue == 2)
        }
    }

    /// Issue 47: with the car's rate kept exhausted by wrong guesses from
    /// rotating addresses (two connections polling PairStart every 50 ms), an
    /// owner retrying at its own pace was throttled every time. The SDK now
    /// waits the time each refusal states and pairs within 30 s (the car's
    /// rate frees one attempt every 2 s; the owner's arrives at the stated
    /// time, the pollers' at theirs).
    @Test func theOwnerPairsWithTheSDKUnderAGuessingFlood() async throws {
        let daemon = try await onOwnThread(gated: false) { try TestDaemon.launch(pairing: true) }
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        let code = try await onOwnThread(gated: false) { try AuthenticationTests.startPairing(daemon) }
        let wrong = code == "000000" ? "000001" : "000000"
        let attack = Attack()
        let flood = attack.run(threads: 2) { index in
            var host = 0
            while !attack.isStopped {
                host += 1
                // A fresh address for each connection: no address's own backoff binds.
                let address = "127.0.\(7 + index).\(1 + host % 250)"
                guard let attacker = try? RawSocketClient.tcp(port: port, from: address, timeoutMs: 5_000) else { continue }
                defer { attacker.close() }
                guard (try? attacker.handshake(role: .phone, timeout: 10)) != nil else { continue }
                // Up to 6 PairStarts (8 frames before authenticating): one guess, then a new address.
                for requestID in UInt32(1)...6 where !attack.isStopped {
                    guard let result = try? Self.pairStart(attacker, code: wrong, requestID: requestID) else { break }
                    if result.code == .ok {
                        attack.count("guesses")
                        break
                    }
                    guard result.code == .pairingThrottled else { break }
                    attack.count("throttled")
                    Thread.sleep(forTimeInterval: 0.05)
                }
            }
        }
        // The flood has spent the car's burst: attempts are being throttled.
        let spent = RawSocketClient.now() + 60
        while attack.count(of: "throttled") == 0, RawSocketClient.now() < spent { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(attack.count(of: "throttled") > 0, "the flood never exhausted the car's rate")

        let identity = PhoneIdentity()
        let started = RawSocketClient.now()
        var paired: PhoneSession?
        do {
            paired = try await PhoneSession.connect(to: .tcp(host: "127.0.0.1", port: port), deviceName: "Owner") {
                $0.identity = identity
                $0.pairingCode = code
                $0.pairingTimeout = .seconds(60)
                $0.pairingWait = { _, _ in attack.count("owner waits") }
            }
        } catch {
            Issue.record("the owner did not pair under the flood: \(error)")
        }
        let elapsed = RawSocketClient.now() - started
        let guessesDuringFlood = attack.count(of: "guesses")
        await onOwnThreadJoin(flood)
        await paired?.close()
        #expect(paired != nil)
        #expect(elapsed < 30, "paired after \(elapsed) s")
        // Whether the owner was throttled at all is the clock's luck: the
        // flood takes each of the car's tokens only between its reconnects, so
        // one may be free as the owner arrives (0 waits, seen once in a CI
        // run). That a throttled owner waits the stated time and then pairs is
        // shown without luck by `aThrottledPairStartStatesTheWaitAndWaitingItIsEnough`
        // and `headunitctlPairPhoneSaysItWaitsAndPairs`; here: it pairs, in time.
        // The car's rate held: 16 at once, then one every 2 s (the flood ran at most a minute before the owner).
        #expect(guessesDuringFlood <= 16 + Int((elapsed + 60) / 2) + 1, "\(guessesDuringFlood) guesses")
        print("owner paired under the flood after \(String(format: "%.2f", elapsed)) s, \(attack.count(of: "owner waits")) waits; flood: \(guessesDuringFlood) guesses, \(attack.count(of: "throttled")) throttled")
    }

    /// `headunitctl pair-phone` right after a wrong guess from the same
    /// address: the car throttles it (the address's 1 s backoff), and the
    /// command says it waits, then pairs instead of failing.
    @Test func headunitctlPairPhoneSaysItWaitsAndPairs() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(pairing: true)
            defer { _ = try? daemon.terminate() }
            let code = try AuthenticationTests.startPairing(daemon)
            let wrong = code == "000000" ? "000001" : "000000"
            let tcp = "127.0.0.1:\(daemon.tcpPort!)"
            let failed = try AuthenticationTests.ctl(["pair-phone", "--tcp", tcp, "--code", wrong, "--key", daemon.directory + "/k1"])
            #expect(failed.status != 0 && failed.stderr.contains("does not verify"), "\(failed)")
            let paired = try AuthenticationTests.ctl(["pair-phone", "--tcp", tcp, "--code", code, "--key", daemon.directory + "/k2"])
            #expect(paired.status == 0, "\(paired)")
            #expect(paired.stderr.contains("the car is throttling pairing attempts: waiting"), "\(paired.stderr)")
            #expect(paired.stdout.contains("paired: device id"), "\(paired.stdout)")
        }
    }

    /// Joins attacker threads without blocking the cooperative pool.
    func onOwnThreadJoin(_ join: @escaping () -> Void) async {
        _ = try? await onOwnThread(gated: false) { join() }
    }

    /// Issue 48 bug 5: a pairing attempt abandoned by the connection's end
    /// reached the HMIs with their next heartbeat write (up to 30 s here).
    /// Now every event a close causes goes out at once: the abandoned
    /// attempt, and a departed phone's apps leaving the home screen.
    @Test func whatAConnectionsEndCausesReachesTheHMIsAtOnce() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["heartbeatIntervalMs": 30_000, "heartbeatTimeoutMs": 90_000], pairing: true)
            defer { _ = try? daemon.terminate() }
            let (hmi, code) = try AuthenticationTests.startPairingWatching(daemon)
            let phone = try daemon.connectTCP()
            _ = try phone.handshake(role: .phone)
            #expect(try Self.pairStart(phone, code: code, requestID: 2).code == .ok)
            // The phone leaves before confirming (no Pair).
            phone.close()
            let closed = RawSocketClient.now()
            let shown = try AuthenticationTests.readPairingAttempt(hmi, timeout: 10)
            #expect(shown.outcome == .abandoned)
            let late = RawSocketClient.now() - closed
            #expect(late < 10, "PairingAttempt{ABANDONED} \(late) s after the close")

            // Another kind: a Unix phone with an app says Goodbye; the home screen loses its icon at once.
            let wired = try daemon.connectUnix()
            try wired.handshake(role: .phone)
            try AuthenticationTests.announce(wired)
            #expect(try AuthenticationTests.readResult(wired, requestID: 10).code == .ok)
            #expect(try ResumptionTests.homeScreen(hmi, link: .connected)?.icons.isEmpty == false)
            try wired.send(.goodbye(HUGoodbye.with { $0.code = .ok; $0.reason = "user disconnected" }))
            let left = RawSocketClient.now()
            let home = try ResumptionTests.homeScreen(hmi, link: .none)
            #expect(home?.icons.isEmpty == true)
            #expect(RawSocketClient.now() - left < 10)
        }
    }
}
