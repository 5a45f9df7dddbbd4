import HeadUnitWire

/// A button of the now-playing screen (`CPNowPlayingButton`); use a subclass.
@MainActor
public class CPNowPlayingButton {
    /// The button's id (made up when not given).
    public let identifier: String
    /// A disabled button cannot be pressed.
    public var isEnabled: Bool = true { didSet { CPNowPlayingTemplate.shared.setNeedsUpdate() } }
    /// Shown as selected (shuffle on...).
    public var isSelected: Bool = false { didSet { CPNowPlayingTemplate.shared.setNeedsUpdate() } }
    /// Called when the driver presses the button.
    public let handler: (@MainActor (CPNowPlayingButton) -> Void)?

    /// A button.
    public init(identifier: String? = nil, handler: (@MainActor (CPNowPlayingButton) -> Void)?) {
        self.identifier = identifier ?? ElementID.make("np-button")
        self.handler = handler
    }

    var kind: HUNowPlayingButtonKind { .unspecified }
    var image: CPImage? { nil }

    var wire: HUNowPlayingButton {
        var button = HUNowPlayingButton()
        button.id = identifier
        button.kind = kind
        if let image { button.image = image.wire }
        button.selected = isSelected
        button.disabled = !isEnabled
        return button
    }
}

/// Shuffle (`CPNowPlayingShuffleButton`).
@MainActor
public final class CPNowPlayingShuffleButton: CPNowPlayingButton {
    override var kind: HUNowPlayingButtonKind { .shuffle }
}
/// Repeat (`CPNowPlayingRepeatButton`).
@MainActor
public final class CPNowPlayingRepeatButton: CPNowPlayingButton {
    override var kind: HUNowPlayingButtonKind { .repeat }
}
/// Add to library (`CPNowPlayingAddToLibraryButton`).
@MainActor
public final class CPNowPlayingAddToLibraryButton: CPNowPlayingButton {
    override var kind: HUNowPlayingButtonKind { .addToLibrary }
}
/// More (`CPNowPlayingMoreButton`).
@MainActor
public final class CPNowPlayingMoreButton: CPNowPlayingButton {
    override var kind: HUNowPlayingButtonKind { .more }
}
/// Playback rate (`CPNowPlayingPlaybackRateButton`).
@MainActor
public final class CPNowPlayingPlaybackRateButton: CPNowPlayingButton {
    override var kind: HUNowPlayingButtonKind { .playbackRate }
}
/// A button with your image (`CPNowPlayingImageButton`).
@MainActor
public final class CPNowPlayingImageButton: CPNowPlayingButton {
    private let buttonImage: CPImage
    /// An image button.
    public init(image: CPImage, identifier: String? = nil, handler: (@MainActor (CPNowPlayingButton) -> Void)?) {
        buttonImage = image
        super.init(identifier: identifier, handler: handler)
    }
    override var kind: HUNowPlayingButtonKind { .image }
    override var image: CPImage? { buttonImage }
}

/// What is playing, standing in for `MPNowPlayingInfoCenter.default().nowPlayingInfo`
/// (the car draws the now-playing screen from it).
public struct CPNowPlayingInfo: Sendable, Equatable {
    /// The track's title.
    public var title: String
    /// The artist.
    public var artist: String
    /// The album.
    public var album: String
    /// The artwork.
    public var artwork: CPImage?
    /// Seconds played.
    public var elapsedTime: Double
    /// The track's length in seconds (ignored for a live stream).
    public var duration: Double
    /// 0 paused, 1 playing.
    public var playbackRate: Float
    /// An open-ended stream.
    public var isLiveStream: Bool
    /// A podcast or audiobook: navigation prompts pause it instead of lowering it.
    public var isSpokenAudio: Bool

    /// Now-playing information.
    public init(title: String = "", artist: String = "", album: String = "", artwork: CPImage? = nil, elapsedTime: Double = 0,
                duration: Double = 0, playbackRate: Float = 0, isLiveStream: Bool = false, isSpokenAudio: Bool = false) {
        self.title = title
        self.artist = artist
        self.album = album
        self.artwork = artwork
        self.elapsedTime = elapsedTime
        self.duration = duration
        self.playbackRate = playbackRate
        self.isLiveStream = isLiveStream
        self.isSpokenAudio = isSpokenAudio
    }
}

/// Hears the now-playing screen's built-in buttons (`CPNowPlayingTemplateObserver`).
@MainActor
public protocol CPNowPlayingTemplateObserver: AnyObject {
    /// The driver pressed "Playing Next": push your queue (a list).
    func nowPlayingTemplateUpNextButtonTapped(_ nowPlayingTemplate: CPNowPlayingTemplate)
    /// The driver pressed the album or artist.
    func nowPlayingTemplateAlbumArtistButtonTapped(_ nowPlayingTemplate: CPNowPlayingTemplate)
}

extension CPNowPlayingTemplateObserver {
    /// Does nothing (optional in CarPlay).
    public func nowPlayingTemplateUpNextButtonTapped(_ nowPlayingTemplate: CPNowPlayingTemplate) {}
    /// Does nothing (optional in CarPlay).
    public func nowPlayingTemplateAlbumArtistButtonTapped(_ nowPlayingTemplate: CPNowPlayingTemplate) {}
}

/// The shared now-playing screen of audio apps (`CPNowPlayingTemplate.shared`).
///
/// Its id is always `now-playing`. Set ``nowPlayingInfo`` (ours, instead of
/// `MPNowPlayingInfoCenter`) and the buttons; every change is sent to the car
/// for each connected audio app's scene, which may show it at any time. Push
/// it with `pushTemplate(CPNowPlayingTemplate.shared, animated:)`.
@MainActor
public final class CPNowPlayingTemplate: CPTemplate {
    /// The one now-playing template.
    public static let shared = CPNowPlayingTemplate()

    /// What is playing.
    public var nowPlayingInfo = CPNowPlayingInfo() { didSet { setNeedsUpdate() } }
    /// The buttons (at most 5).
    public private(set) var nowPlayingButtons: [CPNowPlayingButton] = []
    /// Shows the "Playing Next" button.
    public var isUpNextButtonEnabled = false { didSet { setNeedsUpdate() } }
    /// The "Playing Next" button's title.
    public var upNextTitle = "" { didSet { setNeedsUpdate() } }
    /// Shows the album or artist as a button.
    public var isAlbumArtistButtonEnabled = false { didSet { setNeedsUpdate() } }
    private var observers: [Weak<AnyObject>] = []
    /// The audio apps' interface controllers it is sent to.
    private var controllers: [Weak<CPInterfaceController>] = []

    private init() {
        super.init(identifier: "now-playing", prefix: "now-playing")
    }

    /// Replaces the buttons.
    public func updateNowPlayingButtons(_ nowPlayingButtons: [CPNowPlayingButton]) {
        self.nowPlayingButtons = nowPlayingButtons
        setNeedsUpdate()
    }

    /// Adds an observer (held weakly).
    public func add(_ observer: any CPNowPlayingTemplateObserver) {
        observers = observers.filter { $0.object != nil } + [Weak<AnyObject>(observer as AnyObject)]
    }

    /// Removes an observer.
    public func remove(_ observer: any CPNowPlayingTemplateObserver) {
        observers = observers.filter { $0.object != nil && $0.object !== observer }
    }

    var content: HUNowPlayingTemplate {
        let info = nowPlayingInfo
        var content = HUNowPlayingTemplate()
        content.title = info.title
        content.artist = info.artist
        content.album = info.album
        if let artwork = info.artwork { content.artwork = artwork.wire }
        content.elapsedSeconds = info.elapsedTime
        content.durationSeconds = info.duration
        content.live = info.isLiveStream
        content.playbackRate = info.playbackRate
        content.spokenAudio = info.isSpokenAudio
        content.buttons = nowPlayingButtons.map(\.wire)
        content.upNextEnabled = isUpNextButtonEnabled
        content.upNextTitle = upNextTitle
        content.albumArtistButtonEnabled = isAlbumArtistButtonEnabled
        return content
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? { .nowPlaying(content) }

    /// An audio app's scene connected: keep it up to date from now on.
    func attach(_ controller: CPInterfaceController) {
        controllers = controllers.filter { $0.object != nil } + [Weak(controller)]
        controller.postNowPlaying(content)
    }

    func detach(_ controller: CPInterfaceController) {
        controllers = controllers.filter { $0.object != nil && $0.object !== controller }
    }

    override func setNeedsUpdate() {
        let content = self.content
        for controller in controllers.compactMap(\.object) { controller.postNowPlaying(content) }
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        guard case .nowPlayingButton(let pressed) = event.kind else { return false }
        let observers = self.observers.compactMap { $0.object as? any CPNowPlayingTemplateObserver }
        switch pressed.buttonID {
        case "up-next": observers.forEach { $0.nowPlayingTemplateUpNextButtonTapped(self) }
        case "album-artist": observers.forEach { $0.nowPlayingTemplateAlbumArtistButtonTapped(self) }
        default:
            if let button = nowPlayingButtons.first(where: { $0.identifier == pressed.buttonID }) { button.handler?(button) }
        }
        return true
    }
}
