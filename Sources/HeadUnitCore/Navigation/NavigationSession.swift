import HeadUnitWire

/// One navigation app's guidance (PROTOCOL.md section 19) as a state machine:
///
///     idle --start--> active <--maneuvers-- paused
///                       |  \--pause--------^  |
///          finish/cancel/car ends it          |
///                       v                     v
///                     ended(reason) --start--> active
///
/// Every operation is a pure function of (session, request); the Car routes
/// requests here and publishes what changed.
public struct NavigationSession: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case idle
        case active
        case paused(HUPauseReason, description: String)
        case ended(HUNavigationEndReason)
    }

    public private(set) var state: State = .idle
    public private(set) var trip = HUTrip()
    public private(set) var routeChoiceID = ""
    /// The upcoming maneuvers, each carrying the estimates last shown for it.
    public private(set) var maneuvers: [HUManeuver] = []
    /// The trip's estimates last shown; nil before the first.
    public private(set) var tripEstimates: HUTravelEstimates?
    /// The lane guidances the app added and the current one.
    public private(set) var laneGuidances = HeldLaneGuidances()
    /// The road the car is on, longest first (empty: not said).
    public private(set) var roadNameVariants: [String] = []
    public private(set) var maneuverState: HUManeuverState = .unspecified

    public init() {}

    /// A session as a daemon restart hands it over (CarSnapshot): its
    /// requests were checked when the app made them.
    init(restoring state: State, trip: HUTrip, routeChoiceID: String, maneuvers: [HUManeuver], tripEstimates: HUTravelEstimates?,
         laneGuidances: HeldLaneGuidances = HeldLaneGuidances(), roadNameVariants: [String] = [], maneuverState: HUManeuverState = .unspecified) {
        self.state = state
        self.trip = trip
        self.routeChoiceID = routeChoiceID
        self.maneuvers = maneuvers
        self.tripEstimates = tripEstimates
        self.laneGuidances = laneGuidances
        self.roadNameVariants = roadNameVariants
        self.maneuverState = maneuverState
    }

    public var isRunning: Bool {
        switch state {
        case .active, .paused: return true
        case .idle, .ended: return false
        }
    }

    /// Why the session cannot take guidance updates, or nil when it can.
    func requireRunning() -> RuleViolation? {
        switch state {
        case .active, .paused: return nil
        case .idle: return RuleViolation(.navigationNotActive, "no navigation session: start one for a trip first")
        case .ended(let reason):
            switch reason {
            case .nativeNavigation, .otherApp:
                return RuleViolation(.navigationCancelledByCar, "the car cancelled guidance (\(reason)); start a new session to guide again")
            case .unspecified, .finished, .cancelledByApp, .appClosed, .closedByCar, .phoneGone, .shuttingDown, .UNRECOGNIZED:
                return RuleViolation(.navigationNotActive, "the navigation session ended (\(reason)); start a new one")
            }
        }
    }

    public mutating func start(trip: HUTrip, routeChoiceID: String) -> Result<Void, RuleViolation> {
        if isRunning {
            return .failure(RuleViolation(.navigationAlreadyActive, "guidance for trip '\(self.trip.id)' is running: finish or cancel it first"))
        }
        if let violation = NavigationRules.check(trip: trip) { return .failure(violation) }
        let route = routeChoiceID.isEmpty ? trip.routeChoices[0].id : routeChoiceID
        guard trip.routeChoices.contains(where: { $0.id == route }) else {
            return .failure(RuleViolation(.unknownItem, "trip '\(trip.id)' has no route choice '\(route)'"))
        }
        self.trip = trip
        self.routeChoiceID = route
        clearGuidance()
        tripEstimates = trip.routeChoices.first { $0.id == route }.flatMap { $0.hasEstimates ? $0.estimates : nil }
        state = .active
        return .success(())
    }

    public mutating func pause(_ reason: HUPauseReason, description: String) -> Result<Void, RuleViolation> {
        if let violation = requireRunning() { return .failure(violation) }
        if reason == .unspecified {
            return .failure(RuleViolation(.invalidArgument, "a pause needs a reason (arrived, loading, locating, rerouting, proceed to route)"))
        }
        state = .paused(reason, description: description)
        return .success(())
    }

    /// Replaces the upcoming maneuvers; resumes guidance when paused. A
    /// linked lane guidance must be held (checked after every field rule).
    public mutating func updateManeuvers(_ new: [HUManeuver], scale: UInt32) -> Result<Void, RuleViolation> {
        if let violation = requireRunning() ?? NavigationRules.check(maneuvers: new, scale: scale) { return .failure(violation) }
        for maneuver in new where !maneuver.linkedLaneGuidanceID.isEmpty && laneGuidances[maneuver.linkedLaneGuidanceID] == nil {
            return .failure(RuleViolation(
                .unknownItem,
                "maneuver '\(maneuver.id)' links lane guidance '\(maneuver.linkedLaneGuidanceID)', which was not added to the session (add_lane_guidances)"))
        }
        maneuvers = new
        state = .active
        return .success(())
    }

    /// Adds lane guidances (PROTOCOL.md 16.13, `add_lane_guidances`); the
    /// oldest beyond the held maximum go, except those in use.
    public mutating func addLaneGuidances(_ new: [HULaneGuidance]) -> Result<Void, RuleViolation> {
        if let violation = requireRunning() ?? LaneGuidanceRules.check(laneGuidances: new) { return .failure(violation) }
        laneGuidances.add(new, inUse: Set(maneuvers.map(\.linkedLaneGuidanceID).filter { !$0.isEmpty }))
        return .success(())
    }

    /// Names the lane guidance shown now; empty: none.
    public mutating func setCurrentLaneGuidance(_ id: String) -> Result<Void, RuleViolation> {
        if let violation = requireRunning() ?? laneGuidances.setCurrent(id) { return .failure(violation) }
        return .success(())
    }

    public mutating func setRoadName(_ variants: [String]) -> Result<Void, RuleViolation> {
        if let violation = requireRunning() ?? LaneGuidanceRules.check(roadNameVariants: variants) { return .failure(violation) }
        roadNameVariants = variants
        return .success(())
    }

    public mutating func setManeuverState(_ new: HUManeuverState) -> Result<Void, RuleViolation> {
        if let violation = requireRunning() ?? LaneGuidanceRules.check(maneuverState: new) { return .failure(violation) }
        maneuverState = new
        return .success(())
    }

    /// What the metadata stream draws of the lanes: the current guidance and
    /// those the upcoming maneuvers link, each once.
    public var shownLaneGuidances: [HULaneGuidance] { laneGuidances.shown(linkedBy: maneuvers) }

    private mutating func clearGuidance() {
        maneuvers = []
        laneGuidances = HeldLaneGuidances()
        roadNameVariants = []
        maneuverState = .unspecified
    }

    /// New estimates for a current maneuver (or the trip, `maneuverID` empty).
    /// Returns whether they were shown: an update that is not a significant
    /// change is accepted and dropped (the previous estimates stay shown).
    public mutating func updateEstimates(maneuverID: String, _ estimates: HUTravelEstimates) -> Result<Bool, RuleViolation> {
        if let violation = requireRunning() ?? NavigationRules.estimates(estimates, "estimates") { return .failure(violation) }
        if maneuverID.isEmpty {
            guard NavigationRules.isSignificant(estimates, comparedTo: tripEstimates) else { return .success(false) }
            tripEstimates = estimates
            return .success(true)
        }
        guard let index = maneuvers.firstIndex(where: { $0.id == maneuverID }) else {
            return .failure(RuleViolation(.unknownItem, "maneuver '\(maneuverID)' is not one of the upcoming maneuvers"))
        }
        let shown = maneuvers[index].hasEstimates ? maneuvers[index].estimates : nil
        guard NavigationRules.isSignificant(estimates, comparedTo: shown) else { return .success(false) }
        maneuvers[index].estimates = estimates
        return .success(true)
    }

    public mutating func finish() -> Result<Void, RuleViolation> {
        if let violation = requireRunning() { return .failure(violation) }
        end(.finished)
        return .success(())
    }

    public mutating func cancel() -> Result<Void, RuleViolation> {
        if let violation = requireRunning() { return .failure(violation) }
        end(.cancelledByApp)
        return .success(())
    }

    /// Ends a running session for `reason`; false when nothing was running.
    @discardableResult
    public mutating func end(_ reason: HUNavigationEndReason) -> Bool {
        guard isRunning else { return false }
        state = .ended(reason)
        clearGuidance()
        tripEstimates = nil
        return true
    }
}
