import HeadUnitWire

/// PROTOCOL.md §4 (envelope, requests and answers) and §14 (unknown fields and bodies).
enum EnvelopeChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("envelope.pipelined-in-order", .p("4"), "three requests in one write are answered in order, each with its request_id") { ctx in
            let connection = try ctx.phone()
            var launch = HULaunchApp()
            launch.appID = "com.example.conformance"
            let bytes = WireConnection.envelopeBytes(WireConnection.envelope(.launchApp(launch), requestID: 5))
                + WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: helloPayload(requestID: 6))
                + WireConnection.envelopeBytes(WireConnection.envelope(nil, requestID: 7))
            try connection.send(bytes)
            var got: [String] = []
            for _ in 0..<3 {
                let (id, result) = try connection.anyResult("the answers to requests 5, 6, 7")
                got.append("\(id):\(name(result.code))")
            }
            let expected = ["5:\(name(.notForRole))", "6:\(name(.alreadyHandshaken))", "7:\(name(.unknownMessage))"]
            try require(got == expected, expected.joined(separator: ", "), got: got.joined(separator: ", "))
        },
        ConformanceCheck("envelope.request-id-zero", .p("4"), "a request with request_id 0 is still processed and answered with request_id 0") { ctx in
            let connection = try ctx.phone()
            try connection.send(CheckContext.hello(role: .phone, name: "again"), requestID: 0)
            try connection.expectError(.alreadyHandshaken, requestID: 0, after: "a second Hello with request_id 0")
        },
        ConformanceCheck("envelope.empty-body", .p("4"), "an Envelope with request_id 7 and no body: UNKNOWN_MESSAGE echoing request_id 7") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.message, payload: [0x08, 0x07])
            try connection.expectError(.unknownMessage, requestID: 7, after: "Envelope{request_id 7}")
            try connection.requireAlive("an empty body")
        },
        ConformanceCheck("envelope.invalid-utf8", .p("9"), "a string that is not UTF-8 makes the payload MALFORMED_PAYLOAD (not fatal)") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.message, payload: helloPayload(requestID: 5, name: [0xFF, 0xFE]))
            try connection.expectError(.malformedPayload, after: "a second Hello whose name is the bytes ff fe")
            try connection.requireAlive("a malformed payload")
        },
        ConformanceCheck("envelope.unknown-body", .p("14"), "an Envelope body with an unknown field number (99): UNKNOWN_MESSAGE with its request_id, connection goes on") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.message, payload: [0x08, 0x09] + field(99, [0x01, 0x02]))
            try connection.expectError(.unknownMessage, requestID: 9, after: "Envelope{request_id 9, field 99}")
            try connection.requireAlive("an unknown body")
        },
        ConformanceCheck("envelope.unknown-field-ignored", .p("14"), "unknown fields inside a known message are ignored: a Hello with field 15 gets Welcome") { ctx in
            let connection = try ctx.connect()
            try connection.sendFrame(.message, payload: helloPayload(requestID: 3, extra: [0x78, 0x01] + field(16, [0x41])))
            let envelope = try connection.readEnvelope("Welcome")
            guard case .welcome = envelope.body else { throw CheckFailure(expected: "Welcome despite unknown Hello fields 15 and 16", got: describe(envelope)) }
        },
    ]
}
