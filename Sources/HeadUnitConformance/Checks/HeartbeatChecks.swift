import HeadUnitWire

/// PROTOCOL.md §6 Heartbeat, driven by the limits announced in Welcome.
enum HeartbeatChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("heartbeat.client-ping", .p("6"), "a client's PING is answered with a PONG carrying the same payload") { ctx in
            let connection = try ctx.phone()
            try connection.pingRoundTrip(Array("round trip".utf8), "PONG \"round trip\"")
        },
        ConformanceCheck("heartbeat.oversize-ping", .p("6"), "a PING payload over 64 bytes gets Result MALFORMED_PAYLOAD and no PONG") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.ping, payload: [UInt8](repeating: 0x65, count: 65))
            try connection.expectError(.malformedPayload, after: "a 65-byte PING")
            try connection.pingRoundTrip([0x64], "only the PONG of the next, 1-byte PING")
        },
        ConformanceCheck("heartbeat.daemon-pings", .p("6"), "after the handshake the endpoint PINGs every heartbeat_interval_ms (8-byte clock, §3)") { ctx in
            let interval = Int(ctx.limits.heartbeatIntervalMs)
            guard interval <= 6000 || ctx.options.slow else {
                throw CheckSkipped("heartbeat_interval_ms is \(interval); waiting for a PING takes too long without --slow")
            }
            let connection = try ctx.phone()
            let start = WireConnection.nowMs()
            _ = try connection.quietPeriodUntilPing(ms: interval + ctx.timeoutMs)
            let waited = Int(WireConnection.nowMs() - start)
            guard let payload = connection.pingsReceived.first else {
                throw CheckFailure(expected: "a PING within heartbeat_interval_ms \(interval) + \(ctx.timeoutMs) ms", got: "none after \(waited) ms")
            }
            try require(payload.count <= 64, "a PING payload of at most 64 bytes", got: "\(payload.count) bytes")
            try require(payload.count == 8, "the daemon's monotonic clock: 8 bytes", got: "\(payload.count) bytes")
            try connection.requireAlive("answering the endpoint's PING")
        },
        ConformanceCheck("heartbeat.timeout", .p("6"), "a silent peer gets Goodbye HEARTBEAT_TIMEOUT after heartbeat_timeout_ms; a peer sending any frames stays") { ctx in
            let timeout = Int(ctx.limits.heartbeatTimeoutMs)
            let interval = Int(ctx.limits.heartbeatIntervalMs)
            guard timeout <= 20000 || ctx.options.slow else {
                throw CheckSkipped("heartbeat_timeout_ms is \(timeout) (over 20 s); use --slow to wait for it")
            }
            // A phone whose apps are not accepted is cut off by the announce
            // timeout (§10.1), which may come first (10 s against 15 s by
            // default): the peers here are ones that timeout does not concern.
            // With a car role: a silent cluster, and a phone carrying apps that
            // sends PINGs. A phone alone: the phone carrying apps, silent, then
            // again, sending PINGs.
            if let car = try? ctx.carEndpoint() {
                let silent = try ctx.connect(car, label: "silent cluster")
                _ = try ctx.handshake(silent, role: .cluster, name: "silent")
                let lively = try ctx.phone("lively")
                _ = try ctx.announce(lively, [appInfo("com.example.lively", [Entitlement.audio])])
                try Self.watch(silent: silent, lively: lively, timeout: timeout, interval: interval, ctx: ctx)
            } else {
                let silent = try ctx.phone("silent")
                _ = try ctx.announce(silent, [appInfo("com.example.silent", [Entitlement.audio])])
                try Self.watch(silent: silent, lively: nil, timeout: timeout, interval: interval, ctx: ctx)
                let lively = try ctx.phone("lively")
                _ = try ctx.announce(lively, [appInfo("com.example.lively", [Entitlement.audio])])
                try Self.watch(silent: nil, lively: lively, timeout: timeout, interval: interval, ctx: ctx)
            }
        },
    ]
}

extension HeartbeatChecks {
    /// Waits heartbeat_timeout_ms (+ an interval): `silent` (answering
    /// nothing) must get Goodbye HEARTBEAT_TIMEOUT, no earlier than about the
    /// timeout; `lively` (answering no PING either, but sending its own: any
    /// frame proves it alive) must stay.
    static func watch(silent: WireConnection?, lively: WireConnection?, timeout: Int, interval: Int, ctx: CheckContext) throws {
        silent?.answerPings = false
        lively?.answerPings = false
        let start = WireConnection.nowMs()
        let deadline = start + Double(timeout + interval + ctx.timeoutMs)
        var lastSent = start
        var goodbye: HUGoodbye?
        while silent == nil || goodbye == nil {
            let now = WireConnection.nowMs()
            if now > deadline { break }
            if let lively {
                if now - lastSent > Double(interval) / 2 {
                    try lively.sendFrame(.ping, payload: [0x4C])
                    lastSent = now
                }
                for envelope in try lively.quietPeriod(ms: silent == nil ? 50 : 10) {
                    if case .goodbye(let bye) = envelope.body {
                        throw CheckFailure(expected: "the peer sending PINGs kept (any frame proves it alive)", got: "Goodbye \(name(bye.code)) \"\(bye.reason)\"")
                    }
                }
            }
            if let silent {
                for envelope in try silent.quietPeriod(ms: 50) {
                    if case .goodbye(let bye) = envelope.body { goodbye = bye }
                }
                if silent.sawEOF && goodbye == nil { throw CheckFailure(expected: "Goodbye HEARTBEAT_TIMEOUT before the close", got: "the connection closed without one") }
            }
        }
        let waited = Int(WireConnection.nowMs() - start)
        if let silent {
            guard let goodbye else {
                throw CheckFailure(expected: "Goodbye HEARTBEAT_TIMEOUT within \(timeout) + \(interval) ms", got: "none after \(waited) ms")
            }
            try requireCode(goodbye, .heartbeatTimeout, "silence for heartbeat_timeout_ms")
            try require(waited >= timeout * 8 / 10, "no cut-off before about heartbeat_timeout_ms (\(timeout))", got: "Goodbye after \(waited) ms")
            try silent.expectClose("the endpoint to close after HEARTBEAT_TIMEOUT")
        }
        if let lively {
            lively.answerPings = true
            try lively.requireAlive(silent == nil ? "heartbeat_timeout_ms of PINGs and nothing else" : "another peer timing out")
        }
    }
}

extension WireConnection {
    /// Reads for up to `ms` or until the first PING from the endpoint.
    func quietPeriodUntilPing(ms: Int) throws -> [HUEnvelope] {
        let deadline = Self.nowMs() + Double(ms)
        var seen: [HUEnvelope] = []
        while pingsReceived.isEmpty {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            if left <= 0 { break }
            seen += try quietPeriod(ms: min(left, 100))
            if sawEOF { break }
        }
        return seen
    }
}
