import Foundation
import HeadUnitWire

// Lane guidance and the maneuver fields of iOS 17.4 (PROTOCOL.md 19.2,
// "Lane guidance" and "Newer maneuver fields"). The wire's enums are
// Apple's raw values + 1 (0 is "not given"); angles travel in degrees.

/// Whether a lane follows the route (`CPLaneStatus`).
public enum CPLaneStatus: Int, Sendable, Equatable, CaseIterable {
    /// The lane leaves the route.
    case notGood = 0
    /// The lane follows the route.
    case good = 1
    /// The best lane.
    case preferred = 2

    var wire: HULaneStatus { HULaneStatus(rawValue: rawValue + 1) ?? .notGood }
}

/// The kind of a maneuver (`CPManeuverType`), Apple's cases and raw values.
public enum CPManeuverType: UInt, Sendable, Equatable, CaseIterable {
    case noTurn = 0, leftTurn, rightTurn, straightAhead, uTurn, followRoad, enterRoundabout, exitRoundabout
    case offRamp, onRamp, arriveEndOfNavigation, startRoute, arriveAtDestination, keepLeft, keepRight
    case enter_Ferry, exitFerry, changeFerry, startRouteWithUTurn, uTurnAtRoundabout, leftTurnAtEnd, rightTurnAtEnd
    case highwayOffRampLeft, highwayOffRampRight, arriveAtDestinationLeft, arriveAtDestinationRight
    case uTurnWhenPossible, arriveEndOfDirections
    case roundaboutExit1, roundaboutExit2, roundaboutExit3, roundaboutExit4, roundaboutExit5, roundaboutExit6
    case roundaboutExit7, roundaboutExit8, roundaboutExit9, roundaboutExit10, roundaboutExit11, roundaboutExit12
    case roundaboutExit13, roundaboutExit14, roundaboutExit15, roundaboutExit16, roundaboutExit17, roundaboutExit18
    case roundaboutExit19
    case sharpLeftTurn, sharpRightTurn, slightLeftTurn, slightRightTurn, changeHighway, changeHighwayLeft, changeHighwayRight

    var wire: HUManeuverType { HUManeuverType(rawValue: Int(rawValue) + 1) ?? .unspecified }
}

/// The kind of a junction (`CPJunctionType`).
public enum CPJunctionType: UInt, Sendable, Equatable, CaseIterable {
    /// Roads meeting at one point.
    case intersection = 0
    /// A roundabout: the junction's element angles are its exits.
    case roundabout = 1

    var wire: HUJunctionType { HUJunctionType(rawValue: Int(rawValue) + 1) ?? .unspecified }
}

/// The side of the road traffic drives on (`CPTrafficSide`).
public enum CPTrafficSide: UInt, Sendable, Equatable, CaseIterable {
    /// Roundabouts turn counterclockwise.
    case right = 0
    /// Roundabouts turn clockwise.
    case left = 1

    var wire: HUTrafficSide { HUTrafficSide(rawValue: Int(rawValue) + 1) ?? .unspecified }
}

/// How close the next maneuver is (`CPManeuverState`).
public enum CPManeuverState: Int, Sendable, Equatable, CaseIterable {
    /// Follow the road; the maneuver is far.
    case `continue` = 0
    /// The maneuver was just announced.
    case initial = 1
    /// Get ready.
    case prepare = 2
    /// Now.
    case execute = 3

    var wire: HUManeuverState { HUManeuverState(rawValue: rawValue + 1) ?? .unspecified }
}

extension Measurement where UnitType == UnitAngle {
    /// Degrees, as the wire carries angles (-180...180, 0 straight ahead, positive clockwise).
    var wireDegrees: Double { converted(to: .degrees).value }
}

/// One lane of a lane guidance (`CPLane`): its directions as angles (0
/// straight ahead, positive clockwise, -180 to 180 degrees) and whether it follows the route.
@MainActor
public final class CPLane {
    private struct State {
        var status: CPLaneStatus
        var highlighted: Measurement<UnitAngle>?
        var others: [Measurement<UnitAngle>]
    }
    private var state: State

    /// A lane that leaves the route, with no directions yet (Apple's iOS 17.4 initializer).
    public convenience init() {
        self.init(status: .notGood, highlighted: nil, others: [])
    }

    /// A lane that does not follow the route (`CPLaneStatus.notGood`).
    public convenience init(angles: [Measurement<UnitAngle>]) {
        self.init(status: .notGood, highlighted: nil, others: angles)
    }

    /// A lane that follows the route: `highlightedAngle` is the direction
    /// drawn lit, `angles` the others (not including it).
    public convenience init(angles: [Measurement<UnitAngle>], highlightedAngle: Measurement<UnitAngle>, isPreferred preferred: Bool) {
        self.init(status: preferred ? .preferred : .good, highlighted: highlightedAngle, others: angles)
    }

    private init(status: CPLaneStatus, highlighted: Measurement<UnitAngle>?, others: [Measurement<UnitAngle>]) {
        state = State(status: status, highlighted: highlighted, others: others)
    }

    /// Whether the lane follows the route.
    public var status: CPLaneStatus {
        get { state.status }
        set { state.status = newValue }
    }

    /// The direction drawn lit when the lane is good or preferred.
    public var highlightedAngle: Measurement<UnitAngle>? { state.highlighted }

    /// The lane's other directions.
    public var angles: [Measurement<UnitAngle>] { state.others }

    /// The highlighted direction (iOS 17.4's name; 0 degrees when none was given).
    public var primaryAngle: Measurement<UnitAngle> {
        get { state.highlighted ?? Measurement(value: 0, unit: .degrees) }
        set { state.highlighted = newValue }
    }

    /// The other directions (iOS 17.4's name for ``angles``).
    public var secondaryAngles: [Measurement<UnitAngle>] {
        get { state.others }
        set { state.others = newValue }
    }

    var wire: HULane {
        let state = state
        var lane = HULane()
        lane.status = state.status.wire
        if let highlighted = state.highlighted { lane.highlightedAngleDeg = highlighted.wireDegrees }
        lane.anglesDeg = state.others.map(\.wireDegrees)
        return lane
    }
}

/// The lanes at a point of the route and what to say about them
/// (`CPLaneGuidance`): add it to the session with
/// ``CPNavigationSession/add(_:)``, link it from a maneuver
/// (``CPManeuver/linkedLaneGuidance``) or make it the session's
/// ``CPNavigationSession/currentLaneGuidance``.
@MainActor
public final class CPLaneGuidance {
    /// The guidance's id (ours: the wire names it; made up when not given).
    public let identifier: String
    /// The lanes, left to right (1 to 16).
    public var lanes: [CPLane] = []
    /// What to say, the car shows the longest that fits (at least one).
    public var instructionVariants: [String] = []

    /// A lane guidance; set its lanes and instructions before adding it.
    public init(identifier: String? = nil) {
        self.identifier = identifier ?? ElementID.make("lanes")
    }

    var wire: HULaneGuidance {
        var guidance = HULaneGuidance()
        guidance.id = identifier
        guidance.lanes = lanes.map(\.wire)
        guidance.instructionVariants = instructionVariants.longestFirst
        return guidance
    }
}

extension CPManeuver {
    /// Writes the newer fields (those set) into the maneuver's wire form.
    func addNewerFields(to maneuver: inout HUManeuver) {
        let newer = newerFields
        if let type = newer.maneuverType { maneuver.maneuverType = type.wire }
        if let junction = newer.junctionType { maneuver.junctionType = junction.wire }
        if let side = newer.trafficSide { maneuver.trafficSide = side.wire }
        if let exit = newer.junctionExitAngle { maneuver.junctionExitAngleDeg = exit.wireDegrees }
        if let elements = newer.junctionElementAngles {
            maneuver.junctionElementAnglesDeg = elements.map(\.wireDegrees).sorted()
        }
        maneuver.highwayExitLabel = newer.highwayExitLabel
        if let linked = newer.linkedLaneGuidance { maneuver.linkedLaneGuidanceID = linked.identifier }
        maneuver.roadFollowingVariants = (newer.roadFollowingManeuverVariants ?? []).longestFirst
        maneuver.notificationInstructionVariants = newer.notificationInstructionVariants.longestFirst
        if let image = newer.dashboardSymbolImage { maneuver.dashboardSymbol = image.wire }
        if let image = newer.notificationSymbolImage { maneuver.notificationSymbol = image.wire }
        if let image = newer.dashboardJunctionImage { maneuver.dashboardJunctionImage = image.wire }
    }

    /// The kind of maneuver (`maneuverType`; `.noTurn` until set, and not sent until set).
    public var maneuverType: CPManeuverType {
        get { newerFields.maneuverType ?? .noTurn }
        set { newerFields.maneuverType = newValue }
    }

    /// The kind of junction (`junctionType`; `.intersection` until set, and not sent until set).
    public var junctionType: CPJunctionType {
        get { newerFields.junctionType ?? .intersection }
        set { newerFields.junctionType = newValue }
    }

    /// The side traffic drives on (`trafficSide`; `.right` until set, and not sent until set).
    public var trafficSide: CPTrafficSide {
        get { newerFields.trafficSide ?? .right }
        set { newerFields.trafficSide = newValue }
    }

    /// The road the driver takes out of the junction (-180 to 180 degrees, 0 straight ahead).
    public var junctionExitAngle: Measurement<UnitAngle>? {
        get { newerFields.junctionExitAngle }
        set { newerFields.junctionExitAngle = newValue }
    }

    /// The junction's other roads, not the exit (at most 16).
    public var junctionElementAngles: Set<Measurement<UnitAngle>>? {
        get { newerFields.junctionElementAngles }
        set { newerFields.junctionElementAngles = newValue }
    }

    /// "Exit 12A" (at most 64 characters).
    public var highwayExitLabel: String {
        get { newerFields.highwayExitLabel }
        set { newerFields.highwayExitLabel = newValue }
    }

    /// The lane guidance at this maneuver: the session adds it first when it
    /// has not (ours: Apple asks the app to add it itself).
    public var linkedLaneGuidance: CPLaneGuidance? {
        get { newerFields.linkedLaneGuidance }
        set { newerFields.linkedLaneGuidance = newValue }
    }

    /// The road after the maneuver, longest first.
    public var roadFollowingManeuverVariants: [String]? {
        get { newerFields.roadFollowingManeuverVariants }
        set { newerFields.roadFollowingManeuverVariants = newValue }
    }

    /// The symbol on the dashboard (nil: ``symbolImage``).
    public var dashboardSymbolImage: CPImage? {
        get { newerFields.dashboardSymbolImage }
        set { newerFields.dashboardSymbolImage = newValue }
    }

    /// The junction image on the dashboard (nil: ``junctionImage``).
    public var dashboardJunctionImage: CPImage? {
        get { newerFields.dashboardJunctionImage }
        set { newerFields.dashboardJunctionImage = newValue }
    }

    /// The symbol in a maneuver banner (nil: ``symbolImage``; 50 x 50 pt at most).
    public var notificationSymbolImage: CPImage? {
        get { newerFields.notificationSymbolImage }
        set { newerFields.notificationSymbolImage = newValue }
    }

    /// The instruction in a maneuver banner (empty: ``instructionVariants``).
    public var notificationInstructionVariants: [String] {
        get { newerFields.notificationInstructionVariants }
        set { newerFields.notificationInstructionVariants = newValue }
    }
}

/// CPManeuver's iOS 14 and 17.4 fields, kept together.
struct CPManeuverNewerFields {
    var maneuverType: CPManeuverType?
    var junctionType: CPJunctionType?
    var trafficSide: CPTrafficSide?
    var junctionExitAngle: Measurement<UnitAngle>?
    var junctionElementAngles: Set<Measurement<UnitAngle>>?
    var highwayExitLabel = ""
    var linkedLaneGuidance: CPLaneGuidance?
    var roadFollowingManeuverVariants: [String]?
    var dashboardSymbolImage: CPImage?
    var dashboardJunctionImage: CPImage?
    var notificationSymbolImage: CPImage?
    var notificationInstructionVariants: [String] = []
}

/// Which lane guidances a navigation session sent, newest last, so that
/// one linked or made current is sent again only when the car may have
/// dropped it (it keeps the 32 newest, PROTOCOL.md 19.2).
struct SentLaneGuidances: Sendable {
    private(set) var ids: [String] = []
    /// Below the car's 32, less the three it may be keeping for being in use.
    static let surelyHeld = 29

    func surelyHeld(_ id: String) -> Bool { ids.suffix(Self.surelyHeld).contains(id) }

    mutating func sent(_ id: String) {
        ids.removeAll { $0 == id }
        ids.append(id)
        if ids.count > 64 { ids.removeFirst(ids.count - 64) }
    }
}

extension CPNavigationSession {
    /// Adds lane guidances in the order the driver meets them
    /// (`add(_ laneGuidances:)`); sent in requests of up to 16.
    public func add(_ laneGuidances: [CPLaneGuidance]) {
        send(laneGuidances)
    }

    /// Sends lane guidances in order, 16 per request.
    func send(_ laneGuidances: [CPLaneGuidance]) {
        guard !laneGuidances.isEmpty else { return }
        for guidance in laneGuidances { sentLaneGuidances.sent(guidance.identifier) }
        var start = 0
        while start < laneGuidances.count {
            let chunk = laneGuidances[start..<min(start + 16, laneGuidances.count)].map(\.wire)
            application.postNavigation(.addLaneGuidances(HULaneGuidances.with { $0.laneGuidances = chunk }))
            start += 16
        }
    }

    /// Those of `guidances` the car may not hold (never sent, or sent long ago), each once.
    func notSurelyHeld(_ guidances: [CPLaneGuidance]) -> [CPLaneGuidance] {
        var seen = Set<String>()
        return guidances.filter { guidance in
            seen.insert(guidance.identifier).inserted && !sentLaneGuidances.surelyHeld(guidance.identifier)
        }
    }

    /// The lane guidance shown now (`currentLaneGuidance`; nil: none). One
    /// the session has not added is added first (ours).
    public var currentLaneGuidance: CPLaneGuidance? {
        get { guidanceState.currentLaneGuidance }
        set {
            guidanceState.currentLaneGuidance = newValue
            if let newValue { send(notSurelyHeld([newValue])) }
            application.postNavigation(.setCurrentLaneGuidance(HUCurrentLaneGuidance.with { $0.laneGuidanceID = newValue?.identifier ?? "" }))
        }
    }

    /// The road the car is on, most verbose first (`currentRoadNameVariants`).
    public var currentRoadNameVariants: [String] {
        get { guidanceState.roadNameVariants }
        set {
            guidanceState.roadNameVariants = newValue
            application.postNavigation(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = newValue.longestFirst }))
        }
    }

    /// How close the next maneuver is (`maneuverState`; `.continue` until set).
    public var maneuverState: CPManeuverState {
        get { guidanceState.maneuverState }
        set {
            guidanceState.maneuverState = newValue
            application.postNavigation(.setManeuverState(HUCurrentManeuverState.with { $0.state = newValue.wire }))
        }
    }
}

/// The session's own values of iOS 17.4.
struct CPNavigationGuidanceState {
    var currentLaneGuidance: CPLaneGuidance?
    var roadNameVariants: [String] = []
    var maneuverState: CPManeuverState = .continue
}
