import XCTest

@testable import headunitd

/// `--print-default-config` prints every key the daemon reads (issue 48):
/// each `DaemonLimits` field of `Protocol/config.proto` appears with its
/// default, so a new limit cannot be added without one.
final class DefaultConfigTests: XCTestCase {
    /// `DaemonLimits`' field names, as JSON spells them (lowerCamelCase).
    static func daemonLimitsFields() throws -> [String] {
        try daemonLimitsProtoNames().map { name in
            let parts = name.split(separator: "_")
            return ([String(parts[0])] + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }).joined()
        }
    }

    /// `DaemonLimits`' field names, as config.proto spells them (snake_case).
    static func daemonLimitsProtoNames() throws -> [String] {
        let proto = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Protocol/config.proto")
        let text = try String(contentsOf: proto, encoding: .utf8)
        guard let start = text.range(of: "message DaemonLimits {") else { throw XCTSkip("no DaemonLimits in config.proto") }
        // The message ends at the first line that is a closing brace (comments hold braces too).
        let lines = text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
        return lines.prefix { $0 != "}" }.compactMap { line -> String? in
            let code = line.split(separator: "/").first.map(String.init) ?? ""
            let words = code.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 4, words[2] == "=", words[3].hasSuffix(";") else { return nil }
            return String(words[1])
        }
    }

    func testEveryLimitIsPrintedWithItsDefault() throws {
        let fields = try Self.daemonLimitsFields()
        XCTAssertGreaterThan(fields.count, 40)
        let json = try DaemonConfig.printJSON(DaemonConfig.defaults())
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let limits = object?["limits"] as? [String: Any] ?? [:]
        for field in fields {
            // A zero would not be printed: every limit has a default other than 0.
            XCTAssertNotNil(limits[field], "--print-default-config omits limits.\(field)")
        }
        XCTAssertEqual(Set(limits.keys), Set(fields))
    }

    /// Every `DaemonLimits` field has one entry in the start-up range table
    /// (PROTOCOL.md section 20.6), and every default lies in its range.
    func testEveryLimitHasARangeAndItsDefaultIsInIt() throws {
        let fields = try Self.daemonLimitsProtoNames()
        let table = DaemonConfig.limitRanges(DaemonConfig.defaults().limits)
        XCTAssertEqual(table.map(\.key).sorted(), fields.sorted(), "one range per DaemonLimits field")
        XCTAssertEqual(Set(table.map(\.key)).count, table.count, "a key twice in the table")
        for entry in table {
            XCTAssertNotEqual(entry.value, 0, "\(entry.key): the default is printed, not 0")
            XCTAssertTrue(entry.range.contains(entry.value), "\(entry.key): default \(entry.value) outside \(entry.range)")
            XCTAssertGreaterThan(entry.range.lowerBound, 0, "\(entry.key): 0 is the default, never a configured value")
        }
        XCTAssertNoThrow(try DaemonConfig.checkLimitRanges(DaemonConfig.defaults().limits))
        let defaults = DaemonConfig.defaults().limits
        XCTAssertNoThrow(try DaemonConfig.checkLimitRanges(type(of: defaults).init()), "absent limits are the defaults")
    }

    /// Each bound refuses one past it and takes the bound itself; the message
    /// names the key, its value and its range. Ranges that depend on another
    /// field follow that field's configured value.
    func testOutOfRangeLimitsAreRefusedByName() throws {
        for entry in DaemonConfig.limitRanges(DaemonConfig.defaults().limits) {
            for (value, valid) in [(entry.range.lowerBound, true), (entry.range.upperBound, true), (entry.range.lowerBound - 1, entry.range.lowerBound == 1), (entry.range.upperBound + 1, false)] {
                var probe = entry
                probe.value = value
                XCTAssertEqual(probe.isValid, valid, "\(entry.key) \(value)")
            }
        }
        var limits = DaemonConfig.defaults().limits
        limits.maxCalls = 1
        limits.audioWindowMs = 200
        limits.audioJitterMs = 200
        limits.maxOutboundBytes = 65_536
        limits.videoViewerBufferBytes = 32_769
        limits.maxTcpFirstFlight = 8
        limits.maxTcpFirstFlightPerSource = 9
        XCTAssertThrowsError(try DaemonConfig.checkLimitRanges(limits)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("limits.max_calls is 1, must be 2 to 16"), text)
            XCTAssertTrue(text.contains("limits.audio_jitter_ms is 200, must be 10 to 199"), text)
            XCTAssertTrue(text.contains("limits.video_viewer_buffer_bytes is 32769, must be 1024 to 32768"), text)
            XCTAssertTrue(text.contains("limits.max_tcp_first_flight_per_source is 9, must be 1 to 8"), text)
            XCTAssertFalse(text.contains("limits.max_outbound_bytes"), text)
        }
        limits.maxCalls = 16
        limits.audioJitterMs = 199
        limits.videoViewerBufferBytes = 32_768
        limits.maxTcpFirstFlightPerSource = 8
        XCTAssertNoThrow(try DaemonConfig.checkLimitRanges(limits))
    }
}
