import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// External Accessory sessions over real sockets (PROTOCOL.md section 18):
/// a phone with automaker apps, accessory peers on the Unix socket, every
/// session error code provoked, bytes through a session in both directions.
@Suite("Accessory sessions over real sockets")
struct AccessorySessionSocketTests {
    static let performance = "com.openmotors.performance"
    static let climate = "com.openmotors.climate"

    struct Rig {
        let daemon: TestDaemon
        let phone: RawSocketClient
        let accessory: RawSocketClient
        var nextID: UInt32 = 100

        init() throws {
            daemon = try TestDaemon.launch()
            accessory = try daemon.connectUnix()
            try accessory.handshake(role: .accessory, name: "performance ECU")
            phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let apps = [
                HUAppInfo.with { $0.appID = "track-laps"; $0.displayName = "Track Laps"; $0.entitlements = ["com.apple.developer.carplay-protocols"]; $0.accessoryProtocols = [AccessorySessionSocketTests.performance] },
                HUAppInfo.with { $0.appID = "comfort"; $0.displayName = "Comfort"; $0.entitlements = ["com.apple.developer.carplay-protocols"]; $0.accessoryProtocols = [AccessorySessionSocketTests.climate] },
                RequestErrorTests.app("radio"),
            ]
            #expect(try RequestErrorTests.announce(phone, apps).1.code == .ok)
        }

        mutating func request(_ client: RawSocketClient, _ body: HUEnvelope.OneOf_Body) throws -> HUResult {
            nextID += 1
            try client.send(body, requestID: nextID)
            while true {
                let (id, result) = try client.readResult()
                if id == nextID { return result }
            }
        }

        mutating func serve(_ client: RawSocketClient, _ protocols: [String]) throws -> HUErrorCode {
            try request(client, .serveProtocols(HUServeProtocols.with { $0.protocols = protocols })).code
        }

        mutating func open(_ app: String, _ name: String) throws -> HUResult {
            try request(phone, .openSession(HUOpenSession.with { $0.appID = app; $0.protocol = name }))
        }

        /// Opens a session the accessory accepts; returns its channel.
        mutating func openAccepted(_ app: String, _ name: String, accessory: RawSocketClient? = nil) throws -> UInt32 {
            let result = try open(app, name)
            #expect(result.code == .ok, "\(result.message)")
            let server = accessory ?? self.accessory
            let requested = try Self.next(server) { if case .sessionRequested(let r) = $0 { return r } else { return nil } }
            #expect(requested.channel == result.accessorySession.channel && requested.appID == app)
            #expect(try request(server, .answerSession(HUAnswerSession.with { $0.channel = requested.channel; $0.accept = true })).code == .ok)
            let opened = try Self.next(phone) { if case .sessionOpened(let o) = $0 { return o } else { return nil } }
            #expect(opened.channel == requested.channel)
            return opened.channel
        }

        /// The next envelope body `match` accepts, skipping others.
        static func next<T>(_ client: RawSocketClient, _ match: (HUEnvelope.OneOf_Body) -> T?) throws -> T {
            while true {
                if let body = try client.readEnvelope().body, let found = match(body) { return found }
            }
        }
    }

    @Test func everySessionErrorCodeOverTheWire() async throws {
        try await onOwnThread {
            var rig = try Rig()
            // UNKNOWN_PROTOCOL: serving what the vehicle does not declare.
            #expect(try rig.serve(rig.accessory, ["com.openmotors.radio"]) == .unknownProtocol)
            // PROTOCOL_UNAVAILABLE: declared, nobody serves it yet.
            #expect(try rig.open("track-laps", Self.performance).code == .protocolUnavailable)
            #expect(try rig.serve(rig.accessory, [Self.performance]) == .ok)
            // PROTOCOL_ALREADY_SERVED: a second peer for the same protocol.
            let second = try rig.daemon.connectUnix()
            try second.handshake(role: .accessory)
            #expect(try rig.serve(second, [Self.performance]) == .protocolAlreadyServed)
            // NOT_ALLOWED_FOR_CATEGORY and UNKNOWN_PROTOCOL for apps.
            #expect(try rig.open("radio", Self.performance).code == .notAllowedForCategory)
            #expect(try rig.open("track-laps", Self.climate).code == .unknownProtocol)
            // UNKNOWN_SESSION: closing or answering a channel that is not yours.
            #expect(try rig.request(rig.phone, .closeSession(HUCloseSession.with { $0.channel = 999 })).code == .unknownSession)
            #expect(try rig.request(second, .answerSession(HUAnswerSession.with { $0.channel = 1; $0.accept = true })).code == .unknownSession)
            // FLOW_CONTROL: more bytes than the credit; the session closes on both sides.
            let channel = try rig.openAccepted("track-laps", Self.performance)
            try rig.phone.sendFrame(.data, channel: channel, payload: [UInt8](repeating: 1, count: Int(65536) + 1))
            // The event first, then the Result (18.6: one order for every request that ends sessions).
            let closed = try Rig.next(rig.phone) { if case .sessionClosed(let c) = $0 { return c } else { return nil } }
            #expect(closed.reason == .flowControl && closed.channel == channel)
            let refused = try rig.phone.readResult()
            #expect(refused.result.code == .flowControl)
            // NOT_CONNECTED: DATA on a channel with no session (DATA on the one
            // that just closed is dropped without a word: it was in flight).
            try rig.phone.sendFrame(.data, channel: channel, payload: [1])
            try rig.phone.sendFrame(.data, channel: 4242, payload: [1])
            let notConnected = try rig.phone.readResult()
            #expect(notConnected.result.code == .notConnected && notConnected.result.message.contains("4242"))
        }
    }

    @Test func statusShowsDeclaredProtocolsServedOrUnavailable() async throws {
        try await onOwnThread {
            var rig = try Rig()
            #expect(try rig.serve(rig.accessory, [Self.performance]) == .ok)
            let hmi = try rig.daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            let status = try rig.request(hmi, .getStatus(HUGetStatus())).status.accessoryProtocols
            #expect(status.map(\.protocol) == [Self.performance, Self.climate])
            #expect(status.map(\.available) == [true, false])
        }
    }

    @Test func killingTheAccessoryEndsTheSessionWithAReason() async throws {
        try await onOwnThread {
            var rig = try Rig()
            #expect(try rig.serve(rig.accessory, [Self.performance]) == .ok)
            let channel = try rig.openAccepted("track-laps", Self.performance)
            rig.accessory.close()
            let closed = try Rig.next(rig.phone) { if case .sessionClosed(let c) = $0 { return c } else { return nil } }
            #expect(closed.channel == channel && closed.reason == .accessoryGone)
            let availability = try Rig.next(rig.phone) { if case .accessoryAvailability(let a) = $0 { return a } else { return nil } }
            #expect(availability.protocols.first?.available == false)
        }
    }

    /// Bytes both ways through one session, in order and intact, paced by
    /// credit, while a second session on another protocol keeps answering.
    @Test func bytesFlowBothWaysIntactWithCreditWhileAnotherSessionAnswers() async throws {
        try await onOwnThread {
            var rig = try Rig()
            #expect(try rig.serve(rig.accessory, [Self.performance]) == .ok)
            let climateECU = try rig.daemon.connectUnix()
            try climateECU.handshake(role: .accessory)
            #expect(try rig.serve(climateECU, [Self.climate]) == .ok)
            let bulk = try rig.openAccepted("track-laps", Self.performance)
            let echo = try rig.openAccepted("comfort", Self.climate, accessory: climateECU)

            let total = 4 << 20
            let chunk = 16 << 10
            var toAccessory = ByteSource(seed: 1), toPhone = ByteSource(seed: 2)
            var checkAtAccessory = ByteSource(seed: 1), checkAtPhone = ByteSource(seed: 2)
            var phoneCredit = 65536, accessoryCredit = 65536
            var sentByPhone = 0, sentByAccessory = 0, gotAtAccessory = 0, gotAtPhone = 0
            var echoRoundTrips = 0
            while gotAtAccessory < total || gotAtPhone < total {
                // Each side sends what its credit allows.
                while sentByPhone < total, phoneCredit >= chunk {
                    try rig.phone.sendFrame(.data, channel: bulk, payload: toAccessory.take(chunk))
                    sentByPhone += chunk; phoneCredit -= chunk
                }
                while sentByAccessory < total, accessoryCredit >= chunk {
                    try rig.accessory.sendFrame(.data, channel: bulk, payload: toPhone.take(chunk))
                    sentByAccessory += chunk; accessoryCredit -= chunk
                }
                // Each side reads one batch, checks it and grants what it consumed.
                gotAtAccessory += try drain(rig.accessory, channel: bulk, check: &checkAtAccessory, credit: &accessoryCredit)
                gotAtPhone += try drain(rig.phone, channel: bulk, check: &checkAtPhone, credit: &phoneCredit)
                // The other session answers meanwhile.
                if echoRoundTrips < 8 {
                    try rig.phone.sendFrame(.data, channel: echo, payload: [UInt8(echoRoundTrips)])
                    let frame = try readData(climateECU)
                    #expect(frame.channel == echo && frame.payload == [UInt8(echoRoundTrips)])
                    echoRoundTrips += 1
                }
            }
            #expect(gotAtAccessory == total && gotAtPhone == total)
            #expect(echoRoundTrips == 8)
        }
    }

    /// Reads one frame; session bytes are checked against the expected stream
    /// and granted back; a credit grant adds to `credit`.
    func drain(_ client: RawSocketClient, channel: UInt32, check: inout ByteSource, credit: inout Int) throws -> Int {
        let read: RawFrame?
        do {
            read = try client.readFrame(timeout: 0.05)
        } catch RawClientError.timedOut {
            return 0  // nothing for this side right now: the other side's turn
        }
        guard let frame = read else { throw RawClientError.closed("session data") }
        switch FrameKind(rawValue: frame.kind) {
        case .data:
            #expect(frame.channel == channel)
            #expect(frame.payload == check.take(frame.payload.count), "bytes arrive in order and unchanged")
            try client.send(.sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(frame.payload.count) }))
            return frame.payload.count
        case .message:
            let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
            if case .sessionCredit(let grant) = envelope.body, grant.channel == channel { credit += Int(grant.bytes) }
            if case .result(let result) = envelope.body { #expect(result.code == .ok, "\(result.message)") }
            return 0
        default:
            return 0
        }
    }

    func readData(_ client: RawSocketClient) throws -> RawFrame {
        while true {
            guard let frame = try client.readFrame(timeout: 10) else { throw RawClientError.closed("session data") }
            if frame.kind == FrameKind.data.rawValue { return frame }
        }
    }
}

/// A reproducible byte stream (xorshift), so both ends know what to expect.
struct ByteSource {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func take(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }
}

/// The same, through the SDK on both ends (AccessoryStream, AccessoryPeer).
@Suite("Accessory sessions through the SDK", .serialized)
struct AccessorySDKTests {
    func start() async throws -> (TestDaemon, PhoneSession, AccessoryPeer) {
        let daemon = try await TestDaemon.start()
        let ecu = try await AccessoryPeer.connect(to: daemon.unixEndpoint, name: "ecu")
        try await ecu.serve([AccessorySessionSocketTests.performance])
        let phone = try await PhoneSession.connect(to: daemon.unixEndpoint, deviceName: "sdk phone")
        let app = HUAppInfo.with {
            $0.appID = "laps"; $0.displayName = "Laps"; $0.entitlements = ["com.apple.developer.carplay-protocols"]
            $0.accessoryProtocols = [AccessorySessionSocketTests.performance]
        }
        _ = try await phone.announce([app])
        return (daemon, phone, ecu)
    }

    /// A reader that stops makes the writer wait (credit), not the daemon queue.
    @Test func aReaderThatStopsMakesTheWriterWait() async throws {
        let (daemon, phone, ecu) = try await start()
        defer { daemon.stop() }
        let stream = try await phone.openAccessorySession(appID: "laps", protocol: AccessorySessionSocketTests.performance)
        var sessions = ecu.sessions.makeAsyncIterator()
        let accessorySide = try #require(await sessions.next())
        let written = ManagedFlag()
        let writer = Task {
            try await stream.write(ByteBuffer(repeating: 9, count: 1 << 20))
            await written.set()
        }
        // Nobody reads on the accessory side: at most the initial credit leaves the phone.
        try await Task.sleep(nanoseconds: 500_000_000)
        let early = await written.value
        #expect(early == false, "the write must wait for credit")
        // Reading grants credit: the whole MiB arrives, in order.
        var received = 0
        while received < 1 << 20, let bytes = try await accessorySide.read() {
            #expect(bytes.readableBytesView.allSatisfy { $0 == 9 })
            received += bytes.readableBytes
        }
        try await writer.value
        let done = await written.value
        #expect(received == 1 << 20 && done)
    }

    /// Killing the accessory mid-transfer ends the app's session with a reason;
    /// what arrived before is an in-order prefix, nothing twice.
    @Test func killingTheAccessoryMidTransferEndsTheSessionWithAReason() async throws {
        let (daemon, phone, ecu) = try await start()
        defer { daemon.stop() }
        let stream = try await phone.openAccessorySession(appID: "laps", protocol: AccessorySessionSocketTests.performance)
        var sessions = ecu.sessions.makeAsyncIterator()
        let accessorySide = try #require(await sessions.next())
        let sender = Task {
            var index: UInt32 = 0
            while true {
                var block = ByteBuffer()
                for _ in 0..<1024 { block.writeInteger(index); index &+= 1 }
                try await accessorySide.write(block)
            }
        }
        var expected: UInt32 = 0
        var failure: Error?
        do {
            while let bytes = try await stream.read() {
                var bytes = bytes
                while let value = bytes.readInteger(as: UInt32.self) {
                    #expect(value == expected, "in order, nothing twice")
                    expected &+= 1
                }
                if expected > 50_000 { await ecu.close() }
            }
        } catch {
            failure = error
        }
        sender.cancel()
        #expect(expected > 50_000)
        #expect(failure != nil, "an accessory that vanishes is not a normal end")
        let reason = await stream.closeReason()?.reason
        #expect(reason == .accessoryGone)
    }
}

actor ManagedFlag {
    var value = false
    func set() { value = true }
}
