import HeadUnitWire
import Logging

/// The output's health as the engine sees it (PROTOCOL.md section 24.5):
/// what the output writer says, logged and reported to the loop without
/// flooding either. A failure is logged once per change, a blocked output
/// once when it starts and once when it ends, dropped audio at most once a
/// second with the count; the status (GetStatus shows it) is reported at
/// once when blocked or failure changes, a changed drop count at most once
/// a second. Used by `AudioEngine` on its own thread only.
struct AudioOutputMonitor {
    /// An operation in progress for this long means the output is blocked.
    static let blockedAfterNanoseconds: UInt64 = 1_000_000_000
    static let logAndReportEveryNanoseconds: UInt64 = 1_000_000_000

    /// The output as configured, for the logs.
    let name: String
    let logger: Logger
    /// Output frames dropped because the output could not take them.
    private(set) var droppedFrames = 0
    /// Of those, how many are not logged yet.
    private var unloggedDrops = 0
    private var lastDropLog: UInt64 = 0
    /// The output is blocked, as last logged.
    private var blocked = false
    private var loggedFailure: String?
    /// The health last reported to the loop, and when.
    private var reportedStatus = HUAudioOutputStatus()
    private var lastStatusReport: UInt64 = 0

    init(name: String, logger: Logger) {
        self.name = name
        self.logger = logger
    }

    mutating func countDropped(_ frames: Int) {
        droppedFrames += frames
        unloggedDrops += frames
    }

    /// Logs what the output did since the last look; the status to report
    /// to the loop, when there is one.
    mutating func check(_ health: (failed: String?, busyNanoseconds: UInt64?), now: UInt64) -> HUAudioOutputStatus? {
        if health.failed != loggedFailure {
            if let failed = health.failed {
                logger.error("audio output unusable: mixing into nothing until the output starts again", metadata: ["reason": "\(failed)"])
            }
            loggedFailure = health.failed
        }
        let isBlocked = (health.busyNanoseconds ?? 0) >= Self.blockedAfterNanoseconds
        if isBlocked != blocked {
            blocked = isBlocked
            if isBlocked {
                logger.error("audio output blocked: it takes nothing, the mix is dropped until it does", metadata: ["output": "\(name)"])
            } else {
                logger.notice("audio output no longer blocked", metadata: ["output": "\(name)", "dropped_frames": "\(droppedFrames)"])
            }
        }
        var status = HUAudioOutputStatus()
        status.blocked = isBlocked
        status.failure = health.failed ?? ""
        status.droppedFrames = UInt64(droppedFrames)
        var toReport: HUAudioOutputStatus?
        if status != reportedStatus {
            let urgent = status.blocked != reportedStatus.blocked || status.failure != reportedStatus.failure
            if urgent || now - lastStatusReport >= Self.logAndReportEveryNanoseconds {
                toReport = status
                reportedStatus = status
                lastStatusReport = now
            }
        }
        if unloggedDrops > 0, now - lastDropLog >= Self.logAndReportEveryNanoseconds {
            logger.warning(
                "audio output cannot keep up: mix dropped",
                metadata: ["frames": "\(unloggedDrops)", "total_frames": "\(droppedFrames)", "output": "\(name)"])
            unloggedDrops = 0
            lastDropLog = now
        }
        return toReport
    }
}
