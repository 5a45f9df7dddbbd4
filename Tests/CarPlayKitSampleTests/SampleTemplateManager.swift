// A port of the template code of a CarPlay audio sample, written the way
// Apple's samples write it (a scene delegate forwarding to a TemplateManager
// singleton that builds a tab bar of lists). It compiles against CarPlayKit
// with only the differences docs/CARPLAYKIT.md lists; each is marked "DIFF".
import CarPlayKit  // DIFF: `import CarPlay`

class CarPlaySceneDelegate: CPTemplateApplicationSceneDelegate {  // DIFF: no `UIResponder` superclass
    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController) {
        TemplateManager.shared.interfaceControllerDidConnect(interfaceController, scene: templateApplicationScene)
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnectInterfaceController interfaceController: CPInterfaceController) {
        TemplateManager.shared.interfaceControllerDidDisconnect(interfaceController, scene: templateApplicationScene)
    }
}

class TemplateManager: NSObject, CPInterfaceControllerDelegate, CPSessionConfigurationDelegate {
    static let shared = TemplateManager()

    /// A reference to the CPInterfaceController that passes in after connecting to CarPlay.
    var carplayInterfaceController: CPInterfaceController?

    /// The CarPlay session configuration contains information on restrictions for the specified interface.
    var sessionConfiguration: CPSessionConfiguration!

    /// Connects the root template to the CPInterfaceController.
    func interfaceControllerDidConnect(_ interfaceController: CPInterfaceController, scene: CPTemplateApplicationScene) {
        carplayInterfaceController = interfaceController
        carplayInterfaceController!.delegate = self
        sessionConfiguration = CPSessionConfiguration(delegate: self)

        var tabTemplates = [CPTemplate]()
        tabTemplates.append(genresTemplate())
        tabTemplates.append(settingsTemplate())

        self.carplayInterfaceController!.setRootTemplate(CPTabBarTemplate(templates: tabTemplates), animated: true, completion: nil)
    }

    /// Called when CarPlay disconnects.
    func interfaceControllerDidDisconnect(_ interfaceController: CPInterfaceController, scene: CPTemplateApplicationScene) {
        carplayInterfaceController = nil
    }

    /// A list of genres; selecting one shows Now Playing.
    func genresTemplate() -> CPListTemplate {
        let genres = ["Jazz", "Rock", "Classical"]
        var items = [CPListItem]()
        for genre in genres {
            let item = CPListItem(text: genre, detailText: nil)
            item.handler = { [weak self] item, completion in
                self?.carplayInterfaceController?.pushTemplate(CPNowPlayingTemplate.shared, animated: true, completion: nil)
                completion()
            }
            items.append(item)
        }
        let listTemplate = CPListTemplate(title: "Genres", sections: [CPListSection(items: items)])
        listTemplate.tabTitle = "Genres"
        listTemplate.tabImage = CPImage(named: "music.note.list", pixelWidth: 48, pixelHeight: 48)  // DIFF: `UIImage(systemName:)`
        return listTemplate
    }

    /// A settings tab with an alert.
    func settingsTemplate() -> CPListTemplate {
        let item = CPListItem(text: "Clear history", detailText: "Forget recently played")
        item.handler = { [weak self] _, completion in
            guard let self else { return completion() }
            let alert = CPAlertTemplate(titleVariants: ["Clear history?"], actions: [
                CPAlertAction(title: "Clear", style: .destructive) { _ in
                    self.carplayInterfaceController?.dismissTemplate(animated: true, completion: nil)
                },
                CPAlertAction(title: "Cancel", style: .cancel) { _ in
                    self.carplayInterfaceController?.dismissTemplate(animated: true, completion: nil)
                },
            ])
            self.carplayInterfaceController?.presentTemplate(alert, animated: true, completion: nil)
            completion()
        }
        let listTemplate = CPListTemplate(title: "Settings", sections: [CPListSection(items: [item])])
        listTemplate.tabSystemItem = .more  // DIFF: `UITabBarItem.SystemItem`
        return listTemplate
    }

    // MARK: CPInterfaceControllerDelegate

    func templateWillAppear(_ aTemplate: CPTemplate, animated: Bool) {}
    func templateDidAppear(_ aTemplate: CPTemplate, animated: Bool) {}
    func templateWillDisappear(_ aTemplate: CPTemplate, animated: Bool) {}
    func templateDidDisappear(_ aTemplate: CPTemplate, animated: Bool) {}

    // MARK: CPSessionConfigurationDelegate

    func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration,
                              limitedUserInterfacesChanged limitedUserInterfaces: CPLimitableUserInterface) {
        print("Limited UI changed: \(limitedUserInterfaces)")
    }
}
