import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Element-level diffs (Protocol/TEMPLATES.md section 7: the car re-renders only what changed).
@Suite struct RulesDifferTests {
    func elements(_ changes: [HUElementChange]?) -> [HUElementChange.OneOf_Element?]? {
        changes?.map(\.element)
    }

    @Test func identicalTemplatesHaveNoChanges() {
        #expect(TemplateDiffer.diff(from: Fixture.list(), to: Fixture.list()) == [])
    }

    @Test func oneChangedItemOfATwelveItemListIsOneChange() throws {
        let old = Fixture.list(items: 12)
        var list = Fixture.listTemplate(old)
        guard case .general(var general) = list.sections[0].items[5].kind else { return }
        general.detailText = "now playing"
        general.playing = true
        list.sections[0].items[5].kind = .general(general)
        let new = Fixture.template(old.id, .list(list))

        let changes = try #require(TemplateDiffer.diff(from: old, to: new))
        #expect(changes.count == 1)
        #expect(changes.first?.element == .listItem(list.sections[0].items[5]))

        // On the wire: the diff is a small fraction of the template.
        var diff = HUTemplateDiff()
        diff.templateID = new.id
        diff.changes = changes
        let diffSize = (try diff.serializedBytes() as [UInt8]).count
        let fullSize = (try new.serializedBytes() as [UInt8]).count
        #expect(diffSize * 5 < fullSize, "diff \(diffSize) bytes, full \(fullSize) bytes")
    }

    @Test func addedRemovedOrReorderedItemsAreStructural() {
        let old = Fixture.list(items: 4)
        var list = Fixture.listTemplate(old)
        list.sections[0].items.append(Fixture.item("new"))
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .list(list))) == nil)
        list = Fixture.listTemplate(old)
        list.sections[0].items.removeLast()
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .list(list))) == nil)
        list = Fixture.listTemplate(old)
        list.sections[0].items.swapAt(0, 1)
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .list(list))) == nil)
    }

    @Test func changedSectionsAreStructural() {
        let old = Fixture.list(items: 2, sections: 2)
        var list = Fixture.listTemplate(old)
        list.sections[1].header = "Later"
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .list(list))) == nil)
        list = Fixture.listTemplate(old)
        list.sections.removeLast()
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .list(list))) == nil)
    }

    @Test func differentKindOrIDIsStructural() {
        #expect(TemplateDiffer.diff(from: Fixture.list("a"), to: Fixture.grid("a")) == nil)
        #expect(TemplateDiffer.diff(from: Fixture.list("a"), to: Fixture.list("b")) == nil)
    }

    @Test func listTitleAndBarButtonChanges() {
        var list = Fixture.listTemplate(Fixture.list())
        list.trailingButtons = [Fixture.barButton("edit")]
        let old = Fixture.template("list", .list(list))
        list.title = "Playlists"
        list.trailingButtons[0].disabled = true
        let changes = TemplateDiffer.diff(from: old, to: Fixture.template("list", .list(list)))
        #expect(elements(changes) == [.title("Playlists"), .barButton(list.trailingButtons[0])])
    }

    @Test func emptyViewTextChangeIsStructural() {
        let old = Fixture.list()
        var list = Fixture.listTemplate(old)
        list.emptyViewTitleVariants = ["Nothing here"]
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .list(list))) == nil)
    }

    @Test func gridButtonChanges() {
        let old = Fixture.grid()
        guard case .grid(var grid) = old.kind else { return }
        grid.buttons[2].disabled = true
        let changes = TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .grid(grid)))
        #expect(elements(changes) == [.gridButton(grid.buttons[2])])
    }

    @Test func tabBadgeChangeIsOneTab() {
        let old = Fixture.tabBar()
        guard case .tabBar(var tabBar) = old.kind else { return }
        tabBar.tabs[1].badge = "3"
        let changes = TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .tabBar(tabBar)))
        #expect(elements(changes) == [.tab(tabBar.tabs[1])])
        // Adding a tab or selecting another one is structural.
        var added = tabBar
        added.tabs.append(Fixture.tab("tab9", Fixture.list("tab9.list")))
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .tabBar(added))) == nil)
        var selected = tabBar
        selected.selectedTabID = "tab0"
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .tabBar(selected))) == nil)
    }

    @Test func pointAndSelectionChanges() {
        let old = Fixture.pointOfInterest(selected: -1)
        guard case .pointOfInterest(var poi) = old.kind else { return }
        poi.points[1].subtitle = "2 free"
        poi.selectedIndex = 1
        let changes = TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .pointOfInterest(poi)))
        #expect(elements(changes) == [.point(poi.points[1]), .selectedPointIndex(1)])
    }

    @Test func informationItemChanges() {
        let old = Fixture.information()
        guard case .information(var information) = old.kind else { return }
        information.items[0].detail = "Ready"
        #expect(elements(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .information(information)))) == [.informationItem(information.items[0])])
        // Footer actions have no element change: structural.
        information.actions[0].title = "Pay"
        #expect(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .information(information))) == nil)
    }

    @Test func nowPlayingChangeSendsTheWholeState() {
        let old = Fixture.nowPlaying()
        guard case .nowPlaying(var nowPlaying) = old.kind else { return }
        nowPlaying.elapsedSeconds = 42
        #expect(elements(TemplateDiffer.diff(from: old, to: Fixture.template(old.id, .nowPlaying(nowPlaying)))) == [.nowPlaying(nowPlaying)])
    }

    @Test func contactAndMapBarButtons() {
        let oldMap = Fixture.map()
        guard case .map(var map) = oldMap.kind else { return }
        map.leadingButtons[0].title = "Route"
        #expect(elements(TemplateDiffer.diff(from: oldMap, to: Fixture.template(oldMap.id, .map(map)))) == [.barButton(map.leadingButtons[0])])
        map.mapButtons[0].hidden = true
        #expect(TemplateDiffer.diff(from: oldMap, to: Fixture.template(oldMap.id, .map(map))) == nil)

        let oldContact = Fixture.contact()
        guard case .contact(var contact) = oldContact.kind else { return }
        contact.title = "Bob"
        #expect(elements(TemplateDiffer.diff(from: oldContact, to: Fixture.template(oldContact.id, .contact(contact)))) == [.title("Bob")])
        contact.informativeTexts = ["new line"]
        #expect(TemplateDiffer.diff(from: oldContact, to: Fixture.template(oldContact.id, .contact(contact))) == nil)
    }

    @Test func modalTemplatesAreReplacedWhole() {
        #expect(TemplateDiffer.diff(from: Fixture.alert(titles: 1), to: Fixture.alert(titles: 2)) == nil)
        #expect(TemplateDiffer.diff(from: Fixture.voiceControl(active: "v0"), to: Fixture.voiceControl(active: "v1")) == nil)
    }
}

/// Not a rule: how long the rules take for the budget's case, a 12-item list
/// (printed, not asserted: debug builds and a shared machine make timings noisy).
@Suite struct RulesCostTests {
    @Test func validateAndDiffATwelveItemList() {
        let old = Fixture.list(items: 12)
        var list = Fixture.listTemplate(old)
        list.sections[0].items[3] = Fixture.item("s0.i3", "changed")
        let new = Fixture.template(old.id, .list(list))
        let context = Fixture.context(.audio, .push(onTopOf: .list))
        let rounds = 2_000
        let clock = ContinuousClock()
        var failures = 0
        let validate = clock.measure {
            for _ in 0..<rounds where TemplateValidator.validate(new, context: context) != nil { failures += 1 }
        }
        var changes = 0
        let diff = clock.measure {
            for _ in 0..<rounds { changes += TemplateDiffer.diff(from: old, to: new)?.count ?? 0 }
        }
        // Reference: one protobuf encode of the same template, which every request pays anyway.
        var bytes = 0
        let encode = clock.measure {
            for _ in 0..<rounds { bytes += ((try? new.serializedBytes()) as [UInt8]?)?.count ?? 0 }
        }
        #expect(failures == 0)
        #expect(changes == rounds)
        print("12-item list: validate \(validate / rounds), diff \(diff / rounds), encode \(encode / rounds) per call")
    }
}
