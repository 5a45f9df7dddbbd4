import HeadUnitWire

/// The navigation banner (PROTOCOL.md 19.9): one maneuver or alert of a
/// navigation app that is not on the main screen, drawn over it for
/// `NavigationBanner.durationMilliseconds`. At most one banner is shown; a
/// new one replaces it. Pure state: the caller turns `TimerChange`s into
/// timer effects and sends the events.
public struct NavigationBanner: Sendable, Equatable {
    /// How long a banner stays up unless the driver taps it or its app comes to the main screen.
    public static let durationMilliseconds: UInt64 = 8000

    public enum Subject: Sendable, Equatable {
        case maneuver(id: String)
        case alert(id: String)
    }

    /// The banner shown, as the metadata stream's `banner` section carries it.
    public private(set) var shown: HUBannerSection?
    /// What the shown banner names (kept beside the wire section for the selection's event).
    public private(set) var subject: Subject?
    var lastID: UInt64 = 0

    /// The banner timer to start or cancel (its id is the banner's `banner_id`).
    public enum TimerChange: Sendable, Equatable {
        case start(UInt64)
        case cancel(UInt64)
    }

    public init() {}

    public var section: HUBannerSection { shown ?? HUBannerSection() }

    // MARK: - showing

    /// A notified maneuver update: the first maneuver, unless the app is on the main screen.
    mutating func show(maneuver: HUManeuver, appID: String, appInFront: Bool) -> [TimerChange] {
        guard !appInFront else { return [] }
        var banner = HUBannerSection()
        banner.appID = appID
        banner.maneuverID = maneuver.id
        banner.instructionVariants = maneuver.notificationInstructionVariants.isEmpty
            ? maneuver.instructionVariants : maneuver.notificationInstructionVariants
        if maneuver.hasNotificationSymbol {
            banner.symbol = maneuver.notificationSymbol
        } else if maneuver.hasSymbol {
            banner.symbol = maneuver.symbol
        }
        if maneuver.hasEstimates { banner.estimates = maneuver.estimates }
        return replace(with: banner, subject: .maneuver(id: maneuver.id))
    }

    /// A notified alert, unless the app is on the main screen.
    mutating func show(alert: HUNavigationAlert, appID: String, appInFront: Bool) -> [TimerChange] {
        guard !appInFront else { return [] }
        var banner = HUBannerSection()
        banner.appID = appID
        banner.alertID = alert.id
        banner.instructionVariants = alert.titleVariants
        banner.subtitleVariants = alert.subtitleVariants
        if alert.hasImage { banner.symbol = alert.image }
        return replace(with: banner, subject: .alert(id: alert.id))
    }

    private mutating func replace(with banner: HUBannerSection, subject: Subject) -> [TimerChange] {
        var changes = dismiss()
        lastID &+= 1
        var banner = banner
        banner.bannerID = lastID
        shown = banner
        self.subject = subject
        changes.append(.start(lastID))
        return changes
    }

    /// A notified estimates update: the banner of that maneuver shows the estimates the car now shows for it.
    /// It does not stay up longer for it.
    mutating func update(estimates: HUTravelEstimates, maneuverID: String, appID: String) {
        guard shown?.appID == appID, subject == .maneuver(id: maneuverID) else { return }
        shown?.estimates = estimates
    }

    // MARK: - going away

    /// Removes the banner, whatever it shows.
    mutating func dismiss() -> [TimerChange] {
        guard let banner = shown else { return [] }
        shown = nil
        subject = nil
        return [.cancel(banner.bannerID)]
    }

    /// Removes the app's banner (its app came to the main screen, or its scenes ended).
    mutating func dismiss(appID: String) -> [TimerChange] {
        shown?.appID == appID ? dismiss() : []
    }

    /// Removes the app's maneuver banner (its guidance ended), or one of a maneuver no longer upcoming.
    mutating func dismissManeuver(appID: String, unless upcoming: [String] = []) -> [TimerChange] {
        guard shown?.appID == appID, case .maneuver(let id)? = subject, !upcoming.contains(id) else { return [] }
        return dismiss()
    }

    /// Removes the banner of this alert (the alert went away).
    mutating func dismissAlert(appID: String, alertID: String) -> [TimerChange] {
        guard shown?.appID == appID, subject == .alert(id: alertID) else { return [] }
        return dismiss()
    }

    /// The banner's time ran out; a stale timer (an older banner) does nothing.
    mutating func expired(bannerID: UInt64) -> Bool {
        guard shown?.bannerID == bannerID else { return false }
        shown = nil
        subject = nil
        return true
    }

    // MARK: - the driver

    /// The driver tapped the banner: what it showed, or why not
    /// (PROTOCOL.md 16.14: no banner of the app `NOTHING_PRESENTED`, another banner id `UNKNOWN_ITEM`).
    func select(appID: String, bannerID: UInt64) -> Result<Subject, RuleViolation> {
        guard let banner = shown, banner.appID == appID, let subject else {
            return .failure(RuleViolation(.nothingPresented, "'\(appID)' shows no navigation banner"))
        }
        guard banner.bannerID == bannerID else {
            return .failure(RuleViolation(.unknownItem, "banner \(bannerID) is not shown (the banner shown is \(banner.bannerID))"))
        }
        return .success(subject)
    }
}
