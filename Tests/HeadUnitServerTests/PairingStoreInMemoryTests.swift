import Crypto
import HeadUnitCore
import HeadUnitSecurity
import HeadUnitWire
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@testable import HeadUnitServer

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Pairing with its store (PROTOCOL.md sections 20.2 and 20.4): the list in
/// memory changes at once, the disk follows off the serving loop, and a slow
/// disk holds back only the answer that waits for it.
@Suite struct PairingStoreInMemoryTests {
    static func configuration(devices: [PairedDeviceRecord] = []) throws -> ServerConfiguration {
        var configuration = ServerConfiguration(listeners: [])
        configuration.connection.security.authenticatePhonesOverTCP = true
        configuration.carIdentity = try CarIdentity(privateKey: P256.Signing.PrivateKey())
        configuration.pairedDevices = devices
        return configuration
    }

    static func record(_ name: String) -> PairedDeviceRecord {
        let key = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
        return PairedDeviceRecord(id: DeviceID.of(publicKey: key), name: name, publicKey: key, pairedAtUnixMilliseconds: 1)
    }

    /// The HMI opens a window; the phone runs PairStart with its code and
    /// checks the car's confirmation. Returns the Pair that completes it.
    static func pairRequest(hmi: InMemoryPeer, phone: InMemoryPeer, key: Curve25519.Signing.PrivateKey, name: String) throws -> HUPair {
        let open = try hmi.request(.startPairing(HUStartPairing()))
        let code = try #require(try hmi.result(for: open)).pairing.code
        let exchange = try SPAKE2Exchange(role: .phone, password: Array(code.utf8))
        var start = HUPairStart()
        start.spake2Message = .init(exchange.message)
        let started = try phone.request(.pairStart(start))
        let answer = try #require(try phone.result(for: started))
        try #require(answer.code == .ok, "\(answer.message)")
        let carMessage = Array(answer.pairing.spake2Message)
        let spakeKey = try exchange.finish(peerMessage: carMessage)
        let transcript = PairingKeySchedule.transcriptHash(
            phoneMessage: exchange.message, carMessage: carMessage, carPublicKey: Array(answer.pairing.carPublicKey))
        #expect(PairingKeySchedule.carConfirmation(spakeKey: spakeKey, transcript: transcript) == Array(answer.pairing.carConfirmation))
        let publicKey = Array(key.publicKey.rawRepresentation)
        var pair = HUPair()
        pair.publicKey = .init(publicKey)
        pair.deviceName = name
        pair.confirmation = .init(
            PairingKeySchedule.phoneConfirmation(spakeKey: spakeKey, transcript: transcript, publicKey: publicKey, deviceName: name))
        pair.signature = .init(try key.signature(for: PairingKeySchedule.signedMessage(transcript: transcript)))
        return pair
    }

    /// The slow-disk tests' rig: a server whose disk holds every write until
    /// the test finishes it, an HMI, another phone on the Unix socket, and
    /// the TLS phone that will pair (its Welcome carries the challenge).
    static func slowDiskRig() throws -> (disk: HeldDisk, hmi: InMemoryPeer, other: InMemoryPeer, phone: InMemoryPeer, welcome: HUWelcome) {
        let disk = HeldDisk()
        let server = InMemoryServer(configuration: try configuration(), disk: disk)
        let hmi = try server.connectUnix()
        try hmi.handshake(role: .hmi)
        let other = try server.connectUnix()
        try other.handshake(role: .phone)
        let phone = try server.connectTCPAfterTLS()
        let welcome = try phone.handshake(role: .phone)
        return (disk, hmi, other, phone, welcome)
    }

    /// While the paired-device list is being written (the disk holds the
    /// write), another peer's PING is answered and the HMIs already see the
    /// phone; the phone's Pair is answered once the list is on disk.
    @Test func aSlowDiskDoesNotDelayAnotherPeersPing() throws {
        let (disk, hmi, other, phone, welcome) = try Self.slowDiskRig()
        #expect(welcome.authChallenge.count == AuthenticationChallenge.challengeBytes)
        let key = Curve25519.Signing.PrivateKey()
        let pair = try Self.pairRequest(hmi: hmi, phone: phone, key: key, name: "Alice's phone")
        _ = try hmi.frames()

        let pairID = try phone.request(.pair(pair))
        // Paired in memory at once, the write on its way and held.
        let deviceID = DeviceID.of(publicKey: Array(key.publicKey.rawRepresentation))
        #expect(disk.waiting.map { $0.map(\.id) } == [[deviceID]])
        #expect(try phone.result(for: pairID) == nil)
        let attempts = try hmi.envelopes().compactMap { envelope -> HUPairingAttempt? in
            if case .pairingAttempt(let attempt) = envelope.body { return attempt }
            return nil
        }
        #expect(attempts.map(\.outcome) == [.paired])

        // Another peer is served meanwhile: its PING, and a request.
        try other.ping([7, 7])
        #expect(try other.frames().contains { $0.kind == .pong && Array($0.payload.readableBytesView) == [7, 7] })
        let list = try hmi.request(.listPairedDevices(HUListPairedDevices()))
        #expect(try hmi.result(for: list)?.pairing.devices.map(\.deviceID) == [deviceID])
        #expect(try phone.result(for: pairID) == nil)

        disk.finishOldest()
        let answer = try #require(try phone.result(for: pairID))
        #expect(answer.code == .ok)
        #expect(answer.pairing.deviceID == deviceID)
        #expect(answer.message.isEmpty)
        #expect(disk.written.map { $0.map(\.name) } == [["Alice's phone"]])
        #expect(disk.waiting.isEmpty)
    }

    /// A phone that sends Authenticate right after Pair, without waiting:
    /// its requests are answered in the order it sent them (section 4),
    /// Pair's answer first once the list is on disk, then Authenticate's;
    /// another peer is served while the phone's Authenticate waits.
    @Test func answersFollowRequestOrderWhileTheDiskHoldsThePair() throws {
        let (disk, hmi, other, phone, welcome) = try Self.slowDiskRig()
        let key = Curve25519.Signing.PrivateKey()
        let pair = try Self.pairRequest(hmi: hmi, phone: phone, key: key, name: "Carol's phone")
        let deviceID = DeviceID.of(publicKey: Array(key.publicKey.rawRepresentation))

        let pairID = try phone.request(.pair(pair))
        var authenticate = HUAuthenticate()
        authenticate.deviceID = deviceID
        authenticate.signature = .init(
            try key.signature(
                for: AuthenticationChallenge.signedMessage(challenge: Array(welcome.authChallenge), connectionID: welcome.connectionID)))
        let authenticateID = try phone.request(.authenticate(authenticate))
        try phone.ping([1, 2])
        // Nothing answered while the disk holds the write: the Authenticate
        // (paired in memory already) waits behind the Pair, the PING too.
        #expect(disk.waiting.count == 1)
        #expect(try phone.frames().isEmpty)
        try other.ping([7, 7])
        #expect(try other.frames().contains { $0.kind == .pong && Array($0.payload.readableBytesView) == [7, 7] })

        disk.finishOldest()
        let frames = try phone.frames()
        let answered = try frames.filter { $0.kind == .message }.map { try EnvelopeCodec.decode($0.payload) }.filter { $0.requestID != 0 }
        #expect(answered.map(\.requestID) == [pairID, authenticateID])
        for envelope in answered {
            guard case .result(let result) = envelope.body else {
                Issue.record("not a Result: \(envelope)")
                continue
            }
            #expect(result.code == .ok, "\(result.message)")
            #expect(result.pairing.deviceID == deviceID)
        }
        // The PING it sent after them is answered after them too.
        let pong = try #require(frames.firstIndex { $0.kind == .pong })
        let authenticated = try #require(
            try frames.firstIndex { try $0.kind == .message && EnvelopeCodec.decode($0.payload).requestID == authenticateID })
        #expect(pong > authenticated)
        #expect(Array(frames[pong].payload.readableBytesView) == [1, 2])
        #expect(phone.isOpen)

        // Reading goes on as before: the authenticated phone's next PING is answered at once.
        try phone.ping([3])
        #expect(try phone.frames().contains { $0.kind == .pong && Array($0.payload.readableBytesView) == [3] })
    }

    /// A write that fails (a full disk): logged, and the phone is told the
    /// pairing lasts only as long as the daemon runs (section 20.2, step 7).
    @Test func aFailedWriteIsReportedInThePairAnswer() throws {
        let disk = HeldDisk()
        let server = InMemoryServer(configuration: try Self.configuration(), disk: disk)
        let hmi = try server.connectUnix()
        try hmi.handshake(role: .hmi)
        let phone = try server.connectTCPAfterTLS()
        try phone.handshake(role: .phone)
        let pair = try Self.pairRequest(hmi: hmi, phone: phone, key: Curve25519.Signing.PrivateKey(), name: "Bob's phone")
        let pairID = try phone.request(.pair(pair))
        #expect(try phone.result(for: pairID) == nil)

        disk.finishOldest(failing: DiskFull())
        let answer = try #require(try phone.result(for: pairID))
        #expect(answer.code == .ok)
        #expect(answer.message.contains("could not be saved"))
        #expect(answer.message.contains("No space left on device"))
        #expect(answer.message.contains("lost on restart"))
    }

    /// Writes go one at a time, in order; lists saved while one is written
    /// are coalesced into the newest (the last state wins). Removals are
    /// answered at once; the writes are what waits.
    @Test func writesFollowInOrderAndTheLastStateWins() throws {
        let devices = ["a", "b", "c"].map(Self.record)
        let disk = HeldDisk()
        let server = InMemoryServer(configuration: try Self.configuration(devices: devices), disk: disk)
        let hmi = try server.connectUnix()
        try hmi.handshake(role: .hmi)

        for device in devices {
            var remove = HURemovePairedDevice()
            remove.deviceID = device.id
            let id = try hmi.request(.removePairedDevice(remove))
            #expect(try hmi.result(for: id)?.code == .ok)
        }
        // The first removal's list is being written; the other two wait as one.
        #expect(disk.waiting.map { $0.map(\.name) } == [["b", "c"]])
        var idle = false
        server.host.pairing.writes.idle().assumeIsolated().whenSuccess { idle = true }
        disk.finishOldest()
        #expect(disk.waiting.map { $0.map(\.name) } == [[]])
        #expect(!idle)
        disk.finishOldest()
        #expect(disk.written.map { $0.map(\.name) } == [["b", "c"], []])
        #expect(idle)
    }

    /// The daemon's disk: `PairingStore.save` on a thread pool, answered on
    /// the loop; what it wrote loads back.
    @Test func theStoreWritesOnTheThreadPool() async throws {
        var template = Array("/tmp/headunit-pairing-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!).map { String(cString: $0) } }
        let directory = try #require(made)
        defer {
            unlink(directory + "/" + PairingStore.fileName)
            rmdir(directory)
        }
        let store = PairingStore(directory: directory)
        try store.prepare()
        let threads = NIOThreadPool(numberOfThreads: 1)
        threads.start()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let devices = ["a", "b"].map(Self.record)
        try await PairingStoreOnThreads(store: store, threads: threads).write(devices, completingOn: loop).get()
        #expect(try store.load() == devices)
        try await threads.shutdownGracefully()
        // A stopped pool refuses the write: a failure, never a hang.
        await #expect(throws: (any Error).self) {
            try await PairingStoreOnThreads(store: store, threads: threads).write([], completingOn: loop).get()
        }
        try await group.shutdownGracefully()
    }
}

/// The pairing window runs on the serving loop's clock: the test moves it
/// (`EmbeddedEventLoop.advanceTime`) instead of waiting two minutes.
@Suite struct PairingWindowClockTests {
    static func startPairStart(on server: InMemoryServer) throws -> HUResult {
        let phone = try server.connectTCPAfterTLS()
        try phone.handshake(role: .phone)
        let exchange = try SPAKE2Exchange(role: .phone, password: Array("000000".utf8))
        var start = HUPairStart()
        start.spake2Message = .init(exchange.message)
        let id = try phone.request(.pairStart(start))
        return try #require(try phone.result(for: id))
    }

    @Test func theCodeIsValidUntilTheLoopsClockPassesItsLifetime() throws {
        var configuration = try PairingStoreInMemoryTests.configuration()
        configuration.pairingCodeValidMilliseconds = 120_000
        let server = InMemoryServer(configuration: configuration)
        let hmi = try server.connectUnix()
        try hmi.handshake(role: .hmi)
        let open = try hmi.request(.startPairing(HUStartPairing()))
        #expect(try hmi.result(for: open)?.pairing.validMs == 120_000)

        // Within the lifetime the attempt is taken (and, with a wrong code, fails later at Pair).
        server.loop.advanceTime(by: .milliseconds(119_000))
        #expect(try Self.startPairStart(on: server).code == .ok)

        server.loop.advanceTime(by: .milliseconds(1_000))
        let expired = try Self.startPairStart(on: server)
        #expect(expired.code == .pairingNotOpen)
        #expect(expired.message.contains("expired"))
    }
}
