import HeadUnitWire

/// What a check gets: the endpoints, the time-out, the limits the endpoint
/// announced, and helpers that open connections it cleans up afterwards
/// (phones first, each with Goodbye and a wait for the close, so the next
/// check's phone is never refused because this one is still there).
public final class CheckContext {
    public let options: ConformanceOptions
    /// The Welcome of the kit's first handshake (phone, 1..1), if it worked.
    public let reference: HUWelcome?
    /// The kit's paired key, for endpoints whose TCP phones must authenticate (§20).
    let identity: KitIdentity
    private var connections: [WireConnection] = []
    private var cleanups: [() -> Void] = []

    init(options: ConformanceOptions, reference: HUWelcome?, identity: KitIdentity) {
        self.options = options
        self.reference = reference
        self.identity = identity
    }

    var timeoutMs: Int { options.timeoutMs }

    /// The limits announced in Welcome (§10), with the spec's defaults where
    /// the endpoint announced 0 or no handshake worked.
    var limits: HULimits {
        var limits = reference?.limits ?? HULimits()
        if limits.maxPayloadBytes == 0 { limits.maxPayloadBytes = 1_048_576 }
        if limits.heartbeatIntervalMs == 0 { limits.heartbeatIntervalMs = 5000 }
        if limits.heartbeatTimeoutMs == 0 { limits.heartbeatTimeoutMs = 15000 }
        if limits.completionTimeoutMs == 0 { limits.completionTimeoutMs = 10000 }
        if limits.maxErrorsPerSecond == 0 { limits.maxErrorsPerSecond = 10 }
        return limits
    }

    /// The daemon's version range from Welcome (§5), [1, 1] when unknown.
    var daemonRange: (min: UInt32, max: UInt32) {
        guard let reference, reference.daemonMinVersion > 0 || reference.daemonMaxVersion > 0 else { return (1, 1) }
        return (reference.daemonMinVersion, reference.daemonMaxVersion)
    }

    /// The Unix socket car roles use: the endpoint itself, or --hmi-endpoint.
    func carEndpoint() throws -> ConformanceEndpoint {
        if options.endpoint.isUnix { return options.endpoint }
        if let hmi = options.hmiEndpoint { return hmi }
        throw CheckSkipped("needs a car role (Unix socket only, §1) on a TCP endpoint; give --hmi-endpoint unix:PATH")
    }

    /// Runs `body` when the check ends, pass or fail (restore vehicle state...).
    func onCleanup(_ body: @escaping () -> Void) { cleanups.append(body) }

    // MARK: - Connections

    /// A raw connection, not yet handshaken.
    func connect(_ endpoint: ConformanceEndpoint? = nil, label: String = "client") throws -> WireConnection {
        let connection = try WireConnection.connect(endpoint ?? options.endpoint, timeoutMs: timeoutMs, label: label)
        connections.append(connection)
        return connection
    }

    static func hello(role: HURole, name: String, min: UInt32 = 1, max: UInt32 = 1) -> HUEnvelope.OneOf_Body {
        var hello = HUHello()
        hello.minVersion = min
        hello.maxVersion = max
        hello.role = role
        hello.name = name
        return .hello(hello)
    }

    /// Hello, then the Welcome that must be the first thing the endpoint sends
    /// (§8: nothing but Welcome or Goodbye before the handshake) with the id echoed (§5).
    func handshake(_ connection: WireConnection, role: HURole, name: String = "conformance", min: UInt32 = 1, max: UInt32 = 1) throws -> HUWelcome {
        let id = connection.newRequestID()
        try connection.send(Self.hello(role: role, name: name, min: min, max: max), requestID: id)
        let envelope = try connection.readEnvelope("Welcome to Hello{\(role), \(min)..\(max)}")
        guard case .welcome(let welcome) = envelope.body else {
            throw CheckFailure(expected: "Welcome to Hello{\(roleName(role)), versions \(min)..\(max)}", got: describe(envelope))
        }
        try require(envelope.requestID == id, "Welcome echoing request_id \(id) (§5)", got: "request_id \(envelope.requestID)")
        if welcome.authRequired && authenticatePhones {
            // §20: a TCP phone joins the car only after Authenticate.
            try identity.authenticate(connection, welcome: welcome, context: self)
        }
        return welcome
    }

    /// Cleared by the §20 checks that drive the authentication themselves.
    var authenticatePhones = true

    func phone(_ label: String = "phone") throws -> WireConnection {
        let connection = try connect(label: label)
        _ = try handshake(connection, role: .phone, name: "conformance \(label)")
        return connection
    }

    /// An HMI (Unix socket). Its first HomeScreen and ScreenUpdate stay in the backlog.
    func hmi(_ label: String = "hmi") throws -> WireConnection {
        let connection = try connect(try carEndpoint(), label: label)
        _ = try handshake(connection, role: .hmi, name: "conformance \(label)")
        return connection
    }

    func carRole(_ role: HURole, _ label: String) throws -> WireConnection {
        let connection = try connect(try carEndpoint(), label: label)
        _ = try handshake(connection, role: role, name: "conformance \(label)")
        return connection
    }

    /// Ends the check: cleanups, then every connection leaves (phones first).
    /// Returns the ScreenUpdate sequence problems seen by HMI connections (§12.3).
    func finish() -> [String] {
        for cleanup in cleanups.reversed() { cleanup() }
        cleanups = []
        var problems: [String] = []
        for connection in connections {
            problems += connection.sequenceProblems.map { "\(connection.label): \($0)" }
        }
        let ordered = connections.filter { !$0.label.hasPrefix("hmi") } + connections.filter { $0.label.hasPrefix("hmi") }
        for connection in ordered { connection.leave() }
        connections = []
        return problems
    }
}

func roleName(_ role: HURole) -> String {
    switch role {
    case .unspecified: return "ROLE_UNSPECIFIED"
    case .phone: return "ROLE_PHONE"
    case .hmi: return "ROLE_HMI"
    case .cluster: return "ROLE_CLUSTER"
    case .accessory: return "ROLE_ACCESSORY"
    case .UNRECOGNIZED(let raw): return "role \(raw)"
    }
}
