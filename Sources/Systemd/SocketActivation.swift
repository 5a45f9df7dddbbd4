import CSystemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Socket activation (sd_listen_fds(3)): the listening sockets systemd passed to us.
public enum SocketActivation {
    /// One fd as systemd handed it over, before we decided what it is.
    public struct InheritedFD: Sendable, Equatable {
        /// The socket unit's FileDescriptorName= (systemd defaults it to the unit name).
        public let name: String
        public let fd: CInt
    }

    /// What an inherited fd turned out to be, checked with sd_is_socket_unix / sd_is_socket_inet.
    public enum SocketKind: Sendable, Equatable {
        /// A listening AF_UNIX stream socket; `path` is empty for abstract or unnamed sockets.
        case unixStream(path: String)
        /// A listening AF_INET or AF_INET6 stream socket.
        case inetStream(port: UInt16)
        /// Anything else: datagram, not listening, FIFO, regular file...
        case other
    }

    /// The fds passed with LISTEN_FDS / LISTEN_FDNAMES (starting at SD_LISTEN_FDS_START = 3).
    /// libsystemd checks LISTEN_PID against our pid and sets FD_CLOEXEC on each fd.
    /// With `unsetEnvironment` (the default) the variables are removed so a child
    /// process we might spawn does not think the fds are meant for it.
    /// Returns an empty array when the daemon was not socket-activated.
    public static func inheritedFDs(unsetEnvironment: Bool = true) throws -> [InheritedFD] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        let count = sd_listen_fds_with_names(unsetEnvironment ? 1 : 0, &names)
        if count < 0 {
            throw SystemdError(function: "sd_listen_fds_with_names", errno: -count)
        }
        defer {
            if let names {
                for i in 0..<Int(count) { free(names[i]) }
                free(names)
            }
        }
        var result: [InheritedFD] = []
        result.reserveCapacity(Int(count))
        for i in 0..<count {
            let name = names?[Int(i)].map { String(cString: $0) } ?? "unknown"
            result.append(InheritedFD(name: name, fd: SD_LISTEN_FDS_START + i))
        }
        return result
    }

    /// What `fd` is. Only listening stream sockets are of any use to a server.
    public static func kind(of fd: CInt) -> SocketKind {
        let stream = CInt(SOCK_STREAM_VALUE)
        if sd_is_socket_unix(fd, stream, 1, nil, 0) > 0 {
            return .unixStream(path: unixPath(of: fd))
        }
        if sd_is_socket_inet(fd, CInt(AF_UNSPEC), stream, 1, 0) > 0 {
            return .inetStream(port: inetPort(of: fd))
        }
        return .other
    }

    /// The file-system path a Unix socket is bound to ("@name" for abstract sockets, "" when unnamed).
    public static func unixPath(of fd: CInt) -> String {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let headerLength = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        guard rc == 0, Int(length) > headerLength else { return "" }
        let pathLength = Int(length) - headerLength
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix(pathLength)
            if bytes.first == 0 {
                // Abstract namespace: the name is every byte after the leading NUL.
                return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self)
            }
            let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
            return String(decoding: bytes[..<end], as: UTF8.self)
        }
    }

    /// The local port of an AF_INET / AF_INET6 socket (0 if unknown).
    public static func inetPort(of fd: CInt) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { return 0 }
        switch CInt(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
        default:
            return 0
        }
    }
}

#if canImport(Glibc)
// Glibc imports SOCK_STREAM as an enum (__socket_type) value.
private let SOCK_STREAM_VALUE = Int32(SOCK_STREAM.rawValue)
#else
private let SOCK_STREAM_VALUE = Int32(SOCK_STREAM)
#endif

/// A libsystemd call failed; libsystemd returns negative errno values.
public struct SystemdError: Error, CustomStringConvertible, Sendable {
    public let function: String
    public let errno: CInt
    public var description: String {
        "\(function): \(String(cString: strerror(errno)))"
    }
}
