import HeadUnitCore
import HeadUnitSecurity
import HeadUnitWire
import NIOCore

/// Where the server accepts connections.
public enum ListenerSpec: Sendable, Equatable {
    /// Bind a Unix socket here (mode 0600). A stale socket file is removed;
    /// if another process listens on it, the server refuses to start.
    case unix(path: String)
    /// Bind TCP; port 0 picks an ephemeral port (reported by `start()`).
    case tcp(host: String, port: Int)
    /// Serve an already bound, listening socket (systemd socket activation).
    /// `path` is informational: an adopted socket file is never unlinked.
    case adopted(fd: CInt, name: String, transport: Transport, path: String?)
}

/// A listener the server is accepting on.
public struct BoundListener: Sendable, Equatable {
    public var transport: Transport
    /// The Unix socket path, or "host:port" with the real port for TCP.
    public var address: String
    /// The TCP port (0 for Unix sockets).
    public var port: Int
    public var adopted: Bool
}

public struct ServerConfiguration: Sendable {
    public var listeners: [ListenerSpec]
    public var connection: ConnectionConfiguration
    public var car: CarConfiguration
    /// A peer whose unsent output exceeds this (by more than one frame) is cut off with SLOW_CONSUMER.
    public var maxOutboundBytes: Int {
        didSet { car.accessoryPeerBudget = Self.accessoryPeerBudget(maxOutboundBytes) }
    }
    /// Past this much unsent output a peer's next requests wait (backpressure,
    /// PROTOCOL.md section 10.2) and an HMI skips state it gets later (10.5):
    /// a quarter of `maxOutboundBytes`, at least 64 KiB, at most all of it.
    var writeHighWaterMark: Int { Self.writeHighWaterMark(maxOutboundBytes: maxOutboundBytes) }
    /// `video_viewer_buffer_bytes` (PROTOCOL.md section 25.6): a VIDEO frame
    /// goes to a viewer only while less than this waits unsent for it.
    public var videoViewerBufferLimit = 256 << 10
    /// ... and never more than half the high-water mark, so video alone never
    /// holds a viewer's requests back (section 10.2): the default (256 KiB)
    /// gives way to a small `max_outbound_bytes`; a configured value above the
    /// half stops the daemon at start (`videoViewerBufferRange`).
    var videoViewerBufferBytes: Int { min(videoViewerBufferLimit, writeHighWaterMark / 2) }

    /// The ranges the daemon accepts at start (PROTOCOL.md section 20.6).
    /// At least 64 KiB of output (the high-water mark's floor); at most what a car's memory spares a peer.
    public static let maxOutboundBytesRange = 65_536...256 << 20
    public static let slowConsumerTimeoutRange: ClosedRange<UInt64> = 100...600_000
    /// Well within systemd's TimeoutStopSec (15 s in headunitd.service) and its default (90 s).
    public static let shutdownGraceRange: ClosedRange<UInt64> = 100...10_000
    /// `video_viewer_buffer_bytes`: at most half the write buffer's high-water mark.
    public static func videoViewerBufferRange(maxOutboundBytes: Int) -> ClosedRange<Int> {
        1_024...max(1_024, writeHighWaterMark(maxOutboundBytes: maxOutboundBytes) / 2)
    }
    static func writeHighWaterMark(maxOutboundBytes: Int) -> Int { min(maxOutboundBytes, max(64 * 1024, maxOutboundBytes / 4)) }
    /// A peer that cannot take writes for this long is cut off with SLOW_CONSUMER.
    public var slowConsumerTimeoutMilliseconds: UInt64
    /// A graceful stop closes whatever is still open after this long.
    public var shutdownGraceMilliseconds: UInt64
    /// Connections per transport and in all (PROTOCOL.md section 10.1).
    public var connectionCaps: ConnectionCaps
    /// A cut-off slow consumer's Goodbye waits behind what it has not read;
    /// the connection stays open this long for it to drain, then closes.
    public var slowConsumerGoodbyeMilliseconds: UInt64
    /// Where paired devices are saved (nil: kept in memory only), and the
    /// devices loaded from there at start (PROTOCOL.md section 20).
    public var pairingStore: PairingStore?
    public var pairedDevices: [PairedDeviceRecord] = []
    /// The car's TLS identity (PROTOCOL.md section 20): required to serve TCP,
    /// which is always TLS.
    public var carIdentity: CarIdentity?
    /// How long a pairing code stays valid.
    public var pairingCodeValidMilliseconds: UInt64 = 120_000
    /// What a previous daemon process handed over through systemd's fd
    /// store (PROTOCOL.md section 22); nil on a fresh start.
    public var restored: RestoredState?
    /// The car's audio output and microphone (PROTOCOL.md section 24.5).
    public var audio = AudioConfiguration()

    public init(
        listeners: [ListenerSpec],
        connection: ConnectionConfiguration = ConnectionConfiguration(),
        car: CarConfiguration = CarConfiguration(vehicle: .standard, entitlements: .acceptAll),
        maxOutboundBytes: Int = 4 << 20,
        slowConsumerTimeoutMilliseconds: UInt64 = 10_000,
        shutdownGraceMilliseconds: UInt64 = 2_000,
        connectionCaps: ConnectionCaps = ConnectionCaps(),
        slowConsumerGoodbyeMilliseconds: UInt64 = 5_000
    ) {
        self.listeners = listeners
        self.connection = connection
        self.car = car
        // Session bytes towards a peer stay under half its write buffer's high-water mark (PROTOCOL.md 18.5).
        self.car.accessoryPeerBudget = Self.accessoryPeerBudget(maxOutboundBytes)
        self.maxOutboundBytes = maxOutboundBytes
        self.slowConsumerTimeoutMilliseconds = slowConsumerTimeoutMilliseconds
        self.shutdownGraceMilliseconds = shutdownGraceMilliseconds
        self.connectionCaps = connectionCaps
        self.slowConsumerGoodbyeMilliseconds = slowConsumerGoodbyeMilliseconds
    }

    /// Half the write buffer's high-water mark (a quarter of max_outbound_bytes).
    static func accessoryPeerBudget(_ maxOutboundBytes: Int) -> UInt64 {
        UInt64(max(64 << 10, maxOutboundBytes / 8))
    }
}

/// The counts a supervisor shows (systemd STATUS=).
public struct StatusSummary: Sendable, Equatable {
    public var phones: UInt32
    public var apps: UInt32
    public var scenes: UInt32

    public init(phones: UInt32, apps: UInt32, scenes: UInt32) {
        self.phones = phones
        self.apps = apps
        self.scenes = scenes
    }

    public var text: String {
        "\(phones) phone\(phones == 1 ? "" : "s"), \(apps) app\(apps == 1 ? "" : "s"), \(scenes) scene\(scenes == 1 ? "" : "s")"
    }
}

/// The counts last reported, and who is told when they change.
struct StatusReport {
    private(set) var last = StatusSummary(phones: 0, apps: 0, scenes: 0)
    var onChange: ((StatusSummary) -> Void)?

    /// Keeps `summary`; true when it differs from the last one (then report it).
    mutating func update(_ summary: StatusSummary) -> Bool {
        guard summary != last else { return false }
        last = summary
        return true
    }
}

extension EventLoop {
    /// The loop's own clock in milliseconds, the time every state machine is
    /// fed with: the system's monotonic clock on a real loop, the test's
    /// (`EmbeddedEventLoop.advanceTime`) on an embedded one.
    @inline(__always)
    var nowMilliseconds: UInt64 { UInt64(now.uptimeNanoseconds / 1_000_000) }
}
