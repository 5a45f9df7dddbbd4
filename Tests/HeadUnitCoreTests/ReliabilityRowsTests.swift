import Foundation
import Testing

/// RELIABILITY.md's rule (issue 47): every row names what proves it, and what it
/// names exists. This reads the file from the source tree (its one copy, as
/// HeadUnitWireTests reads Protocol/vectors) and checks the last column of every
/// table headed "proved by" or "test".
///
/// The grammar of such a cell, read left to right outside parentheses (text in
/// parentheses is commentary, whatever it holds):
/// - `Suite/test`: a Swift test: a type `Suite` in Tests/ with an `@Test` (or
///   XCTest `test...`) function `test` in its body or an extension's;
/// - `test` (starts lower case): another test of the suite named last;
///   a test may be spelled with its argument labels, `test()` or `test(_:)`;
/// - `Suite` (starts upper case): a whole suite;
/// - `path/to/file` or `file.ext`: a file or directory of the repository;
/// - "quoted text" after a path: a check that file holds (a systemd check's
///   name, say); a trailing "..." leaves the rest of the name out;
/// - `Tool --option`: an option of the executable target `Sources/Tool`;
/// - after the word "vector" or "vectors": `name`, `name2` are test vectors
///   of Protocol/vectors/vectors.json; after "check" or "checks": conformance
///   checks of Sources/HeadUnitConformance;
/// - any other text is prose.
/// A cell names at least one of these, or starts with "not tested" and says why.
@Suite struct ReliabilityRowsTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // HeadUnitCoreTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root

    @Test func everyRowOfReliabilityNamesATestThatExists() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("RELIABILITY.md"), encoding: .utf8)
        let index = try TestIndex(testsDirectory: Self.root.appendingPathComponent("Tests"))
        let report = ReliabilityCheck(root: Self.root, index: index).check(text)
        // A parser that found nothing would pass everything: the file has well over 100 rows.
        #expect(report.rows > 100, "only \(report.rows) rows with a proved-by column were read")
        #expect(report.references > 150, "only \(report.references) references were read")
        for problem in report.problems {
            Issue.record("RELIABILITY.md line \(problem.line): \(problem.message)")
        }
        if !report.notTested.isEmpty {
            print("RELIABILITY.md rows not tested (said so in the row): lines \(report.notTested.map(String.init).joined(separator: ", "))")
        }
    }

    /// The guard itself fails on what it is there to catch.
    @Test func theCheckFindsMissingNamesPathsAndEmptyCells() throws {
        let index = try TestIndex(testsDirectory: Self.root.appendingPathComponent("Tests"))
        let check = ReliabilityCheck(root: Self.root, index: index)
        let text = """
            ## A section

            | input or fault | what the daemon does | lost | proved by |
            |---|---|---|---|
            | a | b | c | `ReliabilityRowsTests/everyRowOfReliabilityNamesATestThatExists`, `theCheckFindsMissingNamesPathsAndEmptyCells` (`NotASuite/inParentheses`) |
            | a | b | c | `NoSuchSuiteAnywhere/someTest` |
            | a | b | c | `ReliabilityRowsTests/noSuchTest` |
            | a | b | c | `scripts/no-such-script.sh` |
            | a | b | c | `Tests/SystemdIntegration/test_systemd_pid1.sh` "a check nobody wrote" |
            | a | b | c | the tests named above |
            | a | b | c | not tested: by construction |
            | a | b | c | `NoSuchTool --flag` |
            | a | b | c | `Goodbye{SLOW_CONSUMER}`; vectors `length-over-max`, `no-such-vector`; the conformance check `no.such-check` |
            | a | b | c |

            | what one peer could do | what stops it | test |
            |---|---|---|
            | a | b | `ReliabilityRowsTests/everyRowOfReliabilityNamesATestThatExists()`, `theCheckFindsMissingNamesPathsAndEmptyCells()` |
            | a | b | `lowerCaseWithoutASuite` |
            | a | b | vectors `length-over-max`, `handshake-length-over-max` (`VectorLiveTests`); the check `framing.oversized-refused-alone` |

            | a | b | c | `ReliabilityRowsTests` |
            | a | b | c | `ReliabilityRowsTests` |

            | a | b | c | `ReliabilityRowsTests` |

            """
        let report = check.check(text)
        #expect(report.rows == 13)
        #expect(report.notTested == [11])
        #expect(report.problems.map(\.line) == [6, 7, 8, 9, 10, 12, 13, 13, 13, 14, 19, 22, 25])
    }
}

/// The Swift types and test functions declared under Tests/.
struct TestIndex {
    /// Every struct, class, enum and actor declared in a test file.
    var types: Set<String> = []
    /// Test functions by the type (or extension) whose body declares them.
    var tests: [String: Set<String>] = [:]

    init(testsDirectory: URL) throws {
        guard let files = FileManager.default.enumerator(at: testsDirectory, includingPropertiesForKeys: nil) else {
            throw CocoaError(.fileReadNoSuchFile)
        }
        for case let url as URL in files where url.pathExtension == "swift" {
            add(try String(contentsOf: url, encoding: .utf8))
        }
    }

    private mutating func add(_ source: String) {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // Bodies are found by indentation: the project's code is formatted, and a
        // type's closing brace sits at its declaration's indentation.
        var open: [(name: String, indent: Int)] = []
        for (number, line) in lines.enumerated() {
            let indent = line.prefix { $0 == " " }.count
            let trimmed = line.dropFirst(indent)
            while let last = open.last, indent <= last.indent, trimmed.hasPrefix("}") {
                open.removeLast()
            }
            if let (kind, name) = Self.typeDeclaration(String(trimmed)) {
                if kind != "extension" { types.insert(name) }
                if trimmed.contains("{") && !trimmed.hasSuffix("}") { open.append((name, indent)) }
                continue
            }
            guard let name = Self.functionName(String(trimmed)) else { continue }
            guard name.hasPrefix("test") || Self.isMarkedTest(lines, functionLine: number) else { continue }
            for type in open { tests[type.name, default: []].insert(name) }
        }
    }

    static let modifiers: Set<String> = ["public", "private", "fileprivate", "internal", "final", "open", "nonisolated"]
    static let typeKinds: Set<String> = ["struct", "class", "enum", "actor", "extension"]

    /// `@Suite(.ownThread) final class Name: XCTestCase {` gives ("class", "Name").
    static func typeDeclaration(_ line: String) -> (String, String)? {
        var rest = Substring(line)
        while true {
            rest = rest.drop { $0 == " " }
            if rest.hasPrefix("@") {
                rest = skipAttribute(rest)
                continue
            }
            let word = rest.prefix { $0.isLetter }
            if modifiers.contains(String(word)) {
                rest = rest.dropFirst(word.count)
                continue
            }
            guard typeKinds.contains(String(word)), rest.dropFirst(word.count).first == " " else { return nil }
            let name = rest.dropFirst(word.count + 1).prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            return name.isEmpty ? nil : (String(word), String(name))
        }
    }

    /// Drops `@Name` or `@Name(...)` with balanced parentheses.
    static func skipAttribute(_ text: Substring) -> Substring {
        var rest = text.dropFirst().drop { $0.isLetter || $0.isNumber || $0 == "_" }
        guard rest.first == "(" else { return rest }
        var depth = 0
        while let character = rest.first {
            rest = rest.dropFirst()
            if character == "(" { depth += 1 }
            if character == ")" { depth -= 1; if depth == 0 { break } }
        }
        return rest
    }

    static func functionName(_ line: String) -> String? {
        guard let range = line.range(of: "func "), !line.hasPrefix("//") else { return nil }
        let before = line[..<range.lowerBound]
        guard before.isEmpty || before.hasSuffix(" ") else { return nil }
        let name = line[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        return name.isEmpty ? nil : String(name)
    }

    /// `@Test` on the function's line or on the attribute lines just above it.
    static func isMarkedTest(_ lines: [String], functionLine: Int) -> Bool {
        if lines[functionLine].contains("@Test") { return true }
        var number = functionLine - 1
        while number >= 0, functionLine - number <= 8 {
            let trimmed = lines[number].trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("//") || trimmed == "}" || trimmed.contains("func ") { return false }
            if trimmed.contains("@Test") { return true }
            number -= 1
        }
        return false
    }
}

/// Reads RELIABILITY.md's tables and checks their proved-by cells (grammar above).
struct ReliabilityCheck {
    struct Problem { var line: Int; var message: String }
    struct Report {
        var rows = 0
        var references = 0
        var notTested: [Int] = []
        var problems: [Problem] = []
    }

    let root: URL
    let index: TestIndex

    func check(_ text: String) -> Report {
        var report = Report()
        var header: [String]?
        var tableLine = 0
        for (offset, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            guard line.hasPrefix("|") else {
                if header != nil && tableLine == number - 1 {
                    report.problems.append(Problem(line: tableLine, message: "a table row alone, with no header (a blank line before it?)"))
                }
                header = nil
                continue
            }
            let cells = Self.cells(String(line))
            let separator = cells.allSatisfy { !$0.isEmpty && $0.allSatisfy { "-: ".contains($0) } }
            guard let columns = header else {
                header = cells
                tableLine = number
                continue
            }
            // Rows cut off from their table by a blank line read as a table of their own, unchecked.
            if number == tableLine + 1 && !separator {
                report.problems.append(Problem(line: tableLine, message: "a table without a header row (a blank line between rows?)"))
            }
            if separator { continue }
            guard let last = columns.last?.lowercased(), last == "proved by" || last == "test" else { continue }
            report.rows += 1
            guard cells.count == columns.count else {
                report.problems.append(Problem(line: number, message: "\(cells.count) cells in a table of \(columns.count) columns"))
                continue
            }
            checkCell(cells[cells.count - 1], line: number, into: &report)
        }
        return report
    }

    /// A row's cells: split at `|` outside code spans, the outer bars dropped.
    static func cells(_ line: String) -> [String] {
        var cells: [String] = []
        var current = ""
        var inCode = false
        var previous: Character = " "
        for character in line.dropFirst() {
            if character == "`" { inCode.toggle() }
            if character == "|" && !inCode && previous != "\\" {
                cells.append(current.trimmingCharacters(in: .whitespaces))
                current = ""
            } else {
                current.append(character)
            }
            previous = character
        }
        return cells
    }

    enum Token: Equatable {
        /// A code span, and the prose outside parentheses just before it.
        case code(String, after: String)
        case quoted(String)
    }

    /// Code spans and quoted text outside parentheses; both are taken whole at any depth,
    /// so a parenthesis inside them does not count.
    static func tokens(_ cell: String) -> [Token] {
        var tokens: [Token] = []
        var depth = 0
        var prose = ""
        var rest = Substring(cell)
        while let character = rest.first {
            rest = rest.dropFirst()
            switch character {
            case "`", "\"":
                let body = rest.prefix { $0 != character }
                rest = rest.dropFirst(body.count + 1)
                guard depth == 0 else { continue }
                tokens.append(character == "`" ? .code(String(body), after: prose) : .quoted(String(body)))
                prose = ""
            case "(": depth += 1
            case ")": depth = max(0, depth - 1)
            default: if depth == 0 { prose.append(character) }
            }
        }
        return tokens
    }

    enum Kind { case any, vector, conformanceCheck }

    /// "vectors `a`, `b`" and "the conformance check `x`": the word before a
    /// list of code spans says what they name.
    static func kind(after prose: String, continuing kind: Kind) -> Kind {
        let lead = prose.trimmingCharacters(in: .whitespaces).lowercased()
        if lead.hasSuffix("vector") || lead.hasSuffix("vectors") { return .vector }
        if lead.hasSuffix("check") || lead.hasSuffix("checks") { return .conformanceCheck }
        return [",", "and", ", and"].contains(lead) ? kind : .any
    }

    private func checkCell(_ cell: String, line: Int, into report: inout Report) {
        var suite: String?
        var path: String?
        var named = 0
        var kind = Kind.any
        func problem(_ message: String) { report.problems.append(Problem(line: line, message: message)) }
        for token in Self.tokens(cell) {
            switch token {
            case .quoted(let text):
                guard let file = path else { continue }  // a quotation in prose
                var name = text
                if name.hasSuffix("...") { name.removeLast(3) }
                name = name.trimmingCharacters(in: .whitespaces)
                if !contents(file).contains(name) { problem("\(file) has no check \"\(text)\"") }
            case .code(let spelled, let prose):
                let code = Self.withoutArgumentLabels(spelled)
                named += 1
                report.references += 1
                path = nil
                kind = Self.kind(after: prose, continuing: kind)
                if kind == .vector {
                    if !contents("Protocol/vectors/vectors.json").contains("\"name\": \"\(code)\"") { problem("no vector `\(code)` in Protocol/vectors/vectors.json") }
                    continue
                }
                if kind == .conformanceCheck {
                    // A check's id is the first argument of `ConformanceCheck(`, on its line or the next.
                    if !sources("Sources/HeadUnitConformance").contains(where: { $0.contains("\"\(code)\", .p(") }) {
                        problem("no conformance check `\(code)` in Sources/HeadUnitConformance")
                    }
                    continue
                }
                let parts = code.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                if parts.count == 2, Self.isIdentifier(parts[0], upper: true), Self.isIdentifier(parts[1], upper: false) {
                    suite = parts[0]
                    checkTest(parts[1], in: parts[0], problem)
                } else if Self.isIdentifier(code, upper: true) {
                    suite = code
                    if !index.types.contains(code) { problem("no suite `\(code)` in Tests/") }
                } else if Self.isIdentifier(code, upper: false) {
                    if let suite { checkTest(code, in: suite, problem) } else { problem("test `\(code)` follows no suite") }
                } else if let space = code.firstIndex(of: " "), code[space...].hasPrefix(" --"),
                    Self.isIdentifier(String(code[..<space]), upper: true)
                {
                    checkOption(tool: String(code[..<space]), option: String(code[space...].dropFirst(3)), problem)
                } else if code.contains("/") || code.contains(".") && !code.contains(" ") && !code.contains("{") {
                    if FileManager.default.fileExists(atPath: root.appendingPathComponent(code).path) {
                        path = code
                    } else {
                        problem("no file `\(code)`")
                    }
                } else {
                    problem("`\(code)` is neither a test, a suite, a path nor a tool's option (commentary goes in parentheses)")
                }
            }
        }
        if cell.lowercased().hasPrefix("not tested") {
            report.notTested.append(line)
        } else if named == 0 {
            problem("names no test, suite, script or file (say \"not tested: why\" if none): \(cell)")
        }
    }

    private func contents(_ path: String) -> String {
        (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? ""
    }

    /// The Swift sources under a directory of the repository.
    private func sources(_ directory: String) -> [String] {
        guard let files = FileManager.default.enumerator(at: root.appendingPathComponent(directory), includingPropertiesForKeys: nil) else { return [] }
        return files.compactMap { ($0 as? URL).flatMap { $0.pathExtension == "swift" ? try? String(contentsOf: $0, encoding: .utf8) : nil } }
    }

    private func checkTest(_ test: String, in suite: String, _ problem: (String) -> Void) {
        if !index.types.contains(suite) {
            problem("no suite `\(suite)` in Tests/ (for `\(test)`)")
        } else if !(index.tests[suite]?.contains(test) ?? false) {
            problem("no test `\(test)` in `\(suite)`")
        }
    }

    private func checkOption(tool: String, option: String, _ problem: (String) -> Void) {
        let directory = root.appendingPathComponent("Sources").appendingPathComponent(tool)
        guard FileManager.default.fileExists(atPath: directory.path) else {
            return problem("no executable target `Sources/\(tool)`")
        }
        if !sources("Sources/\(tool)").contains(where: { $0.contains("customLong(\"\(option)\")") }) {
            problem("`\(tool)` has no option `--\(option)`")
        }
    }

    /// `test(_:)` and `Suite/test()` name `test`, as Swift Testing shows them.
    static func withoutArgumentLabels(_ code: String) -> String {
        guard code.hasSuffix(")"), let open = code.firstIndex(of: "(") else { return code }
        let labels = code[code.index(after: open)..<code.index(before: code.endIndex)]
        guard labels.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }) else { return code }
        return String(code[..<open])
    }

    /// A Swift identifier starting upper case (a type) or lower case (a function).
    static func isIdentifier(_ text: String, upper: Bool) -> Bool {
        guard let first = text.first, first.isLetter, first.isUppercase == upper else { return false }
        return text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
    }
}
