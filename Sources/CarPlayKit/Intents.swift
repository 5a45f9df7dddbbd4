import Foundation

// SiriKit's communication intents (`import Intents` on iOS), as the phone's
// assistant (`CPAssistant`, standing in for Siri) hands them to an app: the
// five a messaging or calling app in CarPlay handles. An app registers its
// handlers the way an Intents extension does (`INExtension.handler(for:)`,
// here `CPApplication.intentsExtension`); each handler may resolve a
// parameter (success, needs a value, unsupported), confirm, and must handle,
// answering a typed response. The assistant turns the driver's request into
// an intent and speaks or shows the response (PROTOCOL.md section 27).

/// What every intent is (`INIntent`).
@MainActor
open class INIntent {
    /// A fresh identifier per intent, as SiriKit gives.
    public let identifier = UUID().uuidString
    public init() {}
}

/// A person an intent names (`INPerson`): the name the driver said, and a handle when the app knows one.
@MainActor
public final class INPerson {
    public let displayName: String
    public let personHandle: INPersonHandle?

    public init(personHandle: INPersonHandle?, nameComponents: PersonNameComponents? = nil, displayName: String?) {
        self.personHandle = personHandle
        self.displayName = displayName ?? nameComponents?.givenName ?? personHandle?.value ?? ""
    }
}

/// A phone number or address (`INPersonHandle`).
public struct INPersonHandle: Sendable, Equatable {
    public enum HandleType: Sendable { case unknown, emailAddress, phoneNumber }
    public let value: String?
    public let type: HandleType

    public init(value: String?, type: HandleType) {
        self.value = value
        self.type = type
    }
}

/// A parameter's resolution (`INIntentResolutionResult` and its typed subclasses, as one generic).
public enum INResolution<Value> {
    case success(Value)
    /// Ask the driver for it (Siri asks, and the next thing said is the value).
    case needsValue
    case unsupported
}

// MARK: - Send a message

/// `INSendMessageIntent`: "send a message to Jane saying on my way".
@MainActor
public final class INSendMessageIntent: INIntent {
    public let recipients: [INPerson]?
    public let content: String?
    public let conversationIdentifier: String?

    public init(recipients: [INPerson]?, outgoingMessageType: Int = 0, content: String?, speakableGroupName: String? = nil,
                conversationIdentifier: String?, serviceName: String? = nil, sender: INPerson? = nil) {
        self.recipients = recipients
        self.content = content
        self.conversationIdentifier = conversationIdentifier
    }
}

/// `INSendMessageIntentResponse`.
@MainActor
public final class INSendMessageIntentResponse {
    public enum Code: Sendable { case unspecified, ready, inProgress, success, failure, failureRequiringAppLaunch, failureMessageServiceNotAvailable }
    public let code: Code
    public init(code: Code, userActivity: Any? = nil) { self.code = code }
}

/// An app's handler for `INSendMessageIntent` (`INSendMessageIntentHandling`).
@MainActor
public protocol INSendMessageIntentHandling: AnyObject {
    func resolveRecipients(for intent: INSendMessageIntent) async -> INResolution<[INPerson]>
    func resolveContent(for intent: INSendMessageIntent) async -> INResolution<String>
    func confirm(intent: INSendMessageIntent) async -> INSendMessageIntentResponse
    func handle(intent: INSendMessageIntent) async -> INSendMessageIntentResponse
}

extension INSendMessageIntentHandling {
    /// By default the recipients the driver named are taken; none: asked for.
    public func resolveRecipients(for intent: INSendMessageIntent) async -> INResolution<[INPerson]> {
        guard let recipients = intent.recipients, !recipients.isEmpty else { return .needsValue }
        return .success(recipients)
    }
    /// By default the content the driver said is taken; none: asked for.
    public func resolveContent(for intent: INSendMessageIntent) async -> INResolution<String> {
        guard let content = intent.content, !content.isEmpty else { return .needsValue }
        return .success(content)
    }
    public func confirm(intent: INSendMessageIntent) async -> INSendMessageIntentResponse {
        INSendMessageIntentResponse(code: .ready, userActivity: nil)
    }
}

// MARK: - Read messages

/// A message an app found (`INMessage`).
@MainActor
public final class INMessage {
    public let identifier: String
    public let conversationIdentifier: String?
    public let content: String?
    public let dateSent: Date?
    public let sender: INPerson?
    public let recipients: [INPerson]?

    public init(identifier: String, conversationIdentifier: String?, content: String?, dateSent: Date?, sender: INPerson?, recipients: [INPerson]?) {
        self.identifier = identifier
        self.conversationIdentifier = conversationIdentifier
        self.content = content
        self.dateSent = dateSent
        self.sender = sender
        self.recipients = recipients
    }
}

/// `INMessageAttributeOptions`: which messages a search wants.
public struct INMessageAttributeOptions: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let read = INMessageAttributeOptions(rawValue: 1)
    public static let unread = INMessageAttributeOptions(rawValue: 2)
}

/// `INSearchForMessagesIntent`: "read my messages", "read my messages from Jane".
@MainActor
public final class INSearchForMessagesIntent: INIntent {
    public let senders: [INPerson]?
    public let attributes: INMessageAttributeOptions
    public let conversationIdentifiers: [String]?

    public init(recipients: [INPerson]? = nil, senders: [INPerson]?, searchTerms: [String]? = nil, attributes: INMessageAttributeOptions,
                dateTimeRange: DateInterval? = nil, identifiers: [String]? = nil, notificationIdentifiers: [String]? = nil,
                speakableGroupNames: [String]? = nil, conversationIdentifiers: [String]?) {
        self.senders = senders
        self.attributes = attributes
        self.conversationIdentifiers = conversationIdentifiers
    }
}

/// `INSearchForMessagesIntentResponse`: the messages, which the assistant reads out.
@MainActor
public final class INSearchForMessagesIntentResponse {
    public enum Code: Sendable { case unspecified, ready, inProgress, success, failure, failureRequiringAppLaunch, failureMessageServiceNotAvailable }
    public let code: Code
    public var messages: [INMessage]?
    public init(code: Code, userActivity: Any? = nil) { self.code = code }
}

/// `INSearchForMessagesIntentHandling`.
@MainActor
public protocol INSearchForMessagesIntentHandling: AnyObject {
    func handle(intent: INSearchForMessagesIntent) async -> INSearchForMessagesIntentResponse
}

// MARK: - Mark read

/// `INMessageAttribute`.
public enum INMessageAttribute: Sendable { case unknown, read, unread, flagged, unflagged, played }

/// `INSetMessageAttributeIntent`: the assistant marks what it read as read.
@MainActor
public final class INSetMessageAttributeIntent: INIntent {
    public let identifiers: [String]?
    public let attribute: INMessageAttribute

    public init(identifiers: [String]?, attribute: INMessageAttribute) {
        self.identifiers = identifiers
        self.attribute = attribute
    }
}

/// `INSetMessageAttributeIntentResponse`.
@MainActor
public final class INSetMessageAttributeIntentResponse {
    public enum Code: Sendable { case unspecified, ready, inProgress, success, failure, failureRequiringAppLaunch, failureMessageNotFound, failureMessageAttributeNotSet }
    public let code: Code
    public init(code: Code, userActivity: Any? = nil) { self.code = code }
}

/// `INSetMessageAttributeIntentHandling`.
@MainActor
public protocol INSetMessageAttributeIntentHandling: AnyObject {
    func handle(intent: INSetMessageAttributeIntent) async -> INSetMessageAttributeIntentResponse
}

// MARK: - Calls

/// `INStartCallIntent`: "call Jane".
@MainActor
public final class INStartCallIntent: INIntent {
    public let contacts: [INPerson]?

    public init(callRecordFilter: Any? = nil, callRecordToCallBack: Any? = nil, audioRoute: Int = 0, destinationType: Int = 0,
                contacts: [INPerson]?, callCapability: Int = 0) {
        self.contacts = contacts
    }
}

/// `INStartCallIntentResponse`.
@MainActor
public final class INStartCallIntentResponse {
    public enum Code: Sendable { case unspecified, ready, continueInApp, userConfirmationRequired, failure, failureRequiringAppLaunch, failureContactNotSupportedByApp, failureNoValidNumber }
    public let code: Code
    public init(code: Code, userActivity: Any? = nil) { self.code = code }
}

/// `INStartCallIntentHandling`.
@MainActor
public protocol INStartCallIntentHandling: AnyObject {
    func resolveContacts(for intent: INStartCallIntent) async -> INResolution<[INPerson]>
    func handle(intent: INStartCallIntent) async -> INStartCallIntentResponse
}

extension INStartCallIntentHandling {
    /// By default the contact the driver named; none: asked for.
    public func resolveContacts(for intent: INStartCallIntent) async -> INResolution<[INPerson]> {
        guard let contacts = intent.contacts, !contacts.isEmpty else { return .needsValue }
        return .success(contacts)
    }
}

/// `INCallRecordTypeOptions`.
public struct INCallRecordTypeOptions: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let outgoing = INCallRecordTypeOptions(rawValue: 1)
    public static let missed = INCallRecordTypeOptions(rawValue: 2)
    public static let received = INCallRecordTypeOptions(rawValue: 4)
}

/// A call an app remembers (`INCallRecord`).
@MainActor
public final class INCallRecord {
    public let identifier: String
    public let dateCreated: Date?
    public let caller: INPerson?
    public let unseen: Bool?

    public init(identifier: String, dateCreated: Date?, callRecordType: INCallRecordTypeOptions, callCapability: Int = 0,
                callDuration: Double? = nil, unseen: Bool?, participants: [INPerson]?, numberOfCalls: Int? = nil, isCallerIdBlocked: Bool? = nil) {
        self.identifier = identifier
        self.dateCreated = dateCreated
        self.caller = participants?.first
        self.unseen = unseen
    }
}

/// `INSearchCallHistoryIntent`: "who called me", "missed calls".
@MainActor
public final class INSearchCallHistoryIntent: INIntent {
    public let callTypes: INCallRecordTypeOptions

    public init(dateCreated: DateInterval? = nil, recipient: INPerson? = nil, callCapabilities: Int = 0, callTypes: INCallRecordTypeOptions, unseen: Bool? = nil) {
        self.callTypes = callTypes
    }
}

/// `INSearchCallHistoryIntentResponse`.
@MainActor
public final class INSearchCallHistoryIntentResponse {
    public enum Code: Sendable { case unspecified, ready, continueInApp, inProgress, success, failure, failureRequiringAppLaunch }
    public let code: Code
    public var callRecords: [INCallRecord]?
    public init(code: Code, userActivity: Any? = nil) { self.code = code }
}

/// `INSearchCallHistoryIntentHandling`.
@MainActor
public protocol INSearchCallHistoryIntentHandling: AnyObject {
    func handle(intent: INSearchCallHistoryIntent) async -> INSearchCallHistoryIntentResponse
}

// MARK: - The extension

/// What an Intents extension is (`INExtension`): the app answers, per intent,
/// the object that handles it (nil: the app does not handle that intent).
@MainActor
open class INExtension {
    public init() {}
    open func handler(for intent: INIntent) -> Any? { nil }
}
