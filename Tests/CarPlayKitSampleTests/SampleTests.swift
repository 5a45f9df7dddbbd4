import CarPlayKit
import Testing

/// The sample port compiles (the point) and builds the templates it means to.
@Suite("CarPlay sample port")
struct SampleTests {
    @Test("the TemplateManager builds a genres list with a handler per item and a settings tab")
    @MainActor func templates() {
        let genres = TemplateManager.shared.genresTemplate()
        #expect(genres.itemCount == 3)
        #expect(genres.sections[0].items.allSatisfy { ($0 as? CPListItem)?.handler != nil })
        #expect(genres.tabTitle == "Genres")
        let settings = TemplateManager.shared.settingsTemplate()
        #expect(settings.tabSystemItem == .more)
        let tabs = CPTabBarTemplate(templates: [genres, settings])
        #expect(tabs.templates.count == 2)
    }
}

/// The Apple-style navigation port compiles (the point) and answers its search on the main actor.
@Suite("CarPlay navigation sample port")
struct NavigationSampleTests {
    @Test("the Apple-shaped navigation delegate answers a search through Apple's non-Sendable completion")
    @MainActor func search() {
        let delegate = NavigationSceneDelegate()
        var answered: [CPListItem] = []
        delegate.searchTemplate(CPSearchTemplate(), updatedSearchText: "x") { answered = $0 }
        #expect(answered.first?.text == "Cafe x")
        delegate.mapTemplate(CPMapTemplate(), panWith: CPMapTemplate.PanDirection.up)
        #expect(delegate.events == ["pan \(CPPanDirection.up)"])
    }
}
