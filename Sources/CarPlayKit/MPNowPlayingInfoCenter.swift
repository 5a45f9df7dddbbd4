import HeadUnitWire

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
@MainActor
public final class MPMediaItemArtwork {
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
@MainActor
public final class MPNowPlayingInfoCenter {
    private static let instance = MPNowPlayingInfoCenter()
    /// The one info center.
    public static func `default`() -> MPNowPlayingInfoCenter { instance }

    private var info: [String: Any]?

    private init() {}

    /// The now-playing properties (the keys above; others are ignored). Nil: nothing plays.
    public var nowPlayingInfo: [String: Any]? {
        get { info }
        set {
            info = newValue
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
