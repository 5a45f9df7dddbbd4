import HeadUnitWire
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every connection-level error code (PROTOCOL.md, errors.proto < 100),
/// provoked over a real socket against the real daemon.
@Suite("Connection errors over real sockets")
struct ConnectionErrorTests {
    // MARK: - Framing (fatal)

    @Test func frameTooLarge() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(arguments: ["--max-payload", "1024"])
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            // Only the header: the daemon must refuse before the payload arrives.
            try client.send(RawSocketClient.frameBytes(kind: FrameKind.message.rawValue, payload: [], length: 5000))
            let goodbye = try client.readGoodbye()
            #expect(goodbye.code == .frameTooLarge)
            #expect(goodbye.reason.contains("1024"))
            #expect(client.waitForClose())
            #expect(daemon.isRunning)
        }
    }

    @Test func badMagic() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.send(Array("GET / HTTP/1.1\r\nHost: car\r\n\r\n".utf8))
            let goodbye = try client.readGoodbye()
            #expect(goodbye.code == .badMagic)
            #expect(client.waitForClose())
            #expect(daemon.isRunning)
        }
    }

    @Test func unknownFrameKindIsSkipped() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            try client.sendFrame(kind: 0x7F, payload: [1, 2, 3])
            let (_, result) = try client.readResult()
            #expect(result.code == .unknownFrameKind)
            #expect(try client.pingRoundTrip())
        }
    }

    // MARK: - Payloads (non-fatal)

    @Test func malformedPayload() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            // An unterminated varint: not a protobuf message.
            try client.sendFrame(.message, payload: [0xFF, 0xFF, 0xFF])
            let (requestID, result) = try client.readResult()
            #expect(result.code == .malformedPayload)
            #expect(requestID == 0)
            #expect(try client.pingRoundTrip())
        }
    }

    @Test func oversizedPingIsMalformed() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            try client.sendFrame(.ping, payload: [UInt8](repeating: 7, count: 65))
            #expect(try client.readResult().result.code == .malformedPayload)
        }
    }

    @Test func unknownMessage() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            // An empty Envelope carrying only request_id 7.
            var empty = HUEnvelope()
            empty.requestID = 7
            try client.send(empty)
            let (requestID, result) = try client.readResult()
            #expect(result.code == .unknownMessage)
            #expect(requestID == 7)
            // A body from a "newer version": field 99, length-delimited, 2 bytes.
            try client.sendFrame(.message, payload: [0x08, 0x09, 0x9A, 0x06, 0x02, 0x01, 0x02])
            let (requestID2, result2) = try client.readResult()
            #expect(result2.code == .unknownMessage)
            #expect(requestID2 == 9)
        }
    }

    // MARK: - Handshake

    @Test func handshakeRequired() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.send(.getStatus(HUGetStatus()), requestID: 1)
            let goodbye = try client.readGoodbye()
            #expect(goodbye.code == .handshakeRequired)
            #expect(client.waitForClose())
        }
    }

    @Test func noCommonVersion() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.send(RawSocketClient.hello(role: .phone, minVersion: 2, maxVersion: 5))
            let goodbye = try client.readGoodbye()
            #expect(goodbye.code == .noCommonVersion)
            // The reason says what the daemon speaks, so the client can tell the user.
            #expect(goodbye.reason.contains("\(ProtocolVersion.minimum)...\(ProtocolVersion.maximum)"))
            #expect(client.waitForClose())
        }
    }

    @Test func welcomeCarriesNegotiatedVersionAndLimits() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["heartbeatIntervalMs": 4000, "maxErrorsPerSecond": 7])
            let client = try daemon.connectUnix()
            try client.send(RawSocketClient.hello(role: .phone, minVersion: 1, maxVersion: 9))
            let envelope = try client.readEnvelope()
            guard case .welcome(let welcome) = envelope.body else {
                Issue.record("expected Welcome, got \(envelope)")
                return
            }
            #expect(welcome.version == 1)
            #expect(welcome.limits.heartbeatIntervalMs == 4000)
            #expect(welcome.limits.maxErrorsPerSecond == 7)
            #expect(welcome.vehicle.mainDisplay.widthPt > 0)
            #expect(welcome.connectionID != 0)
        }
    }

    @Test func alreadyHandshaken() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            try client.send(RawSocketClient.hello(role: .phone), requestID: 3)
            let (requestID, result) = try client.readResult()
            #expect(result.code == .alreadyHandshaken)
            #expect(requestID == 3)
            #expect(try client.pingRoundTrip())
        }
    }

    @Test func carRoleOverTCPIsNotAllowed() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectTCP()
            try client.send(RawSocketClient.hello(role: .hmi))
            let goodbye = try client.readGoodbye()
            #expect(goodbye.code == .roleNotAllowed)
            #expect(client.waitForClose())
            // A phone over TCP is fine.
            let phone = try daemon.connectTCP()
            try phone.handshake(role: .phone)
        }
    }

    @Test func unspecifiedRoleIsNotAllowed() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.send(RawSocketClient.hello(role: .unspecified))
            #expect(try client.readGoodbye().code == .roleNotAllowed)
        }
    }

    @Test func handshakeTimeout() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["handshakeTimeoutMs": 300])
            let client = try daemon.connectUnix()
            let start = RawSocketClient.now()
            let goodbye = try client.readGoodbye(timeout: 5)
            #expect(goodbye.code == .handshakeTimeout)
            #expect(RawSocketClient.now() - start >= 0.25)
            #expect(client.waitForClose())
        }
    }

    // MARK: - Liveness

    @Test func heartbeatTimeoutCutsOnlyTheSilentPeer() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["heartbeatIntervalMs": 250, "heartbeatTimeoutMs": 1500])
            let silent = try daemon.connectUnix()
            try silent.handshake(role: .phone, name: "silent")
            let lively = try daemon.connectUnix()
            try lively.handshake(role: .cluster, name: "lively")

            // The lively peer answers the daemon's PINGs (any frame counts).
            var pings = 0
            let end = RawSocketClient.now() + 2.5
            while RawSocketClient.now() < end {
                guard let frame = try? lively.readFrame(timeout: max(0.01, end - RawSocketClient.now())) else { continue }
                if frame.kind == FrameKind.ping.rawValue {
                    pings += 1
                    try lively.sendFrame(.pong, payload: frame.payload)
                }
            }
            #expect(pings >= 4)
            let goodbye = try silent.readGoodbye(timeout: 5)
            #expect(goodbye.code == .heartbeatTimeout)
            #expect(silent.waitForClose())
            #expect(try lively.pingRoundTrip())
        }
    }

    // MARK: - Abuse

    @Test func tooManyErrorsCutsOffOnlyTheFlooder() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["maxErrorsPerSecond": 10])
            let bystander = try daemon.connectUnix()
            try bystander.handshake(role: .phone, name: "bystander")
            let flooder = try daemon.connectUnix()
            try flooder.handshake(role: .cluster, name: "flooder")

            var flood: [UInt8] = []
            for _ in 0..<50 { flood += RawSocketClient.frameBytes(kind: FrameKind.message.rawValue, payload: [0xFF, 0xFF, 0xFF]) }
            try? flooder.send(flood)
            var results = 0
            var goodbye: HUGoodbye?
            while goodbye == nil {
                let envelope = try flooder.readEnvelope()
                switch envelope.body {
                case .result(let result):
                    #expect(result.code == .malformedPayload)
                    results += 1
                case .goodbye(let bye):
                    goodbye = bye
                default:
                    Issue.record("unexpected \(envelope)")
                }
            }
            #expect(results == 10)
            #expect(goodbye?.code == .tooManyErrors)
            #expect(flooder.waitForClose())

            #expect(daemon.isRunning)
            #expect(try bystander.pingRoundTrip())
            let newcomer = try daemon.connectUnix()
            try newcomer.handshake(role: .cluster, name: "newcomer")
        }
    }

    @Test func notForRole() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            var launch = HULaunchApp()
            launch.appID = "com.example.audio"
            try phone.send(.launchApp(launch), requestID: 11)
            let (requestID, result) = try phone.readResult()
            #expect(result.code == .notForRole)
            #expect(requestID == 11)
            // Car-to-peer messages are never accepted from a peer.
            try phone.send(.screenUpdate(HUScreenUpdate()), requestID: 12)
            #expect(try phone.readResult().result.code == .notForRole)
            try phone.send(.welcome(HUWelcome()), requestID: 13)
            #expect(try phone.readResult().result.code == .notForRole)

            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            try hmi.send(.announceApps(HUAnnounceApps()), requestID: 14)
            #expect(try hmi.readResult().result.code == .notForRole)
            // DATA frames: an HMI never has External Accessory sessions.
            try hmi.sendFrame(.data, channel: 1, payload: [1, 2, 3])
            #expect(try hmi.readResult().result.code == .notForRole)
            #expect(try hmi.pingRoundTrip())
        }
    }

    @Test func dataFrameWithoutSessionIsNotConnected() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            try phone.sendFrame(.data, channel: 42, payload: [1, 2, 3])
            #expect(try phone.readResult().result.code == .notConnected)
        }
    }

    @Test func reservedFlagsAndChannel() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
            try client.sendFrame(.ping, flags: 0x01, payload: [1])
            #expect(try client.readResult().result.code == .reservedFlags)
            try client.sendFrame(.ping, channel: 5, payload: [1])
            #expect(try client.readResult().result.code == .reservedFlags)
            #expect(try client.pingRoundTrip())
        }
    }

    // MARK: - Shutdown and teardown

    @Test func sigtermSaysShuttingDownAndExitsZero() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            let hmi = try daemon.connectUnix()
            try hmi.handshake(role: .hmi)
            let pending = try daemon.connectUnix()  // never says Hello
            _ = try phone.pingRoundTrip()

            kill(daemon.process.processIdentifier, SIGTERM)
            #expect(try phone.readGoodbye().code == .shuttingDown)
            #expect(try hmi.readGoodbye().code == .shuttingDown)
            #expect(try pending.readGoodbye().code == .shuttingDown)
            #expect(phone.waitForClose())
            let status = try daemon.terminate()
            #expect(status == 0)
            // The daemon removes the socket it bound.
            #expect(access(daemon.unixSocketPath, F_OK) != 0)
        }
    }

    @Test func truncatedFrameThenCloseLeavesOthersServed() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let other = try daemon.connectUnix()
            try other.handshake(role: .phone)
            let cutter = try daemon.connectUnix()
            try cutter.handshake(role: .cluster)
            let frame = RawSocketClient.frameBytes(kind: FrameKind.ping.rawValue, payload: [1, 2, 3, 4, 5, 6, 7, 8])
            try cutter.send(Array(frame.prefix(15)))
            cutter.close()
            #expect(try other.pingRoundTrip())
            #expect(daemon.isRunning)
            let again = try daemon.connectUnix()
            try again.handshake(role: .cluster)
            #expect(try again.pingRoundTrip())
        }
    }

    @Test func slowConsumerIsCutOff() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(limits: ["maxOutboundBytes": 65536, "slowConsumerTimeoutMs": 500, "maxRequestsPerSecond": 1_000_000])
            let bystander = try daemon.connectUnix()
            try bystander.handshake(role: .phone)
            let sleeper = try daemon.connectUnix()
            try sleeper.handshake(role: .cluster)
            // PINGs in, PONGs out that the sleeper never reads: its queue must be bounded.
            let ping = RawSocketClient.frameBytes(kind: FrameKind.ping.rawValue, payload: [UInt8](repeating: 0xAB, count: 64))
            var batch: [UInt8] = []
            for _ in 0..<1000 { batch += ping }
            var sendFailed = false
            for _ in 0..<60 {
                do { try sleeper.send(batch) } catch { sendFailed = true; break }
            }
            // Either the send already failed (cut off), or the connection ends when we finally read.
            let closed = sendFailed || sleeper.waitForClose(timeout: 10)
            #expect(closed)
            #expect(daemon.log.contains("slow consumer"))
            #expect(try bystander.pingRoundTrip())
        }
    }
}
