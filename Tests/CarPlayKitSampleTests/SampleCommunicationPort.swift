// A communication app's scene delegate written the way Apple's CarPlay
// documentation writes one: an NSObject subclass, conversations in a list,
// a contact template with call and message buttons. It compiles against
// CarPlayKit in Swift 6 mode with only the differences docs/CARPLAYKIT.md
// lists; each is marked "DIFF". PortDriverTests drives it from the HMI.
import CarPlayKit  // DIFF: `import CarPlay` (and no `import CallKit`)

class CommunicationSceneDelegate: NSObject, CPTemplateApplicationSceneDelegate, CPInterfaceControllerDelegate {
    var interfaceController: CPInterfaceController?
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
            // DIFF: `CXStartCallAction` is unavailable (no call state in the protocol); an iOS app would request
            // `CXStartCallAction(call: UUID(), handle: CXHandle(type: .phoneNumber, value: ...))` here.
            self?.events.append("call \(name)")
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
