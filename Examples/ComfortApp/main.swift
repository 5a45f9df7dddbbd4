// An automaker app: a grid of car functions, an information screen, and an
// External Accessory session to the car's climate feature.
// Run: swift run ComfortApp [socket path]; launch "Comfort" on the car.
import CarPlayKit
import Foundation

func log(_ line: String) { print(line); fflush(nil) }  // fflush(nil): every C stream (Swift 6 will not touch `stdout`)

import HeadUnitClient  // accessory sessions: the lower-level SDK (EASession has no CarPlay counterpart)

let climateProtocol = "com.openmotors.climate"

final class ComfortSceneDelegate: CPTemplateApplicationSceneDelegate {
    let application: CPApplication
    var interfaceController: CPInterfaceController?
    init(application: CPApplication) { self.application = application }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController) {
        self.interfaceController = interfaceController
        let climate = CPGridButton(titleVariants: ["Climate"], image: CPImage(named: "climate", pixelWidth: 80, pixelHeight: 80),
                                   identifier: "climate") { [unowned self] _ in self.showClimate() }
        let grid = CPGridTemplate(title: "Comfort", gridButtons: [climate], identifier: "functions")
        interfaceController.setRootTemplate(grid, animated: false) { success, _ in log("root set: \(success)") }
    }

    func showClimate() {
        let protocols = application.decision?.matchedProtocols ?? []
        let status = CPInformationItem(title: "Protocols", detail: protocols.joined(separator: ", "), identifier: "protocols")
        let warmer = CPTextButton(title: "Warmer", textStyle: .confirm, identifier: "warmer") { [unowned self] _ in
            Task { await self.sendToClimate([0x01]) }
        }
        let info = CPInformationTemplate(title: "Climate", layout: .leading, items: [status], actions: [warmer], identifier: "climate-info")
        Task {
            try await interfaceController?.pushTemplate(info, animated: true)
            log("showed climate")
        }
    }

    /// Automaker apps talk to the car's own features over accessory sessions (`EASession` in iOS).
    func sendToClimate(_ bytes: [UInt8]) async {
        do {
            guard let phone = application.phone else { return }
            let stream = try await phone.openAccessorySession(appID: application.bundleIdentifier, protocol: climateProtocol)
            try await stream.write(bytes)
            let reply = try await stream.read()
            try await stream.close()
            log("climate replied \(reply?.readableBytes ?? 0) bytes")
        } catch {
            log("climate unavailable: \(error)")
        }
    }
}

let socket = CommandLine.arguments.dropFirst().first ?? HeadUnitEndpoint.defaultUnixSocketPath
let app = CPApplication(bundleIdentifier: "com.example.comfort", displayName: "Comfort", entitlements: [.protocols],
                        accessoryProtocols: [climateProtocol])
let sceneDelegate = ComfortSceneDelegate(application: app)
app.sceneDelegate = sceneDelegate
try await app.connect(to: .unix(path: socket), deviceName: "Example iPhone")
log("connected")
await app.run()
