#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the endpoint under test listens: `unix:PATH`, `tls:HOST:PORT` (the
/// protocol's TCP transport: TLS 1.3, PROTOCOL.md section 1) or
/// `tcp:HOST:PORT` (plain TCP, for endpoints that do not speak TLS).
/// (Its own type: the kit must not lean on HeadUnitClient.)
public enum ConformanceEndpoint: Sendable, Equatable, CustomStringConvertible {
    case unix(path: String)
    case tcp(host: String, port: Int)
    case tls(host: String, port: Int)

    /// PROTOCOL.md §1: $XDG_RUNTIME_DIR/headunitd/headunitd.sock, else
    /// /run/headunitd/headunitd.sock as root, else /tmp/headunitd-$UID/headunitd.sock.
    public static var defaultUnix: ConformanceEndpoint {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return .unix(path: runtime + "/headunitd/headunitd.sock")
        }
        if geteuid() == 0 { return .unix(path: "/run/headunitd/headunitd.sock") }
        return .unix(path: "/tmp/headunitd-\(getuid())/headunitd.sock")
    }

    /// Parses `unix:PATH`, `tls:HOST:PORT` or `tcp:HOST:PORT` (`tls::PORT` for 127.0.0.1), or a bare path.
    public init?(parsing text: String) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { return nil }
            self = .unix(path: path)
        } else if text.hasPrefix("tcp:") || text.hasPrefix("tls:") {
            let rest = text.dropFirst(4)
            guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else { return nil }
            let host = String(rest[..<colon])
            self = text.hasPrefix("tls:")
                ? .tls(host: host.isEmpty ? "127.0.0.1" : host, port: port) : .tcp(host: host.isEmpty ? "127.0.0.1" : host, port: port)
        } else if text.hasPrefix("/") || text.hasPrefix(".") {
            self = .unix(path: text)
        } else {
            return nil
        }
    }

    public var isUnix: Bool {
        if case .unix = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return "tcp:\(host):\(port)"
        case .tls(let host, let port): return "tls:\(host):\(port)"
        }
    }
}
