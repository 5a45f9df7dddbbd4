import HeadUnitCore
import Testing

/// "Paired phones first" (PROTOCOL.md section 10.1) without a socket: the
/// pool of connections waiting for their first flight, tickets' counters,
/// and what a verified ticket's connection may do that a stranger's may not.
@Suite struct PairedPhoneAdmissionTests {
    static let caps = ConnectionCaps(
        maxTotal: 512, maxUnix: 10, maxTCP: 8, maxTCPUnauthenticated: 4, maxTCPUnauthenticatedPerSource: 2, unixReserved: 3,
        tcpEvictionsPerSourcePerSecond: 1, maxTCPFirstFlight: 4, maxTCPFirstFlightPerSource: 2)

    @Test func theFirstFlightPoolClosesItsOldestAndAnAddressOnlyItsOwn() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.firstFlightArriving(1, address: "10.0.0.1") == .wait)
        #expect(admission.firstFlightArriving(2, address: "10.0.0.2") == .wait)
        #expect(admission.firstFlightArriving(3, address: "10.0.0.2") == .wait)
        // 10.0.0.2 holds its share: its own oldest goes, not 10.0.0.1's.
        #expect(admission.firstFlightArriving(4, address: "10.0.0.2") == .waitClosing(2))
        #expect(admission.firstFlightArriving(5, address: "10.0.0.3") == .wait)
        // Full (4): the oldest of all makes room.
        #expect(admission.firstFlightArriving(6, address: "10.0.0.4") == .waitClosing(1))
        #expect(admission.waitingForFirstFlight == 4)
        admission.firstFlightEnded(3)
        admission.firstFlightEnded(3)  // a second end is a no-op
        #expect(admission.waitingForFirstFlight == 3)
        // Waiting connections are not admitted connections.
        #expect(admission.tcpConnections == 0)
    }

    @Test func aTicketIsAcceptedOnceAndOnlyAboveTheLastCounter() {
        var admission = Admission(caps: Self.caps)
        var accepted: [Bool] = []
        for (device, counter) in [("alice", 100), ("alice", 100), ("alice", 99), ("bob", 1), ("alice", 101)] {
            accepted.append(admission.acceptTicket(device: device, counter: UInt64(counter)))
        }
        // The second is the replayed ClientHello; the third an older ticket; bob has his own counter.
        #expect(accepted == [true, false, false, true, true])
        admission.forgetTickets(of: "alice")
        let afterRemoval = admission.acceptTicket(device: "alice", counter: 5)
        #expect(afterRemoval)
    }

    @Test func aPairedPhoneEvictsAStrangerWithoutAnyBudgetAndNoStrangerEvictsIt() {
        var admission = Admission(caps: Self.caps)
        // TCP full: 4 authenticated phones, 4 greeted strangers from as many addresses.
        for id in 1...4 {
            #expect(admission.admit(UInt64(id), .tcp(address: "10.0.2.\(id)")) == .admit)
            admission.authenticated(UInt64(id), device: "phone\(id)")
        }
        for id in 5...8 {
            #expect(admission.admit(UInt64(id), .tcp(address: "10.0.1.\(id)")) == .admit)
            admission.greeted(UInt64(id))
        }
        // Every address spends its one eviction a second at once.
        guard case .admitEvicting(5, _) = admission.admit(9, .tcp(address: "10.0.3.1")) else { Issue.record("stranger refused"); return }
        admission.greeted(9)
        #expect({ if case .refuse = admission.admit(10, .tcp(address: "10.0.3.1")) { return true } else { return false } }())
        // The paired phone needs no budget: it takes the oldest stranger's slot.
        guard case .admitEvicting(6, let reason) = admission.admit(11, .pairedTCP(address: "10.0.3.1", device: "alice")) else {
            Issue.record("paired phone not admitted")
            return
        }
        #expect(reason.contains("paired phone"))
        #expect(!admission.isAuthenticated(11))
        // Strangers from fresh addresses (full budgets) evict each other, never the paired phone.
        for id in 12...40 {
            switch admission.admit(UInt64(id), .tcp(address: "10.0.4.\(id)")) {
            case .admitEvicting(let victim, _): #expect(victim != 11)
            case .admit: break
            case .refuse(let why): Issue.record("refused: \(why)")
            }
        }
        #expect(admission.unauthenticatedTCP == 3 && admission.tcpConnections == 8)
        // It authenticates: an ordinary authenticated connection of its device from now on.
        #expect(admission.authenticated(11, device: "alice") == nil)
        #expect(admission.isAuthenticated(11) && admission.connections(ofDevice: "alice") == 1)
    }

    @Test func oneConnectionOnItsWayPerDeviceTheNewestWins() {
        var admission = Admission(caps: Self.caps)
        #expect(admission.admit(1, .pairedTCP(address: "10.0.0.1", device: "alice")) == .admit)
        guard case .admitEvicting(1, let reason) = admission.admit(2, .pairedTCP(address: "10.0.0.9", device: "alice")) else {
            Issue.record("the retry did not replace the attempt before it")
            return
        }
        #expect(reason.contains("same paired device"))
        #expect(admission.admit(3, .pairedTCP(address: "10.0.0.1", device: "bob")) == .admit)
        #expect(admission.tcpConnections == 2)
    }

    @Test func aTCPSideOfAuthenticatedPhonesRefusesEvenAPairedPhone() {
        var admission = Admission(caps: ConnectionCaps(maxTCP: 2))
        for id in 1...2 {
            #expect(admission.admit(UInt64(id), .tcp(address: "10.0.0.\(id)")) == .admit)
            admission.authenticated(UInt64(id), device: "phone\(id)")
        }
        guard case .refuse(let why) = admission.admit(3, .pairedTCP(address: "10.0.0.3", device: "alice")) else {
            Issue.record("an authenticated connection was evicted for a claim")
            return
        }
        #expect(why.contains("authenticated"))
    }
}
