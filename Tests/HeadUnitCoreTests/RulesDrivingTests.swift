import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// DOMAIN.md §5 (list caps while driving) and §11 (refresh rates).
@Suite struct RulesDrivingTests {
    func counts(_ template: HUTemplate) -> [Int] {
        Fixture.listTemplate(template).sections.map(\.items.count)
    }

    @Test func listsAreCappedWhileDriving() {
        let result = DrivingLimits.truncate(Fixture.list(items: 20), maxItems: 12, maxSections: 0)
        #expect(result.shown == 12)
        #expect(result.total == 20)
        #expect(counts(result.template) == [12])
    }

    @Test func capCountsItemsAcrossSections() {
        let result = DrivingLimits.truncate(Fixture.list(items: 5, sections: 4), maxItems: 12, maxSections: 0)
        #expect(counts(result.template) == [5, 5, 2])
        #expect(result.shown == 12)
        #expect(result.total == 20)
        // The kept items are the first ones, in order.
        #expect(Fixture.listTemplate(result.template).sections[2].items.map(\.id) == ["s2.i0", "s2.i1"])
    }

    @Test func sectionCapDropsLaterSections() {
        let result = DrivingLimits.truncate(Fixture.list(items: 2, sections: 4), maxItems: 12, maxSections: 2)
        #expect(counts(result.template) == [2, 2])
        #expect(result.shown == 4)
        #expect(result.total == 8)
    }

    @Test func shortListsAreUnchanged() {
        let list = Fixture.list(items: 3, sections: 2)
        let result = DrivingLimits.truncate(list, maxItems: 12, maxSections: 12)
        #expect(result.template == list)
        #expect(result.shown == 6)
        #expect(result.total == 6)
    }

    @Test func zeroMeansNoCap() {
        let result = DrivingLimits.truncate(Fixture.list(items: 30), maxItems: 0, maxSections: 0)
        #expect(result.shown == 30)
    }

    @Test func tabListsAreCappedEachOnItsOwn() {
        var template = Fixture.tabBar(tabs: 2)
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.tabs[0].template = Fixture.list("tab0.list", items: 20)
        template.kind = .tabBar(tabBar)
        let result = DrivingLimits.truncate(template, maxItems: 12, maxSections: 0)
        guard case .tabBar(let shown) = result.template.kind else { return }
        #expect(counts(shown.tabs[0].template) == [12])
        #expect(counts(shown.tabs[1].template) == [3])
        #expect(result.shown == 15)
        #expect(result.total == 23)
    }

    @Test func templatesWithoutListsAreUnchanged() {
        let grid = Fixture.grid()
        let result = DrivingLimits.truncate(grid, maxItems: 1, maxSections: 1)
        #expect(result.template == grid)
        #expect(result.shown == 0 && result.total == 0)
    }

    @Test func drivingTaskPointsOfInterestRefreshAtMostEverySixtySeconds() {
        #expect(RefreshRules.minimumUpdateInterval(.pointOfInterest, category: .drivingTask) == 60_000)
    }

    @Test func drivingTaskDataItemsRefreshAtMostEveryTenSeconds() {
        #expect(RefreshRules.minimumUpdateInterval(.list, category: .drivingTask) == 10_000)
        #expect(RefreshRules.minimumUpdateInterval(.information, category: .drivingTask) == 10_000)
    }

    @Test func otherCategoriesAndTemplatesHaveNoRefreshLimit() {
        #expect(RefreshRules.minimumUpdateInterval(.pointOfInterest, category: .parking) == nil)
        #expect(RefreshRules.minimumUpdateInterval(.list, category: .audio) == nil)
        #expect(RefreshRules.minimumUpdateInterval(.grid, category: .drivingTask) == nil)
    }
}
