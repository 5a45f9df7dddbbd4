import HeadUnitWire

/// Who hears the car's mixed output (`WatchAudio`, PROTOCOL.md section 24.7).
/// The rules only: the server fans each rendered chunk out to `watchers`.
public struct AudioTap: Sendable, Equatable {
    /// The MEDIA frames' channel for the output (a watcher has no other audio).
    public static let channel: UInt32 = 1
    /// 20 ms at 48 kHz per MEDIA frame.
    public static let chunkFrames = 960

    /// Peers watching at once; past it `TOO_MANY_VIEWERS`, limit "audio.output_watchers".
    public var maxWatchers: Int
    public private(set) var watchers: [PeerID] = []
    /// The car's output as the mixer last reported it (section 24.5), set by
    /// the server; shown in `GetStatus`. Nil until audio first played.
    public var outputStatus: HUAudioOutputStatus?

    public init(maxWatchers: Int = 8) {
        self.maxWatchers = maxWatchers
    }

    /// What the Result says: the channel and the format.
    public static var info: HUAudioStreamInfo {
        var info = HUAudioStreamInfo()
        info.streamID = channel
        info.type = .output
        info.format.codec = .pcmS16Le
        info.format.sampleRate = 48_000
        info.format.channels = 2
        return info
    }

    /// Start or stop watching. Both are idempotent. The engine command is
    /// returned when the tap turns on (first watcher) or off (last one left).
    public mutating func watch(_ peer: PeerID, stop: Bool) -> Result<AudioStreams.EngineCommand?, RuleViolation> {
        let before = !watchers.isEmpty
        if stop {
            watchers.removeAll { $0 == peer }
        } else if !watchers.contains(peer) {
            guard watchers.count < maxWatchers else {
                return .failure(RuleViolation(
                    .tooManyViewers, "\(maxWatchers) peers already hear the car's output", limit: "audio.output_watchers",
                    limitValue: UInt32(maxWatchers)))
            }
            watchers.append(peer)
        }
        return .success(change(from: before))
    }

    /// A watcher's connection is gone.
    public mutating func forget(_ peer: PeerID) -> AudioStreams.EngineCommand? {
        let before = !watchers.isEmpty
        watchers.removeAll { $0 == peer }
        return change(from: before)
    }

    private func change(from before: Bool) -> AudioStreams.EngineCommand? {
        let now = !watchers.isEmpty
        return now == before ? nil : .tap(now)
    }
}
