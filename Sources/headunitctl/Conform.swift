import ArgumentParser
import HeadUnitConformance

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `headunitctl conform`: the black-box conformance kit (docs/CONFORMANCE.md).
struct Conform: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check any endpoint against Protocol/PROTOCOL.md and TEMPLATES.md, over the wire only.",
        discussion: """
            Prints one line per check (PASS/FAIL/SKIP, spec section, id, rule; expected vs got on failure) and a summary; \
            exits 1 when a check fails, 2 when the endpoint cannot be reached. Checks that need a car role (HMI, cluster, \
            accessory: Unix socket only) are skipped on a TCP endpoint unless --hmi-endpoint names the Unix socket.
            """
    )

    @Option(help: "The endpoint under test: unix:PATH, tls:HOST:PORT (headunitd's TCP: TLS 1.3) or tcp:HOST:PORT (plain TCP) (default: unix:\(defaultPath)).")
    var endpoint: String?

    @Option(help: "With a tls: or tcp: endpoint, the Unix socket for the car roles (the HMI that launches the TCP phone's apps).")
    var hmiEndpoint: String?

    @Option(name: .customLong("section"), help: "Run only checks of this section: 5, 11.7, T5 (TEMPLATES.md §5). Repeatable.")
    var sections: [String] = []

    @Option(help: "Run only checks whose id, title or section contains this text.")
    var filter: String?

    @Option(help: "How long to wait for any one answer, in ms.")
    var timeoutMs: Int = 2000

    @Flag(help: "Include checks that wait for long time-outs (handshake time-out, heartbeat over 20 s).")
    var slow = false

    @Flag(help: "List the checks (section, id, rule) without running them.")
    var list = false

    static var defaultPath: String {
        if case .unix(let path) = ConformanceEndpoint.defaultUnix { return path }
        return ""
    }

    func validate() throws {
        if let endpoint, ConformanceEndpoint(parsing: endpoint) == nil {
            throw ValidationError("--endpoint wants unix:PATH, tls:HOST:PORT or tcp:HOST:PORT, got '\(endpoint)'")
        }
        if let hmiEndpoint {
            guard let parsed = ConformanceEndpoint(parsing: hmiEndpoint), parsed.isUnix else {
                throw ValidationError("--hmi-endpoint wants unix:PATH (car roles use the Unix socket only), got '\(hmiEndpoint)'")
            }
        }
        if timeoutMs < 50 { throw ValidationError("--timeout-ms must be at least 50") }
    }

    func run() throws {
        let checks = ConformanceKit.select(sections: sections, filter: filter)
        if checks.isEmpty { throw ValidationError("no check matches --section \(sections) --filter \(filter ?? "")") }
        if list {
            for check in checks { print(ConformanceKit.line(check, nil)) }
            print("\(checks.count) checks")
            return
        }
        var options = ConformanceOptions(endpoint: endpoint.flatMap(ConformanceEndpoint.init(parsing:)) ?? .defaultUnix, timeoutMs: timeoutMs, slow: slow)
        options.hmiEndpoint = hmiEndpoint.flatMap(ConformanceEndpoint.init(parsing:))
        let report = ConformanceKit.run(options, checks: checks) { line in
            print(line)
            flushOutput()
        }
        if report.unreachable != nil { throw ExitCode(2) }
        if !report.succeeded { throw ExitCode(1) }
    }
}
