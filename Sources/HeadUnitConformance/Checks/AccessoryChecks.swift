import HeadUnitWire

/// PROTOCOL.md §18: External Accessory sessions, between a phone's automaker
/// app and an accessory peer, as far as the rules stand in this version.
enum AccessoryChecks {
    static let appID = "com.example.conformance.automaker"

    /// The first protocol the vehicle declares (Welcome.vehicle), or a skip.
    static func declared(_ ctx: CheckContext) throws -> String {
        guard let first = ctx.reference?.vehicle.accessoryProtocols.first else {
            throw CheckSkipped("the vehicle declares no accessory protocol (Welcome.vehicle.accessory_protocols)")
        }
        return first
    }

    static func serve(_ accessory: WireConnection, _ protocols: [String]) throws -> HUResult {
        var serve = HUServeProtocols()
        serve.protocols = protocols
        return try accessory.request(.serveProtocols(serve), "ServeProtocols \(protocols)")
    }

    /// An accessory serving `proto` and a phone with an automaker app matching it.
    static func parties(_ ctx: CheckContext, serve served: Bool = true) throws -> (phone: WireConnection, accessory: WireConnection, proto: String) {
        let proto = try declared(ctx)
        let accessory = try ctx.carRole(.accessory, "accessory")
        if served { try requireCode(try serve(accessory, [proto]), .ok, "ServeProtocols of a declared protocol") }
        let phone = try ctx.phone()
        var app = appInfo(appID, ["com.apple.developer.carplay-protocols"])
        app.accessoryProtocols = [proto]
        let result = try ctx.announce(phone, [app])
        try requireCode(result, .ok, "AnnounceApps of an automaker app")
        guard let decision = result.appDecisions.decisions.first, decision.accepted else {
            throw CheckSkipped("the endpoint's entitlement policy refused the automaker app: \(describe(result))")
        }
        try require(decision.matchedProtocols.contains(proto), "\(proto) in matched_protocols (§18.1)", got: "\(decision.matchedProtocols)")
        return (phone, accessory, proto)
    }

    static func open(_ phone: WireConnection, _ proto: String) throws -> HUResult {
        var open = HUOpenSession()
        open.appID = appID
        open.protocol = proto
        return try phone.request(.openSession(open), "OpenSession \(proto)")
    }

    /// Opens and accepts a session: its channel.
    static func openSession(_ phone: WireConnection, _ accessory: WireConnection, _ proto: String) throws -> UInt32 {
        let result = try open(phone, proto)
        try requireCode(result, .ok, "OpenSession on a served protocol")
        let channel = result.accessorySession.channel
        try require(channel != 0, "a non-zero channel (§18.3)", got: "0")
        let requested = try accessory.take("SessionRequested") { envelope -> HUSessionRequested? in
            if case .sessionRequested(let requested) = envelope.body, requested.channel == channel { return requested }
            return nil
        }
        try require(requested.channel == channel && requested.appID == appID && requested.protocol == proto,
                    "SessionRequested{channel \(channel), \(appID), \(proto)}", got: "\(requested)")
        var answer = HUAnswerSession()
        answer.channel = channel
        answer.accept = true
        try requireCode(try accessory.request(.answerSession(answer), "AnswerSession accept"), .ok, "AnswerSession")
        let opened = try phone.take("SessionOpened") { envelope -> HUSessionOpened? in
            if case .sessionOpened(let opened) = envelope.body { return opened }
            return nil
        }
        try require(opened.channel == channel && opened.initialCredit > 0, "SessionOpened on channel \(channel) with credit", got: "\(opened)")
        return channel
    }

    static func sessionClosed(_ connection: WireConnection, _ what: String) throws -> HUSessionClosed {
        try connection.take(what) { envelope -> HUSessionClosed? in
            if case .sessionClosed(let closed) = envelope.body { return closed }
            return nil
        }
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("accessory.serve-checks", .p("18.2"), "ServeProtocols: not reverse DNS INVALID_ARGUMENT, undeclared UNKNOWN_PROTOCOL, another peer's PROTOCOL_ALREADY_SERVED", needsCarRole: true) { ctx in
            let proto = try declared(ctx)
            let first = try ctx.carRole(.accessory, "accessory")
            try requireCode(try serve(first, ["not reverse dns"]), .invalidArgument, "a string that is not reverse DNS")
            try requireCode(try serve(first, ["com.example.conformance.undeclared"]), .unknownProtocol, "a protocol the vehicle does not declare")
            try requireCode(try serve(first, [proto]), .ok, "a declared protocol")
            let second = try ctx.carRole(.accessory, "accessory 2")
            try requireCode(try serve(second, [proto]), .protocolAlreadyServed, "a protocol another peer serves")
        },
        ConformanceCheck("accessory.unavailable", .p("18.3"), "OpenSession on a declared protocol no accessory serves: PROTOCOL_UNAVAILABLE; on another: UNKNOWN_PROTOCOL", needsCarRole: true) { ctx in
            let (phone, _, proto) = try parties(ctx, serve: false)
            try requireCode(try open(phone, proto), .protocolUnavailable, "OpenSession with nobody serving")
            try requireCode(try open(phone, "com.example.conformance.other"), .unknownProtocol, "OpenSession on a protocol the app did not match")
        },
        ConformanceCheck("accessory.session", .p("18.4"), "a session: SessionRequested, SessionOpened; DATA relayed unchanged both ways on the channel; SessionCredit forwarded; CloseSession: the other side CLOSED_BY_APP; DATA then in flight on that channel dropped without an answer (18.4), on a channel never opened NOT_CONNECTED", needsCarRole: true) { ctx in
            let (phone, accessory, proto) = try parties(ctx)
            let channel = try openSession(phone, accessory, proto)
            try phone.sendFrame(.data, channel: channel, payload: [1, 2, 3, 4])
            let up = try accessory.takeData("the phone's 4 bytes on channel \(channel)")
            try require(up.channel == channel && up.payload == [1, 2, 3, 4], "DATA 01 02 03 04 on channel \(channel)", got: "channel \(up.channel): \(hex(up.payload))")
            try accessory.sendFrame(.data, channel: channel, payload: [9, 8])
            let down = try phone.takeData("the accessory's 2 bytes on channel \(channel)")
            try require(down.channel == channel && down.payload == [9, 8], "DATA 09 08 on channel \(channel)", got: "channel \(down.channel): \(hex(down.payload))")
            var credit = HUSessionCredit()
            credit.channel = channel
            credit.bytes = 4
            try accessory.send(.sessionCredit(credit), requestID: 0)
            let forwarded = try phone.take("SessionCredit forwarded") { envelope -> HUSessionCredit? in
                if case .sessionCredit(let credit) = envelope.body { return credit }
                return nil
            }
            try require(forwarded.channel == channel && forwarded.bytes == 4, "SessionCredit{channel \(channel), 4}", got: "\(forwarded)")
            var close = HUCloseSession()
            close.channel = channel
            close.detail = "done"
            try requireCode(try phone.request(.closeSession(close), "CloseSession"), .ok, "CloseSession")
            let closed = try sessionClosed(accessory, "SessionClosed to the accessory")
            try require(closed.channel == channel && closed.reason == .closedByApp && closed.detail == "done", "SessionClosed CLOSED_BY_APP \"done\"", got: "\(closed)")
            // Bytes in flight at close are not errors (18.4): dropped, unanswered.
            try phone.sendFrame(.data, channel: channel, payload: [5])
            let answers = try phone.quietPeriod(ms: 300).filter { if case .result = $0.body { return true } else { return false } }
            try require(answers.isEmpty, "no answer to DATA on a recently closed channel", got: "\(answers.count) Result(s)")
            try phone.sendFrame(.data, channel: channel &+ 100_000, payload: [5])
            try phone.expectError(.notConnected, requestID: 0, after: "DATA on a channel never opened")
        },
        ConformanceCheck("accessory.refused-and-flow-control", .p("18.5"), "a refused session: SessionClosed REFUSED with the reason; DATA over the credit: FLOW_CONTROL, the session closed on both sides", needsCarRole: true) { ctx in
            let (phone, accessory, proto) = try parties(ctx)
            let result = try open(phone, proto)
            try requireCode(result, .ok, "OpenSession")
            var answer = HUAnswerSession()
            answer.channel = result.accessorySession.channel
            answer.accept = false
            answer.reason = "busy"
            try requireCode(try accessory.request(.answerSession(answer), "AnswerSession refuse"), .ok, "AnswerSession refusing")
            let refused = try sessionClosed(phone, "SessionClosed REFUSED")
            try require(refused.reason == .refused && refused.detail == "busy", "SessionClosed REFUSED \"busy\"", got: "\(refused)")
            let channel = try openSession(phone, accessory, proto)
            let opened = phone.received.compactMap { envelope -> HUSessionOpened? in
                if case .sessionOpened(let o) = envelope.body, o.channel == channel { return o }
                return nil
            }.last
            let credit = Int(opened?.initialCredit ?? 65536)
            guard credit + 1 <= Int(ctx.limits.maxPayloadBytes) else { throw CheckSkipped("the initial credit \(credit) does not fit one frame") }
            try phone.sendFrame(.data, channel: channel, payload: [UInt8](repeating: 0x46, count: credit + 1))
            try phone.expectError(.flowControl, requestID: 0, after: "DATA one byte over the credit")
            let toPhone = try sessionClosed(phone, "SessionClosed FLOW_CONTROL to the phone")
            let toAccessory = try sessionClosed(accessory, "SessionClosed FLOW_CONTROL to the accessory")
            try require(toPhone.reason == .flowControl && toAccessory.reason == .flowControl, "FLOW_CONTROL on both sides", got: "\(toPhone.reason), \(toAccessory.reason)")
        },
    ]
}

extension WireConnection {
    /// The next DATA frame; MESSAGE frames on the way stay in the backlog.
    func takeData(_ what: String) throws -> WireFrame {
        let deadline = Self.nowMs() + Double(timeoutMs)
        while true {
            let left = Int((deadline - Self.nowMs()).rounded(.up))
            guard left > 0, let frame = try readFrame(what, timeoutMs: left) else { throw CheckFailure("\(label): no answer within \(timeoutMs) ms (waiting for \(what))") }
            switch frame.kind {
            case FrameKind.data.rawValue: return frame
            case FrameKind.message.rawValue: backlog.append(try decode(frame))
            case FrameKind.ping.rawValue: try sendFrame(.pong, payload: frame.payload)
            default: continue
            }
        }
    }
}
