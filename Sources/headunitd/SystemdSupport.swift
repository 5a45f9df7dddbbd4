// The daemon's systemd integration: what main calls, written with libsystemd (Systemd module).
import HeadUnitCore
import HeadUnitServer
import Logging
import Systemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A listening socket handed over by systemd (socket activation).
struct ActivatedListener {
    enum Kind: Equatable {
        case unix(path: String)
        case tcp
    }
    let name: String
    let fd: CInt
    let kind: Kind
}

enum SystemdSupport {
    /// FileDescriptorName= values systemd/headunitd.socket gives its two listeners.
    static let unixSocketName = "unix"
    static let tcpSocketName = "tcp"

    /// The sockets systemd passed (LISTEN_FDS / LISTEN_FDNAMES), checked with
    /// sd_is_socket_*; empty when the daemon was not socket-activated.
    ///
    /// An fd is adopted only when its name says what it should be and the socket is
    /// that: "unix" a listening AF_UNIX stream socket, "tcp" a listening AF_INET/AF_INET6
    /// stream socket. Anything else is logged and closed (our copy only: systemd keeps
    /// its own). Several fds may share a name (e.g. ListenStream=0.0.0.0:7420 and [::]:7420).
    static func activatedListeners(logger: Logger, maxSnapshotBytes: Int) -> (listeners: [ActivatedListener], restored: RestoredState?) {
        let inherited: [SocketActivation.InheritedFD]
        do {
            inherited = try SocketActivation.inheritedFDs(unsetEnvironment: true)
        } catch {
            logger.error("socket activation: cannot read the fds systemd passed", metadata: ["error": "\(error)"])
            return ([], nil)
        }
        var listeners: [ActivatedListener] = []
        // What a previous process left in the fd store (PROTOCOL.md section 22).
        var snapshot: [UInt8]?
        var readError: String?
        var connections: [PeerID: CInt] = [:]
        var storedAnything = false
        for item in inherited {
            let kind = SocketActivation.kind(of: item.fd)
            switch (item.name, kind) {
            case (unixSocketName, .unixStream(let path)):
                listeners.append(ActivatedListener(name: item.name, fd: item.fd, kind: .unix(path: path)))
            case (tcpSocketName, .inetStream):
                listeners.append(ActivatedListener(name: item.name, fd: item.fd, kind: .tcp))
            case (RestoredState.snapshotName, _):
                storedAnything = true
                do {
                    snapshot = try FDStore.readAll(item.fd, limit: maxSnapshotBytes)
                } catch {
                    readError = "the snapshot cannot be read: \(error)"
                }
                close(item.fd)
                // Read once: a later start must not take it for new.
                FDStore.remove(name: item.name)
            case (let name, _) where RestoredState.peer(fromName: name) != nil:
                storedAnything = true
                // Ours now: systemd's copy would keep the peer from ever seeing us close it.
                FDStore.remove(name: name)
                if FDStore.isConnectedStreamSocket(item.fd) {
                    connections[RestoredState.peer(fromName: name)!] = item.fd
                } else {
                    logger.error("fd store: '\(name)' is not a connected stream socket; closing it")
                    close(item.fd)
                }
            default:
                logger.error(
                    "socket activation: refusing inherited fd \(item.fd) named '\(item.name)' (\(describe(kind))): expected FileDescriptorName=\(unixSocketName) on a listening Unix stream socket or FileDescriptorName=\(tcpSocketName) on a listening TCP socket; closing it"
                )
                close(item.fd)
            }
        }
        if !listeners.isEmpty {
            logger.info(
                "socket activation: adopted \(listeners.count) listener(s)",
                metadata: ["listeners": "\(listeners.map { describe($0) }.joined(separator: ","))"]
            )
        }
        guard storedAnything else { return (listeners, nil) }
        logger.notice(
            "fd store: taking over from the previous process",
            metadata: ["connections": "\(connections.count)", "snapshot": "\(snapshot.map { "\($0.count) bytes" } ?? "none")"])
        return (listeners, RestoredState(snapshot: snapshot, connections: connections, readError: readError))
    }

    /// Whether SIGTERM hands the connections over instead of closing them:
    /// the unit keeps descriptors for us (FileDescriptorStoreMax=, seen as $FDSTORE).
    static var handoverCapacity: Int { FDStore.capacity }

    /// The fd store as the server uses it; the snapshot travels in a memfd.
    static func descriptorStore(logger: Logger) -> DescriptorStore {
        DescriptorStore(
            storeDescriptor: { fd, name in FDStore.store(fd, name: name) },
            storeSnapshot: { bytes in
                do {
                    let fd = try FDStore.memoryFile(name: "headunitd-snapshot", bytes: bytes)
                    defer { close(fd) }
                    return FDStore.store(fd, name: RestoredState.snapshotName)
                } catch {
                    logger.error("fd store: cannot write the snapshot", metadata: ["error": "\(error)"])
                    return false
                }
            })
    }

    static func notifyReady() {
        Notify.ready()
    }

    /// STATUS= line: a short live summary.
    static func notifyStatus(_ text: String) {
        Notify.status(text)
    }

    static func notifyStopping() {
        Notify.stopping()
    }

    /// RELOADING=1 before re-reading the configuration (then notifyReady() when done).
    static func notifyReloading() {
        Notify.reloading()
    }

    /// Half of WATCHDOG_USEC in nanoseconds when the watchdog is enabled for us.
    static func watchdogPingIntervalNanoseconds() -> Int64? {
        Watchdog.pingIntervalNanoseconds()
    }

    static func watchdogPing() {
        Notify.watchdog()
    }

    /// Journald-friendly logging (`<N>` priority prefixes when stderr is the journal),
    /// quiet (`.notice`) unless told otherwise. Call once, before the first Logger is made.
    static func bootstrapLogging(level: Logger.Level = .notice) {
        JournalLogHandler.bootstrap(logLevel: level)
    }

    private static func describe(_ kind: SocketActivation.SocketKind) -> String {
        switch kind {
        case .unixStream(let path): return "listening Unix stream socket \(path.isEmpty ? "(unnamed)" : path)"
        case .inetStream(let port): return "listening TCP socket on port \(port)"
        case .other: return "not a listening stream socket"
        }
    }

    private static func describe(_ listener: ActivatedListener) -> String {
        switch listener.kind {
        case .unix(let path): return "\(listener.name)@fd\(listener.fd)=\(path)"
        case .tcp: return "\(listener.name)@fd\(listener.fd)=tcp:\(SocketActivation.inetPort(of: listener.fd))"
        }
    }
}
