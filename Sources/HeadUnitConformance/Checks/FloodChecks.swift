import HeadUnitWire

/// PROTOCOL.md §10 Flood control: non-fatal connection errors in a sliding second.
enum FloodChecks {
    static func malformed(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        for _ in 0..<count { bytes += WireConnection.frameBytes(kind: FrameKind.message.rawValue, payload: [0xFF, 0xFF, 0xFF]) }
        return bytes
    }

    static func requireFloodable(_ ctx: CheckContext) throws -> Int {
        let maximum = Int(ctx.limits.maxErrorsPerSecond)
        guard maximum <= 1000 else { throw CheckSkipped("max_errors_per_second is \(maximum); too many to send") }
        return maximum
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("flood.too-many-errors", .p("10"), "max_errors_per_second+1 errors in a second: that many Results, then Goodbye TOO_MANY_ERRORS instead of the last") { ctx in
            let maximum = try requireFloodable(ctx)
            let connection = try ctx.phone()
            try connection.send(malformed(maximum + 1))
            for index in 1...maximum {
                let envelope = try connection.take("Result \(index) of \(maximum) (MALFORMED_PAYLOAD)") { $0 }
                switch envelope.body {
                case .result(let result): try requireCode(result, .malformedPayload, "malformed payload \(index)")
                default: throw CheckFailure(expected: "\(maximum) Results MALFORMED_PAYLOAD before the Goodbye", got: "\(describe(envelope)) as answer \(index)")
                }
            }
            try connection.expectFatal(.tooManyErrors, after: "error \(maximum + 1) within a second")
        },
        ConformanceCheck("flood.sliding-window", .p("10"), "max_errors_per_second errors, a pause over one second, as many again: all answered, connection stays") { ctx in
            let maximum = try requireFloodable(ctx)
            let connection = try ctx.phone()
            for round in 1...2 {
                try connection.send(malformed(maximum))
                for index in 1...maximum {
                    try connection.expectError(.malformedPayload, after: "malformed payload \(index) of round \(round)")
                }
                if round == 1 { sleepMs(1150) }
            }
            try connection.requireAlive("2 x \(maximum) errors more than a second apart")
        },
        ConformanceCheck("flood.refusals-do-not-count", .p("10"), "request refusals (codes 100+) do not count: 2 x max_errors_per_second refused requests, connection stays") { ctx in
            let maximum = try requireFloodable(ctx)
            let connection = try ctx.phone()
            var request = HUTemplateRequest()
            request.appID = "com.example.never-announced"
            request.sceneID = 4242
            request.pop = HUPopTemplate()
            var bytes: [UInt8] = []
            let first = connection.newRequestID()
            for offset in 0..<(2 * maximum) {
                bytes += WireConnection.envelopeBytes(WireConnection.envelope(.templateRequest(request), requestID: first + UInt32(offset)))
                _ = offset > 0 ? connection.newRequestID() : 0
            }
            try connection.send(bytes)
            for offset in 0..<(2 * maximum) {
                let result = try connection.result(for: first + UInt32(offset), "a pop for an app never announced")
                try require(result.code.rawValue >= 100, "a request-level refusal (code 100+)", got: describe(result))
            }
            try connection.requireAlive("\(2 * maximum) request refusals")
        },
    ]
}
