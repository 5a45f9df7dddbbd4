import XCTest

@testable import headunitd

/// `--print-default-config` prints every key the daemon reads (issue 48):
/// each `DaemonLimits` field of `Protocol/config.proto` appears with its
/// default, so a new limit cannot be added without one.
final class DefaultConfigTests: XCTestCase {
    /// `DaemonLimits`' field names, as JSON spells them (lowerCamelCase).
    static func daemonLimitsFields() throws -> [String] {
        let proto = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Protocol/config.proto")
        let text = try String(contentsOf: proto, encoding: .utf8)
        guard let start = text.range(of: "message DaemonLimits {") else { throw XCTSkip("no DaemonLimits in config.proto") }
        // The message ends at the first line that is a closing brace (comments hold braces too).
        let lines = text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
        return lines.prefix { $0 != "}" }.compactMap { line -> String? in
            let code = line.split(separator: "/").first.map(String.init) ?? ""
            let words = code.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 4, words[2] == "=", words[3].hasSuffix(";") else { return nil }
            let parts = words[1].split(separator: "_")
            return ([String(parts[0])] + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }).joined()
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
}
