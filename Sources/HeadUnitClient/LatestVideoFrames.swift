/// A video consumer's bound (PROTOCOL.md section 25.5, latest frame wins):
/// per channel, the frames the consumer has not taken yet, and only frames its
/// decoder can take. A P-frame needs every frame since the keyframe decoded,
/// so the frames that arrive while the consumer is busy wait as one run (a
/// keyframe or the frame after the last one taken, then each frame after it)
/// that the consumer takes whole: it decodes them all and shows the last. So
/// a consumer slower than the stream shows fewer, newer frames without making
/// the app send keyframes. A keyframe replaces the run (nothing before it is
/// needed any more). A run longer than `maxFramesWaiting` or
/// `maxBytesWaiting` is the sign of a consumer that stopped: it is dropped,
/// the channel is out of sync, and its P-frames are dropped until the next
/// keyframe, which the owner asks the car for once per loss of sync (a
/// second request could cross the keyframe the first one brings, and the
/// daemon would then hold the stream back until yet another, 25.5).
/// Used by `VideoWatch` and by the simulator for each browser page.
public struct LatestVideoFrames<Frame> {
    fileprivate struct Run {
        var frames: [Frame]
        var bytes: Int
    }
    private var waiting: [UInt32: Run] = [:]
    /// Channels with waiting frames, oldest first (fair between streams).
    private var order: [UInt32] = []
    /// Channels whose consumer can decode the next P-frame.
    private var synced: Set<UInt32> = []
    /// Channels out of sync whose keyframe the owner was told to ask for: their P-frames are dropped without asking again.
    private var asked: Set<UInt32> = []
    /// Frames that never reached the consumer.
    public private(set) var dropped = 0
    /// The longest run a channel keeps: one second at 30 frames a second.
    public let maxFramesWaiting: Int
    /// The most bytes a channel's run keeps: the daemon's own bound per
    /// viewer (`video_viewer_buffer_bytes`, 25.6). A run's first frame is
    /// always kept, however large.
    public let maxBytesWaiting: Int

    public init(maxFramesWaiting: Int = 30, maxBytesWaiting: Int = 256 * 1024) {
        self.maxFramesWaiting = maxFramesWaiting
        self.maxBytesWaiting = maxBytesWaiting
    }

    public enum Offer: Equatable, Sendable {
        /// Kept, and nothing waited for the channel: tell the consumer.
        case wake
        /// Kept with (or, a keyframe, in place of) the frames that wait: the consumer was told already.
        case waiting
        /// Dropped, and the channel just lost sync: ask the car for a keyframe
        /// (once: the channel's P-frames are `skipped` until it comes).
        case needKeyframe
        /// Dropped while the channel waits for the keyframe already asked for.
        case skipped
    }

    /// `bytes` is the frame's size, counted against `maxBytesWaiting`.
    public mutating func offer(_ frame: Frame, channel: UInt32, isKeyframe: Bool, bytes: Int) -> Offer {
        if isKeyframe {
            synced.insert(channel)
            asked.remove(channel)
            if let replaced = waiting.updateValue(Run(frames: [frame], bytes: bytes), forKey: channel) {
                dropped += replaced.frames.count
                return .waiting
            }
            order.append(channel)
            return .wake
        }
        guard synced.contains(channel) else {
            dropped += 1
            return asked.insert(channel).inserted ? .needKeyframe : .skipped
        }
        // Only the run's sizes are read here: holding the run itself would make the append below copy its array.
        guard let (count, held) = waiting[channel].map({ ($0.frames.count, $0.bytes) }) else {
            waiting[channel] = Run(frames: [frame], bytes: bytes)
            order.append(channel)
            return .wake
        }
        guard count < maxFramesWaiting, held + bytes <= maxBytesWaiting else {
            // The consumer stopped taking: what waits is stale, and the next keyframe is what it needs.
            dropped += count + 1
            waiting[channel] = nil
            synced.remove(channel)
            asked.insert(channel)
            return .needKeyframe
        }
        waiting[channel]?.frames.append(frame)
        waiting[channel]?.bytes += bytes
        return .waiting
    }

    /// The waiting run that came first, of any channel: decode all, show the last.
    public mutating func take() -> (channel: UInt32, frames: [Frame])? {
        while !order.isEmpty {
            let channel = order.removeFirst()
            if let run = waiting.removeValue(forKey: channel) { return (channel, run.frames) }
        }
        return nil
    }

    /// The channel's waiting run (empty when nothing waits).
    public mutating func take(_ channel: UInt32) -> [Frame] {
        order.removeAll { $0 == channel }
        return waiting.removeValue(forKey: channel)?.frames ?? []
    }

    /// The consumer's decoder lost sync: nothing more of the channel until a
    /// keyframe. True when the owner should ask for one (false: asked already).
    @discardableResult
    public mutating func lostSync(_ channel: UInt32) -> Bool {
        synced.remove(channel)
        return asked.insert(channel).inserted
    }

    /// The channel's stream ended: its waiting frames and sync go with it.
    public mutating func remove(_ channel: UInt32) {
        synced.remove(channel)
        asked.remove(channel)
        _ = take(channel)
    }

    /// Only these channels' streams go on (the watched screens show them): the rest are removed.
    public mutating func keep(only channels: Set<UInt32>) {
        for channel in Set(waiting.keys).union(synced).union(asked) where !channels.contains(channel) { remove(channel) }
    }

    public mutating func removeAll() {
        waiting.removeAll()
        order.removeAll()
        synced.removeAll()
        asked.removeAll()
    }
}

extension LatestVideoFrames: Sendable where Frame: Sendable {}
extension LatestVideoFrames.Run: Sendable where Frame: Sendable {}
