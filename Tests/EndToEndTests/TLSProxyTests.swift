import Foundation
import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 23, "Done means" (a)-(c): a real TCP proxy between phone and car
/// (PROTOCOL.md section 20, "What an attacker on the path can do").
@Suite("TLS on TCP: a proxy that records, tampers and sits in the middle", .ownThread)
struct TLSProxyTests {
    static let secretTitle = "Secret-Title-7731"

    /// A paired, authenticated phone through `proxy`.
    static func authenticatedPhone(_ daemon: TestDaemon, through proxy: TLSProxy, name: String = "Alice's phone") throws -> RawSocketClient {
        let code = try AuthenticationTests.startPairing(daemon)
        let phone = try RawSocketClient.tcp(port: proxy.port)
        let welcome = try phone.handshake(role: .phone)
        let identity = PhoneIdentity()
        #expect(try AuthenticationTests.pair(phone, code: code, identity: identity, name: name).code == .ok)
        try AuthenticationTests.authenticate(phone, welcome: welcome, identity: identity)
        #expect(try AuthenticationTests.readResult(phone, requestID: 3).code == .ok)
        return phone
    }

    static func announce(_ phone: RawSocketClient, title: String, requestID: UInt32 = 10) throws {
        var announce = HUAnnounceApps()
        announce.deviceName = "Test Phone"
        var app = HUAppInfo()
        app.appID = "com.example.secret"
        app.displayName = title
        app.entitlements = [AuthenticationTests.audio]
        announce.apps = [app]
        try phone.send(.announceApps(announce), requestID: requestID)
    }

    static func appCount(_ daemon: TestDaemon) throws -> UInt32 {
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        try hmi.send(.getStatus(HUGetStatus()), requestID: 40)
        return try AuthenticationTests.readResult(hmi, requestID: 40).status.apps
    }

    /// (a) Nothing of the protocol in clear: no frame header, no title, no
    /// device name, no resumption token in the capture.
    @Test func aCaptureHoldsNoFrameAndNoTitle() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let proxy = try TLSProxy(toPort: daemon.tcpPort!)
        defer { proxy.close() }
        let phone = try Self.authenticatedPhone(daemon, through: proxy)
        try Self.announce(phone, title: Self.secretTitle)
        let accepted = try AuthenticationTests.readResult(phone, requestID: 10)
        #expect(accepted.code == .ok)
        let token = accepted.appDecisions.resumptionToken
        #expect(!token.isEmpty)
        #expect(try phone.pingRoundTrip())
        let (up, down) = proxy.capture()
        #expect(up.count > 500 && down.count > 500)
        for (what, bytes) in [("phone to car", up), ("car to phone", down)] {
            for needle in [Self.secretTitle, "Alice's phone", token, "com.example.secret"] {
                #expect(Self.find(Array(needle.utf8), in: bytes) == nil, "\(needle) in clear \(what)")
            }
            // No frame header of any kind in clear: "HU", a kind, any flags and channel, a length under the maximum.
            #expect(Self.frameHeaders(in: bytes).isEmpty, "a frame header in clear \(what) at \(Self.frameHeaders(in: bytes))")
        }
        // What was sent really is there once decrypted: the app is on the car.
        #expect(try Self.appCount(daemon) == 1)
    }

    /// (b) After authentication, bytes changed, injected, replayed or
    /// reordered on the path end the connection, and what they carried never
    /// reaches the car or the HMI; the daemon serves everyone else.
    @Test(arguments: [TLSProxy.Attack.tamper, .inject, .replay, .reorder])
    func anAttackOnTheRecordsEndsTheConnection(_ attack: TLSProxy.Attack) throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let proxy = try TLSProxy(toPort: daemon.tcpPort!)
        defer { proxy.close() }
        let phone = try Self.authenticatedPhone(daemon, through: proxy)
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        proxy.arm(attack)
        if attack == .reorder {
            // Two records, so there is something to swap.
            try phone.send(.getStatus(HUGetStatus()), requestID: 9)
            usleep(100_000)
        }
        try Self.announce(phone, title: "Injected-\(attack)")
        #expect(phone.waitForClose(timeout: 5))
        #expect(proxy.attacked)
        // Nothing reached the car: no app, and the HMI's screens never named it.
        #expect(try Self.appCount(daemon) == 0)
        let deadline = Date().addingTimeInterval(0.5)
        while Date() < deadline, let envelope = try? hmi.readEnvelope(timeout: 0.2) {
            #expect(!"\(envelope)".contains("Injected"))
        }
        #expect(try hmi.pingRoundTrip())
    }

    /// (c) A man in the middle of a first pairing (its own TLS toward the
    /// phone, its own toward the car, relaying the frames), with the right
    /// code typed on the phone: the SDK refuses (the car's key in the answer
    /// is not the TLS session's), the car shows the abandoned attempt, and
    /// nothing is paired.
    @Test func aManInTheMiddleOfPairingFailsAndTheCarShowsIt() async throws {
        // The watching HMI answers no PING while the SDK phone works: no heartbeat cut-off here.
        let daemon = try TestDaemon.launch(limits: ["heartbeatIntervalMs": 60_000, "heartbeatTimeoutMs": 120_000], pairing: true)
        let proxy = try TLSProxy(toPort: daemon.tcpPort!, mode: .manInTheMiddle)
        defer { proxy.close() }
        let (hmi, code) = try AuthenticationTests.startPairingWatching(daemon)
        var configuration = HeadUnitConnection.Configuration(role: .phone, name: "Alice's phone")
        configuration.identity = PhoneIdentity()
        configuration.pairingCode = code
        do {
            _ = try await HeadUnitConnection.connect(to: .tcp(host: "127.0.0.1", port: proxy.port), configuration: configuration)
            Issue.record("paired through a man in the middle")
        } catch let error as HeadUnitError {
            #expect(error.message.contains("someone is"))
        }
        let shown = try AuthenticationTests.readPairingAttempt(hmi, timeout: 30)
        #expect(shown.outcome == .abandoned)
        try hmi.send(.listPairedDevices(HUListPairedDevices()), requestID: 11)
        #expect(try AuthenticationTests.readResult(hmi, requestID: 11).pairing.devices.isEmpty)
    }

    /// (c) The same with a phone that goes on to Pair anyway (or a man in the
    /// middle that forges the car key in the answer): its confirmation binds
    /// the key it saw, so the car refuses it and shows a failed attempt.
    @Test func aManInTheMiddleCannotCompleteAPairing() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let proxy = try TLSProxy(toPort: daemon.tcpPort!, mode: .manInTheMiddle)
        defer { proxy.close() }
        let (hmi, code) = try AuthenticationTests.startPairingWatching(daemon)
        let phone = try RawSocketClient.tcp(port: proxy.port)
        _ = try phone.handshake(role: .phone)
        let result = try AuthenticationTests.pair(phone, code: code, identity: PhoneIdentity())
        #expect(result.code == .badPairingCode)
        let shown = try AuthenticationTests.readPairingAttempt(hmi)
        #expect(shown.outcome == .failed)
        try hmi.send(.listPairedDevices(HUListPairedDevices()), requestID: 11)
        #expect(try AuthenticationTests.readResult(hmi, requestID: 11).pairing.devices.isEmpty)
    }

    /// A paired phone pins the car's key: a man in the middle is refused in
    /// the TLS handshake, before any frame.
    @Test func aPairedPhoneRefusesAnotherCarKey() async throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let code = try AuthenticationTests.startPairing(daemon)
        var configuration = HeadUnitConnection.Configuration(role: .phone, name: "Alice's phone")
        var identity = PhoneIdentity()
        configuration.identity = identity
        configuration.pairingCode = code
        let paired = try await HeadUnitConnection.connect(to: .tcp(host: "127.0.0.1", port: daemon.tcpPort!), configuration: configuration)
        identity.carKey = paired.carPublicKey
        await paired.close()
        configuration.identity = identity
        configuration.pairingCode = nil
        // Straight to the car: the pin holds and the phone authenticates.
        let direct = try await HeadUnitConnection.connect(to: .tcp(host: "127.0.0.1", port: daemon.tcpPort!), configuration: configuration)
        await direct.close()
        let proxy = try TLSProxy(toPort: daemon.tcpPort!, mode: .manInTheMiddle)
        defer { proxy.close() }
        do {
            _ = try await HeadUnitConnection.connect(to: .tcp(host: "127.0.0.1", port: proxy.port), configuration: configuration)
            Issue.record("connected through a man in the middle")
        } catch {}
        // Nothing of the protocol reached the man in the middle.
        #expect(proxy.capture().phoneToCar.isEmpty)
    }

    /// Plaintext on the TLS port gets no frame back, only a TLS alert or a close.
    @Test func plaintextOnTheTCPPortGetsNoFrame() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let raw = try RawSocketClient.plainTCP(port: daemon.tcpPort!)
        var hello = HUHello()
        hello.minVersion = 1
        hello.maxVersion = 1
        hello.role = .phone
        try? raw.send(.hello(hello), requestID: 1)
        // A TLS alert is not a frame (bad magic); a close is no frame either.
        let frame = try? raw.readFrame(timeout: 3)
        #expect(frame == nil)
        #expect(raw.waitForClose(timeout: 3))
    }

    /// Where a 12-byte frame header could start (section 2: "HU", kind,
    /// flags, channel, length): the magic, any kind the protocol defines
    /// (`FrameKind`: MESSAGE ... VIDEO) and a length of at most 1 MiB. Random
    /// ciphertext matches at a position with probability about 6 x 10^-11.
    static func frameHeaders(in bytes: [UInt8]) -> [Int] {
        guard bytes.count >= 12 else { return [] }
        var found: [Int] = []
        for start in 0...(bytes.count - 12) where bytes[start] == 0x48 && bytes[start + 1] == 0x55 {
            let length = bytes[(start + 8)..<(start + 12)].reduce(0) { $0 << 8 | Int($1) }
            if FrameKind(rawValue: bytes[start + 2]) != nil, length <= 1 << 20 { found.append(start) }
        }
        return found
    }

    /// Truncation: half of the phone's next record reaches the car and the
    /// connection is cut. The car decrypts nothing of it (a record is
    /// authenticated whole): no app, nothing on the HMI's screens.
    @Test func aTruncatedRecordNeverReachesTheCar() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let proxy = try TLSProxy(toPort: daemon.tcpPort!)
        defer { proxy.close() }
        let phone = try Self.authenticatedPhone(daemon, through: proxy)
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        proxy.arm(.truncate)
        try Self.announce(phone, title: "Truncated-Title")
        #expect(phone.waitForClose(timeout: 5))
        #expect(proxy.attacked)
        #expect(try Self.appCount(daemon) == 0)
        let deadline = Date().addingTimeInterval(0.5)
        while Date() < deadline, let envelope = try? hmi.readEnvelope(timeout: 0.2) {
            #expect(!"\(envelope)".contains("Truncated"))
        }
        #expect(try hmi.pingRoundTrip())
    }

    /// Car to phone: one bit flipped in a record the car sends (the answer
    /// to the phone's PING) ends the connection at the phone; the phone
    /// never gets a frame from it, and the car serves everyone else.
    @Test func aTamperedRecordFromTheCarEndsTheConnectionAtThePhone() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        let proxy = try TLSProxy(toPort: daemon.tcpPort!)
        defer { proxy.close() }
        let phone = try Self.authenticatedPhone(daemon, through: proxy)
        proxy.arm(.tamperToPhone)
        try phone.sendFrame(.ping, payload: [9, 9, 9, 9])
        var frames = 0
        while let frame = try? phone.readFrame(timeout: 3) {
            if frame.kind == FrameKind.pong.rawValue { frames += 1 }
        }
        #expect(frames == 0)
        #expect(phone.waitForClose(timeout: 5))
        #expect(proxy.attacked)
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        #expect(try hmi.pingRoundTrip())
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return start }
        }
        return nil
    }
}
