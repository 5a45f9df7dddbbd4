/// A section of the spec a check tests: `§5` of Protocol/PROTOCOL.md or
/// `TEMPLATES §5` of Protocol/TEMPLATES.md.
public struct SpecSection: Sendable, Equatable {
    public enum Document: Sendable { case protocolSpec, templates }
    public var document: Document
    /// "5", "11.7", "2 step 3" is not allowed: numbers and dots only.
    public var number: String

    public static func p(_ number: String) -> SpecSection { SpecSection(document: .protocolSpec, number: number) }
    public static func t(_ number: String) -> SpecSection { SpecSection(document: .templates, number: number) }

    public var label: String {
        switch document {
        case .protocolSpec: return "§\(number)"
        case .templates: return "TEMPLATES §\(number)"
        }
    }

    /// `--section 5` matches §5 and §5.x; `--section T5` (or "TEMPLATES 5") TEMPLATES §5.
    public func matches(_ query: String) -> Bool {
        var text = trimmed(String(query.uppercased().filter { $0 != "§" }))
        var wantTemplates = false
        for prefix in ["TEMPLATES.MD", "TEMPLATES", "T"] where text.hasPrefix(prefix) {
            wantTemplates = true
            text = trimmed(String(text.dropFirst(prefix.count)))
            break
        }
        for prefix in ["PROTOCOL.MD", "PROTOCOL", "P"] where !wantTemplates && text.hasPrefix(prefix) {
            text = trimmed(String(text.dropFirst(prefix.count)))
            break
        }
        guard (document == .templates) == wantTemplates, !text.isEmpty else { return false }
        return number == text || number.hasPrefix(text + ".")
    }
}

/// Which transport a check's rule is about.
public enum TransportNeed: Sendable {
    case any
    /// Rules about TCP only (car roles refused over it): skipped on a Unix endpoint.
    case tcpOnly
}

/// One row of the conformance table: a rule of the spec, checked over the wire.
public struct ConformanceCheck: Sendable {
    /// Stable, dotted: `framing.bad-magic`.
    public var id: String
    public var section: SpecSection
    /// What the endpoint must do, in the spec's words.
    public var title: String
    /// Opens an HMI, cluster or accessory connection (Unix socket only, §1):
    /// skipped on a TCP endpoint unless --hmi-endpoint names the Unix socket.
    public var needsCarRole: Bool
    public var transport: TransportNeed
    /// Takes a long time (heartbeat time-outs): only with --slow, or when the
    /// check decides the announced limits make it quick.
    public var slow: Bool
    public var run: @Sendable (CheckContext) throws -> Void

    public init(
        _ id: String, _ section: SpecSection, _ title: String,
        needsCarRole: Bool = false, transport: TransportNeed = .any, slow: Bool = false,
        run: @escaping @Sendable (CheckContext) throws -> Void
    ) {
        self.id = id
        self.section = section
        self.title = title
        self.needsCarRole = needsCarRole
        self.transport = transport
        self.slow = slow
        self.run = run
    }
}

func trimmed(_ text: String) -> String {
    String(text.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
}
