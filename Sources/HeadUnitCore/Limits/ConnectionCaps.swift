/// How many connections the daemon holds, per transport and in all. Past a
/// cap the new connection is told TOO_MANY_CONNECTIONS and closed at once, so
/// a flood of TCP "phones" can neither exhaust the descriptors the car's own
/// roles need on the Unix socket nor grow the daemon's memory.
public struct ConnectionCaps: Sendable, Equatable {
    public var maxTotal: Int
    public var maxUnix: Int
    public var maxTCP: Int
    public private(set) var unix = 0
    public private(set) var tcp = 0

    /// Defaults: 8 TCP (phones only, one of which carries apps; the rest are
    /// waiting, pairing or resuming) and the rest of 512 for the car's roles.
    public init(maxTotal: Int = 512, maxUnix: Int = 448, maxTCP: Int = 8) {
        self.maxTotal = maxTotal
        self.maxUnix = maxUnix
        self.maxTCP = maxTCP
    }

    public var total: Int { unix + tcp }

    /// Counts a new connection in, or says which cap it would break.
    public mutating func admit(_ transport: Transport) -> String? {
        if total >= maxTotal { return "the daemon holds its maximum of \(maxTotal) connections" }
        switch transport {
        case .unix:
            if unix >= maxUnix { return "the Unix socket holds its maximum of \(maxUnix) connections" }
            unix += 1
        case .tcp:
            if tcp >= maxTCP { return "TCP holds its maximum of \(maxTCP) connections (phones)" }
            tcp += 1
        }
        return nil
    }

    /// An admitted connection closed.
    public mutating func release(_ transport: Transport) {
        switch transport {
        case .unix: unix = max(0, unix - 1)
        case .tcp: tcp = max(0, tcp - 1)
        }
    }
}
