// A communication app: conversations (the car's voice flow), a contact card
// with a call button, and an alert. Run: swift run MessagesApp [socket path].
import CarPlayKit
import Foundation

func log(_ line: String) { print(line); fflush(nil) }  // fflush(nil): every C stream (Swift 6 will not touch `stdout`)

final class MessagesSceneDelegate: CPTemplateApplicationSceneDelegate, @unchecked Sendable {
    var interfaceController: CPInterfaceController?

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
        let list = CPListTemplate(title: "Messages", sections: [CPListSection(items: [alice, bob])], identifier: "conversations")
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
            CPContactCallButton(identifier: "call") { _ in log("calling Bob") },
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

let socket = CommandLine.arguments.dropFirst().first ?? HeadUnitEndpoint.defaultUnixSocketPath
let app = CPApplication(bundleIdentifier: "com.example.messages", displayName: "Messages", entitlements: [.communication])
let sceneDelegate = MessagesSceneDelegate()
app.sceneDelegate = sceneDelegate
try await app.connect(to: .unix(path: socket), deviceName: "Example iPhone")
log("connected")
await app.run()
