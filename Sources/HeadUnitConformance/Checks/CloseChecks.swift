import HeadUnitWire

/// PROTOCOL.md §7 Orderly close.
enum CloseChecks {
    static func goodbye(_ reason: String) -> HUEnvelope.OneOf_Body {
        var goodbye = HUGoodbye()
        goodbye.code = .ok
        goodbye.reason = reason
        return .goodbye(goodbye)
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("close.goodbye-not-answered", .p("7"), "a client's Goodbye{OK} is not answered: the endpoint closes its side") { ctx in
            let connection = try ctx.phone()
            try connection.send(goodbye("leaving"), requestID: 0)
            let after = try connection.expectClose("the endpoint to close after the client's Goodbye")
            if let first = after.first { throw CheckFailure(expected: "no answer to Goodbye", got: describe(first)) }
        },
        ConformanceCheck("close.frames-after-goodbye-ignored", .p("7"), "frames after a Goodbye are ignored: a PING right behind it gets no PONG") { ctx in
            let connection = try ctx.phone()
            let bytes = WireConnection.envelopeBytes(WireConnection.envelope(goodbye("leaving"), requestID: 0))
                + WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [0xAF, 0x7E])
                + WireConnection.envelopeBytes(WireConnection.envelope(nil, requestID: 8))
            try connection.send(bytes)
            let frames = try connection.expectCloseFrames("the endpoint to close, ignoring the frames after the Goodbye")
            if let pong = frames.first(where: { $0.kind == FrameKind.pong.rawValue && $0.payload == [0xAF, 0x7E] }) {
                throw CheckFailure(expected: "the PING after Goodbye ignored", got: "PONG \(hex(pong.payload))")
            }
            if let message = frames.first(where: { $0.kind == FrameKind.message.rawValue }) {
                throw CheckFailure(expected: "the request after Goodbye ignored", got: (try? connection.decode(message)).map(describe) ?? "a MESSAGE")
            }
        },
        ConformanceCheck("close.drop-without-goodbye", .p("7"), "a connection that simply drops is cleaned up; the endpoint goes on serving") { ctx in
            let dropped = try ctx.phone("dropped")
            dropped.close()
            let next = try ctx.phone("next")
            try next.requireAlive("another connection dropping")
        },
    ]
}
