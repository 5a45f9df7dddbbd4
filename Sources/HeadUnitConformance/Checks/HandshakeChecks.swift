import HeadUnitWire

/// PROTOCOL.md §5 Handshake (and §8: nothing but Welcome or Goodbye before it).
enum HandshakeChecks {
    /// §5 step 2: the highest version in both ranges, judged against the
    /// range the endpoint announced in its Welcome ([1, 1] in this release).
    static func version(_ min: UInt32, _ max: UInt32) -> ConformanceCheck {
        ConformanceCheck("handshake.versions-\(min)-\(max)", .p("5"), "Hello for versions \(min)..\(max): " + (min <= 1 && 1 <= max ? "Welcome.version = highest common version (1 for a 1..1 daemon)" : "Goodbye NO_COMMON_VERSION (for a 1..1 daemon)")) { ctx in
            let (daemonMin, daemonMax) = ctx.daemonRange
            let low = Swift.max(min, daemonMin)
            let high = Swift.min(max, daemonMax)
            let connection = try ctx.connect()
            try connection.send(CheckContext.hello(role: .phone, name: "versions", min: min, max: max), requestID: 21)
            let envelope = try connection.readEnvelope("the answer to Hello{\(min)..\(max)}")
            if low <= high && min <= max {
                guard case .welcome(let welcome) = envelope.body else {
                    throw CheckFailure(expected: "Welcome{version \(high)} (daemon speaks \(daemonMin)..\(daemonMax))", got: describe(envelope))
                }
                try require(envelope.requestID == 21, "request_id 21 echoed", got: "request_id \(envelope.requestID)")
                try require(welcome.version == high, "Welcome.version \(high) (the highest in \(min)..\(max) and \(daemonMin)..\(daemonMax))", got: "Welcome.version \(welcome.version)")
            } else {
                guard case .goodbye(let goodbye) = envelope.body else {
                    throw CheckFailure(expected: "Goodbye NO_COMMON_VERSION (client \(min)..\(max), daemon \(daemonMin)..\(daemonMax))", got: describe(envelope))
                }
                try requireCode(goodbye, .noCommonVersion, "Hello for \(min)..\(max)")
                for number in [min, max] {
                    try require(goodbye.reason.firstRange(of: String(number)) != nil, "a reason stating both ranges, with \(number)", got: "\"\(goodbye.reason)\"")
                }
                try connection.expectClose("the endpoint to close after NO_COMMON_VERSION")
            }
        }
    }

    static func refusedRole(_ role: HURole, raw: UInt32? = nil, transport: TransportNeed = .any, why: String) -> ConformanceCheck {
        let label = raw.map { "role \($0)" } ?? roleName(role)
        let id = "handshake.role-" + (raw.map { "unknown-\($0)" } ?? String(roleName(role).dropFirst(5)).lowercased()) + (transport == .tcpOnly ? "-over-tcp" : "")
        return ConformanceCheck(id, .p("5"), "Hello with \(label)\(transport == .tcpOnly ? " over TCP" : ""): Goodbye ROLE_NOT_ALLOWED (\(why))", transport: transport) { ctx in
            let connection = try ctx.connect()
            try connection.sendFrame(.message, payload: helloPayload(requestID: 1, role: raw ?? UInt32(role.rawValue)))
            try connection.expectFatal(.roleNotAllowed, after: "Hello with \(label)")
        }
    }

    static func handshakeRequired(_ id: String, _ what: String, _ bytes: @escaping @Sendable () -> [UInt8]) -> ConformanceCheck {
        ConformanceCheck("handshake.required-" + id, .p("5"), "\(what) as the first frame: Goodbye HANDSHAKE_REQUIRED, closed") { ctx in
            let connection = try ctx.connect()
            try connection.send(bytes())
            try connection.expectFatal(.handshakeRequired, after: "\(what) before Hello")
        }
    }

    static let all: [ConformanceCheck] = [
        version(1, 1), version(1, 3), version(0, 9), version(2, 3), version(0, 0), version(3, 1),
        ConformanceCheck("handshake.daemon-range", .p("14"), "Welcome states the daemon's range and it includes version 1 (this document)") { ctx in
            let connection = try ctx.connect()
            let welcome = try ctx.handshake(connection, role: .phone, min: 0, max: 9)
            try require(welcome.daemonMinVersion <= 1 && 1 <= welcome.daemonMaxVersion && welcome.daemonMinVersion <= welcome.daemonMaxVersion,
                        "daemon_min_version <= 1 <= daemon_max_version", got: "\(welcome.daemonMinVersion)..\(welcome.daemonMaxVersion)")
            try require(welcome.version >= welcome.daemonMinVersion && welcome.version <= welcome.daemonMaxVersion,
                        "Welcome.version within the daemon's own range", got: "version \(welcome.version) with range \(welcome.daemonMinVersion)..\(welcome.daemonMaxVersion)")
        },
        ConformanceCheck("handshake.welcome-limits", .p("10"), "Welcome.limits announces every W limit (max_payload_bytes, heartbeat interval and timeout, completion timeout, max errors)") { ctx in
            let connection = try ctx.connect()
            let limits = try ctx.handshake(connection, role: .phone).limits
            let missing = [
                ("max_payload_bytes", limits.maxPayloadBytes), ("heartbeat_interval_ms", limits.heartbeatIntervalMs),
                ("heartbeat_timeout_ms", limits.heartbeatTimeoutMs), ("completion_timeout_ms", limits.completionTimeoutMs),
                ("max_errors_per_second", limits.maxErrorsPerSecond),
            ].filter { $0.1 == 0 }.map(\.0)
            try require(missing.isEmpty, "every limit set in Welcome.limits", got: "0 for " + missing.joined(separator: ", "))
        },
        ConformanceCheck("handshake.nothing-before-hello", .p("8"), "before Hello the endpoint sends nothing; then Welcome is the first frame") { ctx in
            let connection = try ctx.connect()
            let early = try connection.quietPeriod(ms: 300)
            try require(early.isEmpty && connection.pingsReceived.isEmpty, "nothing before Hello",
                        got: early.first.map(describe) ?? "\(connection.pingsReceived.count) PING(s)")
            try connection.sendFrame(.message, payload: helloPayload(requestID: 2))
            guard let frame = try connection.readFrame("Welcome") else { throw CheckFailure(expected: "Welcome", got: "the connection closed") }
            try require(frame.kind == FrameKind.message.rawValue, "a MESSAGE frame (Welcome) first", got: "a frame of kind \(frame.kind)")
            let envelope = try connection.decode(frame)
            guard case .welcome = envelope.body else { throw CheckFailure(expected: "Welcome first", got: describe(envelope)) }
        },
        refusedRole(.unspecified, why: "never allowed"),
        refusedRole(.unspecified, raw: 9, why: "an unknown role is never allowed"),
        refusedRole(.hmi, transport: .tcpOnly, why: "car roles use the Unix socket only"),
        refusedRole(.cluster, transport: .tcpOnly, why: "car roles use the Unix socket only"),
        refusedRole(.accessory, transport: .tcpOnly, why: "car roles use the Unix socket only"),
        ConformanceCheck("handshake.car-roles-unix", .p("5"), "ROLE_HMI, ROLE_CLUSTER and ROLE_ACCESSORY are welcome on the Unix socket", needsCarRole: true) { ctx in
            for role in [HURole.hmi, .cluster, .accessory] {
                let connection = try ctx.connect(try ctx.carEndpoint(), label: "car-\(role)")
                _ = try ctx.handshake(connection, role: role)
                connection.leave()
            }
        },
        ConformanceCheck("handshake.second-hello", .p("5"), "a second Hello: Result ALREADY_HANDSHAKEN with its request_id; the first handshake stands") { ctx in
            let connection = try ctx.phone()
            try connection.send(CheckContext.hello(role: .hmi, name: "changed my mind"), requestID: 31)
            try connection.expectError(.alreadyHandshaken, requestID: 31, after: "a second Hello asking for ROLE_HMI")
            var launch = HULaunchApp()
            launch.appID = "com.example.conformance"
            try connection.send(.launchApp(launch), requestID: 32)
            try connection.expectError(.notForRole, requestID: 32, after: "LaunchApp from the connection still a phone")
        },
        handshakeRequired("ping", "a PING") { WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [1]) },
        handshakeRequired("request", "a request (AnnounceApps)") {
            WireConnection.envelopeBytes(WireConnection.envelope(.announceApps(HUAnnounceApps()), requestID: 1))
        },
        handshakeRequired("garbage", "an undecodable MESSAGE") { WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: [0xFF, 0xFF]) },
        handshakeRequired("empty", "an empty MESSAGE") { WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: []) },
        handshakeRequired("flags", "a Hello with flags 0x01") {
            WireConnection.frameBytes(kind: FrameKind.message.rawValue, flags: 1, payload: helloPayload(requestID: 1))
        },
        handshakeRequired("channel", "a Hello on channel 3") {
            WireConnection.frameBytes(kind: FrameKind.message.rawValue, channel: 3, payload: helloPayload(requestID: 1))
        },
        handshakeRequired("unknown-kind", "a frame of unknown kind 0x7f (step 5 before step 6)") { WireConnection.frameBytes(kind: 0x7F, payload: [1]) },
        ConformanceCheck("handshake.timeout", .p("5"), "no Hello within the handshake time-out (5 s by default): Goodbye HANDSHAKE_TIMEOUT", slow: true) { ctx in
            let connection = try ctx.connect()
            let start = WireConnection.nowMs()
            try connection.expectFatalWithin(.handshakeTimeout, ms: 12000, after: "saying nothing")
            let waited = Int(WireConnection.nowMs() - start)
            try require(waited >= 500, "the time-out to take a while (5 s by default)", got: "Goodbye after \(waited) ms")
        },
    ]
}

extension String {
    func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}

extension WireConnection {
    /// As expectFatal, waiting up to `ms` for the Goodbye (time-outs).
    func expectFatalWithin(_ code: HUErrorCode, ms: Int, after why: String) throws {
        let goodbye = try self.goodbye("Goodbye \(name(code)) after \(why)", timeoutMs: ms)
        try requireCode(goodbye, code, why)
        try expectClose("the endpoint to close after Goodbye \(name(code)) (§7)")
    }
}
