import HeadUnitCore
import HeadUnitWire
import NIOCore
import Testing

/// Admission (PROTOCOL.md section 10.1) without a socket: accepts,
/// authentications and closes in, decisions out.
@Suite struct AdmissionTests {
    static let caps = ConnectionCaps(maxTotal: 512, maxUnix: 10, maxTCP: 8, maxTCPUnauthenticated: 4, maxTCPUnauthenticatedPerSource: 2, unixReserved: 3)

    @Test func unauthenticatedTCPAtItsCapEvictsTheOldestInsteadOfRefusingTheNewcomer() {
        var admission = Admission(caps: Self.caps)
        for id in 1...4 { #expect(admission.admit(UInt64(id), .tcp(address: "10.0.0.\(id)")) == .admit) }
        guard case .admitEvicting(1, let reason) = admission.admit(5, .tcp(address: "10.0.0.9")) else {
            Issue.record("expected the oldest (1) evicted")
            return
        }
        #expect(reason.contains("oldest"))
        #expect(admission.unauthenticatedTCP == 4 && admission.tcpConnections == 4)
        // Releasing an evicted connection later changes nothing.
        admission.release(1)
        #expect(admission.tcpConnections == 4)
    }

    /// Issue 23: one paired device holds at most `maxTCPPerDevice` (2)
    /// authenticated TCP connections; its newest past that evicts its own
    /// oldest, never another device's, so it cannot fill TCP's cap.
    @Test func onePairedDeviceHoldsAtMostItsShareOfTCP() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.caps.maxTCPPerDevice == 2)
        #expect(admission.admit(1, .tcp(address: "10.0.0.2")) == .admit)
        #expect(admission.authenticated(1, device: "owner") == nil)
        for id in UInt64(2)...7 {
            #expect(admission.admit(id, .tcp(address: "10.0.0.3")) == .admit)
            let evicted = admission.authenticated(id, device: "greedy")
            if id <= 3 {
                #expect(evicted == nil)
            } else {
                #expect(evicted?.victim == id - 2)
                #expect(evicted?.reason.contains("same paired device") == true)
            }
        }
        #expect(admission.connections(ofDevice: "greedy") == 2)
        #expect(admission.connections(ofDevice: "owner") == 1)
        #expect(admission.tcpConnections == 3)
        // The owner's second connection still finds a slot and evicts nobody.
        #expect(admission.admit(8, .tcp(address: "10.0.0.2")) == .admit)
        #expect(admission.authenticated(8, device: "owner") == nil)
    }

    @Test func authenticatedConnectionsAreNeverEvictedAndAlwaysFindASlot() {
        var admission = Admission(caps: Self.caps)
        // Four paired phones authenticated...
        for id in 1...4 {
            #expect(admission.admit(UInt64(id), .tcp(address: "10.0.1.\(id)")) == .admit)
            admission.authenticated(UInt64(id))
        }
        // ...and strangers keep the unauthenticated set full.
        for id in 5...8 { #expect(admission.admit(UInt64(id), .tcp(address: "10.0.2.\(id)")) == .admit) }
        for id in 9...40 {
            guard case .admitEvicting(let victim, _) = admission.admit(UInt64(id), .tcp(address: "10.0.3.\(id)")) else {
                Issue.record("newcomer \(id) not admitted")
                return
            }
            #expect(victim > 4, "an authenticated connection was evicted")
        }
        // The owner's phone arrives: it gets in, authenticates, and is safe.
        guard case .admitEvicting = admission.admit(41, .tcp(address: "10.0.9.1")) else { Issue.record("owner refused"); return }
        admission.authenticated(41)
        for id in 42...60 {
            if case .admitEvicting(let victim, _) = admission.admit(UInt64(id), .tcp(address: "10.0.4.\(id)")) {
                #expect(victim != 41)
            }
        }
        #expect(admission.isAuthenticated(41))
    }

    @Test func aFullTCPSideOfAuthenticatedConnectionsRefuses() {
        var admission = Admission(caps: Self.caps)
        for id in 1...8 {
            #expect(admission.admit(UInt64(id), .tcp(address: "10.0.0.\(id)")) == .admit)
            admission.authenticated(UInt64(id))
        }
        guard case .refuse(let reason) = admission.admit(9, .tcp(address: "10.0.0.9")) else { Issue.record("not refused"); return }
        #expect(reason.contains("authenticated"))
        admission.release(3)
        #expect(admission.admit(10, .tcp(address: "10.0.0.9")) == .admit)
    }

    @Test func aFullTCPSideEvictsAnUnauthenticatedConnection() {
        var admission = Admission(caps: Self.caps)
        for id in 1...6 {
            _ = admission.admit(UInt64(id), .tcp(address: "10.0.0.\(id)"))
            admission.authenticated(UInt64(id))
        }
        #expect(admission.admit(7, .tcp(address: "10.0.1.7")) == .admit)
        #expect(admission.admit(8, .tcp(address: "10.0.1.8")) == .admit)
        // TCP is full (8) with only two unauthenticated: the oldest of them goes.
        guard case .admitEvicting(7, _) = admission.admit(9, .tcp(address: "10.0.1.9")) else { Issue.record("7 not evicted"); return }
    }

    @Test func oneAddressOnlyEverReplacesItsOwnConnections() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.admit(1, .tcp(address: "10.0.0.1")) == .admit)  // the phone
        #expect(admission.admit(2, .tcp(address: "10.6.6.6")) == .admit)
        #expect(admission.admit(3, .tcp(address: "10.6.6.6")) == .admit)
        for id in 4...50 {
            guard case .admitEvicting(let victim, let reason) = admission.admit(UInt64(id), .tcp(address: "10.6.6.6")) else {
                Issue.record("expected an eviction")
                return
            }
            #expect(victim == UInt64(id - 2))
            #expect(reason.contains("same address"))
        }
        #expect(admission.unauthenticatedTCP == 3)
        #expect(!admission.isAuthenticated(1) && admission.tcpConnections == 3)
    }

    @Test func atTheCapTheAddressHoldingTheMostMakesRoomFirst() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.admit(1, .tcp(address: "10.0.0.1")) == .admit)  // a lone phone, oldest
        #expect(admission.admit(2, .tcp(address: "10.6.6.6")) == .admit)
        #expect(admission.admit(3, .tcp(address: "10.6.6.6")) == .admit)
        #expect(admission.admit(4, .tcp(address: "10.7.7.7")) == .admit)
        guard case .admitEvicting(2, _) = admission.admit(5, .tcp(address: "10.8.8.8")) else { Issue.record("2 not evicted"); return }
    }

    @Test func anAddressEvictsOthersOnlyWithinItsBudget() {
        var admission = Admission(caps: Self.caps)
        for id in 1...4 { #expect(admission.admit(UInt64(id), .tcp(address: "10.0.0.\(id)")) == .admit) }
        // 10.6.6.6 reconnects as fast as it can: 4 evictions of others, then refused.
        var id: UInt64 = 10
        var evicted = 0
        while case .admitEvicting = admission.admit(id, .tcp(address: "10.6.6.6"), now: 5_000) {
            evicted += 1
            // It closes its own at once, to evict again; the evicted peer comes back.
            admission.release(id)
            #expect(admission.admit(id + 1, .tcp(address: "10.0.1.\(id)"), now: 5_000) == .admit)
            id += 2
        }
        #expect(evicted == 4)
        guard case .refuse(let reason) = admission.admit(id, .tcp(address: "10.6.6.6"), now: 5_000) else { Issue.record("not refused"); return }
        #expect(reason.contains("made room"))
        // A phone from elsewhere still gets in; the budget refills with time.
        guard case .admitEvicting = admission.admit(100, .tcp(address: "10.0.9.1"), now: 5_000) else { Issue.record("phone refused"); return }
        guard case .admitEvicting = admission.admit(101, .tcp(address: "10.6.6.6"), now: 5_250) else { Issue.record("not refilled"); return }
    }

    @Test func connectionsThatHaveNotSaidHelloGoFirst() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.admit(1, .tcp(address: "10.0.0.1")) == .admit)  // the phone, oldest
        admission.greeted(1)
        for id in 2...4 { #expect(admission.admit(UInt64(id), .tcp(address: "10.6.6.\(id)")) == .admit) }
        guard case .admitEvicting(2, _) = admission.admit(5, .tcp(address: "10.7.7.7")) else { Issue.record("2 not evicted"); return }
        // Once everyone has said Hello, the oldest goes again.
        for id: UInt64 in [3, 4, 5] { admission.greeted(id) }
        guard case .admitEvicting(1, _) = admission.admit(6, .tcp(address: "10.8.8.8")) else { Issue.record("1 not evicted"); return }
    }

    @Test func theUnixReserveIsKeptForConfiguredUsers() {
        let hmi = PeerCredentials(pid: 1, uid: 990, gid: 990)
        let stranger = PeerCredentials(pid: 2, uid: 4242, gid: 4242)
        var admission = Admission(caps: Self.caps, access: PeerAccessPolicy(hmi: PeerAccess(uids: [990])))
        #expect(admission.unixReserve == 3)
        for id in 1...7 { #expect(admission.admit(UInt64(id), .unix(stranger)) == .admit) }
        guard case .refuse(let reason) = admission.admit(8, .unix(stranger)) else { Issue.record("stranger took a reserved slot"); return }
        #expect(reason.contains("uid 4242") && reason.contains("kept for the configured users"))
        guard case .refuse = admission.admit(9, .unix(nil)) else { Issue.record("unreadable credentials took a reserved slot"); return }
        for id in 10...12 { #expect(admission.admit(UInt64(id), .unix(hmi)) == .admit) }
        guard case .refuse(let full) = admission.admit(13, .unix(hmi)) else { Issue.record("over the Unix cap"); return }
        #expect(full.contains("maximum of 10"))
        admission.release(1)
        #expect(admission.admit(14, .unix(stranger)) == .admit)
    }

    @Test func withoutAccessRulesThereIsNoReserve() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.unixReserve == 0)
        for id in 1...10 { #expect(admission.admit(UInt64(id), .unix(PeerCredentials(pid: 1, uid: 4242, gid: 4242))) == .admit) }
    }

    @Test func phoneAccessNamesPeersForTheReserveToo() {
        let policy = PeerAccessPolicy(phone: PeerAccess(gids: [46]))
        #expect(policy.names(PeerCredentials(pid: 1, uid: 5, gid: 46)))
        #expect(!policy.names(PeerCredentials(pid: 1, uid: 5, gid: 5)))
        #expect(policy.refusal(role: .phone, credentials: PeerCredentials(pid: 1, uid: 5, gid: 5)) != nil)
    }
}

extension Admission {
    /// At one instant (the eviction budgets do not refill).
    mutating func admit(_ id: UInt64, _ peer: AdmissionPeer) -> AdmissionDecision { admit(id, peer, now: 1_000) }
}

/// Every frame counts (PROTOCOL.md section 10.2): the budget before
/// authentication, unsolicited PONGs, and DATA frames against the rate.
@Suite struct FrameBudgetTests {
    typealias Fixtures = ConnectionStateMachineTests

    @Test func theAuthenticatingStateHasAHandfulOfFrames() {
        var machine = AuthenticatingConnectionTests.challenged()
        let frames = [
            Fixtures.raw(kind: FrameKind.ping.rawValue, [1]), Fixtures.raw(kind: FrameKind.pong.rawValue, [1]),
            Fixtures.message(.pair(HUPair()), requestID: 2),
        ]
        for index in 0..<Int(Fixtures.limits.maxUnauthenticatedFrames) {
            let action = machine.receive(frames[index % 3], now: 1_100)
            #expect(Fixtures.closeCode(action) == nil, "frame \(index): \(action)")
        }
        let action = machine.receive(Fixtures.raw(kind: FrameKind.ping.rawValue, [1]), now: 1_100)
        #expect(Fixtures.closeCode(action) == .tooManyRequests)
        guard case .close(_, let reason) = action else { return }
        #expect(reason.contains("max_unauthenticated_frames"))
    }

    @Test func aTCPPhoneMustAuthenticateWithinAuthTimeoutOfConnecting() {
        let timeout = Fixtures.limits.authTimeoutMilliseconds
        var silent = AuthenticatingConnectionTests.machine()
        #expect(silent.nextDeadline == 1_000 + timeout)
        #expect(Fixtures.closeCode(silent.tick(now: 1_000 + timeout)) == .handshakeTimeout)
        var slow = AuthenticatingConnectionTests.machine()
        guard case .challenge = slow.receive(Fixtures.hello(.phone), now: 2_000) else { Issue.record("no challenge"); return }
        #expect(slow.nextDeadline == 1_000 + timeout)  // from connecting, not from Welcome
        #expect(slow.tick(now: 1_000 + timeout - 1) == .none)
        #expect(Fixtures.closeCode(slow.tick(now: 1_000 + timeout)) == .authRequired)
        // A Unix peer keeps the handshake timeout alone.
        let unix = AuthenticatingConnectionTests.machine(.unix)
        #expect(unix.nextDeadline == 1_000 + Fixtures.limits.handshakeTimeoutMilliseconds)
    }

    @Test func aPongAnswersAPingTheDaemonSentAndNoMore() {
        var machine = Fixtures.established(.hmi)
        let pong = Fixtures.raw(kind: FrameKind.pong.rawValue, [1])
        // Nothing sent yet: unsolicited, unanswered, counted; the 11th in a second cuts off.
        for _ in 0..<10 { #expect(machine.receive(pong, now: 1_100) == .none) }
        guard case .close(.tooManyErrors, let reason) = machine.receive(pong, now: 1_100) else {
            Issue.record("not cut off")
            return
        }
        #expect(reason.contains("PONG"))
        // A PONG for each PING sent is fine, however many.
        var answered = Fixtures.established(.hmi)
        var now: UInt64 = 1_000
        for _ in 0..<20 {
            now += Fixtures.limits.heartbeatIntervalMilliseconds
            guard case .ping = answered.tick(now: now) else { Issue.record("no ping"); return }
            #expect(answered.receive(pong, now: now) == .none)
        }
        for _ in 0..<10 { #expect(answered.receive(pong, now: now + 1) == .none) }
        #expect(Fixtures.closeCode(answered.receive(pong, now: now + 1)) == .tooManyErrors)
    }

    @Test func dataFramesTakeASixteenthOfARequestToken() {
        var limits = Fixtures.limits
        limits.maxRequestsPerSecond = 10
        var machine = ConnectionStateMachine(connectionID: 7, transport: .unix, configuration: ConnectionConfiguration(limits: limits), now: 1_000)
        guard case .join = machine.receive(Fixtures.hello(.phone), now: 1_000) else { Issue.record("no join"); return }
        let empty = Fixtures.raw(kind: FrameKind.data.rawValue, channel: 2, [])
        for _ in 0..<160 {
            guard case .deliverData = machine.receive(empty, now: 1_000) else { Issue.record("DATA refused early"); return }
        }
        #expect(Fixtures.resultCode(machine.receive(empty, now: 1_000)) == .tooManyRequests)
        // The bucket refills: 10 ms of a 10/s rate is a tenth of a token, 1.6 DATA frames.
        guard case .deliverData = machine.receive(empty, now: 1_010) else { Issue.record("not refilled"); return }
    }

    @Test func aRestoredConnectionMayAnswerThePreviousProcesssPing() {
        var machine = Fixtures.machine(.unix)
        machine.restoreEstablished(PeerInfo(role: .hmi, name: "h", transport: .unix), version: 1, now: 1_000)
        #expect(machine.receive(Fixtures.raw(kind: FrameKind.pong.rawValue, [1]), now: 1_001) == .none)
    }
}
