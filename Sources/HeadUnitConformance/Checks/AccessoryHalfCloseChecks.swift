import HeadUnitWire
import NIOCore

/// PROTOCOL.md §18.6 half-close: a side that finished writing still reads;
/// the other side gets every byte, then SessionFinished, and may answer; once
/// both finished, SessionClosed{FINISHED} to both. Needs an accessory (a car
/// role on the Unix socket) and a protocol the vehicle declares (Welcome).
enum AccessoryHalfCloseChecks {
    static let protocolsEntitlement = "com.apple.developer.carplay-protocols"

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "accessory.half-close-echo", .p("18.6"),
            "CloseSession{half} ends one direction: the accessory gets every byte then SessionFinished, echoes them and finishes; the phone reads them all, then SessionFinished and SessionClosed{FINISHED}",
            needsCarRole: true
        ) { ctx in
            guard let name = ctx.reference?.vehicle.accessoryProtocols.first else {
                throw CheckSkipped("the vehicle declares no accessory protocols (Welcome.vehicle)")
            }
            let accessory = try ctx.carRole(.accessory, "accessory")
            let served = try accessory.request(.serveProtocols(HUServeProtocols.with { $0.protocols = [name] }), "ServeProtocols{\(name)}")
            if served.code == .protocolAlreadyServed { throw CheckSkipped("another accessory serves \(name)") }
            try expectResult(served, .ok, "ServeProtocols{\(name)}")
            let phone = try ctx.phone()
            let app = HUAppInfo.with {
                $0.appID = "com.example.conformance.accessory"
                $0.displayName = "Conformance Accessory"
                $0.entitlements = [protocolsEntitlement]
                $0.accessoryProtocols = [name]
            }
            let announced = try ctx.announce(phone, [app])
            guard announced.appDecisions.decisions.first?.accepted == true else {
                throw CheckSkipped("the endpoint's entitlement policy refused an automaker app: \(announced.appDecisions.decisions.first?.reason ?? describe(announced))")
            }
            let opened = try phone.request(.openSession(HUOpenSession.with { $0.appID = app.appID; $0.protocol = name }), "OpenSession")
            try expectResult(opened, .ok, "OpenSession")
            let channel = opened.accessorySession.channel
            let requested = try accessory.take("SessionRequested{channel \(channel)}") { envelope -> HUSessionRequested? in
                if case .sessionRequested(let r) = envelope.body, r.channel == channel { return r }
                return nil
            }
            try expectResult(
                try accessory.request(.answerSession(HUAnswerSession.with { $0.channel = channel; $0.accept = true }), "AnswerSession{accept}"),
                .ok, "AnswerSession{accept}")
            let sessionOpened = try phone.take("SessionOpened{channel \(channel)}") { envelope -> HUSessionOpened? in
                if case .sessionOpened(let o) = envelope.body, o.channel == channel { return o }
                return nil
            }
            let message: [UInt8] = [1, 2, 3, 4, 5, 6]
            try require(sessionOpened.initialCredit >= 6 && requested.initialCredit >= 6, "at least 6 bytes of initial credit each way", got: "\(sessionOpened.initialCredit) / \(requested.initialCredit)")

            // The phone writes, then half-closes.
            try phone.sendFrame(.data, channel: channel, payload: [1, 2, 3])
            try phone.sendFrame(.data, channel: channel, payload: [4, 5, 6])
            try expectResult(
                try phone.request(.closeSession(HUCloseSession.with { $0.channel = channel; $0.half = true }), "CloseSession{half}"),
                .ok, "CloseSession{half} from the phone")
            // The accessory: every byte, then SessionFinished.
            let (atAccessory, finished) = try readUntilEvent(accessory, channel: channel, "the phone's bytes, then SessionFinished")
            try require(atAccessory == message, "the 6 bytes, in order, before SessionFinished", got: "\(atAccessory)")
            guard case .sessionFinished = finished.body else {
                throw CheckFailure(expected: "SessionFinished{channel \(channel)}", got: describe(finished))
            }
            // A finished side may not send any more.
            try phone.sendFrame(.data, channel: channel, payload: [7])
            try phone.expectError(.notConnected, after: "DATA after the phone's own half-close")
            // The accessory still may: it echoes, then finishes too.
            try accessory.sendFrame(.data, channel: channel, payload: message)
            try expectResult(
                try accessory.request(.closeSession(HUCloseSession.with { $0.channel = channel; $0.half = true }), "CloseSession{half}"),
                .ok, "CloseSession{half} from the accessory")
            let (atPhone, event) = try readUntilEvent(phone, channel: channel, "the echo, then SessionFinished")
            try require(atPhone == message, "the echoed 6 bytes before SessionFinished", got: "\(atPhone)")
            guard case .sessionFinished = event.body else {
                throw CheckFailure(expected: "SessionFinished{channel \(channel)}", got: describe(event))
            }
            let closed = try phone.take("SessionClosed{FINISHED}") { envelope -> HUSessionClosed? in
                if case .sessionClosed(let c) = envelope.body, c.channel == channel { return c }
                return nil
            }
            try require(closed.reason == .finished, "SessionClosed{FINISHED} once both sides finished", got: "\(closed.reason)")
        },
    ]

    static func expectResult(_ result: HUResult, _ code: HUErrorCode, _ what: String) throws {
        try require(result.code == code, "\(what): Result \(name(code))", got: "Result \(describe(result))")
    }

    /// DATA payloads on `channel` until the first session event about it
    /// (SessionFinished or SessionClosed); other envelopes go to the backlog.
    static func readUntilEvent(_ connection: WireConnection, channel: UInt32, _ what: String) throws -> ([UInt8], HUEnvelope) {
        var bytes: [UInt8] = []
        while true {
            guard let frame = try connection.readFrame(what) else { throw CheckFailure("\(connection.label): connection closed while waiting for \(what)") }
            switch frame.kind {
            case FrameKind.data.rawValue:
                try require(frame.channel == channel, "DATA on channel \(channel)", got: "DATA on channel \(frame.channel)")
                bytes += frame.payload
            case FrameKind.message.rawValue:
                let envelope = try connection.decode(frame)
                switch envelope.body {
                case .sessionFinished(let f) where f.channel == channel: return (bytes, envelope)
                case .sessionClosed(let c) where c.channel == channel: return (bytes, envelope)
                case .goodbye(let goodbye): throw CheckFailure(expected: what, got: "Goodbye \(name(goodbye.code)) \"\(goodbye.reason)\"")
                default: connection.backlog.append(envelope)
                }
            case FrameKind.ping.rawValue:
                try connection.sendFrame(.pong, payload: frame.payload)
            default:
                continue
            }
        }
    }
}
