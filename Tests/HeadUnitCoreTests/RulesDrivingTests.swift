import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Protocol/TEMPLATES.md section 8: list caps while driving, and refresh rates.
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

    /// What the car answers a push with and what a parked screen shows are
    /// counted from the held section sizes (`DrivingLimits.counts`), not by
    /// cutting the list: the same numbers as the cut, for every shape and cap.
    @Test func countsAreWhatTheCutShows() {
        for sections in 1...5 {
            for items in [0, 1, 3, 7] {
                let list = Fixture.list(items: items, sections: sections)
                let sizes = Fixture.listTemplate(list).sections.map(\.items.count)
                for maxItems in [0, 1, 4, 12, 35] {
                    for maxSections in [0, 1, 2, 12] {
                        let cut = DrivingLimits.truncate(list, maxItems: maxItems, maxSections: maxSections)
                        let counted = DrivingLimits.counts(sectionItems: sizes, maxItems: maxItems, maxSections: maxSections)
                        #expect(counted.shown == cut.shown && counted.total == cut.total, "\(sizes) \(maxItems) \(maxSections)")
                    }
                }
            }
        }
        // Uneven sections, an empty one among them.
        #expect(DrivingLimits.counts(sectionItems: [5, 0, 9, 2], maxItems: 12, maxSections: 0) == (12, 16))
        #expect(DrivingLimits.counts(sectionItems: [5, 0, 9, 2], maxItems: 12, maxSections: 2) == (5, 16))
        #expect(DrivingLimits.counts(sectionItems: [], maxItems: 12, maxSections: 2) == (0, 0))
    }

    /// A held template keeps its kind and section sizes, read once when stored.
    @Test func heldTemplatesKnowTheirKindAndSectionSizes() {
        var scene = SceneState(id: 1, appID: "app", kind: .main)
        _ = scene.setRoot(Fixture.list(items: 2, sections: 3), category: .audio, scale: 2)
        #expect(scene.stackHeld.last?.kind == .list)
        #expect(scene.stackHeld.last?.listSectionItems == [2, 2, 2])
        _ = scene.push(Fixture.grid(), category: .audio, scale: 2)
        #expect(scene.stackHeld.map(\.kind) == [.list, .grid])
        #expect(scene.stackHeld.last?.listSectionItems == [])
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
