import HeadUnitWire

/// PROTOCOL.md §3 Frame kinds: MESSAGE, PING, PONG, DATA.
enum FrameKindChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("kinds.ping-pong-echo", .p("3"), "PINGs of 0, 8 and 64 bytes are answered by PONGs with the same bytes") { ctx in
            let connection = try ctx.phone()
            try connection.pingRoundTrip([], "PONG with an empty payload")
            try connection.pingRoundTrip([0, 0, 0, 0, 0, 0, 0x13, 0x88], "PONG 00 00 00 00 00 00 13 88")
            try connection.pingRoundTrip((0..<64).map { UInt8($0) }, "PONG with the same 64 bytes")
        },
        ConformanceCheck("kinds.empty-message", .p("3"), "a MESSAGE of length 0 is an empty Envelope: UNKNOWN_MESSAGE, request_id 0") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.message, payload: [])
            try connection.expectError(.unknownMessage, requestID: 0, after: "an empty MESSAGE")
            try connection.requireAlive("an empty MESSAGE")
        },
        ConformanceCheck("kinds.pong-unanswered", .p("3"), "an unsolicited PONG needs no answer: nothing comes back") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.pong, payload: [9, 9])
            try connection.pingRoundTrip([0x21], "the PONG of the next PING and nothing before it")
            if let first = connection.backlog.first { throw CheckFailure(expected: "no answer to a PONG", got: describe(first)) }
        },
        ConformanceCheck("kinds.data-from-phone", .p("3"), "a DATA frame from a phone (no session open): NOT_CONNECTED, not fatal") { ctx in
            let connection = try ctx.phone()
            try connection.sendFrame(.data, channel: 7, payload: [1, 2, 3])
            try connection.expectError(.notConnected, after: "a DATA frame on channel 7 from a phone")
            try connection.requireAlive("a refused DATA frame")
        },
        ConformanceCheck("kinds.data-from-accessory", .p("3"), "a DATA frame from an accessory (no session open): NOT_CONNECTED, not fatal", needsCarRole: true) { ctx in
            let connection = try ctx.carRole(.accessory, "accessory")
            try connection.sendFrame(.data, channel: 2, payload: [1])
            try connection.expectError(.notConnected, after: "a DATA frame on channel 2 from an accessory")
            try connection.requireAlive("a refused DATA frame")
        },
        ConformanceCheck("kinds.data-from-hmi-cluster", .p("3"), "a DATA frame from an HMI or a cluster: NOT_FOR_ROLE, not fatal", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            try hmi.sendFrame(.data, channel: 1, payload: [1, 2, 3])
            try hmi.expectError(.notForRole, after: "a DATA frame from an HMI")
            try hmi.requireAlive("a refused DATA frame")
            let cluster = try ctx.carRole(.cluster, "cluster")
            try cluster.sendFrame(.data, channel: 1, payload: [1])
            try cluster.expectError(.notForRole, after: "a DATA frame from a cluster")
            try cluster.requireAlive("a refused DATA frame")
        },
    ]
}
