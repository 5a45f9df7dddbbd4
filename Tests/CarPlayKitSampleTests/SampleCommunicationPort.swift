// A communication app's scene delegate written the way Apple's CarPlay
// documentation writes one: an NSObject subclass, conversations in a list,
// a contact template with call and message buttons. It compiles against
// CarPlayKit in Swift 6 mode with only the differences docs/CARPLAYKIT.md
// lists; each is marked "DIFF". The contact's call button places the call
// with CallKit, as Apple's "Making and receiving VoIP calls" sample does.
// PortDriverTests drives it from the HMI.
import CarPlayKit  // DIFF: `import CarPlay` (and `import CallKit`)

/// The app's CallKit side: a provider that reports calls and performs
/// actions, a call controller that asks for them.
final class CallManager: NSObject, CXProviderDelegate {
    let provider: CXProvider
    let callController = CXCallController()
    /// What the app did, for the driver test.
    var events: [String] = []
    /// The calls the app has, by UUID, with whom.
    var calls: [UUID: String] = [:]

    override init() {
        let configuration = CXProviderConfiguration()
        configuration.maximumCallGroups = 1
        configuration.maximumCallsPerCallGroup = 1
        configuration.supportsVideo = false
        configuration.supportedHandleTypes = [.phoneNumber]
        provider = CXProvider(configuration: configuration)
        super.init()
        provider.setDelegate(self, queue: nil)
    }

    func startCall(to name: String, number: String) {
        let handle = CXHandle(type: .phoneNumber, value: number)
        let uuid = UUID()
        calls[uuid] = name
        let startCallAction = CXStartCallAction(call: uuid, handle: handle)
        let transaction = CXTransaction(action: startCallAction)
        callController.request(transaction) { [weak self] error in
            if let error {
                self?.events.append("start refused: \(error)")
            } else {
                self?.events.append("start requested")
            }
        }
    }

    // MARK: CXProviderDelegate

    func providerDidReset(_ provider: CXProvider) {
        calls.removeAll()
        events.append("reset")
    }

    func provider(_ provider: CXProvider, perform action: CXStartCallAction) {
        let update = CXCallUpdate()
        update.remoteHandle = action.handle
        update.localizedCallerName = calls[action.callUUID]
        update.supportsHolding = true
        update.supportsDTMF = true
        provider.reportCall(with: action.callUUID, updated: update)
        action.fulfill()
        events.append("start performed")
        provider.reportOutgoingCall(with: action.callUUID, startedConnectingAt: nil)
        provider.reportOutgoingCall(with: action.callUUID, connectedAt: nil)
    }

    func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
        action.fulfill()
    }

    func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
        events.append("end \(calls[action.callUUID] ?? "?")")
        calls[action.callUUID] = nil
        action.fulfill()
    }

    func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {
        // An iOS app starts its call audio here.
        events.append("audio activated")
    }

    func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {
        events.append("audio deactivated")
    }

    func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction) {
        events.append(action.isMuted ? "muted" : "unmuted")
        action.fulfill()
    }
}

class CommunicationSceneDelegate: NSObject, CPTemplateApplicationSceneDelegate, CPInterfaceControllerDelegate {
    var interfaceController: CPInterfaceController?
    let callManager = CallManager()
    /// What the app did, for the driver test.
    var events: [String] = []
    let conversations = [("Alice", "See you at 6"), ("Bob", "Running late")]

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController) {
        self.interfaceController = interfaceController
        interfaceController.delegate = self
        var items: [CPListItem] = []
        for (name, lastMessage) in conversations {
            let item = CPListItem(text: name, detailText: lastMessage)
            item.accessoryType = .disclosureIndicator
            item.handler = { [weak self] _, completion in
                self?.showContact(named: name)
                completion()
            }
            items.append(item)
        }
        let listTemplate = CPListTemplate(title: "Messages", sections: [CPListSection(items: items, header: "Recent", sectionIndexTitle: nil)])
        listTemplate.emptyViewTitleVariants = ["No Messages"]
        interfaceController.setRootTemplate(listTemplate, animated: true, completion: nil)
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnectInterfaceController interfaceController: CPInterfaceController) {
        self.interfaceController = nil
    }

    func showContact(named name: String) {
        let callButton = CPContactCallButton { [weak self] _ in
            self?.events.append("call \(name)")
            self?.callManager.startCall(to: name, number: "+1 555 0100")
        }
        let messageButton = CPContactMessageButton(phoneOrEmail: "+1 555 0100")
        let contact = CPContact(name: name, image: CPImage(named: "person.crop.circle", pixelWidth: 180, pixelHeight: 180))  // DIFF: `UIImage(systemName:)`
        contact.subtitle = "mobile"
        contact.informativeText = "Last message: today"
        contact.actions = [callButton, messageButton]
        let contactTemplate = CPContactTemplate(contact: contact)
        interfaceController?.pushTemplate(contactTemplate, animated: true) { [weak self] success, error in
            self?.events.append("contact \(name) shown: \(success)")
        }
    }

    // MARK: CPInterfaceControllerDelegate

    func templateDidAppear(_ aTemplate: CPTemplate, animated: Bool) {
        if aTemplate is CPContactTemplate { events.append("contact appeared") }
    }
}
