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
