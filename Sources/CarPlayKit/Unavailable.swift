// Apple APIs the protocol cannot carry. They exist only to fail to compile
// with the reason (docs/CARPLAYKIT.md, "Apple's API / ours / why"), instead
// of being missing without a word or compiling and doing nothing.
// Their bodies never run: an unavailable declaration cannot be called.

// MARK: - Templates

/// The message-compose bar button (`CPMessageComposeBarButton`): unavailable.
@available(*, unavailable, message: "the protocol has no compose button (it starts Siri's compose flow in CarPlay; the car has no such flow): use a CPBarButton with a title")
public final class CPMessageComposeBarButton {
    /// Apple's initializer (unavailable with its type).
    public init(image: CPImage? = nil) {}
}

/// A rating row of an information template (`CPInformationRatingItem`): unavailable.
@available(*, unavailable, message: "the protocol's InformationItem has a title and a detail only: put the rating in the detail text")
public final class CPInformationRatingItem {
    /// Apple's initializer (unavailable with its type).
    public init(rating: NSNumber?, maximumRating: NSNumber?, title: String?, detail: String?) {}
}

/// The Now Playing mode (`CPNowPlayingMode`, sports scores): unavailable.
@available(*, unavailable, message: "the protocol's now playing has no mode: the car draws title, artist, album, progress and the buttons")
public final class CPNowPlayingMode {}

/// A bar button's visual style (`CPBarButtonStyle`): unavailable.
@available(*, unavailable, message: "the protocol's bar button has a semantic style (default, cancel, destructive, confirm), not a visual one: the car draws its own")
public enum CPBarButtonStyle { case none, rounded }

extension CPNowPlayingTemplate {
    /// Sports mode (`nowPlayingMode`): unavailable.
    @available(*, unavailable, message: "the protocol's now playing has no mode: the car draws title, artist, album, progress and the buttons")
    public var nowPlayingMode: CPNowPlayingMode? { fatalError("unavailable") }
}

extension CPBarButton {
    /// A bar button's visual style (`buttonStyle`): unavailable.
    @available(*, unavailable, message: "the protocol's bar button has a semantic style (default, cancel, destructive, confirm), not a visual one: the car draws its own")
    public var buttonStyle: CPBarButtonStyle { fatalError("unavailable") }
}

extension CPTemplate {
    /// A custom back button (`backButton`): unavailable.
    @available(*, unavailable, message: "the car draws its own back button on every pushed template; the protocol has no field for the app's")
    public var backButton: CPBarButton? { fatalError("unavailable") }
}

extension CPAlertAction {
    /// An action with a custom color (`CPAlertAction(title:color:handler:)`): unavailable.
    @available(*, unavailable, message: "the protocol's alert action has a style (default, cancel, destructive, confirm), not a color: use init(title:style:handler:)")
    public convenience init(title: String, color: Any, handler: @escaping @MainActor (CPAlertAction) -> Void) { fatalError("unavailable") }
}

extension CPListSection {
    /// A section header with a subtitle, image and button (`CPListSection(items:header:headerSubtitle:headerImage:headerButton:sectionIndexTitle:)`): unavailable.
    @available(*, unavailable, message: "the protocol's list section has a header text only: use init(items:header:sectionIndexTitle:)")
    public convenience init(items: [any CPListTemplateItem], header: String, headerSubtitle: String?, headerImage: CPImage?,
                            headerButton: CPBarButton?, sectionIndexTitle: String?) { fatalError("unavailable") }
}

// MARK: - Navigation

/// How trip estimates are drawn (`CPTripEstimateStyle`): unavailable.
@available(*, unavailable, message: "the protocol has no estimate style: the car draws trip estimates its own way")
public enum CPTripEstimateStyle { case light, dark }

extension CPNavigationSession {
    /// Pausing with a turn-card color (`pauseTrip(for:description:turnCardColor:)`): unavailable.
    @available(*, unavailable, message: "the protocol's pause has a reason and a description only: use pauseTrip(for:description:) and the map template's guidanceBackgroundColor")
    public func pauseTrip(for reason: CPTripPauseReason, description: String?, turnCardColor: Any?) { fatalError("unavailable") }
}

extension CPMapTemplate {
    /// How trip estimates are drawn (`tripEstimateStyle`): unavailable.
    @available(*, unavailable, message: "the protocol has no estimate style: the car draws trip estimates its own way")
    public var tripEstimateStyle: CPTripEstimateStyle { fatalError("unavailable") }
}
