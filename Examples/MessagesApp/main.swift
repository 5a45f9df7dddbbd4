// A communication app: conversations (the car's voice flow), a contact card
// with a call button that places a call with CallKit, an alert, and SiriKit's
// communication intents for the phone's assistant (the car's voice button:
// "send a message to Jane saying on my way", "read my messages", "call Bob",
// "missed calls").
// Run: swift run MessagesApp [socket path] [--incoming-call NAME]
// (--incoming-call: a call from NAME rings on the car once connected). Once
// connected it posts a CarPlay notification for Alice's unread message.
import CarPlayKit
import Foundation

func log(_ line: String) { print(line); fflush(nil) }  // fflush(nil): every C stream (Swift 6 will not touch `stdout`)

/// The app's calls, as CallKit has them (PROTOCOL.md section 26): the car
/// shows them and its buttons arrive here as actions to perform.
final class CallManager: NSObject, CXProviderDelegate {
    let provider = CXProvider(configuration: CXProviderConfiguration())
    let controller = CXCallController()

    override init() {
        super.init()
        provider.setDelegate(self, queue: nil)
    }

    func update(_ name: String) -> CXCallUpdate {
        let update = CXCallUpdate()
        update.remoteHandle = CXHandle(type: .phoneNumber, value: "+1 555 0100")
        update.localizedCallerName = name
        update.supportsHolding = true
        update.supportsDTMF = true
        return update
    }

    func call(_ name: String) {
        let uuid = UUID()
        controller.request(CXTransaction(action: CXStartCallAction(call: uuid, handle: CXHandle(type: .phoneNumber, value: "+1 555 0100")))) { error in
            log(error.map { "call refused: \($0)" } ?? "calling \(name)")
        }
        provider.reportCall(with: uuid, updated: update(name))
    }

    func ring(from name: String) {
        provider.reportNewIncomingCall(with: UUID(), update: update(name)) { error in
            log(error.map { "incoming call refused: \($0)" } ?? "ringing: \(name)")
        }
    }

    func providerDidReset(_ provider: CXProvider) { log("calls reset") }

    func provider(_ provider: CXProvider, perform action: CXStartCallAction) {
        action.fulfill()
        provider.reportOutgoingCall(with: action.callUUID, connectedAt: Date())
        log("call connected")
    }

    func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
        action.fulfill()
        log("answered")
    }

    func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
        action.fulfill()
        log("ended")
    }

    func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction) {
        action.fulfill()
        log(action.isOnHold ? "held" : "resumed")
    }

    func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction) {
        action.fulfill()
        log(action.isMuted ? "muted" : "unmuted")
    }

    func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction) {
        action.fulfill()
        log("keys \(action.digits)")
    }
}

/// The app's SiriKit handlers (its Intents extension): the assistant sends,
/// reads and marks messages read, starts calls and finds missed ones here.
final class MessagesIntents: INExtension, INSendMessageIntentHandling, INSearchForMessagesIntentHandling,
    INSetMessageAttributeIntentHandling, INStartCallIntentHandling, INSearchCallHistoryIntentHandling
{
    let calls: CallManager
    var unread: [INMessage] = [
        INMessage(identifier: "m1", conversationIdentifier: "conv-alice", content: "See you at 6", dateSent: Date(),
                  sender: INPerson(personHandle: INPersonHandle(value: "+15550101", type: .phoneNumber), displayName: "Alice"), recipients: nil),
    ]
    let missed = [INCallRecord(identifier: "c1", dateCreated: Date(), callRecordType: .missed, unseen: true,
                               participants: [INPerson(personHandle: INPersonHandle(value: "+15550100", type: .phoneNumber), displayName: "Bob")])]

    init(calls: CallManager) {
        self.calls = calls
        super.init()
    }

    override func handler(for intent: INIntent) -> Any? { self }

    func handle(intent: INSendMessageIntent) async -> INSendMessageIntentResponse {
        let names = (intent.recipients ?? []).map(\.displayName).joined(separator: ", ")
        log("message sent to \(names): \(intent.content ?? "")" + (intent.conversationIdentifier.map { " (\($0))" } ?? ""))
        return INSendMessageIntentResponse(code: .success, userActivity: nil)
    }

    func handle(intent: INSearchForMessagesIntent) async -> INSearchForMessagesIntentResponse {
        let senders = Set((intent.senders ?? []).map { $0.displayName.lowercased() })
        let response = INSearchForMessagesIntentResponse(code: .success, userActivity: nil)
        let conversations = Set(intent.conversationIdentifiers ?? [])
        response.messages = unread.filter {
            (senders.isEmpty || senders.contains($0.sender?.displayName.lowercased() ?? ""))
                && (conversations.isEmpty || conversations.contains($0.conversationIdentifier ?? ""))
        }
        log("messages found: \(response.messages?.count ?? 0)")
        return response
    }

    func handle(intent: INSetMessageAttributeIntent) async -> INSetMessageAttributeIntentResponse {
        let ids = Set(intent.identifiers ?? [])
        if intent.attribute == .read { unread.removeAll { ids.contains($0.identifier) } }
        log("marked \(intent.attribute): \(ids.sorted().joined(separator: ", "))")
        return INSetMessageAttributeIntentResponse(code: .success, userActivity: nil)
    }

    func handle(intent: INStartCallIntent) async -> INStartCallIntentResponse {
        let name = intent.contacts?.first?.displayName ?? ""
        calls.call(name)
        return INStartCallIntentResponse(code: .continueInApp, userActivity: nil)
    }

    func handle(intent: INSearchCallHistoryIntent) async -> INSearchCallHistoryIntentResponse {
        let response = INSearchCallHistoryIntentResponse(code: .success, userActivity: nil)
        response.callRecords = intent.callTypes.contains(.missed) ? missed : []
        return response
    }
}

final class MessagesSceneDelegate: CPTemplateApplicationSceneDelegate {
    var interfaceController: CPInterfaceController?
    let calls: CallManager

    init(calls: CallManager) { self.calls = calls }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController) {
        self.interfaceController = interfaceController
        let unread = CPMessageListItemLeadingConfiguration(leadingItem: .none, leadingImage: nil, unread: true)
        let alice = CPMessageListItem(conversationIdentifier: "conv-alice", text: "Alice", leadingConfiguration: unread,
                                      trailingConfiguration: nil, detailText: "See you at 6", trailingText: "18:02",
                                      identifier: "alice")
        alice.voiceFlowHandler = { item in
            log("voice flow for \(item.text ?? "")")
            item.leadingConfiguration = CPMessageListItemLeadingConfiguration(leadingItem: .none, leadingImage: nil, unread: false)
        }
        let bob = CPListItem(text: "Bob", detailText: "Contact", accessoryType: .disclosureIndicator, identifier: "bob")
        bob.handler = { [unowned self] _, completion in
            Task {
                try await self.interfaceController?.pushTemplate(self.contactCard(), animated: true)
                completion()
                log("showed Bob")
            }
        }
        // With the "Ask Siri" row: the assistant opens to place a call.
        let list = CPListTemplate(title: "Messages", sections: [CPListSection(items: [alice, bob])],
                                  assistantCellConfiguration: CPAssistantCellConfiguration(position: .top, visibility: .always, assistantAction: .startCall),
                                  identifier: "conversations")
        list.leadingNavigationBarButtons = [CPBarButton(title: "Clear", identifier: "clear") { [unowned self] _ in
            self.confirmClear()
        }]
        Task {
            do {
                try await interfaceController.setRootTemplate(list, animated: false)
                log("root set")
            } catch let error as CPError {
                log("refused: \(error.code)")
            }
        }
    }

    func contactCard() -> CPContactTemplate {
        let contact = CPContact(name: "Bob", image: nil)
        contact.subtitle = "+1 555 0100"
        contact.actions = [
            CPContactCallButton(identifier: "call") { [unowned self] _ in self.calls.call("Bob") },
            CPContactMessageButton(phoneOrEmail: "+15550100", identifier: "message"),
        ]
        return CPContactTemplate(contact: contact, identifier: "bob-card")
    }

    func confirmClear() {
        let clear = CPAlertAction(title: "Clear all", style: .destructive, identifier: "clear-all") { [unowned self] _ in
            log("cleared")
            self.interfaceController?.dismissTemplate(animated: true) { _, _ in }
        }
        let cancel = CPAlertAction(title: "Cancel", style: .cancel, identifier: "cancel") { [unowned self] _ in
            self.interfaceController?.dismissTemplate(animated: true) { _, _ in }
        }
        let alert = CPAlertTemplate(titleVariants: ["Clear all conversations?", "Clear all?"], actions: [clear, cancel],
                                    identifier: "confirm-clear")
        interfaceController?.presentTemplate(alert, animated: true) { _, error in
            if let error { log("alert refused: \(error)") }
        }
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var incomingCaller: String?
if let flag = arguments.firstIndex(of: "--incoming-call"), flag + 1 < arguments.count {
    incomingCaller = arguments[flag + 1]
    arguments.removeSubrange(flag...(flag + 1))
}
let socket = arguments.first ?? HeadUnitEndpoint.defaultUnixSocketPath
let app = CPApplication(bundleIdentifier: "com.example.messages", displayName: "Messages", entitlements: [.communication])
let callManager = CallManager()
let sceneDelegate = MessagesSceneDelegate(calls: callManager)
app.sceneDelegate = sceneDelegate
let intents = MessagesIntents(calls: callManager)
app.intentsExtension = intents
// The phone's assistant: the car's voice button opens it and it runs the intents above.
try await app.connect(to: .unix(path: socket), deviceName: "Example iPhone", assistant: true)
log("connected")
if let incomingCaller { callManager.ring(from: incomingCaller) }
// Alice's unread message as a CarPlay notification: sender and group only (a body would be refused).
let notifications = UNUserNotificationCenter.current()
_ = try await notifications.requestAuthorization(options: [.alert, .carPlay])
notifications.setNotificationCategories([
    UNNotificationCategory(identifier: "message", intentIdentifiers: ["INSearchForMessagesIntent"], options: [.allowInCarPlay]),
])
let content = UNMutableNotificationContent()
content.title = "Alice"
content.categoryIdentifier = "message"
content.threadIdentifier = "conv-alice"
do {
    try await notifications.add(UNNotificationRequest(identifier: "m1", content: content, trigger: nil))
    log("notification posted")
} catch {
    log("notification refused: \(error)")
}
await app.run()
