// The daemon's systemd integration: what main calls, written with libsystemd (Systemd module).
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
    static func activatedListeners(logger: Logger) -> [ActivatedListener] {
        let inherited: [SocketActivation.InheritedFD]
        do {
            inherited = try SocketActivation.inheritedFDs(unsetEnvironment: true)
        } catch {
            logger.error("socket activation: cannot read the fds systemd passed", metadata: ["error": "\(error)"])
            return []
        }
        var listeners: [ActivatedListener] = []
        for item in inherited {
            let kind = SocketActivation.kind(of: item.fd)
            switch (item.name, kind) {
            case (unixSocketName, .unixStream(let path)):
                listeners.append(ActivatedListener(name: item.name, fd: item.fd, kind: .unix(path: path)))
            case (tcpSocketName, .inetStream):
                listeners.append(ActivatedListener(name: item.name, fd: item.fd, kind: .tcp))
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
        return listeners
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
