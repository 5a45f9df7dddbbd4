/// The `AccessoryAvailability` the phone's automaker apps are owed
/// (PROTOCOL.md 18.2), kept as state, never as a log (issue 47): per app,
/// what the phone's connection was last handed, and whether the app's
/// protocols may have flipped since. However often an accessory flips, at
/// most one message per app waits, and it carries the state at the moment it
/// is sent; a flip undone before then costs nothing.
struct OwedAvailability: Sendable, Equatable {
    /// Per app: whether each of its matched protocols was available (in their
    /// order) in the last event handed to the phone's connection. Absent:
    /// unknown (none sent on this connection), so the next look sends one.
    private var delivered: [String: [Bool]] = [:]
    /// Apps whose availability may differ from `delivered`.
    private(set) var owed: Set<String> = []

    var isEmpty: Bool { owed.isEmpty }

    /// One of `appID`'s protocols became available or unavailable.
    mutating func mayHaveChanged(_ appID: String) {
        owed.insert(appID)
    }

    /// An event carrying `available` went to the phone's connection for `appID`.
    mutating func sent(_ appID: String, _ available: [Bool]) {
        delivered[appID] = available
        owed.remove(appID)
    }

    /// What to send now, in `order` (the apps' announce order): each app owed
    /// whose state now (`current`; nil for an app gone) differs from what its
    /// connection was last handed. Everything owed is settled by this: what
    /// is returned counts as sent, the rest needs nothing.
    mutating func take(in order: [String], current: (String) -> [Bool]?) -> [(appID: String, available: [Bool])] {
        guard !owed.isEmpty else { return [] }
        var due: [(appID: String, available: [Bool])] = []
        for appID in order where owed.contains(appID) {
            guard let now = current(appID), delivered[appID] != now else { continue }
            delivered[appID] = now
            due.append((appID, now))
        }
        owed = []
        return due
    }

    /// The phone's apps ended, or a new connection carries them (a resumed
    /// session, a restored daemon): nothing is known of what it was told.
    mutating func reset() {
        self = OwedAvailability()
    }
}
