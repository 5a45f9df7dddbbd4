/// The daemon's command line as plain values: what `HeadUnitDaemon` parses
/// with swift-argument-parser, and what `init?(plainArguments:)` reads
/// directly from the usual forms.
struct DaemonOptions: Equatable, Sendable {
    var unixSocket: String?
    var tcp: String?
    var noTCP = false
    var configFile: String?
    var logLevel: String?
    var maxPayload: UInt32?
    var printDefaultConfig = false

    /// The arguments systemd's unit and the tests pass, read without
    /// swift-argument-parser's run-time reflection: each option at most once,
    /// as `--name value` (a value not starting with "-"), and the two flags.
    /// Nil for anything else (help, `--name=value`, repeats, unknown or
    /// malformed arguments): ArgumentParser parses those, with its messages.
    /// A test checks every accepted form against ArgumentParser's own parse.
    init?(plainArguments arguments: [String]) {
        var seen: [String] = []  // at most seven names
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let name = arguments[index]
            guard !seen.contains(name) else { return nil }
            seen.append(name)
            index += 1
            switch name {
            case "--no-tcp":
                noTCP = true
                continue
            case "--print-default-config":
                printDefaultConfig = true
                continue
            case "--unix-socket", "--tcp", "--config", "--log-level", "--max-payload":
                break
            default:
                return nil
            }
            guard index < arguments.endIndex, !arguments[index].hasPrefix("-") else { return nil }
            let value = arguments[index]
            index += 1
            switch name {
            case "--unix-socket": unixSocket = value
            case "--tcp": tcp = value
            case "--config": configFile = value
            case "--log-level": logLevel = value
            default:
                guard let bytes = UInt32(value) else { return nil }
                maxPayload = bytes
            }
        }
    }

    init(
        unixSocket: String?, tcp: String?, noTCP: Bool, configFile: String?,
        logLevel: String?, maxPayload: UInt32?, printDefaultConfig: Bool
    ) {
        self.unixSocket = unixSocket
        self.tcp = tcp
        self.noTCP = noTCP
        self.configFile = configFile
        self.logLevel = logLevel
        self.maxPayload = maxPayload
        self.printDefaultConfig = printDefaultConfig
    }
}
