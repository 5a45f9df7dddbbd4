import Foundation
import HeadUnitClient
import HeadUnitWire

// UserNotifications (`import UserNotifications` on iOS) as CarPlay uses it
// (PROTOCOL.md section 27.7): a messaging or calling app asks for the
// `.carPlay` authorization, puts its message notifications in a category
// created with `.allowInCarPlay` whose intent identifier says what the
// assistant runs when the driver selects one (search-for-messages, or the
// call history), and posts them; the car shows the sender (title) and the
// group (subtitle), never the body. Notifications of other categories, or
// without the authorization, stay on the phone, as iOS keeps them there.
//
// Which connection: the communication app connected most recently and still
// connected (as CallKit's, `CallKitHub`); ours: iOS has one app per process.

/// `UNAuthorizationOptions`.
public struct UNAuthorizationOptions: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let badge = UNAuthorizationOptions(rawValue: 1)
    public static let sound = UNAuthorizationOptions(rawValue: 2)
    public static let alert = UNAuthorizationOptions(rawValue: 4)
    public static let carPlay = UNAuthorizationOptions(rawValue: 8)
}

/// `UNNotificationCategoryOptions`.
public struct UNNotificationCategoryOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let customDismissAction = UNNotificationCategoryOptions(rawValue: 1)
    public static let allowInCarPlay = UNNotificationCategoryOptions(rawValue: 2)
}

/// `UNNotificationCategory`: only the CarPlay-relevant parts (no actions: the car shows none).
public struct UNNotificationCategory: Hashable, Sendable {
    public let identifier: String
    /// The intents the category stands for: `"INSearchForMessagesIntent"` (a
    /// message) or `"INSearchCallHistoryIntent"` (a missed call).
    public let intentIdentifiers: [String]
    public let options: UNNotificationCategoryOptions

    public init(identifier: String, actions: [Any] = [], intentIdentifiers: [String], options: UNNotificationCategoryOptions = []) {
        self.identifier = identifier
        self.intentIdentifiers = intentIdentifiers
        self.options = options
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.identifier == rhs.identifier }
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
}

/// `UNMutableNotificationContent`.
public final class UNMutableNotificationContent: @unchecked Sendable {  // a plain value holder, built then handed over, as on iOS
    /// The sender (the car's notification title).
    public var title = ""
    /// The group's name.
    public var subtitle = ""
    /// Never shown in the car: a non-empty body is refused by it (NOTIFICATION_NOT_ALLOWED).
    public var body = ""
    public var categoryIdentifier = ""
    /// The conversation the assistant reads when the driver selects it.
    public var threadIdentifier = ""
    public init() {}
}

/// `UNNotificationRequest`.
public final class UNNotificationRequest: @unchecked Sendable {  // immutable after init
    public let identifier: String
    public let content: UNMutableNotificationContent
    public init(identifier: String, content: UNMutableNotificationContent, trigger: Any?) {
        self.identifier = identifier
        self.content = content
    }
}

/// `UNUserNotificationCenter`.
@MainActor
public final class UNUserNotificationCenter {
    private static let shared = UNUserNotificationCenter()
    public static func current() -> UNUserNotificationCenter { shared }

    private var authorized: UNAuthorizationOptions = []
    private var categories: Set<UNNotificationCategory> = []

    /// Granted as asked (the driver's consent is the phone's, not the car's);
    /// without `.carPlay` nothing reaches the car.
    public func requestAuthorization(options: UNAuthorizationOptions) async throws -> Bool {
        authorized.formUnion(options)
        return true
    }

    public func setNotificationCategories(_ categories: Set<UNNotificationCategory>) {
        self.categories = categories
    }

    /// Posts the notification to the car when its category allows CarPlay
    /// (and the app asked for `.carPlay`); the car's refusal is thrown
    /// (`HeadUnitError`: `NOTIFICATION_NOT_ALLOWED` for a body...). Kept on the
    /// phone otherwise: nothing sent, nothing thrown.
    public func add(_ request: UNNotificationRequest) async throws {
        guard let wire = wire(request), let application = CallKitHub.shared.application, let phone = application.phone else { return }
        var post = wire
        post.appID = application.bundleIdentifier
        try await phone.postNotification(post)
    }

    /// Withdraws delivered notifications from the car.
    public func removeDeliveredNotifications(withIdentifiers identifiers: [String]) {
        guard let application = CallKitHub.shared.application, let phone = application.phone else { return }
        let appID = application.bundleIdentifier
        Task {
            for identifier in identifiers {
                try? await phone.postNotification(HUPostNotification.with {
                    $0.appID = appID
                    $0.notificationID = identifier
                    $0.withdraw = true
                })
            }
        }
    }

    /// The request as the car takes it, or nil when it stays on the phone.
    func wire(_ request: UNNotificationRequest) -> HUPostNotification? {
        guard authorized.contains(.carPlay),
            let category = categories.first(where: { $0.identifier == request.content.categoryIdentifier }),
            category.options.contains(.allowInCarPlay)
        else { return nil }
        let kind: HUNotificationCategory
        if category.intentIdentifiers.contains("INSearchForMessagesIntent") {
            kind = .message
        } else if category.intentIdentifiers.contains("INSearchCallHistoryIntent") {
            kind = .missedCall
        } else {
            return nil
        }
        return HUPostNotification.with {
            $0.notificationID = request.identifier
            $0.category = kind
            $0.sender = request.content.title
            $0.group = request.content.subtitle
            $0.conversationID = request.content.threadIdentifier
            $0.body = request.content.body
        }
    }
}
