import HeadUnitWire

/// Counts and sizes of lane guidance and the maneuver fields of iOS 17.4
/// (TEMPLATES.md section 9, "Lane guidance"; PROTOCOL.md 16.13). Each bounds
/// what one request can make the car hold or draw: the session keeps at most
/// `heldLaneGuidances` of them, the metadata stream carries at most three (the
/// current one and one per upcoming maneuver).
public enum LaneGuidanceLimits {
    /// Lane guidances in one `add_lane_guidances`.
    public static let perRequest = 16
    /// Lane guidances a session keeps: the newest, never the current one nor
    /// one an upcoming maneuver links (those are at most three).
    public static let held = 32
    /// Lanes of one guidance: more than a motorway has.
    public static let lanes = 16
    /// A lane's directions besides the highlighted one (straight, left, right, U-turn, slight and sharp turns).
    public static let laneAngles = 8
    /// A junction's roads besides the exit.
    public static let junctionElementAngles = 16
    /// Angles are degrees in -180...180.
    public static let angleDegrees = 180.0
    /// A lane guidance id, in UTF-8 bytes.
    public static let idBytes = 64
    /// "Exit 12A", in Unicode scalars.
    public static let highwayExitLabelScalars = 64
    /// One variant of the newer variant lists (lane guidance instructions,
    /// road names, road following, notification instructions), in Unicode
    /// scalars: 32 held guidances of 16 variants stay within 512 KiB.
    public static let variantScalars = 256
    /// The most one lane guidance within these limits encodes to (64-byte id,
    /// 16 lanes of 9 angles, 16 variants of 256 four-byte scalars: 17.8 KB),
    /// rounded up: what a session holds counts in the restart snapshot's bound.
    public static let maximumEncodedBytes = 20 << 10
    /// The held lane guidances of the one session that guides.
    public static let heldBytes = held * maximumEncodedBytes
}

/// Validation of lane guidances, angles and the newer maneuver fields: pure
/// functions of the message. The first broken rule wins, in the order
/// PROTOCOL.md 16.13 lists.
public enum LaneGuidanceRules {
    /// A variant list of the newer fields: count (`navigation.variants`),
    /// each variant's length (`navigation.variantScalars`), then longest first.
    static func variants(_ variants: [String], _ what: @autoclosure () -> String) -> RuleViolation? {
        if variants.count > NavigationLimits.variants {
            return NavigationRules.longestFirst(variants, what())
        }
        for variant in variants where variant.unicodeScalars.count > LaneGuidanceLimits.variantScalars {
            return RuleViolation(
                .limitExceeded,
                "\(what()): a variant of \(variant.unicodeScalars.count) characters, at most \(LaneGuidanceLimits.variantScalars) allowed",
                limit: "navigation.variantScalars", limitValue: UInt32(LaneGuidanceLimits.variantScalars))
        }
        return NavigationRules.longestFirst(variants, what())
    }

    /// An angle in degrees: finite, -180...180.
    static func angle(_ degrees: Double, _ what: @autoclosure () -> String) -> RuleViolation? {
        if degrees.isFinite, abs(degrees) <= LaneGuidanceLimits.angleDegrees { return nil }
        return RuleViolation(
            .invalidArgument, "\(what()): \(degrees) is not an angle from -180 to 180 degrees",
            limit: "navigation.angle", limitValue: UInt32(LaneGuidanceLimits.angleDegrees))
    }

    /// Angles that must differ: `first` (when given) and `others`.
    static func distinct(_ first: Double?, _ others: [Double], _ what: @autoclosure () -> String) -> RuleViolation? {
        var seen = Set<Double>()
        if let first { seen.insert(first) }
        for angle in others where !seen.insert(angle).inserted {
            return RuleViolation(.invalidArgument, "\(what()): the angle \(angle) is given twice")
        }
        return nil
    }

    // MARK: lane guidance

    /// `add_lane_guidances`: count, ids, then each guidance in order.
    public static func check(laneGuidances: [HULaneGuidance]) -> RuleViolation? {
        if laneGuidances.isEmpty {
            return RuleViolation(.invalidArgument, "add at least one lane guidance", limit: "navigation.laneGuidances", limitValue: 1)
        }
        if laneGuidances.count > LaneGuidanceLimits.perRequest {
            return .limitExceeded("navigation.laneGuidances", count: laneGuidances.count, maximum: LaneGuidanceLimits.perRequest)
        }
        if let violation = NavigationRules.uniqueIDs(laneGuidances.map(\.id), "lane guidances") { return violation }
        for guidance in laneGuidances {
            if let violation = check(laneGuidance: guidance) { return violation }
        }
        return nil
    }

    public static func check(laneGuidance guidance: HULaneGuidance) -> RuleViolation? {
        let what = "lane guidance '\(guidance.id)'"
        if guidance.id.isEmpty { return RuleViolation(.invalidArgument, "a lane guidance id is empty") }
        if guidance.id.utf8.count > LaneGuidanceLimits.idBytes {
            return RuleViolation(
                .limitExceeded, "a lane guidance id of \(guidance.id.utf8.count) bytes, at most \(LaneGuidanceLimits.idBytes) allowed",
                limit: "navigation.laneGuidance.id", limitValue: UInt32(LaneGuidanceLimits.idBytes))
        }
        if guidance.lanes.isEmpty {
            return RuleViolation(.invalidArgument, "\(what) needs at least one lane", limit: "navigation.laneGuidance.lanes", limitValue: 1)
        }
        if guidance.lanes.count > LaneGuidanceLimits.lanes {
            return .limitExceeded("navigation.laneGuidance.lanes", count: guidance.lanes.count, maximum: LaneGuidanceLimits.lanes)
        }
        if let violation = NavigationRules.atLeastOne(guidance.instructionVariants, "navigation.laneGuidance.instructionVariants", what)
            ?? variants(guidance.instructionVariants, what + " instructions")
        {
            return violation
        }
        for (index, lane) in guidance.lanes.enumerated() {
            if let violation = check(lane: lane, "\(what) lane \(index)") { return violation }
        }
        return nil
    }

    /// A lane: status, angle count, each angle's range, the highlighted angle
    /// a good or preferred lane needs, then no angle twice.
    static func check(lane: HULane, _ what: String) -> RuleViolation? {
        switch lane.status {
        case .unspecified:
            return RuleViolation(.invalidArgument, "\(what): a lane needs a status (not good, good, preferred)")
        case .notGood, .good, .preferred, .UNRECOGNIZED:
            break  // an unknown value was refused with the envelope (KnownEnums)
        }
        if lane.anglesDeg.count > LaneGuidanceLimits.laneAngles {
            return .limitExceeded("navigation.lane.angles", count: lane.anglesDeg.count, maximum: LaneGuidanceLimits.laneAngles)
        }
        if lane.hasHighlightedAngleDeg, let violation = angle(lane.highlightedAngleDeg, what + " highlighted angle") { return violation }
        for value in lane.anglesDeg {
            if let violation = angle(value, what + " angle") { return violation }
        }
        if lane.status == .good || lane.status == .preferred, !lane.hasHighlightedAngleDeg {
            return RuleViolation(.invalidArgument, "\(what): a good or preferred lane needs its highlighted angle")
        }
        return distinct(lane.hasHighlightedAngleDeg ? lane.highlightedAngleDeg : nil, lane.anglesDeg, what)
    }

    // MARK: the maneuver's newer fields

    /// The fields of iOS 17.4 and the dashboard and notification variants,
    /// checked after the older ones (NavigationRules.check(maneuver:)).
    /// `symbolUse` is the rule the maneuver's symbol follows; its dashboard
    /// symbol follows the same. The linked lane guidance is the session's to check.
    static func checkNewerFields(_ maneuver: HUManeuver, symbolUse: ImageUse, scale: UInt32) -> RuleViolation? {
        let what = "maneuver '\(maneuver.id)'"
        if let violation = ImageRules.check(maneuver.dashboardSymbol, present: maneuver.hasDashboardSymbol, use: symbolUse, scale: scale, what: what + " dashboard symbol")
            ?? ImageRules.check(maneuver.notificationSymbol, present: maneuver.hasNotificationSymbol, use: .maneuverSymbol, scale: scale, what: what + " notification symbol")
            ?? ImageRules.check(maneuver.dashboardJunctionImage, present: maneuver.hasDashboardJunctionImage, use: .junctionImage, scale: scale, what: what + " dashboard junction image")
            ?? variants(maneuver.notificationInstructionVariants, what + " notification instructions")
            ?? variants(maneuver.roadFollowingVariants, what + " road following")
        {
            return violation
        }
        let label = maneuver.highwayExitLabel.unicodeScalars.count
        if label > LaneGuidanceLimits.highwayExitLabelScalars {
            return RuleViolation(
                .limitExceeded, "\(what): a highway exit label of \(label) characters, at most \(LaneGuidanceLimits.highwayExitLabelScalars) allowed",
                limit: "navigation.maneuver.highwayExitLabel", limitValue: UInt32(LaneGuidanceLimits.highwayExitLabelScalars))
        }
        if maneuver.junctionElementAnglesDeg.count > LaneGuidanceLimits.junctionElementAngles {
            return .limitExceeded(
                "navigation.maneuver.junctionElementAngles", count: maneuver.junctionElementAnglesDeg.count,
                maximum: LaneGuidanceLimits.junctionElementAngles)
        }
        if maneuver.hasJunctionExitAngleDeg, let violation = angle(maneuver.junctionExitAngleDeg, what + " junction exit angle") {
            return violation
        }
        for value in maneuver.junctionElementAnglesDeg {
            if let violation = angle(value, what + " junction element angle") { return violation }
        }
        return distinct(maneuver.hasJunctionExitAngleDeg ? maneuver.junctionExitAngleDeg : nil, maneuver.junctionElementAnglesDeg, what + " junction")
    }

    // MARK: the session's own

    public static func check(roadNameVariants: [String]) -> RuleViolation? {
        variants(roadNameVariants, "current road name")
    }

    public static func check(maneuverState: HUManeuverState) -> RuleViolation? {
        switch maneuverState {
        case .unspecified:
            return RuleViolation(.invalidArgument, "a maneuver state is continue, initial, prepare or execute")
        case .continue, .initial, .prepare, .execute, .UNRECOGNIZED:
            return nil
        }
    }
}

/// The lane guidances a navigation session holds (PROTOCOL.md 19.2, "Lane
/// guidance"): added by the app in the order the driver meets them, named by
/// the upcoming maneuvers and the session's current one. Bounded: beyond
/// `LaneGuidanceLimits.held` the oldest go, except those in use.
public struct HeldLaneGuidances: Sendable, Equatable {
    /// Oldest first.
    public private(set) var guidances: [HULaneGuidance] = []
    /// Empty: none.
    public private(set) var currentID = ""

    public init() {}

    init(restoring guidances: [HULaneGuidance], currentID: String) {
        self.guidances = guidances
        self.currentID = currentID
    }

    public subscript(id: String) -> HULaneGuidance? { guidances.first { $0.id == id } }

    /// Adds checked guidances; an id held already is replaced and becomes the
    /// newest. `inUse`: ids the upcoming maneuvers link, kept with the current one.
    mutating func add(_ new: [HULaneGuidance], inUse: Set<String>) {
        for guidance in new {
            guidances.removeAll { $0.id == guidance.id }
            guidances.append(guidance)
        }
        var excess = guidances.count - LaneGuidanceLimits.held
        guard excess > 0 else { return }
        let keep = inUse.union([currentID])
        guidances.removeAll { guidance in
            guard excess > 0, !keep.contains(guidance.id) else { return false }
            excess -= 1
            return true
        }
    }

    /// Names the current guidance; empty clears it. UNKNOWN_ITEM for one not held.
    mutating func setCurrent(_ id: String) -> RuleViolation? {
        if !id.isEmpty, self[id] == nil {
            return RuleViolation(.unknownItem, "lane guidance '\(id)' was not added to the session (add_lane_guidances)")
        }
        currentID = id
        return nil
    }

    /// What the metadata stream draws: the current guidance, then those the
    /// maneuvers link, each once.
    func shown(linkedBy maneuvers: [HUManeuver]) -> [HULaneGuidance] {
        var ids: [String] = currentID.isEmpty ? [] : [currentID]
        for maneuver in maneuvers where !maneuver.linkedLaneGuidanceID.isEmpty && !ids.contains(maneuver.linkedLaneGuidanceID) {
            ids.append(maneuver.linkedLaneGuidanceID)
        }
        return ids.compactMap { self[$0] }
    }
}
