import HeadUnitWire

public struct ConformanceOptions: Sendable {
    public var endpoint: ConformanceEndpoint
    /// The Unix socket for car roles when `endpoint` is TCP (the HMI that
    /// launches the TCP phone's apps).
    public var hmiEndpoint: ConformanceEndpoint?
    /// How long to wait for any one answer.
    public var timeoutMs: Int
    /// Include checks that wait for long time-outs.
    public var slow: Bool

    public init(endpoint: ConformanceEndpoint = .defaultUnix, hmiEndpoint: ConformanceEndpoint? = nil, timeoutMs: Int = 2000, slow: Bool = false) {
        self.endpoint = endpoint
        self.hmiEndpoint = hmiEndpoint
        self.timeoutMs = timeoutMs
        self.slow = slow
    }
}

public struct CheckResult: Sendable {
    public var check: ConformanceCheck
    public var outcome: CheckOutcome
    public var milliseconds: Int
}

public struct ConformanceReport: Sendable {
    public var endpoint: ConformanceEndpoint
    public var results: [CheckResult] = []
    /// Set when the endpoint could not be reached at all (no check ran).
    public var unreachable: String?
    public var milliseconds = 0

    public var passed: Int { results.filter { $0.outcome == .passed }.count }
    public var failed: [CheckResult] { results.filter { if case .failed = $0.outcome { return true } else { return false } } }
    public var skipped: Int { results.filter { if case .skipped = $0.outcome { return true } else { return false } }.count }
    public var succeeded: Bool { unreachable == nil && failed.isEmpty }

    public var summary: String {
        if let unreachable { return "conformance: could not reach \(endpoint): \(unreachable)" }
        return "conformance: \(results.count) checks against \(endpoint): \(passed) passed, \(failed.count) failed, \(skipped) skipped in \(String(format1(Double(milliseconds) / 1000))) s"
    }
}

func format1(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

/// The whole table, and the runner.
public enum ConformanceKit {
    /// Every check, grouped by spec section, in the order they run.
    public static var allChecks: [ConformanceCheck] {
        FramingChecks.all + FrameKindChecks.all + EnvelopeChecks.all + HandshakeChecks.all
            + HeartbeatChecks.all + CloseChecks.all + RoleChecks.all + FloodChecks.all
            + PhoneSessionChecks.all + HMIChecks.all + TemplateChecks.all
            + LimitChecks.all + AccessoryChecks.all + NavigationChecks.all + AuthChecks.all + ResumptionChecks.all
            + AccessoryHalfCloseChecks.all + AccessoryOrderChecks.all + NavigationSectionChecks.all + CatchUpChecks.all
            + CallChecks.all + RemoteCommandChecks.all + AudioStreamChecks.all + VideoChecks.all + AssistantChecks.all
    }

    /// Checks whose section matches one of `sections` (`5`, `11.7`, `T5`) and
    /// whose id, title or section contains `filter` (case-insensitive).
    public static func select(_ checks: [ConformanceCheck] = allChecks, sections: [String] = [], filter: String? = nil) -> [ConformanceCheck] {
        checks.filter { check in
            let sectionOK = sections.isEmpty || sections.contains { check.section.matches($0) }
            guard let filter, !filter.isEmpty else { return sectionOK }
            let needle = filter.lowercased()
            let hay = (check.id + " " + check.title + " " + check.section.label).lowercased()
            // firstRange (stdlib), not contains: with Foundation visible, contains(String)
            // binds to Foundation's and links all of it (and ICU) into headunitctl.
            return sectionOK && hay.firstRange(of: needle) != nil
        }
    }

    /// One line per check: `PASS  §5           handshake.version-1-1  title[ -- reason]`.
    public static func line(_ check: ConformanceCheck, _ outcome: CheckOutcome?) -> String {
        let status = outcome?.label ?? (check.needsCarRole ? "car " : "    ")
        var text = "\(status)  \(pad(check.section.label, 14)) \(pad(check.id, 46)) \(check.title)"
        switch outcome {
        case .failed(let reason)?, .skipped(let reason)?: text += " -- " + reason
        default: break
        }
        return text
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// Runs `checks` one after the other against `options.endpoint`, calling
    /// `output` with each line as it completes and the summary at the end.
    public static func run(_ options: ConformanceOptions, checks: [ConformanceCheck] = allChecks, output: (String) -> Void = { _ in }) -> ConformanceReport {
        var report = ConformanceReport(endpoint: options.endpoint)
        let start = WireConnection.nowMs()
        // Reach the endpoint once and learn its limits; a broken handshake is
        // left for the §5 checks to report.
        let reference: HUWelcome?
        let identity = KitIdentity()
        defer { identity.unpair(options: options) }
        do {
            let probe = try WireConnection.connect(options.endpoint, timeoutMs: options.timeoutMs, label: "probe")
            let context = CheckContext(options: options, reference: nil, identity: identity)
            context.authenticatePhones = false
            reference = try? context.handshake(probe, role: .phone, name: "conformance probe")
            probe.leave()
            // The kit's phone pairs through an HMI (§20.2), which needs the
            // Unix socket: without one every phone check would end in
            // AUTH_REQUIRED. Say so once instead of failing the whole table.
            if reference?.authRequired == true && !options.endpoint.isUnix && options.hmiEndpoint == nil {
                report.unreachable =
                    "its phones on TCP must pair and authenticate (PROTOCOL.md §20); the kit pairs through an HMI: give --hmi-endpoint unix:PATH (the same daemon's Unix socket), or run the daemon with \"allowUnpairedTcp\": true (a test bench)"
                output(report.summary)
                return report
            }
        } catch {
            report.unreachable = "\(error)"
            output(report.summary)
            return report
        }
        for check in checks {
            let began = WireConnection.nowMs()
            let outcome = runOne(check, options: options, reference: reference, identity: identity)
            let result = CheckResult(check: check, outcome: outcome, milliseconds: Int(WireConnection.nowMs() - began))
            report.results.append(result)
            output(line(check, outcome))
        }
        report.milliseconds = Int(WireConnection.nowMs() - start)
        output(report.summary)
        return report
    }

    static func runOne(_ check: ConformanceCheck, options: ConformanceOptions, reference: HUWelcome?, identity: KitIdentity) -> CheckOutcome {
        if check.slow && !options.slow {
            return .skipped("slow (waits for a time-out); include it with --slow")
        }
        if check.transport == .tcpOnly && options.endpoint.isUnix {
            return .skipped("the rule is about TCP; run against a tls: (or tcp:) endpoint")
        }
        if check.needsCarRole && !options.endpoint.isUnix && options.hmiEndpoint == nil {
            return .skipped("needs a car role (Unix socket only, §1) on a TCP endpoint; give --hmi-endpoint unix:PATH")
        }
        let context = CheckContext(options: options, reference: reference, identity: identity)
        var outcome: CheckOutcome
        do {
            try check.run(context)
            outcome = .passed
        } catch let skipped as CheckSkipped {
            outcome = .skipped(skipped.description)
        } catch {
            outcome = .failed("\(error)")
        }
        let problems = context.finish()
        if outcome == .passed, !problems.isEmpty {
            outcome = .failed("ScreenUpdate.sequence: a diff or spinner update carries the previous number + 1, a full a higher one (§12.3): " + problems.joined(separator: "; "))
        }
        return outcome
    }
}
