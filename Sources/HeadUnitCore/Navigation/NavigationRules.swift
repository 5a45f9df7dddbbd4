import HeadUnitWire

/// Counts and limits of the navigation messages (PROTOCOL.md section 19.2, TEMPLATES.md section 9).
public enum NavigationLimits {
    public static let trips = 12
    public static let routeChoicesPerTrip = 3
    /// The car draws the next maneuver and, when turns come fast, the one after (ours: more are refused).
    public static let maneuvers = 2
    public static let alertActions = 2
    public static let dashboardButtons = 2
    /// Text variants of one string (instructions, summaries, titles, cluster
    /// descriptions): CarPlay apps send a handful, longest first. Without a
    /// count, 880 variants of 1,000 bytes in each section made a 5 MB
    /// metadata frame (section 10.4).
    public static let variants = 16
}

/// Validation of trips, maneuvers, alerts and dashboard buttons: pure
/// functions of the message and the display scale. The first broken rule wins.
public enum NavigationRules {
    /// Variants are listed longest first so the HMI can show the longest that fits.
    static func longestFirst(_ variants: [String], _ what: @autoclosure () -> String) -> RuleViolation? {
        if variants.count > NavigationLimits.variants {
            return RuleViolation(
                .limitExceeded, "\(what()): \(variants.count) variants, at most \(NavigationLimits.variants) allowed",
                limit: "navigation.variants", limitValue: UInt32(NavigationLimits.variants))
        }
        var previous = Int.max
        for variant in variants {
            let length = variant.unicodeScalars.count
            if length > previous {
                return RuleViolation(.invalidArgument, "\(what()): variants must be ordered longest first ('\(variant)' is longer than the one before)")
            }
            previous = length
        }
        return nil
    }

    static func atLeastOne(_ variants: [String], _ limit: String, _ what: @autoclosure () -> String) -> RuleViolation? {
        variants.isEmpty ? RuleViolation(.invalidArgument, "\(what()): at least one variant required", limit: limit, limitValue: 1) : nil
    }

    static func uniqueIDs(_ ids: [String], _ what: String) -> RuleViolation? {
        var seen = Set<String>()
        for id in ids {
            if id.isEmpty { return RuleViolation(.invalidArgument, "\(what): an id is empty") }
            if !seen.insert(id).inserted { return RuleViolation(.invalidArgument, "\(what): id '\(id)' is used twice") }
        }
        return nil
    }

    static func estimates(_ estimates: HUTravelEstimates, _ what: @autoclosure () -> String) -> RuleViolation? {
        let distance = estimates.distanceRemainingM
        if distance.isNaN || distance < 0 || distance.isInfinite {
            return RuleViolation(.invalidArgument, "\(what()): distance_remaining_m must be a finite number >= 0")
        }
        return nil
    }

    // MARK: trips

    public static func check(previews: HUTripPreviews) -> RuleViolation? {
        if previews.trips.isEmpty {
            return RuleViolation(.invalidArgument, "trip previews need at least one trip", limit: "navigation.trips", limitValue: 1)
        }
        if previews.trips.count > NavigationLimits.trips {
            return .limitExceeded("navigation.trips", count: previews.trips.count, maximum: NavigationLimits.trips)
        }
        if let violation = uniqueIDs(previews.trips.map(\.id), "trips") { return violation }
        for trip in previews.trips {
            if let violation = check(trip: trip) { return violation }
        }
        if !previews.selectedTripID.isEmpty, !previews.trips.contains(where: { $0.id == previews.selectedTripID }) {
            return RuleViolation(.unknownItem, "selected_trip_id '\(previews.selectedTripID)' is not one of the trips")
        }
        return nil
    }

    public static func check(trip: HUTrip) -> RuleViolation? {
        if trip.id.isEmpty { return RuleViolation(.invalidArgument, "a trip id is empty") }
        if trip.routeChoices.isEmpty {
            return RuleViolation(.invalidArgument, "trip '\(trip.id)' needs at least one route choice", limit: "navigation.routeChoices", limitValue: 1)
        }
        if trip.routeChoices.count > NavigationLimits.routeChoicesPerTrip {
            return .limitExceeded("navigation.routeChoices", count: trip.routeChoices.count, maximum: NavigationLimits.routeChoicesPerTrip)
        }
        if let violation = uniqueIDs(trip.routeChoices.map(\.id), "route choices of trip '\(trip.id)'") { return violation }
        if let violation = estimates(trip.estimates, "trip '\(trip.id)'") { return violation }
        for route in trip.routeChoices {
            let what = "route choice '\(route.id)' of trip '\(trip.id)'"
            if let violation = atLeastOne(route.summaryVariants, "navigation.routeChoice.summaryVariants", what)
                ?? longestFirst(route.summaryVariants, what + " summary")
                ?? longestFirst(route.additionalInformationVariants, what + " additional information")
                ?? longestFirst(route.selectionSummaryVariants, what + " selection summary")
                ?? estimates(route.estimates, what)
            {
                return violation
            }
        }
        return nil
    }

    // MARK: maneuvers

    /// `index` is the maneuver's position: 0 the next maneuver, 1 the one after.
    public static func check(maneuvers: [HUManeuver], scale: UInt32) -> RuleViolation? {
        if maneuvers.isEmpty {
            return RuleViolation(
                .invalidArgument, "guidance needs at least one upcoming maneuver (pause the session instead)",
                limit: "navigation.maneuvers", limitValue: 1)
        }
        if maneuvers.count > NavigationLimits.maneuvers {
            return .limitExceeded("navigation.maneuvers", count: maneuvers.count, maximum: NavigationLimits.maneuvers)
        }
        if let violation = uniqueIDs(maneuvers.map(\.id), "maneuvers") { return violation }
        for (index, maneuver) in maneuvers.enumerated() {
            if let violation = check(maneuver: maneuver, index: index, scale: scale) { return violation }
        }
        return nil
    }

    /// Which image rule a maneuver's symbol follows (TEMPLATES.md §9).
    public static func symbolUse(_ maneuver: HUManeuver, index: Int, scale: UInt32) -> ImageUse {
        if index == 0 {
            // Up to 50 pt wide sits beside a one-line instruction; wider takes the two-line layout.
            let oneLineWidth = UInt64(ImageUse.maneuverSymbol.maximumPoints.width) * UInt64(max(scale, 1))
            let width = UInt64(maneuver.symbol.widthPx != 0 ? maneuver.symbol.widthPx : ImageRules.pngSize(maneuver.symbol.png)?.width ?? 0)
            return width <= oneLineWidth ? .maneuverSymbol : .maneuverSymbolTwoLines
        }
        return isLaneGuidance(maneuver) ? .laneGuidance : .secondManeuverSymbol
    }

    /// Lane guidance is a symbol-only second maneuver with no instructions.
    public static func isLaneGuidance(_ maneuver: HUManeuver) -> Bool {
        maneuver.displayStyle == .symbolOnly && maneuver.instructionVariants.isEmpty && maneuver.attributedInstructionVariants.isEmpty
    }

    static func check(maneuver: HUManeuver, index: Int, scale: UInt32) -> RuleViolation? {
        let what = "maneuver '\(maneuver.id)'"
        if index == 0, maneuver.displayStyle != .default {
            return RuleViolation(.invalidArgument, "\(what): display_style is for the second maneuver only")
        }
        if maneuver.displayStyle == .symbolOnly, !maneuver.hasSymbol {
            return RuleViolation(.invalidArgument, "\(what): a symbol-only maneuver needs a symbol")
        }
        if maneuver.displayStyle != .symbolOnly, maneuver.instructionVariants.isEmpty {
            return RuleViolation(.invalidArgument, "\(what): at least one instruction variant required (or symbol-only lane guidance)",
                limit: "navigation.maneuver.instructionVariants", limitValue: 1)
        }
        if !maneuver.attributedInstructionVariants.isEmpty, maneuver.instructionVariants.isEmpty {
            return RuleViolation(.invalidArgument, "\(what): attributed instruction variants need plain instruction variants too")
        }
        if let violation = longestFirst(maneuver.instructionVariants, what + " instructions")
            ?? longestFirst(maneuver.attributedInstructionVariants.map(\.text), what + " attributed instructions")
            ?? longestFirst(maneuver.dashboardInstructionVariants, what + " dashboard instructions")
            ?? estimates(maneuver.estimates, what)
        {
            return violation
        }
        for text in maneuver.attributedInstructionVariants {
            let length = text.text.unicodeScalars.count
            for span in text.spans {
                if Int(span.start) + Int(span.length) > length {
                    return RuleViolation(.invalidArgument, "\(what): span \(span.start)+\(span.length) runs past '\(text.text)'")
                }
                if span.hasImage, let violation = ImageRules.check(span.image, use: .secondManeuverSymbol, scale: scale, what: what + " inline image") {
                    return violation
                }
            }
        }
        let use = symbolUse(maneuver, index: index, scale: scale)
        if let violation = ImageRules.check(maneuver.symbol, present: maneuver.hasSymbol, use: use, scale: scale, what: what + " symbol")
            ?? ImageRules.check(maneuver.darkSymbol, present: maneuver.hasDarkSymbol, use: use, scale: scale, what: what + " dark symbol")
            ?? ImageRules.check(maneuver.junctionImage, present: maneuver.hasJunctionImage, use: .junctionImage, scale: scale, what: what + " junction image")
            ?? LaneGuidanceRules.checkNewerFields(maneuver, symbolUse: use, scale: scale)
        {
            return violation
        }
        return nil
    }

    // MARK: alerts and dashboard

    public static func check(alert: HUNavigationAlert, scale: UInt32) -> RuleViolation? {
        let what = "navigation alert '\(alert.id)'"
        if alert.id.isEmpty { return RuleViolation(.invalidArgument, "a navigation alert needs an id") }
        if alert.actions.count > NavigationLimits.alertActions {
            return .limitExceeded("navigationAlert.actions", count: alert.actions.count, maximum: NavigationLimits.alertActions)
        }
        if let violation = atLeastOne(alert.titleVariants, "navigationAlert.titleVariants", what)
            ?? longestFirst(alert.titleVariants, what + " title")
            ?? longestFirst(alert.subtitleVariants, what + " subtitle")
            ?? uniqueIDs(alert.actions.map(\.id), what + " actions")
            // The guide gives no size for the alert image: ours is the maneuver symbol's.
            ?? ImageRules.check(alert.image, present: alert.hasImage, use: .maneuverSymbol, scale: scale, what: what + " image")
        {
            return violation
        }
        return nil
    }

    public static func check(dashboardButtons buttons: [HUDashboardButton], scale: UInt32) -> RuleViolation? {
        if buttons.count > NavigationLimits.dashboardButtons {
            return .limitExceeded("dashboard.buttons", count: buttons.count, maximum: NavigationLimits.dashboardButtons)
        }
        if let violation = uniqueIDs(buttons.map(\.id), "dashboard buttons") { return violation }
        for button in buttons {
            let what = "dashboard button '\(button.id)'"
            if let violation = atLeastOne(button.titleVariants, "dashboard.button.titleVariants", what)
                ?? longestFirst(button.titleVariants, what + " title")
                ?? longestFirst(button.subtitleVariants, what + " subtitle")
                ?? ImageRules.check(button.image, present: button.hasImage, use: .gridButton, scale: scale, what: what + " image")
            {
                return violation
            }
        }
        return nil
    }

    // MARK: estimates

    /// Whether new estimates differ from those shown enough to show them
    /// (PROTOCOL.md section 19.2, "Estimates only on significant change"): the minutes shown
    /// changed, or the distance shown changed (to 100 m from 1 km up, to 10 m below).
    public static func isSignificant(_ new: HUTravelEstimates, comparedTo shown: HUTravelEstimates?) -> Bool {
        guard let shown else { return true }
        if new.timeRemainingS / 60 != shown.timeRemainingS / 60 { return true }
        return displayedDistance(new.distanceRemainingM) != displayedDistance(shown.distanceRemainingM)
    }

    static func displayedDistance(_ meters: Double) -> Int64 {
        let step: Double = meters >= 1000 ? 100 : 10
        // Down, like the minutes: a display shows "1.2 km" until 1.1 km is left (PROTOCOL.md 19.2).
        return Int64((meters / step).rounded(.down)) * Int64(step)
    }
}
