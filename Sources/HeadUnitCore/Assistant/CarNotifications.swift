import HeadUnitWire

/// The phone's notifications the car holds (PROTOCOL.md section 27.7):
/// incoming messages and missed calls only, sender and group but never the
/// body; the driver may turn an app's off; selecting one opens the assistant
/// to read it. Pure: the car checks who posts and when.
public struct CarNotifications: Sendable, Equatable {
    /// Notifications held in the car; past it the oldest goes.
    public static let maxHeld = 16
    /// Posts one app may make in a minute (LIMIT_EXCEEDED, `notifications.perMinute`).
    public static let maxPerMinute = 10
    public static let maxIDBytes = 64
    public static let maxNameBytes = 128
    public static let maxConversationBytes = 256

    /// Newest first.
    public private(set) var held: [HUNotificationInfo] = []
    /// Apps whose notifications the driver turned off (the car's Settings).
    public private(set) var off: [String] = []
    /// Each app's posts of the last minute (monotonic ms), for the rate.
    var recentPosts: [String: [UInt64]] = [:]

    public init() {}

    /// A post's or withdrawal's own checks after the car's (the app and its
    /// category), in order: the fields (INVALID_ARGUMENT), a body or an app
    /// turned off (NOTIFICATION_NOT_ALLOWED), the rate (LIMIT_EXCEEDED).
    public func problem(_ post: HUPostNotification, now: UInt64) -> RuleViolation? {
        let id = post.notificationID.utf8.count
        if id == 0 || id > Self.maxIDBytes {
            return RuleViolation(.invalidArgument, "notification_id is 1 to \(Self.maxIDBytes) bytes, not \(id)", limit: "notifications.idBytes", limitValue: UInt32(Self.maxIDBytes))
        }
        if post.withdraw { return nil }
        if post.category == .unspecified {
            return RuleViolation(.invalidArgument, "a notification is a MESSAGE or a MISSED_CALL (NOTIFICATION_CATEGORY_UNSPECIFIED)")
        }
        let sender = post.sender.utf8.count
        if sender == 0 || sender > Self.maxNameBytes {
            return RuleViolation(.invalidArgument, "sender is 1 to \(Self.maxNameBytes) bytes, not \(sender)", limit: "notifications.nameBytes", limitValue: UInt32(Self.maxNameBytes))
        }
        if post.group.utf8.count > Self.maxNameBytes {
            return RuleViolation(.invalidArgument, "group of \(post.group.utf8.count) bytes, at most \(Self.maxNameBytes)", limit: "notifications.nameBytes", limitValue: UInt32(Self.maxNameBytes))
        }
        if post.conversationID.utf8.count > Self.maxConversationBytes {
            return RuleViolation(
                .invalidArgument, "conversation_id of \(post.conversationID.utf8.count) bytes, at most \(Self.maxConversationBytes)",
                limit: "notifications.conversationBytes", limitValue: UInt32(Self.maxConversationBytes))
        }
        if !post.body.isEmpty {
            return RuleViolation(.notificationNotAllowed, "a notification in the car carries the sender and the group, never the message's contents: leave body empty")
        }
        if off.contains(post.appID) {
            return RuleViolation(.notificationNotAllowed, "the driver turned off the notifications of '\(post.appID)' on this car")
        }
        let recent = recentPosts(of: post.appID, now: now)
        if recent.count >= Self.maxPerMinute {
            return RuleViolation.limitExceeded("notifications.perMinute", count: recent.count + 1, maximum: Self.maxPerMinute)
        }
        return nil
    }

    /// Applies a post that passed `problem`: held on top (a repeated id replaces its notification).
    mutating func post(_ post: HUPostNotification, appName: String, now: UInt64) {
        held.removeAll { $0.appID == post.appID && $0.notificationID == post.notificationID }
        if post.withdraw { return }
        recentPosts[post.appID] = recentPosts(of: post.appID, now: now) + [now]
        held.insert(HUNotificationInfo.with {
            $0.appID = post.appID
            $0.appDisplayName = appName
            $0.notificationID = post.notificationID
            $0.category = post.category
            $0.sender = post.sender
            $0.group = post.group
            $0.conversationID = post.conversationID
        }, at: 0)
        if held.count > Self.maxHeld { held.removeLast() }
    }

    /// The app's posts within the last 60 s.
    private func recentPosts(of appID: String, now: UInt64) -> [UInt64] {
        (recentPosts[appID] ?? []).filter { now < $0 + 60_000 }
    }

    /// The notification named, or UNKNOWN_NOTIFICATION.
    public func find(_ ref: HUNotificationRef) -> Result<HUNotificationInfo, RuleViolation> {
        guard let found = held.first(where: { $0.appID == ref.appID && $0.notificationID == ref.notificationID }) else {
            return .failure(RuleViolation(.unknownNotification, "no notification '\(ref.notificationID)' of '\(ref.appID)' is held"))
        }
        return .success(found)
    }

    mutating func remove(_ ref: HUNotificationRef) {
        held.removeAll { $0.appID == ref.appID && $0.notificationID == ref.notificationID }
    }

    /// Apps remembered as turned off (the car's setting outlives a phone); the oldest is forgotten past it.
    public static let maxOff = 256

    /// The driver turns an app's notifications on or off; off, its held ones go.
    mutating func allow(_ appID: String, _ allowed: Bool) {
        off.removeAll { $0 == appID }
        if !allowed {
            off.append(appID)
            if off.count > Self.maxOff { off.removeFirst() }
            held.removeAll { $0.appID == appID }
        }
    }

    /// The phone's apps ended for good: nothing of them is held.
    mutating func phoneEnded() {
        held = []
        recentPosts = [:]
    }
}
