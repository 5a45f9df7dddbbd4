import CSystemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Service notifications (sd_notify(3)) to the service manager over $NOTIFY_SOCKET.
///
/// sd_notifyf is variadic and cannot be called from Swift: the state is formatted
/// here and handed to sd_notify. Every call is a no-op (returning false) when
/// NOTIFY_SOCKET is not set, so the daemon calls these unconditionally.
public enum Notify {
    /// Sends raw newline-separated `KEY=VALUE` assignments. Returns true when sent.
    @discardableResult
    public static func send(_ state: String) -> Bool {
        // Never unset the environment: we notify for the whole life of the process.
        sd_notify(0, state) > 0
    }

    /// READY=1: startup finished, every listener accepts.
    @discardableResult
    public static func ready(status: String? = nil) -> Bool {
        send(status.map { "READY=1\nSTATUS=\(sanitized($0))" } ?? "READY=1")
    }

    /// STATUS=: a one-line human-readable summary `systemctl status` shows.
    @discardableResult
    public static func status(_ text: String) -> Bool {
        send("STATUS=\(sanitized(text))")
    }

    /// STOPPING=1: shutdown has begun.
    @discardableResult
    public static func stopping(status: String? = nil) -> Bool {
        send(status.map { "STOPPING=1\nSTATUS=\(sanitized($0))" } ?? "STOPPING=1")
    }

    /// RELOADING=1 (with MONOTONIC_USEC, as Type=notify-reload expects); send
    /// `ready()` once the new configuration is in effect.
    @discardableResult
    public static func reloading() -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
        return send("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    /// WATCHDOG=1: the keep-alive ping.
    @discardableResult
    public static func watchdog() -> Bool {
        send("WATCHDOG=1")
    }

    /// A newline would start a new assignment: a status text must stay one line.
    static func sanitized(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) else { return text }
        return String(text.map { $0 == "\n" || $0 == "\r" || $0 == "\0" ? " " : $0 })
    }
}

/// The service watchdog (sd_watchdog_enabled(3)).
public enum Watchdog {
    /// WATCHDOG_USEC in microseconds when the watchdog is enabled for this process
    /// (libsystemd also checks WATCHDOG_PID, when set, against our pid), else nil.
    public static func timeoutMicroseconds() -> UInt64? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return usec
    }

    /// How often to ping: half the timeout, as sd_watchdog_enabled(3) recommends,
    /// so one late ping does not get the daemon killed.
    public static func pingIntervalNanoseconds() -> Int64? {
        guard let usec = timeoutMicroseconds() else { return nil }
        let half = usec / 2
        return half > UInt64(Int64.max / 1_000) ? Int64.max : Int64(half) * 1_000
    }
}
