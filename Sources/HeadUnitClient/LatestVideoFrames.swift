/// A video consumer's bound (PROTOCOL.md section 25.5, latest frame wins):
/// at most one undelivered frame per channel, and only frames the consumer's
/// decoder can take. A keyframe always gets in (replacing what waits). A
/// P-frame needs every frame since the keyframe decoded, so it cannot replace
/// one that waits: it is dropped, the channel is out of sync, and its P-frames
/// are dropped until the next keyframe, which the owner asks the car for.
/// Used by `VideoWatch` and by the simulator for each browser page.
public struct LatestVideoFrames<Frame> {
    private var waiting: [UInt32: Frame] = [:]
    /// Channels with a waiting frame, oldest first (fair between streams).
    private var order: [UInt32] = []
    /// Channels whose consumer can decode the next P-frame.
    private var synced: Set<UInt32> = []
    /// Frames that never reached the consumer.
    public private(set) var dropped = 0

    public init() {}

    public enum Offer: Equatable, Sendable {
        /// Kept, and nothing waited for the channel: tell the consumer.
        case wake
        /// Kept in place of a waiting frame: the consumer was told already.
        case replaced
        /// Dropped: the consumer needs a keyframe on this channel (ask the car for one).
        case needKeyframe
    }

    public mutating func offer(_ frame: Frame, channel: UInt32, isKeyframe: Bool) -> Offer {
        if isKeyframe {
            synced.insert(channel)
        } else if !synced.contains(channel) || waiting[channel] != nil {
            synced.remove(channel)
            dropped += 1
            return .needKeyframe
        }
        guard waiting.updateValue(frame, forKey: channel) == nil else {
            dropped += 1
            return .replaced
        }
        order.append(channel)
        return .wake
    }

    /// The waiting frame that came first, of any channel.
    public mutating func take() -> (channel: UInt32, frame: Frame)? {
        while !order.isEmpty {
            let channel = order.removeFirst()
            if let frame = waiting.removeValue(forKey: channel) { return (channel, frame) }
        }
        return nil
    }

    /// The channel's waiting frame.
    public mutating func take(_ channel: UInt32) -> Frame? {
        order.removeAll { $0 == channel }
        return waiting.removeValue(forKey: channel)
    }

    /// The consumer's decoder lost sync: nothing more of the channel until a keyframe.
    public mutating func lostSync(_ channel: UInt32) {
        synced.remove(channel)
    }

    /// The channel's stream ended: its waiting frame and sync go with it.
    public mutating func remove(_ channel: UInt32) {
        synced.remove(channel)
        _ = take(channel)
    }

    /// Only these channels' streams go on (the watched screens show them): the rest are removed.
    public mutating func keep(only channels: Set<UInt32>) {
        for channel in Set(waiting.keys).union(synced) where !channels.contains(channel) { remove(channel) }
    }

    public mutating func removeAll() {
        waiting.removeAll()
        order.removeAll()
        synced.removeAll()
    }
}

extension LatestVideoFrames: Sendable where Frame: Sendable {}
