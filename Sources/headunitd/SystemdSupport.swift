// OWNER: systemd helper. Signatures the daemon's main calls; bodies to be written with libsystemd.
import Logging

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
    /// The sockets systemd passed (LISTEN_FDS / LISTEN_FDNAMES), checked with
    /// sd_is_socket_*; empty when the daemon was not socket-activated.
    static func activatedListeners(logger: Logger) -> [ActivatedListener] { [] }
    static func notifyReady() {}
    /// STATUS= line: a short live summary.
    static func notifyStatus(_ text: String) {}
    static func notifyStopping() {}
    /// Half of WATCHDOG_USEC in nanoseconds when the watchdog is enabled for us.
    static func watchdogPingIntervalNanoseconds() -> Int64? { nil }
    static func watchdogPing() {}
}
