import HeadUnitWire

/// The sections of the metadata state; a change names the sections it replaces.
public struct MetadataSections: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let guidance = MetadataSections(rawValue: 1 << 0)
    public static let maneuvers = MetadataSections(rawValue: 1 << 1)
    public static let tripEstimates = MetadataSections(rawValue: 1 << 2)
    public static let alert = MetadataSections(rawValue: 1 << 3)
    public static let nowPlaying = MetadataSections(rawValue: 1 << 4)
    public static let display = MetadataSections(rawValue: 1 << 5)
    public static let previews = MetadataSections(rawValue: 1 << 6)
    public static let cluster = MetadataSections(rawValue: 1 << 7)
    public static let audio = MetadataSections(rawValue: 1 << 8)
    public static let phone = MetadataSections(rawValue: 1 << 9)
    public static let banner = MetadataSections(rawValue: 1 << 10)
    public static let all: MetadataSections = [.guidance, .maneuvers, .tripEstimates, .alert, .nowPlaying, .display, .previews, .cluster, .audio, .phone, .banner]
}

/// The latest metadata state for the instrument cluster, HUDs and HMIs
/// (PROTOCOL.md section 19.5): state, not a log. The Car rebuilds the state after every
/// input; the feed keeps it, numbers each change (`version`) and says which
/// sections changed, so the server can encode one change once for everyone.
public struct ClusterFeed: Sendable {
    public private(set) var state: HUMetadataState
    public private(set) var version: UInt64 = 0
    /// Peers that asked for the stream.
    public private(set) var subscribers: Set<PeerID> = []
    /// Subscribers that still need their first full snapshot (in subscription order).
    var awaitingSnapshot: [PeerID] = []
    /// Sections changed since the server last took them.
    var unsent: MetadataSections = []

    public init() {
        var state = HUMetadataState()
        state.guidance = HUGuidanceSection()
        state.maneuvers = HUManeuversSection()
        state.tripEstimates = HUTripEstimatesSection()
        state.alert = HUAlertSection()
        state.nowPlaying = HUNowPlayingSection()
        state.display = HUDisplaySection()
        state.previews = HUPreviewsSection()
        state.cluster = HUClusterSection()
        state.audio = AudioFocus().section
        state.phone = HUPhoneSection()
        state.banner = HUBannerSection()
        self.state = state
    }

    /// After a daemon restart (CarSnapshot): versions go on from where the
    /// previous process stopped, so a subscriber never sees one go back.
    mutating func continueVersions(from version: UInt64) {
        self.version = max(self.version, version)
    }

    public mutating func subscribe(_ peer: PeerID) {
        if subscribers.insert(peer).inserted { awaitingSnapshot.append(peer) }
    }

    public mutating func unsubscribe(_ peer: PeerID) {
        subscribers.remove(peer)
        awaitingSnapshot.removeAll { $0 == peer }
    }

    /// Adopts a newly built state; returns the sections that differ (and
    /// bumps the version once when any did).
    @discardableResult
    public mutating func update(to new: HUMetadataState) -> MetadataSections {
        var changed: MetadataSections = []
        if new.guidance != state.guidance { changed.insert(.guidance) }
        if new.maneuvers != state.maneuvers { changed.insert(.maneuvers) }
        if new.tripEstimates != state.tripEstimates { changed.insert(.tripEstimates) }
        if new.alert != state.alert { changed.insert(.alert) }
        if new.nowPlaying != state.nowPlaying { changed.insert(.nowPlaying) }
        if new.display != state.display { changed.insert(.display) }
        if new.previews != state.previews { changed.insert(.previews) }
        if new.cluster != state.cluster { changed.insert(.cluster) }
        if new.audio != state.audio { changed.insert(.audio) }
        if new.phone != state.phone { changed.insert(.phone) }
        if new.banner != state.banner { changed.insert(.banner) }
        if !changed.isEmpty {
            state = new
            version &+= 1
            unsent.formUnion(changed)
        }
        return changed
    }

    /// The update carrying `sections` of the current state (all of them, `full`, for a snapshot).
    public func update(sections: MetadataSections, full: Bool = false) -> HUMetadataUpdate {
        var update = HUMetadataUpdate()
        update.version = version
        update.full = full
        var partial = HUMetadataState()
        if sections.contains(.guidance) { partial.guidance = state.guidance }
        if sections.contains(.maneuvers) { partial.maneuvers = state.maneuvers }
        if sections.contains(.tripEstimates) { partial.tripEstimates = state.tripEstimates }
        if sections.contains(.alert) { partial.alert = state.alert }
        if sections.contains(.nowPlaying) { partial.nowPlaying = state.nowPlaying }
        if sections.contains(.display) { partial.display = state.display }
        if sections.contains(.previews) { partial.previews = state.previews }
        if sections.contains(.cluster) { partial.cluster = state.cluster }
        if sections.contains(.audio) { partial.audio = state.audio }
        if sections.contains(.phone) { partial.phone = state.phone }
        if sections.contains(.banner) { partial.banner = state.banner }
        update.state = partial
        return update
    }

    public var snapshot: HUMetadataUpdate { update(sections: .all, full: true) }

    /// What the server must send since it last asked: snapshots for new
    /// subscribers, and the sections changed since (for everyone else).
    public mutating func take() -> (snapshots: [PeerID], changed: MetadataSections) {
        defer { awaitingSnapshot = []; unsent = [] }
        return (awaitingSnapshot, unsent)
    }
}

/// One subscriber's delivery state on the server: at most one metadata frame
/// in flight; changes that arrive meanwhile are merged into `behind` (a bit
/// set, so the memory is the same however fast the app updates). When the
/// frame in flight has been written, the subscriber gets one catch-up frame
/// with the current values of what it missed. A subscriber that does not
/// read thus costs one frame and a few bytes, and never delays anyone.
public struct ClusterSubscription: Sendable, Equatable {
    public private(set) var inFlight = false
    public private(set) var behind: MetadataSections = []

    public init() {}

    public enum Delivery: Equatable, Sendable {
        /// Write the change frame shared by every caught-up subscriber.
        case sendShared
        /// Merged into `behind`; sent later as a catch-up.
        case deferred
    }

    /// A change (or a snapshot) is ready.
    public mutating func offer(_ sections: MetadataSections) -> Delivery {
        if inFlight {
            behind.formUnion(sections)
            return .deferred
        }
        inFlight = true
        return .sendShared
    }

    /// The frame in flight was written out. Returns the sections to send as
    /// a catch-up frame now (that frame is then in flight), or nil.
    public mutating func written() -> MetadataSections? {
        guard !behind.isEmpty else {
            inFlight = false
            return nil
        }
        defer { behind = [] }
        return behind
    }
}
