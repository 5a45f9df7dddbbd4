import Foundation
import Testing

/// docs/CARPLAYKIT.md promises that its tables list every change a port of
/// Apple-style CarPlay code needs. The ports in this folder mark each change
/// they made with a `// DIFF:` comment naming in back quotes the Apple APIs
/// they had to change; this test fails when a mark names one that no row of
/// the document's tables lists, so a port that needs an unlisted change
/// fails here (and a mark without a name fails too).
@Suite("CarPlayKit's difference table lists every change the ports mark")
struct DifferenceTableTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let document = folder.appendingPathComponent("../../docs/CARPLAYKIT.md").standardizedFileURL

    /// (file, line, back-quoted names) of every `// DIFF:` mark in the ports.
    static func marks() throws -> [(file: String, line: Int, names: [String])] {
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("Sample") && $0.hasSuffix(".swift") }
        var found: [(String, Int, [String])] = []
        for file in files.sorted() {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                guard let range = line.range(of: "// DIFF:") else { continue }
                let rest = line[range.upperBound...]
                // Between back quotes: the odd pieces of the text split at them.
                let pieces = rest.split(separator: "`", omittingEmptySubsequences: false)
                let names = pieces.indices.filter { $0 % 2 == 1 && $0 < pieces.count - 1 }.map { String(pieces[$0]) }
                found.append((file, index + 1, names))
            }
        }
        return found
    }

    @Test func everyMarkedChangeIsListedInTheDifferenceTables() throws {
        let rows = try String(contentsOf: Self.document, encoding: .utf8)
            .split(separator: "\n").filter { $0.hasPrefix("|") }.joined(separator: "\n")
        let marks = try Self.marks()
        // Fewer marks is progress (each API made to port unchanged removes one); almost none means the ports are gone.
        #expect(marks.count >= 5, "found only \(marks.count) DIFF marks: are the ports still here?")
        for mark in marks {
            if mark.names.isEmpty {
                Issue.record("\(mark.file):\(mark.line): a DIFF mark must name the Apple API it changes in back quotes")
            }
            for name in mark.names {
                #expect(rows.contains(name), "\(mark.file):\(mark.line): `\(name)` is not in any table of docs/CARPLAYKIT.md")
            }
        }
    }
}
