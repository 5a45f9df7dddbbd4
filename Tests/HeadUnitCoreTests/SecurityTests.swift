import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// PROTOCOL.md section 20 without a socket: the pairing window, the peer
/// credential rules, and the connection's authenticating state.
@Suite struct PairingRegistryTests {
    static let key = [UInt8](repeating: 1, count: 32)

    static func opened(now: UInt64 = 1_000, allowed: [String] = []) -> (PairingRegistry, String) {
        var registry = PairingRegistry(codeValidMilliseconds: 120_000, globalBurst: 3)
        guard case .success(let info) = registry.open(code: "042917", allowedEntitlements: allowed, now: now) else {
            fatalError("open failed")
        }
        return (registry, info.code)
    }

    /// A guess started and confirmed (the server checked the SPAKE2 confirmation).
    static func pairs(_ registry: inout PairingRegistry, source: String = "10.0.0.2", id: String = "d1", name: String = "", now: UInt64 = 1_001)
        -> PairingRegistry.PairOutcome
    {
        guard case .proceed(let attempt) = registry.beginAttempt(source: source, now: now) else { return .refused(.pairingNotOpen, "no attempt") }
        return registry.complete(
            generation: attempt.generation, source: source, publicKey: Self.key, deviceID: id, name: name, now: now, unixMilliseconds: 0)
    }

    @Test func pairingNeedsAnOpenWindow() {
        var registry = PairingRegistry()
        let outcome = registry.beginAttempt(source: "10.0.0.2", now: 0)
        guard case .refused(.pairingNotOpen, _) = outcome else { Issue.record("\(outcome)"); return }
        #expect(registry.devices.isEmpty)
    }

    @Test func openingAnswersTheCodeItsValidityAndAttempts() {
        var registry = PairingRegistry(codeValidMilliseconds: 60_000, globalBurst: 4, globalIntervalMilliseconds: 2_000)
        let info = try? registry.open(code: "000123", now: 5).get()
        #expect(info?.code == "000123")
        #expect(info?.validMs == 60_000)
        // The most guesses the window can take: the burst plus one per 2 s for 60 s.
        #expect(info?.attempts == 34)
        #expect(registry.window?.expiresAt == 60_005)
    }

    @Test func aConfirmedAttemptPairsOnceAndClosesTheWindow() {
        var (registry, code) = Self.opened()
        guard case .proceed(let attempt) = registry.beginAttempt(source: "10.0.0.2", now: 2_000) else { Issue.record("no attempt"); return }
        #expect(attempt.code == code)
        let outcome = registry.complete(
            generation: attempt.generation, source: "10.0.0.2", publicKey: Self.key, deviceID: "d1", name: "Alice", now: 2_000, unixMilliseconds: 77)
        guard case .paired(let record) = outcome else { Issue.record("\(outcome)"); return }
        #expect(record == PairedDeviceRecord(id: "d1", name: "Alice", publicKey: Self.key, pairedAtUnixMilliseconds: 77))
        #expect(registry.devices == [record])
        #expect(registry.window == nil)
        // One code pairs one device: a second confirmation of the same attempt is refused.
        let second = registry.complete(
            generation: attempt.generation, source: "10.0.0.3", publicKey: Self.key, deviceID: "d2", name: "Bob", now: 2_001, unixMilliseconds: 78)
        guard case .refused(.pairingNotOpen, _) = second else { Issue.record("\(second)"); return }
    }

    @Test func anExpiredCodeIsNotOpen() {
        var (registry, _) = Self.opened(now: 1_000)
        let outcome = registry.beginAttempt(source: "10.0.0.2", now: 121_000)
        guard case .refused(.pairingNotOpen, let message) = outcome else { Issue.record("\(outcome)"); return }
        #expect(message.contains("expired"))
        #expect(registry.window == nil)
    }

    @Test func anAttemptUnderAReplacedWindowDoesNotPair() {
        var (registry, _) = Self.opened()
        guard case .proceed(let attempt) = registry.beginAttempt(source: "10.0.0.2", now: 1_001) else { Issue.record("no attempt"); return }
        _ = registry.open(code: "111111", now: 1_002)
        let outcome = registry.complete(
            generation: attempt.generation, source: "10.0.0.2", publicKey: Self.key, deviceID: "d1", name: "", now: 1_003, unixMilliseconds: 0)
        guard case .refused(.pairingNotOpen, _) = outcome else { Issue.record("\(outcome)"); return }
    }

    /// Issue 23: wrong codes from one source no longer void the window; they
    /// make that source wait (1 s, 2 s, 4 s ... at most 30 s), and another
    /// source (the owner's phone) pairs meanwhile.
    @Test func failedAttemptsBackOffPerSourceAndNeverVoidTheOwnersWindow() {
        var registry = PairingRegistry(codeValidMilliseconds: 120_000)
        _ = registry.open(code: "042917", now: 0)
        var now: UInt64 = 0
        var started = 0
        // The attacker tries every 50 ms for the whole window.
        while now < 119_000 {
            if case .proceed = registry.beginAttempt(source: "10.0.0.66", now: now) { started += 1 }
            now += 50
        }
        // 0, 1, 3, 7, 15, 31, 61, 91 s: eight guesses in two minutes.
        #expect(started == 8)
        guard case .throttled(let wait, let message) = registry.beginAttempt(source: "10.0.0.66", now: now) else {
            Issue.record("not throttled"); return
        }
        // Its last guess was at 91 s: the next at 121 s, stated in ms (section 20.2's limit_value).
        #expect(wait == 121_000 - now)
        #expect(message.contains("try again in \(wait) ms"))
        #expect(registry.window != nil)
        let owner = Self.pairs(&registry, source: "10.0.0.2", id: "owner", now: now)
        guard case .paired = owner else { Issue.record("\(owner)"); return }
    }

    /// Issue 23: many sources together are held to a rate (a burst of 16,
    /// then one attempt every 2 s), which delays them but never closes the
    /// window: the owner's phone pairs as soon as the rate has an attempt for
    /// it, and over the whole window the attempts stay under `attemptBound`.
    @Test func manySourcesAreDelayedByTheCarsRateAndNeverVoidTheWindow() {
        var registry = PairingRegistry(codeValidMilliseconds: 120_000)
        _ = registry.open(code: "042917", now: 0)
        #expect(registry.attemptBound == 16 + 60)
        var started = 0
        var now: UInt64 = 0
        var address = 0
        var lastRefusal: PairingRegistry.AttemptStart?
        // A fresh address every 10 ms for 100 s of the window.
        while now < 100_000 {
            address += 1
            let outcome = registry.beginAttempt(source: "10.1.\(address / 250).\(address % 250)", now: now)
            if case .proceed = outcome { started += 1 } else { lastRefusal = outcome }
            now += 10
        }
        // The burst, then one every 2 s (2, 4 ... 98 s).
        #expect(started == 16 + 49)
        #expect(started <= registry.attemptBound)
        #expect(registry.window != nil)
        // Past the burst an attempt waits for the rate, told how long; the window stays open.
        guard case .throttled(let wait, let message) = lastRefusal else { Issue.record("not throttled"); return }
        #expect(message.contains("try again in") && message.contains("stays open"))
        // The last try, at 99.99 s, is told the next attempt is free at 100 s.
        #expect(wait == 10)
        // The owner, 2 s later, gets the next attempt and pairs.
        let owner = Self.pairs(&registry, source: "10.0.0.2", id: "owner", now: now + 2_000)
        guard case .paired = owner else { Issue.record("\(owner)"); return }
    }

    /// Issue 47: the wait a throttled attempt is told is exact, so a phone
    /// that waits it (the SDK does) gets the next attempt: one millisecond
    /// earlier it is still throttled, at the stated time it starts.
    @Test func theStatedWaitIsExactForTheSourceAndTheCarsRate() {
        var registry = PairingRegistry(codeValidMilliseconds: 120_000, globalBurst: 2, globalIntervalMilliseconds: 2_000)
        _ = registry.open(code: "042917", now: 0)
        for index in 0..<2 {
            guard case .proceed = registry.beginAttempt(source: "10.0.1.\(index)", now: 100) else { Issue.record("refused"); return }
        }
        // The car's rate: the bucket is empty, 2 s to the next attempt.
        guard case .throttled(let wait, _) = registry.beginAttempt(source: "10.0.0.2", now: 500) else { Issue.record("not throttled"); return }
        #expect(wait == 1_600)
        guard case .throttled(let left, _) = registry.beginAttempt(source: "10.0.0.2", now: 500 + wait - 1) else { Issue.record("early"); return }
        #expect(left == 1)
        guard case .proceed = registry.beginAttempt(source: "10.0.0.2", now: 500 + wait) else { Issue.record("not at the stated time"); return }
        // The source's own backoff (1 s) and the car's rate (2 s): the longer is stated.
        guard case .throttled(let both, _) = registry.beginAttempt(source: "10.0.0.2", now: 2_100) else { Issue.record("not throttled"); return }
        #expect(both == 2_000)
    }

    /// Asking every millisecond never stops the car's rate from refilling
    /// (a refill rounded down at each call lost its fraction every time).
    @Test func tryingEveryMillisecondDoesNotStallTheCarsRate() {
        var registry = PairingRegistry(codeValidMilliseconds: 120_000, globalBurst: 1, globalIntervalMilliseconds: 2_000)
        _ = registry.open(code: "042917", now: 0)
        var started = 0
        for now in UInt64(0)..<10_000 {
            if case .proceed = registry.beginAttempt(source: "10.2.\(now / 250).\(now % 250)", now: now) { started += 1 }
        }
        // At 0, 2, 4, 6 and 8 s.
        #expect(started == 5)
    }

    @Test func theBurstLetsAFewSourcesGuessThenTheOwnerPairsAtOnce() {
        var registry = PairingRegistry(codeValidMilliseconds: 120_000)
        _ = registry.open(code: "042917", now: 0)
        for index in 0..<10 {
            guard case .proceed = registry.beginAttempt(source: "10.0.1.\(index)", now: 10) else { Issue.record("refused"); return }
        }
        #expect(registry.attemptsOnOpenCode == 10)
        let owner = Self.pairs(&registry, source: "10.0.0.2", id: "owner", now: 11)
        guard case .paired = owner else { Issue.record("\(owner)"); return }
    }

    @Test func aMalformedKeyOrNameIsRefused() {
        var (registry, _) = Self.opened()
        guard case .proceed(let attempt) = registry.beginAttempt(source: "s", now: 1_001) else { Issue.record("no attempt"); return }
        let short = registry.complete(generation: attempt.generation, source: "s", publicKey: [1, 2, 3], deviceID: "d1", name: "", now: 1_001, unixMilliseconds: 0)
        guard case .refused(.invalidArgument, _) = short else { Issue.record("\(short)"); return }
        let long = String(repeating: "x", count: PairingRegistry.maxDeviceNameBytes + 1)
        let named = registry.complete(generation: attempt.generation, source: "s", publicKey: Self.key, deviceID: "d1", name: long, now: 1_001, unixMilliseconds: 0)
        guard case .refused(.invalidArgument, _) = named else { Issue.record("\(named)"); return }
        #expect(registry.window != nil)
    }

    @Test func theWindowsAllowListGoesToTheDeviceThatPairs() {
        var (registry, _) = Self.opened(allowed: [EntitlementKey.audio])
        guard case .paired(let record) = Self.pairs(&registry) else { Issue.record("not paired"); return }
        #expect(record.allowedEntitlements == [EntitlementKey.audio])
        let policy = record.entitlementPolicy(global: EntitlementPolicy(allowed: EntitlementKey.all, perApp: ["com.x": ["k"]]))
        #expect(policy == EntitlementPolicy(allowed: [EntitlementKey.audio], perApp: ["com.x": ["k"]]))
        // Re-pairing the same key (which only its holder can: the server checks
        // its signature) replaces the record, not duplicates it.
        _ = registry.open(code: "111111", now: 2_000)
        guard case .paired(let again) = Self.pairs(&registry, name: "new", now: 2_001) else { Issue.record("not re-paired"); return }
        #expect(registry.devices == [again])
        #expect(again.allowedEntitlements == nil)
        #expect(again.entitlementPolicy(global: .acceptAll) == nil)
    }

    @Test func anUnknownEntitlementKeyDoesNotOpenAWindow() {
        var (registry, code) = Self.opened()
        let refused = registry.open(code: "222222", allowedEntitlements: ["com.example.made-up"], now: 1_500)
        guard case .failure(let violation) = refused else { Issue.record("\(refused)"); return }
        #expect(violation.code == .invalidArgument)
        #expect(registry.window?.code == code)  // the earlier window stands
    }

    @Test func removingForgetsOnlyAPairedDevice() {
        var (registry, _) = Self.opened()
        _ = Self.pairs(&registry)
        let removedUnknown = registry.remove("nope")
        let removedPaired = registry.remove("d1")
        #expect(!removedUnknown)
        #expect(removedPaired)
        #expect(registry.devices.isEmpty)
    }

    @Test func recordsRoundTripThroughTheWire() {
        let record = PairedDeviceRecord(id: "d1", name: "n", publicKey: Self.key, pairedAtUnixMilliseconds: 9, allowedEntitlements: ["a", "b"])
        #expect(PairedDeviceRecord(wire: record.wire) == record)
        #expect(record.wire.allowedEntitlements == ["a", "b"])
        let global = PairedDeviceRecord(id: "d2", name: "n", publicKey: Self.key, pairedAtUnixMilliseconds: 9)
        #expect(global.wire.defaultPolicy)
        #expect(PairedDeviceRecord(wire: global.wire) == global)
    }

    @Test func constantTimeEqualCompares() {
        #expect(PairingRegistry.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!PairingRegistry.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!PairingRegistry.constantTimeEqual([1, 2], [1, 2, 3]))
    }
}

@Suite struct PeerAccessTests {
    static let root = PeerCredentials(pid: 10, uid: 0, gid: 0)
    static let hmiUser = PeerCredentials(pid: 11, uid: 1000, gid: 1000)

    @Test func noListsMeansWhatWorksToday() {
        let policy = PeerAccessPolicy()
        for role in [HURole.hmi, .cluster, .accessory, .phone] {
            #expect(policy.refusal(role: role, credentials: Self.root) == nil)
            #expect(policy.refusal(role: role, credentials: nil) == nil)
        }
    }

    @Test func aUidOrAGidInTheListIsAllowed() {
        let policy = PeerAccessPolicy(hmi: PeerAccess(uids: [1000]), cluster: PeerAccess(gids: [1000]))
        #expect(policy.refusal(role: .hmi, credentials: Self.hmiUser) == nil)
        #expect(policy.refusal(role: .cluster, credentials: Self.hmiUser) == nil)
        let refusal = policy.refusal(role: .hmi, credentials: Self.root)
        #expect(refusal?.contains("uid 0") == true)
        #expect(refusal?.contains("allowed uids [1000]") == true)
        // The accessory role has no list: unrestricted.
        #expect(policy.refusal(role: .accessory, credentials: Self.root) == nil)
    }

    @Test func unreadableCredentialsPassOnlyAnUnrestrictedRole() {
        let policy = PeerAccessPolicy(hmi: PeerAccess(uids: [1000]))
        #expect(policy.refusal(role: .hmi, credentials: nil)?.contains("could not be read") == true)
        #expect(policy.refusal(role: .cluster, credentials: nil) == nil)
    }

    @Test func phonesAreCheckedOnlyByTheirOwnRule() {
        let policy = PeerAccessPolicy(hmi: PeerAccess(uids: [1]), cluster: PeerAccess(uids: [1]), accessory: PeerAccess(uids: [1]))
        #expect(policy.refusal(role: .phone, credentials: Self.root) == nil)
        let phones = PeerAccessPolicy(phone: PeerAccess(uids: [1000]))
        #expect(phones.refusal(role: .phone, credentials: Self.root)?.contains("phone") == true)
        #expect(phones.refusal(role: .phone, credentials: Self.hmiUser) == nil)
    }

    @Test func aPhoneOnTCPIsNeverCheckedByCredentials() {
        var configuration = ConnectionConfiguration(limits: ConnectionStateMachineTests.limits)
        configuration.security = ConnectionSecurity(access: PeerAccessPolicy(phone: PeerAccess(uids: [1000])))
        var tcp = ConnectionStateMachine(connectionID: 1, transport: .tcp, configuration: configuration, now: 0)
        guard case .join = tcp.receive(ConnectionStateMachineTests.hello(.phone), now: 0) else { Issue.record("TCP phone refused"); return }
        var unix = ConnectionStateMachine(connectionID: 2, transport: .unix, configuration: configuration, now: 0)
        unix.peerCredentials = Self.root
        #expect(ConnectionStateMachineTests.closeCode(unix.receive(ConnectionStateMachineTests.hello(.phone), now: 0)) == .peerNotAllowed)
    }

    @Test func onlyPhonesOnTCPAuthenticate() {
        let on = ConnectionSecurity(authenticatePhonesOverTCP: true)
        #expect(on.requiresAuthentication(role: .phone, transport: .tcp))
        #expect(!on.requiresAuthentication(role: .phone, transport: .unix))
        #expect(!on.requiresAuthentication(role: .hmi, transport: .unix))
        #expect(!ConnectionSecurity().requiresAuthentication(role: .phone, transport: .tcp))
    }

    @Test func theSignedMessageBindsTheChallengeAndTheConnection() {
        let challenge = [UInt8](repeating: 0xAB, count: 32)
        let message = AuthenticationChallenge.signedMessage(challenge: challenge, connectionID: 0x0102_0304_0506_0708)
        #expect(message == Array("headunitd-auth-v1".utf8) + challenge + [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(message != AuthenticationChallenge.signedMessage(challenge: challenge, connectionID: 9))
    }
}

@Suite struct AuthenticatingConnectionTests {
    typealias Fixtures = ConnectionStateMachineTests
    static let challenge = [UInt8](repeating: 0x5A, count: 32)

    static func machine(_ transport: Transport = .tcp, security: ConnectionSecurity = ConnectionSecurity(authenticatePhonesOverTCP: true))
        -> ConnectionStateMachine
    {
        var configuration = ConnectionConfiguration(limits: Fixtures.limits)
        configuration.security = security
        var machine = ConnectionStateMachine(connectionID: 7, transport: transport, configuration: configuration, now: 1_000)
        machine.authChallenge = challenge
        return machine
    }

    /// A TCP phone past Hello, waiting to authenticate.
    static func challenged() -> ConnectionStateMachine {
        var machine = machine()
        guard case .challenge = machine.receive(Fixtures.hello(.phone), now: 1_000) else { fatalError("no challenge") }
        return machine
    }

    @Test func aTCPPhoneGetsAChallengeNotAJoin() {
        var machine = Self.machine()
        let action = machine.receive(Fixtures.hello(.phone), now: 1_000)
        guard case .challenge(let envelope) = action, case .welcome(let welcome) = envelope.body else {
            Issue.record("expected challenge, got \(action)")
            return
        }
        #expect(envelope.requestID == 1)
        #expect(welcome.authRequired)
        #expect(Array(welcome.authChallenge) == Self.challenge)
        #expect(welcome.connectionID == 7)
        guard case .authenticating(let info, 1, 1_000) = machine.state else { Issue.record("\(machine.state)"); return }
        #expect(info.role == .phone && info.device == nil)
    }

    @Test func aUnixPhoneOrABenchJoinsAtOnce() {
        var unix = Self.machine(.unix)
        guard case .join(_, let welcome) = unix.receive(Fixtures.hello(.phone), now: 1_000), case .welcome(let body) = welcome.body else {
            Issue.record("no join")
            return
        }
        #expect(!body.authRequired && body.authChallenge.isEmpty)
        var bench = Self.machine(.tcp, security: ConnectionSecurity(authenticatePhonesOverTCP: false))
        guard case .join = bench.receive(Fixtures.hello(.phone), now: 1_000) else { Issue.record("bench did not join"); return }
    }

    @Test func anythingButPairAuthenticateGoodbyeOrHeartbeatIsAuthRequired() {
        let frames: [Frame] = [
            Fixtures.message(.announceApps(HUAnnounceApps()), requestID: 2),
            Fixtures.message(.getStatus(HUGetStatus()), requestID: 2),
            Fixtures.message(.hello(HUHello()), requestID: 2),
            Fixtures.message(nil),
            Fixtures.raw(kind: FrameKind.data.rawValue, channel: 3, [1]),
            Fixtures.raw(kind: FrameKind.ping.rawValue, flags: 1),
            Fixtures.raw(kind: 0x7F),
            Fixtures.raw(kind: FrameKind.ping.rawValue, [UInt8](repeating: 0, count: 65)),
        ]
        for frame in frames {
            var machine = Self.challenged()
            let action = machine.receive(frame, now: 1_100)
            #expect(Fixtures.closeCode(action) == .authRequired, "\(frame.header): \(action)")
        }
    }

    @Test func heartbeatFramesAreServedWhileAuthenticating() {
        var machine = Self.challenged()
        guard case .pong = machine.receive(Fixtures.raw(kind: FrameKind.ping.rawValue, [1, 2]), now: 1_100) else {
            Issue.record("no pong")
            return
        }
        #expect(machine.receive(Fixtures.raw(kind: FrameKind.pong.rawValue, [1]), now: 1_100) == .none)
    }

    @Test func authenticateAsksTheServerToVerifyTheBoundMessage() {
        var machine = Self.challenged()
        var authenticate = HUAuthenticate()
        authenticate.deviceID = "d1"
        authenticate.signature = .init([1, 2, 3])
        let action = machine.receive(Fixtures.message(.authenticate(authenticate), requestID: 3), now: 1_100)
        #expect(action == .authenticate(authenticate, requestID: 3, message: AuthenticationChallenge.signedMessage(challenge: Self.challenge, connectionID: 7)))
    }

    @Test func pairIsHandedToTheServerAndTheStateStays() {
        var machine = Self.challenged()
        var pair = HUPair()
        pair.code = "123456"
        let action = machine.receive(Fixtures.message(.pair(pair), requestID: 2), now: 1_100)
        #expect(action == .pair(pair, requestID: 2))
        guard case .authenticating = machine.state else { Issue.record("\(machine.state)"); return }
    }

    @Test func aVerifiedSignatureJoinsWithTheDevice() {
        var machine = Self.challenged()
        let device = AuthenticatedDevice(deviceID: "d1", name: "Alice", entitlements: EntitlementPolicy(allowed: [EntitlementKey.audio]))
        let action = machine.authenticated(device, requestID: 3, now: 1_200)
        guard case .join(let info, let answer) = action, case .result(let result) = answer.body else {
            Issue.record("expected join, got \(action)")
            return
        }
        #expect(info.device == device)
        #expect(answer.requestID == 3)
        #expect(result.code == .ok && result.pairing.deviceID == "d1")
        #expect(machine.state == .established(info, version: 1))
        // After authenticating, Pair and Authenticate are not for this peer any more.
        let again = machine.receive(Fixtures.message(.pair(HUPair()), requestID: 4), now: 1_300)
        #expect(Fixtures.resultCode(again) == .notForRole)
    }

    @Test func aFailedVerificationIsAuthFailed() {
        var machine = Self.challenged()
        let action = machine.authenticationFailed("bad signature")
        #expect(action == .close(.authFailed, "bad signature"))
        #expect(machine.state == .closing)
    }

    @Test func notAuthenticatingInTimeIsAuthRequired() {
        var machine = Self.challenged()
        // Whichever comes first: the handshake timeout from Welcome, or auth_timeout_ms from connecting.
        let limit = min(Fixtures.limits.handshakeTimeoutMilliseconds, Fixtures.limits.authTimeoutMilliseconds)
        #expect(machine.nextDeadline == 1_000 + limit)
        #expect(machine.tick(now: 1_000 + limit - 1) == .none)
        let action = machine.tick(now: 1_000 + limit)
        #expect(Fixtures.closeCode(action) == .authRequired)
    }

    @Test func aCarRoleFromADisallowedUidIsPeerNotAllowed() {
        var machine = Self.machine(.unix, security: ConnectionSecurity(access: PeerAccessPolicy(hmi: PeerAccess(uids: [1000]))))
        machine.peerCredentials = PeerCredentials(pid: 1, uid: 0, gid: 0)
        let action = machine.receive(Fixtures.hello(.hmi), now: 1_000)
        #expect(Fixtures.closeCode(action) == .peerNotAllowed)
        var allowed = Self.machine(.unix, security: ConnectionSecurity(access: PeerAccessPolicy(hmi: PeerAccess(uids: [1000]))))
        allowed.peerCredentials = PeerCredentials(pid: 1, uid: 1000, gid: 5)
        guard case .join = allowed.receive(Fixtures.hello(.hmi), now: 1_000) else { Issue.record("allowed HMI not joined"); return }
    }

    @Test func roleIsCheckedBeforeCredentials() {
        // A car role over TCP is ROLE_NOT_ALLOWED whatever its credentials (none on TCP).
        var machine = Self.machine(.tcp, security: ConnectionSecurity(access: PeerAccessPolicy(hmi: PeerAccess(uids: [1000]))))
        #expect(Fixtures.closeCode(machine.receive(Fixtures.hello(.hmi), now: 1_000)) == .roleNotAllowed)
    }
}

/// The Car judges an authenticated phone's apps by its device's allow-list.
@Suite struct PerDeviceEntitlementTests {
    @Test func aPairedDevicesAllowListReplacesTheGlobalPolicy() {
        var harness = CarHarness()
        let device = AuthenticatedDevice(deviceID: "d1", name: "audio only", entitlements: EntitlementPolicy(allowed: [EntitlementKey.audio]))
        harness.apply(harness.car.peerJoined(harness.phone, info: PeerInfo(role: .phone, name: "p", transport: .tcp, device: device)))
        let result = harness.announce([("com.a", [EntitlementKey.audio]), ("com.m", [EntitlementKey.maps])])
        #expect(result.appDecisions.decisions.map(\.accepted) == [true, false])
        #expect(result.appDecisions.decisions.last?.code == .entitlementRefused)
    }

    @Test func aDeviceWithoutItsOwnListUsesTheGlobalPolicy() {
        var harness = CarHarness()
        let device = AuthenticatedDevice(deviceID: "d1", name: "global", entitlements: nil)
        harness.apply(harness.car.peerJoined(harness.phone, info: PeerInfo(role: .phone, name: "p", transport: .tcp, device: device)))
        let result = harness.announce([("com.a", [EntitlementKey.audio]), ("com.m", [EntitlementKey.maps])])
        #expect(result.appDecisions.decisions.map(\.accepted) == [true, true])
    }

    @Test func statusCountsAuthenticatedPhones() {
        var harness = CarHarness()
        harness.apply(harness.car.peerJoined(harness.phone, info: PeerInfo(role: .phone, name: "p", transport: .tcp, device: AuthenticatedDevice(deviceID: "d", name: "", entitlements: nil))))
        harness.join(harness.hmi, .hmi)
        #expect(harness.request(harness.hmi, .getStatus(HUGetStatus())).status.authenticatedPhones == 1)
    }
}

/// Resumption (section 21) of an authenticated phone: only the same paired device.
@Suite struct ResumptionByDeviceTests {
    static let token = "00112233445566778899aabbccddeeff"

    @Test func onlyTheSamePairedDeviceResumes() throws {
        var link = PhoneLink()
        link.carry(peer: 1, token: Self.token, deviceID: "alice")
        _ = link.lost(.lost)
        let other = link.resume(peer: 2, token: Self.token, newToken: "x", deviceID: "mallory")
        #expect(other == .failure(.otherDevice))
        let unauthenticated = link.resume(peer: 3, token: Self.token, newToken: "x", deviceID: nil)
        #expect(unauthenticated == .failure(.otherDevice))
        // A wrong token is told as such first: a guesser learns nothing about devices.
        let guessed = link.resume(peer: 2, token: "f" + Self.token.dropFirst(), newToken: "x", deviceID: "mallory")
        #expect(guessed == .failure(.wrongToken))
        #expect(link.isReconnecting)
        let same = link.resume(peer: 4, token: Self.token, newToken: "next", deviceID: "alice")
        #expect((try? same.get()) != nil)
        #expect(link.peer == 4 && link.deviceID == "alice")
    }

    @Test func aPhoneThatDidNotAuthenticateResumesAsBefore() throws {
        var link = PhoneLink()
        link.carry(peer: 1, token: Self.token)
        _ = link.lost(.lost)
        #expect((try? link.resume(peer: 2, token: Self.token, newToken: "x").get()) != nil)
    }
}
