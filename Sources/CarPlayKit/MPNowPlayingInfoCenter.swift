import HeadUnitWire
import NIOConcurrencyHelpers

/// `MPMediaItemPropertyTitle` and the other keys of `nowPlayingInfo` the car reads.
public let MPMediaItemPropertyTitle = "title"
public let MPMediaItemPropertyArtist = "artist"
public let MPMediaItemPropertyAlbumTitle = "albumTitle"
public let MPMediaItemPropertyArtwork = "artwork"
public let MPMediaItemPropertyPlaybackDuration = "playbackDuration"
public let MPNowPlayingInfoPropertyElapsedPlaybackTime = "MPNowPlayingInfoPropertyElapsedPlaybackTime"
public let MPNowPlayingInfoPropertyPlaybackRate = "MPNowPlayingInfoPropertyPlaybackRate"
public let MPNowPlayingInfoPropertyIsLiveStream = "MPNowPlayingInfoPropertyIsLiveStream"
/// Ours: a podcast or audiobook (MediaPlayer says it with `MPNowPlayingInfoPropertyMediaType`).
public let MPNowPlayingInfoPropertyIsSpokenAudio = "MPNowPlayingInfoPropertyIsSpokenAudio"

/// Artwork for `MPMediaItemPropertyArtwork` (`MPMediaItemArtwork`), from a `CPImage`.
public final class MPMediaItemArtwork: @unchecked Sendable {
    let image: CPImage
    /// The artwork.
    public init(image: CPImage) { self.image = image }
}

/// What is playing (`MPNowPlayingInfoCenter`): the car's Now Playing screen,
/// dashboard and cluster draw it. Setting ``nowPlayingInfo`` sets
/// `CPNowPlayingTemplate.shared.nowPlayingInfo`, which the car gets.
///
///     MPNowPlayingInfoCenter.default().nowPlayingInfo = [
///         MPMediaItemPropertyTitle: "Blue in Green", MPMediaItemPropertyArtist: "Miles Davis",
///         MPMediaItemPropertyArtwork: MPMediaItemArtwork(image: cover),
///         MPMediaItemPropertyPlaybackDuration: 337.0, MPNowPlayingInfoPropertyPlaybackRate: 1.0]
public final class MPNowPlayingInfoCenter: @unchecked Sendable {
    private static let instance = MPNowPlayingInfoCenter()
    /// The one info center.
    public static func `default`() -> MPNowPlayingInfoCenter { instance }

    // @unchecked: the dictionary (of `Any`) is only read and written under this lock.
    private let lock = NIOLockedBox()

    private init() {}

    /// The now-playing properties (the keys above; others are ignored). Nil: nothing plays.
    public var nowPlayingInfo: [String: Any]? {
        get { lock.value }
        set {
            lock.value = newValue
            CPNowPlayingTemplate.shared.nowPlayingInfo = Self.info(newValue ?? [:])
        }
    }

    static func info(_ properties: [String: Any]) -> CPNowPlayingInfo {
        func number(_ key: String) -> Double? {
            switch properties[key] {
            case let value as Double: return value
            case let value as Float: return Double(value)
            case let value as Int: return Double(value)
            case let value as NSNumber: return value.doubleValue
            default: return nil
            }
        }
        return CPNowPlayingInfo(
            title: properties[MPMediaItemPropertyTitle] as? String ?? "",
            artist: properties[MPMediaItemPropertyArtist] as? String ?? "",
            album: properties[MPMediaItemPropertyAlbumTitle] as? String ?? "",
            artwork: (properties[MPMediaItemPropertyArtwork] as? MPMediaItemArtwork)?.image,
            elapsedTime: number(MPNowPlayingInfoPropertyElapsedPlaybackTime) ?? 0,
            duration: number(MPMediaItemPropertyPlaybackDuration) ?? 0,
            playbackRate: Float(number(MPNowPlayingInfoPropertyPlaybackRate) ?? 0),
            isLiveStream: properties[MPNowPlayingInfoPropertyIsLiveStream] as? Bool ?? false,
            isSpokenAudio: properties[MPNowPlayingInfoPropertyIsSpokenAudio] as? Bool ?? false)
    }
}

/// The dictionary under a lock (`Any` is not Sendable: NIO's boxes want it to be).
private final class NIOLockedBox: @unchecked Sendable {
    private let lock = NIOLock()
    private var stored: [String: Any]?
    var value: [String: Any]? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
