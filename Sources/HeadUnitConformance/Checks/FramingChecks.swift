import HeadUnitWire

/// PROTOCOL.md §2 Framing: the 12-byte header and the validation order.
enum FramingChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("framing.worked-example", .p("15"), "the 38-byte Hello of the worked example gets Welcome for request 1") { ctx in
            let connection = try ctx.connect()
            try connection.send([
                0x48, 0x55, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1A,
                0x08, 0x01, 0x12, 0x16, 0x08, 0x01, 0x10, 0x01, 0x18, 0x01,
                0x22, 0x0E, 0x41, 0x6C, 0x69, 0x63, 0x65, 0x27, 0x73, 0x20, 0x69, 0x50, 0x68, 0x6F, 0x6E, 0x65,
            ])
            let envelope = try connection.readEnvelope("Welcome")
            guard case .welcome(let welcome) = envelope.body else { throw CheckFailure(expected: "Welcome", got: describe(envelope)) }
            try require(envelope.requestID == 1, "request_id 1 echoed", got: "request_id \(envelope.requestID)")
            try require(welcome.version == 1, "Welcome.version 1", got: "\(welcome.version)")
        },
        ConformanceCheck("framing.bad-magic-first", .p("2"), "bytes not starting with \"HU\" before Hello: Goodbye BAD_MAGIC, closed (step 2 before 5)") { ctx in
            let connection = try ctx.connect()
            try connection.send(Array("GET / HTTP/1.1\r\nHost: car\r\n\r\n".utf8))
            try connection.expectFatal(.badMagic, after: "an HTTP request instead of a frame")
        },
        ConformanceCheck("framing.bad-magic-established", .p("2"), "a header with bad magic after the handshake: Goodbye BAD_MAGIC, closed") { ctx in
            let connection = try ctx.phone()
            var frame = WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [1, 2])
            frame[0] = 0x58  // "XU"
            try connection.send(frame)
            try connection.expectFatal(.badMagic, after: "a PING with magic \"XU\"")
        },
        ConformanceCheck("framing.too-large-header-only", .p("2"), "a header announcing 4 x max_payload_bytes + 1 gets FRAME_TOO_LARGE before any payload is sent") { ctx in
            let connection = try ctx.phone()
            let length = UInt32(clamping: 4 * UInt64(ctx.limits.maxPayloadBytes) + 1)
            try connection.send(WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: [], length: length))
            try connection.expectFatal(.frameTooLarge, after: "a header with length \(length) and no payload (max \(ctx.limits.maxPayloadBytes))")
        },
        ConformanceCheck("framing.oversized-refused-alone", .p("2"), "a MESSAGE of max_payload_bytes + 1 after the handshake: skipped, Result MESSAGE_TOO_LARGE on its request id, and the connection goes on") { ctx in
            let maximum = Int(ctx.limits.maxPayloadBytes)
            guard maximum <= 16 << 20 else { throw CheckSkipped("max_payload_bytes \(maximum) is over 16 MiB; not sending that much") }
            let connection = try ctx.phone()
            // Envelope field 1 (request_id 88) first, then bytes nobody reads.
            let payload: [UInt8] = [0x08, 88] + [UInt8](repeating: 0xFF, count: maximum - 1)
            try connection.send(WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: payload))
            let result = try connection.result(for: 88, "a MESSAGE of \(maximum + 1) bytes", timeoutMs: max(ctx.timeoutMs, 5000))
            try requireCode(result, .messageTooLarge, "a MESSAGE one byte over max_payload_bytes")
            try require(result.limit == "max_payload_bytes", "limit max_payload_bytes", got: result.limit)
            try connection.send(WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: helloPayload(requestID: 89)))
            try requireCode(try connection.result(for: 89, "a second Hello after the oversized frame"), .alreadyHandshaken, "the frame after the oversized one")
        },
        ConformanceCheck("framing.too-large-before-hello", .p("2"), "length over the maximum as the first frame: FRAME_TOO_LARGE (step 3 before step 5)") { ctx in
            let connection = try ctx.connect()
            let length = UInt32(clamping: UInt64(ctx.limits.maxPayloadBytes) + 1)
            try connection.send(WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: [], length: length))
            try connection.expectFatal(.frameTooLarge, after: "a first header with length \(length)")
        },
        ConformanceCheck("framing.exact-maximum", .p("2"), "a payload of exactly max_payload_bytes is accepted (answered, not FRAME_TOO_LARGE)") { ctx in
            let maximum = Int(ctx.limits.maxPayloadBytes)
            guard maximum <= 16 << 20 else { throw CheckSkipped("max_payload_bytes \(maximum) is over 16 MiB; not sending that much") }
            let connection = try ctx.phone()
            guard let payload = helloEnvelope(requestID: 77, payloadSize: maximum) else {
                throw CheckSkipped("cannot build an Envelope of exactly \(maximum) bytes")
            }
            try connection.send(WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: payload))
            let result = try connection.result(for: 77, "a second Hello of exactly \(maximum) bytes", timeoutMs: max(ctx.timeoutMs, 5000))
            try requireCode(result, .alreadyHandshaken, "a second Hello of exactly max_payload_bytes")
        },
        ConformanceCheck("framing.several-frames-one-write", .p("2"), "Hello and two PINGs in one write: Welcome, then both PONGs in order") { ctx in
            let connection = try ctx.connect()
            let bytes = WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: helloPayload(requestID: 1))
                + WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [0xA1])
                + WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [0xB2, 0xB3])
            try connection.send(bytes)
            var got: [String] = []
            while got.count < 3 {
                guard let frame = try connection.readFrame("Welcome, PONG a1, PONG b2 b3") else {
                    throw CheckFailure(expected: "Welcome, PONG a1, PONG b2 b3", got: got.joined(separator: ", ") + ", then the connection closed")
                }
                switch frame.kind {
                case FrameKind.message.rawValue:
                    let envelope = try connection.decode(frame)
                    if case .welcome = envelope.body { got.append("Welcome") } else { got.append(describe(envelope)) }
                case FrameKind.pong.rawValue: got.append("PONG " + hex(frame.payload))
                case FrameKind.ping.rawValue: try connection.sendFrame(.pong, payload: frame.payload)
                default: got.append("kind \(frame.kind)")
                }
            }
            try require(got == ["Welcome", "PONG a1", "PONG b2 b3"], "Welcome, PONG a1, PONG b2 b3", got: got.joined(separator: ", "))
        },
        ConformanceCheck("framing.header-in-pieces", .p("2"), "a Hello whose header and payload arrive in several writes gets Welcome") { ctx in
            let connection = try ctx.connect()
            let frame = WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: helloPayload(requestID: 4))
            for range in [0..<1, 1..<3, 3..<8, 8..<12, 12..<15, 15..<frame.count] {
                try connection.send(Array(frame[range]))
                sleepMs(15)
            }
            let envelope = try connection.readEnvelope("Welcome")
            guard case .welcome = envelope.body else { throw CheckFailure(expected: "Welcome", got: describe(envelope)) }
            try require(envelope.requestID == 4, "request_id 4 echoed", got: "request_id \(envelope.requestID)")
        },
        ConformanceCheck("framing.truncated-header", .p("2"), "a stream ending inside a header is closed without an answer; the endpoint still serves") { ctx in
            let connection = try ctx.phone()
            try connection.send([0x48, 0x55, 0x02, 0x00, 0x00])
            connection.shutdownWrite()
            try connection.expectSilentClose("5 bytes of a header, then end of stream")
            _ = try ctx.phone("phone-after")
        },
        ConformanceCheck("framing.truncated-payload", .p("2"), "a stream ending inside a payload is closed without an answer; the endpoint still serves") { ctx in
            let connection = try ctx.phone()
            let frame = WireConnection.frameBytes(kind: FrameKind.ping.rawValue, payload: [1, 2, 3, 4, 5, 6, 7, 8])
            try connection.send(Array(frame.prefix(15)))
            connection.shutdownWrite()
            try connection.expectSilentClose("a PING cut 5 bytes short, then end of stream")
            _ = try ctx.phone("phone-after")
        },
        ConformanceCheck("framing.unknown-kind", .p("2"), "unknown kinds 0x00 and 0x7F: Result UNKNOWN_FRAME_KIND (request_id 0), frame skipped, connection goes on") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(kind: 0x7F, payload: [1, 2, 3])
            try connection.expectError(.unknownFrameKind, requestID: 0, after: "a frame of kind 0x7f")
            try connection.sendFrame(kind: 0x00, payload: [])
            try connection.expectError(.unknownFrameKind, requestID: 0, after: "a frame of kind 0x00")
            try connection.requireAlive("unknown frame kinds")
        },
        ConformanceCheck("framing.reserved-flags-message", .p("2"), "a MESSAGE with flags 0x01 gets RESERVED_FLAGS and is skipped (its request is not answered)") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(kind: FrameKind.message.rawValue, flags: 0x01, payload: helloPayload(requestID: 9))
            try connection.expectError(.reservedFlags, after: "a MESSAGE with flags 0x01")
            try connection.requireAlive("a frame with flags")
            if let answered = connection.backlog.first(where: { $0.requestID == 9 }) {
                throw CheckFailure(expected: "the flagged frame skipped", got: "its request answered: \(describe(answered))")
            }
        },
        ConformanceCheck("framing.reserved-flags-ping", .p("2"), "a PING with flags 0x80 gets RESERVED_FLAGS and no PONG") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.ping, flags: 0x80, payload: [0xEE])
            try connection.expectError(.reservedFlags, after: "a PING with flags 0x80")
            try connection.pingRoundTrip([0x11], "only the PONG of the next, clean PING (the flagged one skipped)")
        },
        ConformanceCheck("framing.channel-on-non-data", .p("2"), "channel not 0 on PING and MESSAGE frames: RESERVED_FLAGS, skipped") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.ping, channel: 5, payload: [0xEE])
            try connection.expectError(.reservedFlags, after: "a PING on channel 5")
            try connection.sendFrame(kind: FrameKind.message.rawValue, channel: 1, payload: helloPayload(requestID: 9))
            try connection.expectError(.reservedFlags, after: "a MESSAGE on channel 1")
            try connection.pingRoundTrip([0x12], "only the PONG of the next, clean PING")
        },
        ConformanceCheck("framing.order-kind-before-flags", .p("2"), "unknown kind with flags set: UNKNOWN_FRAME_KIND (step 6 decides before step 7)") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(kind: 0x7E, flags: 0x01, channel: 3, payload: [1])
            try connection.expectError(.unknownFrameKind, after: "kind 0x7e with flags 0x01 and channel 3")
        },
        ConformanceCheck("framing.order-flags-before-payload", .p("2"), "a 65-byte PING with flags set: RESERVED_FLAGS (step 7 decides before step 9)") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.ping, flags: 0x02, payload: [UInt8](repeating: 1, count: 65))
            try connection.expectError(.reservedFlags, after: "a 65-byte PING with flags 0x02")
        },
        ConformanceCheck("framing.malformed-payload", .p("2"), "a MESSAGE payload that is not an Envelope: MALFORMED_PAYLOAD (request_id 0), connection goes on") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.message, payload: [0xFF, 0xFF, 0xFF])
            try connection.expectError(.malformedPayload, requestID: 0, after: "an unterminated varint as payload")
            try connection.requireAlive("a malformed payload")
        },
    ]
}
