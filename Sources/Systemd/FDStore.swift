import CSystemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// systemd's file-descriptor store (sd_pid_notify_with_fds(3), FDSTORE=1):
/// descriptors the service manager keeps for the service while it restarts
/// and hands back in LISTEN_FDS, named by FDNAME= (LISTEN_FDNAMES).
/// The unit must allow it with FileDescriptorStoreMax=.
public enum FDStore {
    /// Whether the service manager told us it keeps descriptors for us: $FDSTORE
    /// (the unit's FileDescriptorStoreMax=; systemd sets it from version 254,
    /// headunitd.service sets it itself for older ones) is a number above 0,
    /// and there is a NOTIFY_SOCKET to send them on.
    public static var capacity: Int {
        guard getenv("NOTIFY_SOCKET") != nil, let raw = getenv("FDSTORE"), let value = Int(String(cString: raw)) else { return 0 }
        return max(value, 0)
    }

    /// Stores `fd` (a duplicate; ours may be closed afterwards) under `name`.
    /// A name may hold several descriptors; systemd refuses names with ':' or
    /// control characters, and any beyond FileDescriptorStoreMax=.
    @discardableResult
    public static func store(_ fd: CInt, name: String) -> Bool {
        var descriptor = fd
        return sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=\(name)", &descriptor, 1) > 0
    }

    /// Drops every stored descriptor named `name` (systemd closes its copies).
    @discardableResult
    public static func remove(name: String) -> Bool {
        sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=\(name)") > 0
    }

    /// A memory file (memfd, close-on-exec) holding `bytes`: how state travels
    /// through the store (a memfd lives as long as a descriptor to it).
    public static func memoryFile(name: String, bytes: [UInt8]) throws -> CInt {
        let fd = headunit_memfd_create(name)
        guard fd >= 0 else { throw SystemdError(function: "memfd_create", errno: errno) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                let error = errno
                close(fd)
                throw SystemdError(function: "write", errno: error)
            }
            offset += written
        }
        return fd
    }

    /// Everything in a stored file, from its start (the descriptor stays open).
    public static func readAll(_ fd: CInt, limit: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var offset: off_t = 0
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, offset) }
            if count < 0 {
                if errno == EINTR { continue }
                throw SystemdError(function: "pread", errno: errno)
            }
            if count == 0 { return result }
            result.append(contentsOf: chunk[0..<count])
            offset += off_t(count)
            if result.count > limit { throw SystemdError(function: "pread", errno: EFBIG) }
        }
    }

    /// Whether `fd` is a connected stream socket (a stored connection), not a
    /// listening one.
    public static func isConnectedStreamSocket(_ fd: CInt) -> Bool {
        let stream = CInt(SOCK_STREAM_VALUE)
        return sd_is_socket(fd, CInt(AF_UNSPEC), stream, 0) > 0
    }
}

#if canImport(Glibc)
private let SOCK_STREAM_VALUE = Int32(SOCK_STREAM.rawValue)
#else
private let SOCK_STREAM_VALUE = Int32(SOCK_STREAM)
#endif
