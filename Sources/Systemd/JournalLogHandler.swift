import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A swift-log handler that writes one line per event to stderr, in the form the
/// reader at the other end understands best:
///
/// - stderr is the journal (systemd sets JOURNAL_STREAM=<dev>:<inode> to the
///   stream it connected, and it matches fd 2): `<6>label: message key=value`.
///   journald takes the `<N>` prefix as the syslog priority (SyslogLevelPrefix=yes,
///   the default), so `journalctl -p warning` filters properly and no timestamp is
///   written (journald stamps every entry itself).
/// - anything else (a terminal, a file, a CI log): `2025-01-31T12:00:00.123Z info label: message key=value`.
///
/// Each line is a single write(2) so lines from different threads never interleave.
public struct JournalLogHandler: LogHandler {
    public enum Style: Sendable {
        case journal
        case plain
    }

    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public let label: String
    public let style: Style

    /// Quiet by default: `.notice` logs lifecycle events and problems, not every connection.
    public init(label: String, logLevel: Logger.Level = .notice, style: Style = JournalLogHandler.detectStyle(),
                metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.logLevel = logLevel
        self.style = style
        self.metadataProvider = metadataProvider
    }

    /// Installs the handler for the whole process (LoggingSystem.bootstrap may be called once).
    public static func bootstrap(logLevel: Logger.Level = .notice) {
        let style = detectStyle()
        LoggingSystem.bootstrap { label in
            JournalLogHandler(label: label, logLevel: logLevel, style: style)
        }
    }

    /// `.journal` when JOURNAL_STREAM names the very stream fd 2 is connected to
    /// (a child that inherited the variable but had stderr redirected gets `.plain`).
    public static func detectStyle() -> Style {
        stderrIsJournal() ? .journal : .plain
    }

    public static func stderrIsJournal() -> Bool {
        guard let raw = getenv("JOURNAL_STREAM") else { return false }
        let value = String(cString: raw)
        let parts = value.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// syslog(3) priorities: swift-log has no "alert"/"emergency" and no debug below debug.
    public static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7  // LOG_DEBUG
        case .info: return 6  // LOG_INFO
        case .notice: return 5  // LOG_NOTICE
        case .warning: return 4  // LOG_WARNING
        case .error: return 3  // LOG_ERR
        case .critical: return 2  // LOG_CRIT
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = format(level: event.level, message: event.message.description,
                          metadata: effectiveMetadata(event.metadata), error: event.error)
        line.append("\n")
        Self.writeToStderr(line)
    }

    func effectiveMetadata(_ explicit: Logger.Metadata?) -> Logger.Metadata {
        var merged = metadata
        if let provided = metadataProvider?.get() {
            merged.merge(provided) { _, new in new }
        }
        if let explicit {
            merged.merge(explicit) { _, new in new }
        }
        return merged
    }

    /// The line without its newline; public for tests.
    public func format(level: Logger.Level, message: String, metadata: Logger.Metadata, error: (any Error)? = nil) -> String {
        var line: String
        switch style {
        case .journal:
            line = "<\(Self.syslogPriority(level))>"
        case .plain:
            line = Self.timestamp() + " " + level.rawValue + " "
        }
        line += label
        line += ": "
        // A newline inside a message would become a separate journal entry without priority.
        line += message.contains(where: \.isNewline) ? message.replacingNewlines() : message
        for key in metadata.keys.sorted() {
            line += " \(key)=\(metadata[key]!)"
        }
        if let error {
            line += " error=\"\(String(describing: error).replacingNewlines())\""
        }
        return line
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let millis = Int(now.tv_nsec) / 1_000_000
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        let date = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return date + "." + ms + "Z"
    }

    static func writeToStderr(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // nowhere left to complain to
                }
                offset += written
            }
        }
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(self.map { $0.isNewline ? " " : $0 })
    }
}
