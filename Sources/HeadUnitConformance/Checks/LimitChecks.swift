import HeadUnitWire

/// PROTOCOL.md §10: the limits a client learns from Welcome and what happens past them.
enum LimitChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("limits.welcome-non-zero", .p("10"), "every W limit in Welcome.limits is non-zero, announce timeout, resume grace and the sizes included") { ctx in
            let connection = try ctx.connect()
            let limits = try ctx.handshake(connection, role: .phone).limits
            let zero = [
                ("max_requests_per_second", limits.maxRequestsPerSecond), ("max_string_bytes", limits.maxStringBytes),
                ("max_image_bytes", limits.maxImageBytes), ("max_message_elements", limits.maxMessageElements),
                ("announce_timeout_ms", limits.announceTimeoutMs), ("resume_grace_ms", limits.resumeGraceMs),
            ].filter { $0.1 == 0 }.map(\.0)
            try require(zero.isEmpty, "every W limit announced non-zero (§10)", got: "0 for " + zero.joined(separator: ", "))
        },
        ConformanceCheck("limits.hello-name-too-large", .p("5"), "Hello.name over max_string_bytes: Goodbye HELLO_TOO_LARGE, closed") { ctx in
            let size = Int(ctx.wireLimits.maxStringBytes) + 1
            let connection = try ctx.connect()
            try connection.sendFrame(.message, payload: helloPayload(requestID: 1, name: [UInt8](repeating: 0x6E, count: size)))
            try connection.expectFatal(.helloTooLarge, after: "a Hello whose name is \(size) bytes")
        },
        ConformanceCheck("limits.hello-auth-too-large", .p("5"), "Hello.auth over max_image_bytes: Goodbye HELLO_TOO_LARGE (at the limit: Welcome)") { ctx in
            let limit = Int(ctx.wireLimits.maxImageBytes)
            guard limit + 64 <= Int(ctx.limits.maxPayloadBytes) else {
                throw CheckSkipped("max_image_bytes \(limit) does not fit a frame of max_payload_bytes \(ctx.limits.maxPayloadBytes)")
            }
            let fits = try ctx.connect()
            try fits.sendFrame(.message, payload: helloPayload(requestID: 1, extra: field(5, [UInt8](repeating: 0x61, count: limit))))
            let envelope = try fits.readEnvelope("Welcome to a Hello with auth of exactly max_image_bytes")
            guard case .welcome = envelope.body else { throw CheckFailure(expected: "Welcome (auth at its limit)", got: describe(envelope)) }
            let over = try ctx.connect()
            try over.sendFrame(.message, payload: helloPayload(requestID: 1, extra: field(5, [UInt8](repeating: 0x61, count: limit + 1))))
            try over.expectFatal(.helloTooLarge, after: "a Hello whose auth is \(limit + 1) bytes")
        },
        ConformanceCheck("limits.string-path", .p("10.3"), "a string over max_string_bytes: Result MESSAGE_TOO_LARGE with limit, limit_value and the path with the element index; nothing applied") { ctx in
            let phone = try ctx.phone()
            var apps = (0..<3).map { appInfo("com.example.limits\($0)", [Entitlement.audio]) }
            apps[2].displayName = String(repeating: "x", count: Int(ctx.wireLimits.maxStringBytes) + 1)
            var announce = HUAnnounceApps()
            announce.apps = apps
            let result = try phone.request(.announceApps(announce), "AnnounceApps with a display name over max_string_bytes")
            try requireCode(result, .messageTooLarge, "a display name over max_string_bytes")
            try require(result.limit == "max_string_bytes" && result.limitValue == ctx.wireLimits.maxStringBytes,
                        "limit max_string_bytes, limit_value \(ctx.wireLimits.maxStringBytes)", got: "limit \(result.limit) \(result.limitValue)")
            // Envelope.announce_apps (10), AnnounceApps.apps (2) element 2, AppInfo.display_name (2).
            try require(result.message.firstRange(of: "10.2[2].2") != nil, "the path 10.2[2].2 in the message (§10.3)", got: "\"\(result.message)\"")
            // Nothing applied: the same apps announce cleanly afterwards.
            apps[2].displayName = "short"
            announce.apps = apps
            let again = try ctx.announce(phone, apps)
            try requireCode(again, .ok, "the same AnnounceApps within the limits")
            try require(again.appDecisions.decisions.allSatisfy { $0.code != .duplicateApp }, "no DUPLICATE_APP: the refused request applied nothing", got: describe(again))
        },
        ConformanceCheck("limits.elements", .p("10.3"), "more than max_message_elements repeated elements: Result MESSAGE_TOO_LARGE, limit max_message_elements") { ctx in
            let count = Int(ctx.wireLimits.maxMessageElements) + 1
            guard count * 4 < Int(ctx.limits.maxPayloadBytes) else { throw CheckSkipped("max_message_elements \(count - 1) does not fit one frame") }
            let phone = try ctx.phone()
            var app = appInfo("com.example.elements", [])
            app.entitlements = [String](repeating: "e", count: count)
            var announce = HUAnnounceApps()
            announce.apps = [app]
            let result = try phone.request(.announceApps(announce), "AnnounceApps with \(count) entitlement strings")
            try requireCode(result, .messageTooLarge, "\(count) repeated elements")
            try require(result.limit == "max_message_elements", "limit max_message_elements", got: result.limit)
        },
        ConformanceCheck("limits.max-apps-counts-all", .p("16.1"), "max_apps counts every app the phone announced (all its AnnounceApps together): LIMIT_EXCEEDED announce.apps") { ctx in
            let phone = try ctx.phone()
            let probe = try ctx.announce(phone, (0..<257).map { appInfo("com.example.many\($0)", [Entitlement.audio]) })
            guard probe.code == .limitExceeded else {
                throw CheckSkipped("257 apps in one AnnounceApps were \(name(probe.code)): max_apps is above 256 here")
            }
            try require(probe.limit == "announce.apps" && probe.limitValue > 0, "limit announce.apps with its value", got: "\(probe.limit) \(probe.limitValue)")
            let maximum = Int(probe.limitValue)
            try requireCode(try ctx.announce(phone, (0..<(maximum - 1)).map { appInfo("com.example.first\($0)", [Entitlement.audio]) }), .ok, "max_apps - 1 apps")
            let over = try ctx.announce(phone, (0..<2).map { appInfo("com.example.second\($0)", [Entitlement.audio]) })
            try requireCode(over, .limitExceeded, "2 more apps after max_apps - 1 (all announces count)")
            try requireCode(try ctx.announce(phone, [appInfo("com.example.last", [Entitlement.audio])]), .ok, "the last app up to max_apps")
        },
        ConformanceCheck("limits.announce-timeout", .p("10.1"), "a phone whose apps are not accepted within announce_timeout_ms of Welcome: Goodbye ANNOUNCE_TIMEOUT") { ctx in
            let timeout = Int(ctx.wireLimits.announceTimeoutMs)
            guard timeout <= 3000 || ctx.options.slow else { throw CheckSkipped("announce_timeout_ms is \(timeout); use --slow to wait for it") }
            let phone = try ctx.phone("idle phone")
            let start = WireConnection.nowMs()
            let goodbye = try phone.goodbye("Goodbye ANNOUNCE_TIMEOUT", timeoutMs: timeout + ctx.timeoutMs)
            let waited = Int(WireConnection.nowMs() - start)
            try requireCode(goodbye, .announceTimeout, "no AnnounceApps for announce_timeout_ms")
            try require(waited >= timeout * 8 / 10, "no cut-off before about announce_timeout_ms (\(timeout))", got: "Goodbye after \(waited) ms")
        },
        ConformanceCheck("limits.requests-per-second", .p("10.2"), "past max_requests_per_second: Result TOO_MANY_REQUESTS (a PING gets it instead of its PONG), then Goodbye TOO_MANY_REQUESTS") { ctx in
            let rate = Int(ctx.wireLimits.maxRequestsPerSecond)
            guard rate <= 5000 else { throw CheckSkipped("max_requests_per_second is \(rate); not sending that many") }
            let phone = try ctx.phone()
            // Twice the bucket and the flood allowance in one write: the bucket cannot refill that fast.
            let burst = 2 * rate + Int(ctx.limits.maxErrorsPerSecond) + 1
            try phone.send((0..<burst).flatMap { _ in WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [0x52]) })
            var refusals = 0
            while true {
                let envelope = try phone.readEnvelope("Result or Goodbye TOO_MANY_REQUESTS", timeoutMs: max(ctx.timeoutMs, 5000))
                if case .result(let result) = envelope.body {
                    try requireCode(result, .tooManyRequests, "a PING past the rate")
                    refusals += 1
                } else if case .goodbye(let goodbye) = envelope.body {
                    try requireCode(goodbye, .tooManyRequests, "refusals past max_errors_per_second")
                    break
                }
            }
            try require(refusals >= 1 && refusals <= Int(ctx.limits.maxErrorsPerSecond), "at most max_errors_per_second refusals before the Goodbye", got: "\(refusals)")
        },
    ]
}

extension CheckContext {
    /// Welcome's limits with section 10's defaults for fields announced 0 (the
    /// sizes, rates and time-outs of §10.1-10.3 and §21).
    var wireLimits: HULimits {
        var limits = self.limits
        if limits.maxRequestsPerSecond == 0 { limits.maxRequestsPerSecond = 1000 }
        if limits.maxStringBytes == 0 { limits.maxStringBytes = 1024 }
        if limits.maxImageBytes == 0 { limits.maxImageBytes = 262_144 }
        if limits.maxMessageElements == 0 { limits.maxMessageElements = 2000 }
        if limits.announceTimeoutMs == 0 { limits.announceTimeoutMs = 10_000 }
        if limits.resumeGraceMs == 0 { limits.resumeGraceMs = 30_000 }
        return limits
    }
}
