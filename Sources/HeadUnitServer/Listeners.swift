#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

public enum ListenerError: Error, CustomStringConvertible {
    case alreadyServed(path: String)
    case notASocket(path: String)
    case pathTooLong(path: String)
    case system(String, errno: CInt)

    public var description: String {
        switch self {
        case .alreadyServed(let path): return "another process is already listening on \(path)"
        case .notASocket(let path): return "\(path) exists and is not a socket; refusing to remove it"
        case .pathTooLong(let path): return "Unix socket path is too long: \(path)"
        case .system(let what, let code): return "\(what): \(String(cString: strerror(code)))"
        }
    }
}

/// POSIX helpers for the listeners: the parts NIO does not do for us.
enum SocketFiles {
    /// Makes `path` free for bind: a stale socket file (nobody accepts on it)
    /// is removed; a live one means another daemon runs, so we refuse.
    static func prepareUnixSocketPath(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there
        guard (info.st_mode & S_IFMT) == S_IFSOCK else { throw ListenerError.notASocket(path: path) }
        if try isListening(path) { throw ListenerError.alreadyServed(path: path) }
        if unlink(path) != 0, errno != ENOENT { throw ListenerError.system("removing stale socket \(path)", errno: errno) }
    }

    /// Whether something accepts connections on the Unix socket at `path`.
    static func isListening(_ path: String) throws -> Bool {
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw ListenerError.system("socket()", errno: errno) }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw ListenerError.pathTooLong(path: path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    /// systemd sized the backlog; adopting the fd made NIO call listen(fd, 128).
    static func restoreBacklog(_ fd: CInt) {
        _ = listen(fd, SOMAXCONN)
    }

    static func unlinkSocket(_ path: String) {
        _ = unlink(path)
    }

    /// Runs `body` with a umask that leaves new files 0600, so the socket is
    /// never reachable by others, not even between bind and chmod.
    static func withPrivateUmask<T>(_ body: () throws -> T) rethrows -> T {
        let previous = umask(0o177)
        defer { umask(previous) }
        return try body()
    }

    static func chmodPrivate(_ path: String) {
        _ = chmod(path, 0o600)
    }
}
