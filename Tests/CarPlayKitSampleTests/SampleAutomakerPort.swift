// An automaker app written the way Apple's documentation and its External
// Accessory sample (EADemo) write one: a grid of car functions, an
// information screen, and a session controller that finds the accessory
// through EAAccessoryManager, hears it connect and disconnect, and talks to
// it over EASession's stream pair with a StreamDelegate. It compiles against
// CarPlayKit in Swift 6 mode with only the differences docs/CARPLAYKIT.md
// lists; each is marked "DIFF". PortDriverTests drives it from the HMI with
// an accessory peer serving the protocol.
import CarPlayKit  // DIFF: `import CarPlay` and `import ExternalAccessory`

/// Talks to the car's climate feature (EADemo's `EADSessionController`).
class ClimateSessionController: NSObject, StreamDelegate {
    static let protocolString = "com.openmotors.climate"

    var session: EASession?
    var writeData = [UInt8]()
    var readData = [UInt8]()
    var onReceive: ((Int) -> Void)?

    func openSession() -> Bool {
        guard let accessory = EAAccessoryManager.shared().connectedAccessories.first(where: {
            $0.protocolStrings.contains(Self.protocolString)
        }) else { return false }
        session = EASession(accessory: accessory, forProtocol: Self.protocolString)
        guard let session else { return false }
        session.inputStream?.delegate = self
        session.inputStream?.schedule(in: .current, forMode: .default)
        session.inputStream?.open()
        session.outputStream?.delegate = self
        session.outputStream?.schedule(in: .current, forMode: .default)
        session.outputStream?.open()
        return true
    }

    func closeSession() {
        session?.inputStream?.close()
        session?.inputStream?.remove(from: .current, forMode: .default)
        session?.inputStream?.delegate = nil
        session?.outputStream?.close()
        session?.outputStream?.remove(from: .current, forMode: .default)
        session?.outputStream?.delegate = nil
        session = nil
    }

    func write(_ bytes: [UInt8]) {
        writeData += bytes
        writeAvailable()
    }

    private func writeAvailable() {
        guard let outputStream = session?.outputStream else { return }
        while outputStream.hasSpaceAvailable && !writeData.isEmpty {
            let written = writeData.withUnsafeBufferPointer { outputStream.write($0.baseAddress!, maxLength: $0.count) }
            if written <= 0 { break }
            writeData.removeFirst(written)
        }
    }

    private func readAvailable() {
        guard let inputStream = session?.inputStream else { return }
        var buffer = [UInt8](repeating: 0, count: 128)
        var total = 0
        while inputStream.hasBytesAvailable {
            let count = inputStream.read(&buffer, maxLength: buffer.count)
            if count <= 0 { break }
            readData += buffer[0..<count]
            total += count
        }
        if total > 0 { onReceive?(total) }
    }

    // MARK: StreamDelegate

    func stream(_ aStream: Stream, handle eventCode: Stream.Event) {
        switch eventCode {
        case .hasBytesAvailable: readAvailable()
        case .hasSpaceAvailable: writeAvailable()
        case .errorOccurred, .endEncountered: closeSession()
        default: break
        }
    }
}

class AutomakerSceneDelegate: NSObject, CPTemplateApplicationSceneDelegate {
    var interfaceController: CPInterfaceController?
    let climate = ClimateSessionController()
    var climateTemplate: CPInformationTemplate?
    /// What the app heard, for the driver test.
    var events: [String] = []
    var observers: [NSObjectProtocol] = []

    override init() {
        super.init()
        EAAccessoryManager.shared().registerForLocalNotifications()
        // DIFF: the block form of addObserver (`#selector` needs the Objective-C runtime); the
        // notifications are posted on the main actor, so `queue: nil` runs the block there.
        observers.append(NotificationCenter.default.addObserver(forName: .EAAccessoryDidConnect, object: nil, queue: nil) { [weak self] notification in
            let accessory = notification.userInfo?[EAAccessoryKey] as? EAAccessory
            let name = accessory?.name ?? "?"
            MainActor.assumeIsolated { self?.events.append("connected \(name)") }
        })
        observers.append(NotificationCenter.default.addObserver(forName: .EAAccessoryDidDisconnect, object: nil, queue: nil) { [weak self] notification in
            let accessory = notification.userInfo?[EAAccessoryKey] as? EAAccessory
            let name = accessory?.name ?? "?"
            MainActor.assumeIsolated { self?.events.append("disconnected \(name)") }
        })
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController) {
        self.interfaceController = interfaceController
        let climateButton = CPGridButton(titleVariants: ["Climate"],
                                         image: CPImage(named: "fan", pixelWidth: 80, pixelHeight: 80)) { [weak self] _ in  // DIFF: `UIImage(systemName:)`
            self?.showClimate()
        }
        let gridTemplate = CPGridTemplate(title: "My Car", gridButtons: [climateButton])
        interfaceController.setRootTemplate(gridTemplate, animated: true, completion: nil)
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnectInterfaceController interfaceController: CPInterfaceController) {
        self.interfaceController = nil
    }

    /// `CPInformationItem.detail` is read-only on iOS: an app shows a new status by replacing the template's items.
    func showStatus(_ status: String) {
        climateTemplate?.items = [CPInformationItem(title: "Climate", detail: status)]
    }

    func showClimate() {
        let warmer = CPTextButton(title: "Warmer", textStyle: .confirm) { [weak self] _ in
            guard let self else { return }
            if self.climate.session == nil, !self.climate.openSession() {
                self.showStatus("Unavailable")
                return
            }
            self.climate.write([0x01])
        }
        climate.onReceive = { [weak self] count in
            self?.showStatus("Replied \(count) byte(s)")
            self?.events.append("reply \(count)")
        }
        let connected = EAAccessoryManager.shared().connectedAccessories.contains { $0.protocolStrings.contains(ClimateSessionController.protocolString) }
        let informationTemplate = CPInformationTemplate(
            title: "Climate", layout: .leading,
            items: [CPInformationItem(title: "Climate", detail: connected ? "Connected" : "Not connected")], actions: [warmer])
        climateTemplate = informationTemplate
        interfaceController?.pushTemplate(informationTemplate, animated: true, completion: nil)
    }
}
