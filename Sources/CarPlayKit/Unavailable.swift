// Apple APIs the protocol cannot carry. They exist only to fail to compile
// with the reason (docs/CARPLAYKIT.md, "Apple's API / ours / why"), instead
// of being missing without a word or compiling and doing nothing.
// Their bodies never run: an unavailable declaration cannot be called.

// MARK: - CallKit

/// CallKit's call controller (`CXCallController`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the protocol carries no call state between the phone and the car (no message starts, answers or ends a call), so a call cannot be placed or shown through the car")
public final class CXCallController {
    /// Apple's initializer (unavailable with its type).
    public init() {}
}

/// CallKit's start-call action (`CXStartCallAction`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the protocol carries no call state between the phone and the car")
public final class CXStartCallAction {
    /// Apple's initializer (unavailable with its type).
    public init(call: UUID, handle: CXHandle) {}
}

/// CallKit's answer-call action (`CXAnswerCallAction`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the protocol carries no call state between the phone and the car")
public final class CXAnswerCallAction {
    /// Apple's initializer (unavailable with its type).
    public init(call: UUID) {}
}

/// CallKit's end-call action (`CXEndCallAction`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the protocol carries no call state between the phone and the car")
public final class CXEndCallAction {
    /// Apple's initializer (unavailable with its type).
    public init(call: UUID) {}
}

/// CallKit's transaction (`CXTransaction`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the protocol carries no call state between the phone and the car")
public final class CXTransaction {
    /// Apple's initializer (unavailable with its type).
    public init(action: Any) {}
}

/// CallKit's call handle (`CXHandle`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the protocol carries no call state between the phone and the car")
public final class CXHandle {
    /// Apple's initializer (unavailable with its type).
    public init(type: Any, value: String) {}
}

/// CallKit's provider (`CXProvider`), which reports calls to the system: unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the car is never told of a call, so there is nothing to report to")
public final class CXProvider {
    /// Apple's initializer (unavailable with its type).
    public init(configuration: CXProviderConfiguration) {}
}

/// CallKit's provider configuration (`CXProviderConfiguration`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the car is never told of a call, so there is nothing to report to")
public final class CXProviderConfiguration {
    /// Apple's initializer (unavailable with its type).
    public init() {}
}

/// CallKit's call update (`CXCallUpdate`): unavailable.
@available(*, unavailable, message: "CallKit has no counterpart: the car is never told of a call, so there is nothing to report to")
public final class CXCallUpdate {
    /// Apple's initializer (unavailable with its type).
    public init() {}
}

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

/// Lane guidance (`CPLaneGuidance`): unavailable.
@available(*, unavailable, message: "the protocol has no lane list: send lane guidance as a second maneuver with displayStyle .symbolOnly, no instructions and the lanes drawn in its symbolImage (TEMPLATES.md section 9)")
public final class CPLaneGuidance {
    /// Apple's initializer (unavailable with its type).
    public init() {}
}

/// One lane (`CPLane`): unavailable.
@available(*, unavailable, message: "the protocol has no lane list: send lane guidance as a second maneuver with displayStyle .symbolOnly and the lanes drawn in its symbolImage")
public final class CPLane {
    /// Apple's initializer (unavailable with its type).
    public init() {}
}

/// The maneuver's kind (`CPManeuverType`): unavailable.
@available(*, unavailable, message: "the protocol's maneuver has no type: the car draws the app's symbolImage and instructions")
public enum CPManeuverType { case noTurn }

/// The junction's kind (`CPJunctionType`): unavailable.
@available(*, unavailable, message: "the protocol's maneuver has no junction type: draw the junction in junctionImage")
public enum CPJunctionType { case intersection }

/// The side of the road traffic drives on (`CPTrafficSide`): unavailable.
@available(*, unavailable, message: "the protocol's maneuver has no traffic side: the app's symbolImage shows the turn")
public enum CPTrafficSide { case right, left }

/// The maneuver state of a navigation session (`CPManeuverState`): unavailable.
@available(*, unavailable, message: "the protocol has no maneuver state: send the upcoming maneuvers and their estimates")
public enum CPManeuverState { case continue_, initial, prepare, execute }

/// How trip estimates are drawn (`CPTripEstimateStyle`): unavailable.
@available(*, unavailable, message: "the protocol has no estimate style: the car draws trip estimates its own way")
public enum CPTripEstimateStyle { case light, dark }

extension CPManeuver {
    /// The maneuver's kind (`maneuverType`): unavailable.
    @available(*, unavailable, message: "the protocol's maneuver has no type: the car draws the app's symbolImage and instructions")
    public var maneuverType: CPManeuverType { fatalError("unavailable") }
    /// The junction's kind (`junctionType`): unavailable.
    @available(*, unavailable, message: "the protocol's maneuver has no junction type: draw the junction in junctionImage")
    public var junctionType: CPJunctionType { fatalError("unavailable") }
    /// The side of the road traffic drives on (`trafficSide`): unavailable.
    @available(*, unavailable, message: "the protocol's maneuver has no traffic side")
    public var trafficSide: CPTrafficSide { fatalError("unavailable") }
    /// The exit's label (`highwayExitLabel`): unavailable.
    @available(*, unavailable, message: "the protocol's maneuver has no exit label: put it in the instruction variants")
    public var highwayExitLabel: String? { fatalError("unavailable") }
    /// Lane guidance linked to the maneuver (`linkedLaneGuidance`): unavailable.
    @available(*, unavailable, message: "the protocol has no lane list: send lane guidance as a second maneuver with displayStyle .symbolOnly")
    public var linkedLaneGuidance: CPLaneGuidance? { fatalError("unavailable") }
    /// The dashboard's own symbol (`dashboardSymbolImage`): unavailable.
    @available(*, unavailable, message: "the protocol's maneuver has one symbol (light and dark) for every screen: use symbolImage and darkSymbolImage")
    public var dashboardSymbolImage: CPImage? { fatalError("unavailable") }
    /// The notification's own symbol (`notificationSymbolImage`): unavailable.
    @available(*, unavailable, message: "the car shows no maneuver notifications (the protocol has no banner): use symbolImage")
    public var notificationSymbolImage: CPImage? { fatalError("unavailable") }
    /// The notification's own instructions (`notificationInstructionVariants`): unavailable.
    @available(*, unavailable, message: "the car shows no maneuver notifications (the protocol has no banner): use instructionVariants")
    public var notificationInstructionVariants: [String] { fatalError("unavailable") }
}

extension CPNavigationSession {
    /// Pausing with a turn-card color (`pauseTrip(for:description:turnCardColor:)`): unavailable.
    @available(*, unavailable, message: "the protocol's pause has a reason and a description only: use pauseTrip(for:description:) and the map template's guidanceBackgroundColor")
    public func pauseTrip(for reason: CPTripPauseReason, description: String?, turnCardColor: Any?) { fatalError("unavailable") }
    /// The road the car is on (`currentRoadNameVariants`): unavailable.
    @available(*, unavailable, message: "the protocol has no current road name: the car shows the maneuvers' instructions")
    public var currentRoadNameVariants: [String] { fatalError("unavailable") }
    /// The maneuver state (`maneuverState`): unavailable.
    @available(*, unavailable, message: "the protocol has no maneuver state: send the upcoming maneuvers and their estimates")
    public var maneuverState: CPManeuverState { fatalError("unavailable") }
}

extension CPMapTemplate {
    /// How trip estimates are drawn (`tripEstimateStyle`): unavailable.
    @available(*, unavailable, message: "the protocol has no estimate style: the car draws trip estimates its own way")
    public var tripEstimateStyle: CPTripEstimateStyle { fatalError("unavailable") }
}
