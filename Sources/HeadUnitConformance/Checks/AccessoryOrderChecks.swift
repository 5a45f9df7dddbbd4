import HeadUnitWire

/// PROTOCOL.md §18, the rules issue 26 decided: one order of events and
/// Result for every request that ends sessions, grants that are never
/// answered, the window cap, empty DATA, channel numbering, the refuser, the
/// open time-out. Wire only, like every check.
enum AccessoryOrderChecks {
    typealias A = AccessoryChecks

    /// Sends a request; returns its Result and what the connection received
    /// between sending it and the Result (in arrival order).
    static func requestNoting(_ connection: WireConnection, _ body: HUEnvelope.OneOf_Body, _ what: String) throws -> (HUResult, [HUEnvelope]) {
        let mark = connection.received.count
        let id = connection.newRequestID()
        try connection.send(body, requestID: id)
        let result = try connection.result(for: id, what)
        let since = Array(connection.received[mark...])
        let index = since.firstIndex { envelope in
            if case .result = envelope.body { return envelope.requestID == id }
            return false
        } ?? since.count
        return (result, Array(since[..<index]))
    }

    static func closed(_ envelopes: [HUEnvelope], channel: UInt32) -> HUSessionClosed? {
        envelopes.lazy.compactMap { envelope -> HUSessionClosed? in
            if case .sessionClosed(let closed) = envelope.body, closed.channel == channel { return closed }
            return nil
        }.first
    }

    /// The SessionClosed for `channel` (others stay in the backlog).
    static func closedOn(_ connection: WireConnection, _ channel: UInt32, _ what: String) throws -> HUSessionClosed {
        try connection.take(what) { envelope -> HUSessionClosed? in
            if case .sessionClosed(let closed) = envelope.body, closed.channel == channel { return closed }
            return nil
        }
    }

    static func credit(_ channel: UInt32, _ bytes: UInt32) -> HUEnvelope.OneOf_Body {
        var credit = HUSessionCredit()
        credit.channel = channel
        credit.bytes = bytes
        return .sessionCredit(credit)
    }

    /// The SessionOpened the phone got for `channel` (openSession took it).
    static func opened(_ phone: WireConnection, _ channel: UInt32) throws -> HUSessionOpened {
        let found = phone.received.lazy.compactMap { envelope -> HUSessionOpened? in
            if case .sessionOpened(let opened) = envelope.body, opened.channel == channel { return opened }
            return nil
        }.first
        guard let found else { throw CheckFailure(expected: "SessionOpened for channel \(channel)", got: "none") }
        return found
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "accessory.events-before-result", .p("18.6"),
            "every request that ends sessions sends its events first, then its Result: OpenSession replacing (REPLACED, to both sides), a flow-control violation (FLOW_CONTROL), ServeProtocols withdrawing (PROTOCOL_WITHDRAWN), AppClosed (APP_CLOSED, to both sides)",
            needsCarRole: true
        ) { ctx in
            let (phone, accessory, proto) = try A.parties(ctx)
            var open = HUOpenSession()
            open.appID = A.appID
            open.protocol = proto
            // Replace: the old session's SessionClosed{REPLACED} before the new OpenSession's Result.
            let first = try A.openSession(phone, accessory, proto)
            let (replacing, before) = try requestNoting(phone, .openSession(open), "OpenSession replacing channel \(first)")
            try requireCode(replacing, .ok, "OpenSession replacing a session")
            guard let replaced = closed(before, channel: first) else {
                throw CheckFailure(expected: "SessionClosed{REPLACED} for channel \(first) before the OpenSession's Result (§18.3, §18.6)", got: "the Result first")
            }
            try require(replaced.reason == .replaced, "reason REPLACED", got: "\(replaced.reason)")
            let toAccessory = try closedOn(accessory, first, "SessionClosed{REPLACED} to the accessory")
            try require(toAccessory.channel == first && toAccessory.reason == .replaced, "the accessory told REPLACED for channel \(first)", got: "\(toAccessory)")
            // Leave the new session opening: the accessory refuses it so the next open starts clean.
            let pending = replacing.accessorySession.channel
            _ = try accessory.take("SessionRequested for channel \(pending)") { envelope -> Bool? in
                if case .sessionRequested(let requested) = envelope.body, requested.channel == pending { return true }
                return nil
            }
            var refuse = HUAnswerSession()
            refuse.channel = pending
            refuse.accept = false
            try requireCode(try accessory.request(.answerSession(refuse), "AnswerSession refusing"), .ok, "AnswerSession refusing")
            _ = try closedOn(phone, pending, "SessionClosed{REFUSED}")

            // Flow control: SessionClosed{FLOW_CONTROL} to the sender before its Result{FLOW_CONTROL} (request id 0).
            let second = try A.openSession(phone, accessory, proto)
            let credit = Int(try opened(phone, second).initialCredit)
            guard credit + 1 <= Int(ctx.limits.maxPayloadBytes) else { throw CheckSkipped("the initial credit \(credit) does not fit one frame") }
            let mark = phone.received.count
            try phone.sendFrame(.data, channel: second, payload: [UInt8](repeating: 0x46, count: credit + 1))
            _ = try phone.expectError(.flowControl, requestID: 0, after: "DATA one byte over the credit")
            let since = Array(phone.received[mark...])
            guard let flowClosed = closed(since, channel: second),
                let closedAt = since.firstIndex(where: { if case .sessionClosed(let c) = $0.body { return c.channel == second } else { return false } }),
                let resultAt = since.firstIndex(where: { if case .result = $0.body { return true } else { return false } }),
                closedAt < resultAt
            else { throw CheckFailure(expected: "SessionClosed{FLOW_CONTROL} before Result{FLOW_CONTROL} (§18.5)", got: "the Result first") }
            try require(flowClosed.reason == .flowControl, "reason FLOW_CONTROL", got: "\(flowClosed.reason)")
            _ = try closedOn(accessory, second, "SessionClosed{FLOW_CONTROL} to the accessory")

            // Withdraw: the accessory's SessionClosed{PROTOCOL_WITHDRAWN} before its ServeProtocols Result.
            let third = try A.openSession(phone, accessory, proto)
            let (withdrawn, beforeServe) = try requestNoting(accessory, .serveProtocols(HUServeProtocols()), "ServeProtocols []")
            try requireCode(withdrawn, .ok, "ServeProtocols withdrawing everything")
            guard let atAccessory = closed(beforeServe, channel: third) else {
                throw CheckFailure(expected: "SessionClosed{PROTOCOL_WITHDRAWN} for channel \(third) before the ServeProtocols Result (§18.2, §18.6)", got: "the Result first")
            }
            try require(atAccessory.reason == .protocolWithdrawn, "reason PROTOCOL_WITHDRAWN", got: "\(atAccessory.reason)")
            let atPhone = try closedOn(phone, third, "SessionClosed{PROTOCOL_WITHDRAWN} to the phone")
            try require(atPhone.channel == third && atPhone.reason == .protocolWithdrawn, "the phone told PROTOCOL_WITHDRAWN", got: "\(atPhone)")

            // AppClosed: SessionClosed{APP_CLOSED} to the phone before the Result, and to the accessory.
            try requireCode(try A.serve(accessory, [proto]), .ok, "ServeProtocols again")
            let fourth = try A.openSession(phone, accessory, proto)
            var appClosed = HUAppClosed()
            appClosed.appID = A.appID
            let (closedApp, beforeClosed) = try requestNoting(phone, .appClosed(appClosed), "AppClosed")
            try requireCode(closedApp, .ok, "AppClosed")
            guard let byApp = closed(beforeClosed, channel: fourth) else {
                throw CheckFailure(expected: "SessionClosed{APP_CLOSED} for channel \(fourth) before the AppClosed Result (§18.6)", got: "the Result first")
            }
            try require(byApp.reason == .appClosed, "reason APP_CLOSED", got: "\(byApp.reason)")
            let byAppAtAccessory = try closedOn(accessory, fourth, "SessionClosed{APP_CLOSED} to the accessory")
            try require(byAppAtAccessory.channel == fourth && byAppAtAccessory.reason == .appClosed, "the accessory told APP_CLOSED", got: "\(byAppAtAccessory)")
        },
        ConformanceCheck(
            "accessory.credit-rules", .p("18.5"),
            "SessionCredit: an accepted grant is never answered, whatever its request_id; 0 bytes INVALID_ARGUMENT; a grant past the window cap INVALID_ARGUMENT with limit session.credit_bytes and limit_value the cap (at least 262144), a grant up to it accepted",
            needsCarRole: true
        ) { ctx in
            let (phone, accessory, proto) = try A.parties(ctx)
            let channel = try A.openSession(phone, accessory, proto)
            let window = try opened(phone, channel).window
            try require(window > 0, "SessionOpened.window (§18.5)", got: "0")
            // Far past any cap: refused, and the refusal names the cap.
            let huge = try phone.request(credit(channel, 1 << 30), "SessionCredit of 1 GiB")
            try requireCode(huge, .invalidArgument, "a grant far past the window cap")
            try require(huge.limit == "session.credit_bytes", "limit \"session.credit_bytes\"", got: "\"\(huge.limit)\"")
            let cap = huge.limitValue
            try require(cap >= 262_144 && cap >= window, "limit_value (the cap) at least 262144, which every client may rely on", got: "\(cap)")
            try requireCode(try phone.request(credit(channel, 0), "SessionCredit of 0 bytes"), .invalidArgument, "a grant of 0 bytes")
            // Up to the cap: accepted, and never answered, though its request_id is not 0.
            let accepted = phone.newRequestID()
            try phone.send(credit(channel, cap - window), requestID: accepted)
            let past = try phone.request(credit(channel, 1), "SessionCredit one byte past the cap")
            try requireCode(past, .invalidArgument, "a grant one byte past the window cap (outstanding = the window widened to the cap)")
            try require(past.limitValue == cap, "limit_value \(cap)", got: "\(past.limitValue)")
            _ = try phone.quietPeriod(ms: 100)
            let answered = phone.received.contains { envelope in
                if case .result = envelope.body { return envelope.requestID == accepted }
                return false
            }
            try require(!answered, "no Result for the accepted grant (request \(accepted))", got: "a Result")
        },
        ConformanceCheck(
            "accessory.empty-data", .p("18.4"),
            "an empty DATA frame on an open session is accepted whatever the credit (no answer) and not passed on; on a channel with no open session NOT_CONNECTED",
            needsCarRole: true
        ) { ctx in
            let (phone, accessory, proto) = try A.parties(ctx)
            let channel = try A.openSession(phone, accessory, proto)
            let credit = Int(try opened(phone, channel).initialCredit)
            let chunk = max(1, min(credit, Int(ctx.limits.maxPayloadBytes)))
            var left = credit
            while left > 0 {
                let count = min(left, chunk)
                try phone.sendFrame(.data, channel: channel, payload: [UInt8](repeating: 0x45, count: count))
                left -= count
            }
            // The credit is spent: an empty frame is still fine.
            try phone.sendFrame(.data, channel: channel, payload: [])
            try phone.sendFrame(.data, channel: channel &+ 100_000, payload: [])
            try phone.expectError(.notConnected, requestID: 0, after: "an empty DATA frame on a channel never opened")
            var received = 0
            while received < credit {
                let frame = try accessory.takeData("the phone's \(credit) bytes")
                try require(!frame.payload.isEmpty, "no empty DATA frame passed on (§18.4)", got: "an empty frame on channel \(frame.channel)")
                received += frame.payload.count
            }
            let deadline = WireConnection.nowMs() + 300
            while WireConnection.nowMs() < deadline {
                guard let frame = try? accessory.readFrame("nothing more", timeoutMs: max(1, Int(deadline - WireConnection.nowMs()))) else { break }
                if frame.kind == FrameKind.data.rawValue {
                    throw CheckFailure(expected: "nothing passed on after the phone's \(credit) bytes (an empty frame is not, §18.4)", got: "DATA of \(frame.payload.count) bytes")
                }
                if frame.kind == FrameKind.message.rawValue { accessory.backlog.append(try accessory.decode(frame)) }
            }
            try phone.requireAlive("an empty DATA frame")
            let answers = phone.received.filter { envelope in
                if case .result = envelope.body { return envelope.requestID == 0 }
                return false
            }
            try require(answers.count == 1, "one answer (NOT_CONNECTED), none to the empty frame on the open session", got: "\(answers.count) Result(s) with request_id 0")
        },
        ConformanceCheck(
            "accessory.channels-and-refuser", .p("18.3"),
            "channels are non-zero, the same on both connections, and count up: a closed channel is not given to a new session; a refusing accessory gets only its Result{OK}, no SessionClosed",
            needsCarRole: true
        ) { ctx in
            let (phone, accessory, proto) = try A.parties(ctx)
            var seen: [UInt32] = []
            for _ in 0..<3 {
                let channel = try A.openSession(phone, accessory, proto)
                try require(!seen.contains(channel), "a channel not used before (§18.3: not reused before about four billion others)", got: "\(channel) again after \(seen)")
                if let last = seen.last, channel < last, last < UInt32.max - 1000 {
                    throw CheckFailure(expected: "channels counting up (§18.3)", got: "\(channel) after \(last)")
                }
                seen.append(channel)
                var close = HUCloseSession()
                close.channel = channel
                try requireCode(try phone.request(.closeSession(close), "CloseSession \(channel)"), .ok, "CloseSession")
                _ = try closedOn(accessory, channel, "SessionClosed{CLOSED_BY_APP} to the accessory")
            }
            let result = try A.open(phone, proto)
            try requireCode(result, .ok, "OpenSession")
            let channel = result.accessorySession.channel
            _ = try accessory.take("SessionRequested for channel \(channel)") { envelope -> Bool? in
                if case .sessionRequested(let requested) = envelope.body, requested.channel == channel { return true }
                return nil
            }
            var answer = HUAnswerSession()
            answer.channel = channel
            answer.accept = false
            answer.reason = "busy"
            try requireCode(try accessory.request(.answerSession(answer), "AnswerSession refusing"), .ok, "AnswerSession refusing")
            let refused = try closedOn(phone, channel, "SessionClosed{REFUSED} to the phone")
            try require(refused.reason == .refused && refused.detail == "busy", "REFUSED \"busy\"", got: "\(refused)")
            let toRefuser = (accessory.backlog + (try accessory.quietPeriod(ms: 300))).filter { envelope in
                if case .sessionClosed(let closed) = envelope.body { return closed.channel == channel }
                return false
            }
            try require(toRefuser.isEmpty, "no SessionClosed to the accessory that refused (§18.3)", got: "\(toRefuser.count)")
        },
        ConformanceCheck(
            "accessory.open-timeout", .p("18.3"),
            "a session left opening 10 s (no AnswerSession) ends with SessionClosed{OPEN_TIMEOUT} to both sides; an AnswerSession after it is UNKNOWN_SESSION",
            needsCarRole: true, slow: true
        ) { ctx in
            let (phone, accessory, proto) = try A.parties(ctx)
            let result = try A.open(phone, proto)
            try requireCode(result, .ok, "OpenSession")
            let channel = result.accessorySession.channel
            let started = WireConnection.nowMs()
            // Both sides keep proving they are alive (§6) while the time-out runs.
            var atPhone: HUSessionClosed?
            while atPhone == nil {
                if WireConnection.nowMs() - started > 10_000 + Double(ctx.timeoutMs) + 2000 {
                    throw CheckFailure(expected: "SessionClosed{OPEN_TIMEOUT} within 10 s of the OpenSession", got: "nothing after \(Int(WireConnection.nowMs() - started)) ms")
                }
                atPhone = try? phone.take("SessionClosed{OPEN_TIMEOUT}", timeoutMs: 500) { envelope -> HUSessionClosed? in
                    if case .sessionClosed(let closed) = envelope.body, closed.channel == channel { return closed }
                    return nil
                }
                if atPhone == nil { try accessory.requireAlive("waiting for the open time-out") }
            }
            let elapsed = WireConnection.nowMs() - started
            try require(atPhone!.reason == .openTimeout, "reason OPEN_TIMEOUT", got: "\(atPhone!.reason)")
            try require(elapsed >= 9000, "after about 10 s", got: "\(Int(elapsed)) ms")
            let atAccessory = try accessory.take("SessionClosed{OPEN_TIMEOUT} to the accessory") { envelope -> HUSessionClosed? in
                if case .sessionClosed(let closed) = envelope.body, closed.channel == channel { return closed }
                return nil
            }
            try require(atAccessory.reason == .openTimeout, "the accessory told OPEN_TIMEOUT", got: "\(atAccessory.reason)")
            var answer = HUAnswerSession()
            answer.channel = channel
            answer.accept = true
            try requireCode(try accessory.request(.answerSession(answer), "AnswerSession after the time-out"), .unknownSession, "an answer too late")
        },
    ]
}
