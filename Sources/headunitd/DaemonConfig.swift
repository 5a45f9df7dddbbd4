import HeadUnitCore
import HeadUnitSecurity
import HeadUnitServer
import HeadUnitWire
import Logging
import SwiftProtobuf

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

struct ConfigError: Error, CustomStringConvertible {
    var description: String
}

/// The daemon's configuration: built-in defaults, then the --config file,
/// then command-line flags. Plain POSIX file I/O: no Foundation in the daemon.
enum DaemonConfig {
    static let defaultTCP = "127.0.0.1:7420"

    /// $XDG_RUNTIME_DIR/headunitd/headunitd.sock, else /run/headunitd/... as root,
    /// else /tmp/headunitd-$UID/headunitd.sock.
    static func defaultUnixSocketPath() -> String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return "\(runtime)/headunitd/headunitd.sock"
        }
        if getuid() == 0 { return "/run/headunitd/headunitd.sock" }
        return "/tmp/headunitd-\(getuid())/headunitd.sock"
    }

    /// Every field at its default, for --print-default-config.
    static func defaults() -> HUDaemonConfig {
        var config = HUDaemonConfig()
        config.unixSocketPath = defaultUnixSocketPath()
        config.tcpListen = defaultTCP
        config.tcpDisabled = false
        let limits = ConnectionLimits()
        config.limits.maxPayloadBytes = limits.maxPayloadBytes
        config.limits.heartbeatIntervalMs = UInt32(limits.heartbeatIntervalMilliseconds)
        config.limits.heartbeatTimeoutMs = UInt32(limits.heartbeatTimeoutMilliseconds)
        config.limits.handshakeTimeoutMs = UInt32(limits.handshakeTimeoutMilliseconds)
        config.limits.completionTimeoutMs = UInt32(limits.completionTimeoutMilliseconds)
        config.limits.maxErrorsPerSecond = limits.maxErrorsPerSecond
        let server = ServerConfiguration(listeners: [])
        config.limits.maxOutboundBytes = UInt32(server.maxOutboundBytes)
        config.limits.slowConsumerTimeoutMs = UInt32(server.slowConsumerTimeoutMilliseconds)
        config.limits.shutdownGraceMs = UInt32(server.shutdownGraceMilliseconds)
        config.limits.maxConnections = UInt32(server.connectionCaps.maxTotal)
        config.limits.maxUnixConnections = UInt32(server.connectionCaps.maxUnix)
        config.limits.maxTcpConnections = UInt32(server.connectionCaps.maxTCP)
        config.limits.maxTcpUnauthenticated = UInt32(server.connectionCaps.maxTCPUnauthenticated)
        config.limits.maxTcpUnauthenticatedPerSource = UInt32(server.connectionCaps.maxTCPUnauthenticatedPerSource)
        config.limits.unixReservedConnections = UInt32(server.connectionCaps.unixReserved)
        config.limits.tcpEvictionsPerSourcePerSecond = UInt32(server.connectionCaps.tcpEvictionsPerSourcePerSecond)
        config.limits.maxTcpPerDevice = UInt32(server.connectionCaps.maxTCPPerDevice)
        config.limits.maxTcpFirstFlight = UInt32(server.connectionCaps.maxTCPFirstFlight)
        config.limits.maxTcpFirstFlightPerSource = UInt32(server.connectionCaps.maxTCPFirstFlightPerSource)
        config.limits.tcpFirstFlightTimeoutMs = UInt32(server.connectionCaps.tcpFirstFlightTimeoutMilliseconds)
        config.limits.authTimeoutMs = UInt32(limits.authTimeoutMilliseconds)
        config.limits.maxUnauthenticatedFrames = limits.maxUnauthenticatedFrames
        config.limits.announceTimeoutMs = UInt32(limits.announceTimeoutMilliseconds)
        config.limits.maxRequestsPerSecond = limits.maxRequestsPerSecond
        config.limits.maxStringBytes = UInt32(limits.message.maxStringBytes)
        config.limits.maxImageBytes = UInt32(limits.message.maxImageBytes)
        config.limits.maxMessageElements = UInt32(limits.message.maxElements)
        config.limits.resumeGraceMs = UInt32(limits.resumeGraceMilliseconds)
        config.limits.maxPhoneTemplateBytes = UInt32(ComposedLimits.defaultPhoneTemplateBytes)
        let video = VideoRoutes.Limits()
        config.limits.maxVideoViewers = UInt32(video.maxViewers)
        config.limits.keyframeRequestIntervalMs = UInt32(video.keyframeIntervalMilliseconds)
        config.limits.videoViewerBufferBytes = UInt32(server.videoViewerBufferLimit)
        config.limits.maxApps = UInt32(CarConfiguration(vehicle: .standard, entitlements: .acceptAll).maxApps)
        let remote = RemoteCommands.Limits()
        config.limits.maxPendingRemoteCommands = UInt32(remote.maxPending)
        config.limits.remoteCommandTimeoutMs = UInt32(remote.timeoutMilliseconds)
        let calls = CallSession.Limits()
        config.limits.maxCalls = UInt32(calls.maxCalls)
        config.limits.maxCallActions = UInt32(calls.maxActionsPerApp)
        config.limits.callActionTimeoutMs = UInt32(calls.actionTimeoutMilliseconds)
        config.limits.callRingTimeoutMs = UInt32(calls.ringTimeoutMilliseconds)
        config.limits.assistantTimeoutMs = UInt32(AssistantSession.Limits().timeoutMilliseconds)
        config.vehicle = .standard
        config.entitlements.allowed = EntitlementKey.all.sorted()
        config.logLevel = "notice"
        config.daemonName = "headunitd"
        config.pairingCodeValidMs = 120_000
        let audio = AudioStreams.Limits()
        config.limits.audioJitterMs = audio.jitterMilliseconds
        config.limits.audioWindowMs = audio.windowMilliseconds
        config.limits.maxAudioStreams = UInt32(audio.maxStreams)
        config.audio.output = stateDirectory(config).map { "wav:" + $0 + "/audio-out.wav" } ?? "none"
        config.audio.microphone = "silence"
        return config
    }

    static func load(path: String) throws -> HUDaemonConfig {
        let text = try readFile(path)
        do {
            var options = JSONDecodingOptions()
            options.ignoreUnknownFields = false  // a typo in a key must not pass silently
            return try HUDaemonConfig(jsonString: text, options: options)
        } catch {
            throw ConfigError(description: "\(path): not a valid headunitd configuration: \(error)")
        }
    }

    static func printJSON(_ config: HUDaemonConfig) throws -> String {
        var options = JSONEncodingOptions()
        options.alwaysPrintEnumsAsInts = false
        return try config.jsonString(options: options)
    }

    static func readFile(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ConfigError(description: "\(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ConfigError(description: "\(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > 16 << 20 { throw ConfigError(description: "\(path): larger than 16 MiB") }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// "host:port", "[v6]:port" or ":port" (all interfaces is not implied: host defaults to 127.0.0.1).
    static func parseHostPort(_ text: String) throws -> (host: String, port: Int) {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw ConfigError(description: "bad TCP address \(text)") }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw ConfigError(description: "bad TCP address \(text): missing :port") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ConfigError(description: "bad TCP address \(text): expected HOST:PORT") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        if host.isEmpty { host = "127.0.0.1" }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw ConfigError(description: "bad TCP port in \(text)")
        }
        return (String(host), port)
    }

    /// Creates the socket's directory (0700) when missing.
    static func makeSocketDirectory(for path: String) throws {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        var current = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            current += "/" + component
            // Only what we create gets 0700; existing parents (/run, /tmp) stay as they are.
            if mkdir(current, 0o700) != 0, errno != EEXIST {
                throw ConfigError(description: "creating \(current): \(String(cString: strerror(errno)))")
            }
        }
        try checkSocketDirectory(directory)
    }

    /// Whoever can write the socket's directory can swap in a socket of their
    /// own (a `/tmp/headunitd-$UID` made by another user, mode 0777): the
    /// directory must belong to us or root, and not be writable by others
    /// unless it is sticky (like /tmp, where others cannot remove our socket).
    static func checkSocketDirectory(_ directory: String) throws {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw ConfigError(description: "\(directory): \(String(cString: strerror(errno)))")
        }
        if info.st_uid != getuid() && info.st_uid != 0 {
            throw ConfigError(description: "\(directory) belongs to uid \(info.st_uid), not to this daemon (uid \(getuid())): refusing to put the socket there")
        }
        let writableByOthers = info.st_mode & 0o022 != 0
        let sticky = info.st_mode & 0o1000 != 0
        if writableByOthers && !sticky {
            throw ConfigError(description: "\(directory) is writable by other users (mode \(String(info.st_mode & 0o7777, radix: 8))): refusing to put the socket there")
        }
    }

    static func entitlementPolicy(_ config: HUDaemonConfig) -> EntitlementPolicy {
        guard config.hasEntitlements else { return .acceptAll }
        var perApp: [String: Set<String>] = [:]
        for grant in config.entitlements.appGrants {
            perApp[grant.appID, default: []].formUnion(grant.entitlements)
        }
        return EntitlementPolicy(allowed: Set(config.entitlements.allowed), perApp: perApp)
    }

    // MARK: - Pairing and peer credentials (PROTOCOL.md section 20)

    /// The access rules with their user and group names resolved to ids
    /// (once, at start: SO_PEERCRED carries ids). A name `accounts` does not
    /// know stops the start: a rule that matched nobody would keep the car's
    /// own HMI out.
    static func security(_ config: HUDaemonConfig, accounts: AccountDatabase = .system) throws -> ConnectionSecurity {
        func access(_ access: HUPeerAccess, _ key: String) throws -> PeerAccess {
            var uids = Set(access.uids)
            var gids = Set(access.gids)
            for name in access.users {
                guard let uid = accounts.uid(name) else {
                    throw ConfigError(description: "\(key).users: no user '\(name)' on this system")
                }
                uids.insert(uid)
            }
            for name in access.groups {
                guard let gid = accounts.gid(name) else {
                    throw ConfigError(
                        description: "\(key).groups: no group '\(name)' on this system (the package creates its groups with systemd-sysusers from headunitd.sysusers)")
                }
                gids.insert(gid)
            }
            return PeerAccess(uids: uids, gids: gids)
        }
        return ConnectionSecurity(
            authenticatePhonesOverTCP: !config.allowUnpairedTcp,
            access: PeerAccessPolicy(
                hmi: try access(config.hmiAccess, "hmi_access"), cluster: try access(config.clusterAccess, "cluster_access"),
                accessory: try access(config.accessoryAccess, "accessory_access"), phone: try access(config.phoneAccess, "phone_access")))
    }

    /// `state_directory`, else systemd's $STATE_DIRECTORY (its first entry),
    /// else /var/lib/headunitd as root, else $XDG_STATE_HOME/headunitd, else
    /// ~/.local/state/headunitd.
    static func stateDirectory(_ config: HUDaemonConfig) -> String? {
        if !config.stateDirectory.isEmpty { return config.stateDirectory }
        func environment(_ name: String) -> String? {
            guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else { return nil }
            return value
        }
        if let systemd = environment("STATE_DIRECTORY") {
            return String(systemd.split(separator: ":").first ?? Substring(systemd))
        }
        if geteuid() == 0 { return "/var/lib/headunitd" }
        if let xdg = environment("XDG_STATE_HOME") { return xdg + "/headunitd" }
        if let home = environment("HOME") { return home + "/.local/state/headunitd" }
        return nil
    }

    /// Serving TCP (always TLS) needs the car's identity key from the state
    /// directory, created on first start; the paired devices are loaded when
    /// phones on TCP must authenticate (a bench with `allow_unpaired_tcp`
    /// keeps them in memory only).
    /// The car's audio output (PROTOCOL.md section 24.5): `audio.output`, else a
    /// WAV in the state directory (written only while audio plays, at most 10
    /// minutes of it), else none. The limits' ranges were checked with the
    /// others (`checkLimitRanges`).
    static func applyAudio(_ config: HUDaemonConfig, to server: inout ServerConfiguration) throws {
        let limits = config.limits
        if limits.audioJitterMs > 0 { server.car.audio.jitterMilliseconds = limits.audioJitterMs }
        if limits.audioWindowMs > 0 { server.car.audio.windowMilliseconds = limits.audioWindowMs }
        if limits.maxAudioStreams > 0 { server.car.audio.maxStreams = Int(limits.maxAudioStreams) }
        if config.audio.output.isEmpty {
            server.audio.output = stateDirectory(config).map { .wav(path: $0 + "/audio-out.wav") } ?? .none
        } else if let output = AudioOutputSpec.parse(config.audio.output) {
            server.audio.output = output
        } else {
            throw ConfigError(description: "audio.output must be \"wav:PATH\", \"raw:PATH\", \"alsa:DEVICE\" or \"none\", not \"\(config.audio.output)\"")
        }
        if !config.audio.microphone.isEmpty { server.audio.microphone = config.audio.microphone }
    }

    static func applyPairing(_ config: HUDaemonConfig, to server: inout ServerConfiguration, logger: Logger) throws {
        if config.pairingCodeValidMs > 0 { server.pairingCodeValidMilliseconds = UInt64(config.pairingCodeValidMs) }
        let servesTCP = server.listeners.contains { listener in
            switch listener {
            case .tcp: return true
            case .adopted(_, _, let transport, _): return transport == .tcp
            case .unix: return false
            }
        }
        guard servesTCP else { return }
        guard let directory = stateDirectory(config) else {
            throw ConfigError(description: "no state directory for the car's TLS key and paired devices: set state_directory, STATE_DIRECTORY or HOME")
        }
        let store = PairingStore(directory: directory)
        try store.prepare()
        let identity = try CarIdentity.loadOrCreate(directory: directory)
        server.carIdentity = identity
        logger.info("TLS identity", metadata: ["file": "\(directory)/\(CarIdentity.fileName)"])
        guard server.connection.security.authenticatePhonesOverTCP else { return }
        server.pairedDevices = try store.load()
        server.pairingStore = store
        logger.info("paired devices", metadata: ["file": "\(store.path)", "devices": "\(server.pairedDevices.count)"])
    }
}

/// User and group names to ids: the system's database (NSS: /etc/passwd,
/// /etc/group, systemd's own), or a test's.
struct AccountDatabase: Sendable {
    var uid: @Sendable (String) -> UInt32?
    var gid: @Sendable (String) -> UInt32?

    static let system = AccountDatabase(
        uid: { name in
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: 16_384)
            guard getpwnam_r(name, &entry, &buffer, buffer.count, &found) == 0, found != nil else { return nil }
            return entry.pw_uid
        },
        gid: { name in
            var entry = group()
            var found: UnsafeMutablePointer<group>?
            // A group's member list can be long: a large buffer, once, at start.
            var buffer = [CChar](repeating: 0, count: 65_536)
            guard getgrnam_r(name, &entry, &buffer, buffer.count, &found) == 0, found != nil else { return nil }
            return entry.gr_gid
        })
}
