#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the daemon listens.
public enum HeadUnitEndpoint: Sendable, Equatable, CustomStringConvertible {
    case unix(path: String)
    /// TCP carries phones only (wireless CarPlay); car roles are refused over it.
    case tcp(host: String, port: Int)

    /// The daemon's default Unix socket: $XDG_RUNTIME_DIR/headunitd/headunitd.sock,
    /// else /run/headunitd/headunitd.sock as root, else /tmp/headunitd-$UID/headunitd.sock.
    public static var defaultUnixSocketPath: String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return runtime + "/headunitd/headunitd.sock"
        }
        if geteuid() == 0 { return "/run/headunitd/headunitd.sock" }
        return "/tmp/headunitd-\(getuid())/headunitd.sock"
    }

    public static var defaultTCPPort: Int { 7420 }

    public static var `default`: HeadUnitEndpoint { .unix(path: defaultUnixSocketPath) }

    /// Parses "HOST:PORT" (or ":PORT" for 127.0.0.1).
    public static func tcp(_ hostPort: String) -> HeadUnitEndpoint? {
        guard let colon = hostPort.lastIndex(of: ":"), let port = Int(hostPort[hostPort.index(after: colon)...]) else { return nil }
        let host = String(hostPort[..<colon])
        return .tcp(host: host.isEmpty ? "127.0.0.1" : host, port: port)
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return "tcp:\(host):\(port)"
        }
    }
}
