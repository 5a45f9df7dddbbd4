import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Protocol/TEMPLATES.md sections 2-5: ids, placement, counts and field ranges of each template.
@Suite struct RulesValidatorTests {
    func validate(_ template: HUTemplate, _ category: HUCategory, _ placement: TemplatePlacement = .root) -> RuleViolation? {
        TemplateValidator.validate(template, context: Fixture.context(category, placement))
    }

    func expectLimit(_ violation: RuleViolation?, _ limit: String, _ maximum: UInt32, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(violation?.code == .limitExceeded, sourceLocation: sourceLocation)
        #expect(violation?.limit == limit, sourceLocation: sourceLocation)
        #expect(violation?.limitValue == maximum, sourceLocation: sourceLocation)
    }

    func expectTooFew(_ violation: RuleViolation?, _ limit: String, _ minimum: UInt32, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(violation?.code == .invalidTemplate, sourceLocation: sourceLocation)
        #expect(violation?.limit == limit, sourceLocation: sourceLocation)
        #expect(violation?.limitValue == minimum, sourceLocation: sourceLocation)
    }

    // MARK: ids

    @Test func templateIDMustNotBeEmpty() {
        #expect(validate(Fixture.list(""), .audio)?.code == .invalidTemplate)
    }

    @Test func templateMustHaveAKind() {
        var template = HUTemplate()
        template.id = "t"
        #expect(validate(template, .audio)?.code == .invalidTemplate)
    }

    @Test func elementIDsMustNotBeEmpty() {
        var list = Fixture.listTemplate(Fixture.list())
        list.sections[0].items[1].id = ""
        #expect(validate(Fixture.template("list", .list(list)), .audio)?.code == .invalidTemplate)
        var grid = Fixture.grid()
        if case .grid(var g) = grid.kind { g.buttons[0].id = ""; grid.kind = .grid(g) }
        #expect(validate(grid, .audio)?.code == .invalidTemplate)
    }

    @Test func elementIDsMustBeUniqueWithinTheTemplate() throws {
        var list = Fixture.listTemplate(Fixture.list())
        list.sections[0].items[2].id = list.sections[0].items[0].id
        let violation = try #require(validate(Fixture.template("list", .list(list)), .audio))
        #expect(violation.code == .invalidTemplate)
        #expect(violation.message.contains("s0.i0"))
    }

    @Test func elementIDsAreUniqueAcrossKinds() {
        // A bar button and an item may not share an id: events name only the id.
        var list = Fixture.listTemplate(Fixture.list())
        list.trailingButtons = [Fixture.barButton("s0.i1")]
        #expect(validate(Fixture.template("list", .list(list)), .audio)?.code == .invalidTemplate)
        // Nor may a section and an item.
        list = Fixture.listTemplate(Fixture.list())
        list.sections[0].id = "s0.i0"
        #expect(validate(Fixture.template("list", .list(list)), .audio)?.code == .invalidTemplate)
    }

    /// `IDScope` compares ids one by one while few and hashes them past
    /// `fewest` (or from the start when told to expect that many): a repeat
    /// is found on either side of the switch, whichever side the first one
    /// was seen on, and whatever the expected count said.
    @Test func repeatedIDsAreFoundAtEveryCount() {
        for count in [1, 2, IDScope.fewest - 1, IDScope.fewest, IDScope.fewest + 1, IDScope.fewest + 2, 100] {
            for expected in [nil, count, 2 * IDScope.fewest] as [Int?] {
                func scope() -> IDScope {
                    var scope = IDScope("t")
                    if let expected { scope.expect(expected) }
                    return scope
                }
                let told = expected.map { ", \($0) expected" } ?? ""
                var unique = scope()
                for index in 0..<count { unique.add("id-\(index)", "list item") }
                #expect(unique.violation == nil, "\(count) distinct ids\(told)")
                for repeated in [0, count / 2, count - 1] {
                    var repeating = scope()
                    for index in 0..<count { repeating.add("id-\(index)", "list item") }
                    repeating.add("id-\(repeated)", "list item")
                    #expect(repeating.violation?.message.contains("id-\(repeated) ") == true, "id \(repeated) repeated after \(count)\(told)")
                }
                var template = scope()
                for index in 0..<count { template.add("id-\(index)", "list item") }
                template.add("t", "list item")
                #expect(template.violation != nil, "the template's own id after \(count)\(told)")
            }
        }
    }

    @Test func pointOfInterestCardButtonIDsAreElementIDs() {
        var template = Fixture.pointOfInterest()
        guard case .pointOfInterest(var poi) = template.kind else { return }
        poi.points[0].primaryButton = Fixture.textButton("go")
        poi.points[1].primaryButton = Fixture.textButton("go")
        template.kind = .pointOfInterest(poi)
        #expect(validate(template, .parking)?.code == .invalidTemplate)
        poi.points[1].primaryButton = Fixture.textButton("go2")
        template.kind = .pointOfInterest(poi)
        #expect(validate(template, .parking) == nil)
    }

    @Test func voiceControlStateIDsMustBeUnique() {
        var template = Fixture.voiceControl(states: 2)
        guard case .voiceControl(var voice) = template.kind else { return }
        voice.states[1].id = "v0"
        template.kind = .voiceControl(voice)
        #expect(validate(template, .navigation, .present)?.code == .invalidTemplate)
    }

    // MARK: placement

    @Test(arguments: [TemplateKind.alert, .actionSheet, .voiceControl])
    func modalTemplatesOnlyViaPresent(kind: TemplateKind) {
        let template = Fixture.sample(kind)
        #expect(validate(template, .navigation, .present) == nil)
        #expect(validate(template, .navigation, .root)?.code == .invalidPosition)
        #expect(validate(template, .navigation, .push(onTopOf: .list))?.code == .invalidPosition)
    }

    @Test(arguments: [TemplateKind.list, .grid, .tabBar, .information, .contact, .map, .search])
    func nonModalTemplatesNeverViaPresent(kind: TemplateKind) {
        #expect(validate(Fixture.sample(kind), .navigation, .present)?.code == .invalidPosition)
    }

    @Test func tabBarOnlyAsRoot() {
        #expect(validate(Fixture.tabBar(), .audio, .root) == nil)
        #expect(validate(Fixture.tabBar(), .audio, .push(onTopOf: .list))?.code == .invalidPosition)
    }

    @Test func mapOnlyAsRoot() {
        #expect(validate(Fixture.map(), .navigation, .root) == nil)
        #expect(validate(Fixture.map(), .navigation, .push(onTopOf: .list))?.code == .invalidPosition)
    }

    @Test func mapOnlyForNavigation() {
        for category in [HUCategory.audio, .communication, .parking, .drivingTask] {
            #expect(validate(Fixture.map(), category)?.code == .notAllowedForCategory)
        }
    }

    @Test func onlyAListMayBePushedOnNowPlaying() {
        #expect(validate(Fixture.list(), .audio, .push(onTopOf: .nowPlaying)) == nil)
        #expect(validate(Fixture.grid(), .audio, .push(onTopOf: .nowPlaying))?.code == .invalidPosition)
        #expect(validate(Fixture.nowPlaying(), .audio, .push(onTopOf: .nowPlaying))?.code == .invalidPosition)
    }

    @Test func nowPlayingCannotBeTheRoot() {
        #expect(validate(Fixture.nowPlaying(), .audio, .root)?.code == .invalidPosition)
        #expect(validate(Fixture.nowPlaying(), .audio, .push(onTopOf: .tabBar)) == nil)
    }

    @Test(arguments: [TemplateKind.list, .grid, .information, .contact])
    func tabsHoldListGridInformationPointOfInterestOrContact(kind: TemplateKind) {
        #expect(validate(Fixture.sample(kind), .communication, .tab) == nil)
    }

    @Test func tabsMayHoldPointsOfInterestForTheLastColumn() {
        #expect(validate(Fixture.pointOfInterest(), .parking, .tab) == nil)
    }

    @Test(arguments: [TemplateKind.search, .map])
    func tabsCannotHoldOtherTemplates(kind: TemplateKind) {
        #expect(validate(Fixture.sample(kind), .navigation, .tab)?.code == .invalidPosition)
    }

    @Test func tabsCannotHoldNowPlaying() {
        #expect(validate(Fixture.nowPlaying(), .audio, .tab)?.code == .invalidPosition)
    }

    @Test func noNestedTabBars() {
        var template = Fixture.tabBar()
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.tabs[1].template = Fixture.tabBar("inner")
        template.kind = .tabBar(tabBar)
        #expect(validate(template, .audio)?.code == .invalidPosition)
    }

    @Test func tabContentMustBeAllowedForTheCategory() {
        var template = Fixture.tabBar()
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.tabs[1].template = Fixture.information("info")
        template.kind = .tabBar(tabBar)
        #expect(validate(template, .audio)?.code == .notAllowedForCategory)
        #expect(validate(template, .communication) == nil)
    }

    @Test func everyTabNeedsATemplate() {
        var template = Fixture.tabBar()
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.tabs[0].clearTemplate()
        template.kind = .tabBar(tabBar)
        #expect(validate(template, .audio)?.code == .invalidTemplate)
    }

    @Test func tabContentIsValidatedLikeAnyTemplate() {
        var template = Fixture.tabBar()
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.tabs[0].template = Fixture.grid("tab0.grid", buttons: 9)
        template.kind = .tabBar(tabBar)
        expectLimit(validate(template, .audio), "grid.buttons", 8)
    }

    // MARK: counts

    @Test func gridAllowsAtMostEightButtons() {
        #expect(validate(Fixture.grid(buttons: 8), .audio) == nil)
        expectLimit(validate(Fixture.grid(buttons: 9), .audio), "grid.buttons", 8)
    }

    @Test func tabBarAllowsFourTabsForAudio() {
        #expect(validate(Fixture.tabBar(tabs: 4), .audio) == nil)
        expectLimit(validate(Fixture.tabBar(tabs: 5), .audio), "tabBar.tabs", 4)
    }

    @Test func tabBarAllowsFiveTabsForOthers() {
        #expect(validate(Fixture.tabBar(tabs: 5), .communication) == nil)
        expectLimit(validate(Fixture.tabBar(tabs: 6), .communication), "tabBar.tabs", 5)
    }

    @Test func tabBarNeedsAtLeastOneTab() {
        expectTooFew(validate(Fixture.tabBar(tabs: 0), .audio), "tabBar.tabs", 1)
    }

    @Test func selectedTabMustExist() {
        var template = Fixture.tabBar()
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.selectedTabID = "tab1"
        template.kind = .tabBar(tabBar)
        #expect(validate(template, .audio) == nil)
        tabBar.selectedTabID = "nope"
        template.kind = .tabBar(tabBar)
        #expect(validate(template, .audio)?.code == .invalidArgument)
    }

    @Test func pointOfInterestAllowsAtMostTwelvePoints() {
        #expect(validate(Fixture.pointOfInterest(points: 12), .evCharging) == nil)
        expectLimit(validate(Fixture.pointOfInterest(points: 13), .evCharging), "pointOfInterest.points", 12)
    }

    @Test func contactAllowsAtMostThreeInformativeTexts() {
        #expect(validate(Fixture.contact(texts: 3), .communication) == nil)
        expectLimit(validate(Fixture.contact(texts: 4), .communication), "contact.informativeTexts", 3)
    }

    @Test func contactAllowsAtMostFourActions() {
        #expect(validate(Fixture.contact(actions: 4), .communication) == nil)
        expectLimit(validate(Fixture.contact(actions: 5), .communication), "contact.actions", 4)
    }

    @Test func informationAllowsAtMostTenItems() {
        #expect(validate(Fixture.information(items: 10), .parking) == nil)
        expectLimit(validate(Fixture.information(items: 11), .parking), "information.items", 10)
    }

    @Test func informationAllowsTwelveItemsForQuickOrdering() {
        #expect(validate(Fixture.information(items: 12), .quickOrdering) == nil)
        expectLimit(validate(Fixture.information(items: 13), .quickOrdering), "information.items", 12)
    }

    @Test func informationAllowsAtMostThreeActions() {
        #expect(validate(Fixture.information(actions: 3), .parking) == nil)
        expectLimit(validate(Fixture.information(actions: 4), .parking), "information.actions", 3)
    }

    @Test func mapAllowsTwoLeadingTwoTrailingAndFourMapButtons() {
        #expect(validate(Fixture.map(leading: 2, trailing: 2, mapButtons: 4), .navigation) == nil)
        expectLimit(validate(Fixture.map(leading: 3), .navigation), "map.leadingButtons", 2)
        expectLimit(validate(Fixture.map(trailing: 3), .navigation), "map.trailingButtons", 2)
        expectLimit(validate(Fixture.map(mapButtons: 5), .navigation), "map.mapButtons", 4)
    }

    @Test func barButtonsAtMostTwoPerSide() {
        var list = Fixture.listTemplate(Fixture.list())
        list.leadingButtons = [Fixture.barButton("a"), Fixture.barButton("b")]
        list.trailingButtons = [Fixture.barButton("c"), Fixture.barButton("d")]
        #expect(validate(Fixture.template("list", .list(list)), .audio) == nil)
        list.trailingButtons.append(Fixture.barButton("e"))
        expectLimit(validate(Fixture.template("list", .list(list)), .audio), "list.trailingButtons", 2)
    }

    @Test func actionSheetNeedsAtLeastTwoActions() {
        #expect(validate(Fixture.actionSheet(actions: 2), .communication, .present) == nil)
        expectTooFew(validate(Fixture.actionSheet(actions: 1), .communication, .present), "actionSheet.actions", 2)
    }

    @Test func alertNeedsAtLeastOneAction() {
        expectTooFew(validate(Fixture.alert(actions: 0), .audio, .present), "alert.actions", 1)
    }

    @Test func alertNeedsAtLeastOneTitleVariant() {
        expectTooFew(validate(Fixture.alert(titles: 0), .audio, .present), "alert.titleVariants", 1)
    }

    @Test func voiceControlNeedsAtLeastOneState() {
        expectTooFew(validate(Fixture.voiceControl(states: 0, active: ""), .navigation, .present), "voiceControl.states", 1)
    }

    @Test func voiceControlActiveStateMustExist() {
        #expect(validate(Fixture.voiceControl(active: "v1"), .navigation, .present) == nil)
        #expect(validate(Fixture.voiceControl(active: "v9"), .navigation, .present)?.code == .invalidTemplate)
        #expect(validate(Fixture.voiceControl(active: ""), .navigation, .present)?.code == .invalidTemplate)
    }

    @Test func nowPlayingAllowsAtMostFiveButtons() {
        #expect(validate(Fixture.nowPlaying(buttons: 5), .audio, .push(onTopOf: .list)) == nil)
        expectLimit(validate(Fixture.nowPlaying(buttons: 6), .audio, .push(onTopOf: .list)), "nowPlaying.buttons", 5)
    }

    @Test func nowPlayingButtonIDsOfTheCarAreReserved() {
        var template = Fixture.nowPlaying()
        guard case .nowPlaying(var nowPlaying) = template.kind else { return }
        nowPlaying.buttons[0].id = "up-next"
        template.kind = .nowPlaying(nowPlaying)
        #expect(validate(template, .audio, .push(onTopOf: .list))?.code == .invalidTemplate)
    }

    @Test func quickOrderingListsHoldAtMostTwelveItems() {
        #expect(validate(Fixture.list(items: 6, sections: 2), .quickOrdering) == nil)
        expectLimit(validate(Fixture.list(items: 7, sections: 2), .quickOrdering), "list.items", 12)
        // Other categories: no cap (the car truncates while driving instead).
        #expect(validate(Fixture.list(items: 40), .audio) == nil)
    }

    @Test func imageRowHoldsAtMostEightImages() {
        var row = HUImageRowItem()
        row.text = "Recent"
        row.images = (0..<9).map { _ in Fixture.asset(width: 40, height: 40) }
        var item = HUListItem()
        item.id = "row"
        item.kind = .imageRow(row)
        var list = HUListTemplate()
        var section = HUListSection()
        section.id = "s"
        section.items = [item]
        list.sections = [section]
        expectLimit(validate(Fixture.template("list", .list(list)), .audio), "list.imageRow.images", 8)
    }

    // MARK: fields

    @Test func progressMustBeBetweenZeroAndOne() {
        for (progress, valid) in [(Float(0), true), (0.5, true), (1, true), (-0.1, false), (1.01, false), (.nan, false)] {
            var list = Fixture.listTemplate(Fixture.list())
            guard case .general(var general) = list.sections[0].items[0].kind else { return }
            general.showsProgress = true
            general.progress = progress
            list.sections[0].items[0].kind = .general(general)
            let violation = validate(Fixture.template("list", .list(list)), .audio)
            #expect(valid ? violation == nil : violation?.code == .invalidArgument, "progress \(progress)")
        }
    }

    @Test func selectedPointIndexInRangeOrNegative() {
        #expect(validate(Fixture.pointOfInterest(points: 3, selected: -1), .parking) == nil)
        #expect(validate(Fixture.pointOfInterest(points: 3, selected: 2), .parking) == nil)
        #expect(validate(Fixture.pointOfInterest(points: 3, selected: 3), .parking)?.code == .invalidArgument)
        // proto3's default 0 with no points means nothing to select.
        #expect(validate(Fixture.pointOfInterest(points: 0, selected: 0), .parking) == nil)
    }

    @Test func listItemsNeedAKind() {
        var list = Fixture.listTemplate(Fixture.list())
        list.sections[0].items[0].kind = nil
        #expect(validate(Fixture.template("list", .list(list)), .audio)?.code == .invalidTemplate)
    }

    @Test func messageItemsOnlyForCommunication() {
        var list = Fixture.listTemplate(Fixture.list())
        list.sections[0].items.append(Fixture.messageItem("m1"))
        let template = Fixture.template("list", .list(list))
        #expect(validate(template, .communication) == nil)
        #expect(validate(template, .audio)?.code == .notAllowedForCategory)
        #expect(validate(template, .navigation)?.code == .notAllowedForCategory)
    }

    @Test func messageItemsNeedAConversationOrAPhoneOrEmail() {
        var item = Fixture.messageItem("m1", conversation: "")
        var list = HUListTemplate()
        var section = HUListSection()
        section.id = "s"
        section.items = [item]
        list.sections = [section]
        #expect(validate(Fixture.template("list", .list(list)), .communication)?.code == .invalidTemplate)
        guard case .message(var message) = item.kind else { return }
        message.phoneOrEmail = "+49 89 123"
        item.kind = .message(message)
        list.sections[0].items = [item]
        #expect(validate(Fixture.template("list", .list(list)), .communication) == nil)
    }

    @Test func mapPanningRequiresAPanButton() {
        var template = Fixture.map()
        guard case .map(var map) = template.kind else { return }
        map.panningSupported = true
        template.kind = .map(map)
        #expect(validate(template, .navigation)?.code == .invalidTemplate)
        map.mapButtons.append(Fixture.mapButton("pan"))
        template.kind = .map(map)
        #expect(validate(template, .navigation) == nil)
    }

    @Test func mapGuidanceColorIsHex() {
        var template = Fixture.map()
        guard case .map(var map) = template.kind else { return }
        map.guidanceBackgroundColor = "#1a2B3c"
        template.kind = .map(map)
        #expect(validate(template, .navigation) == nil)
        map.guidanceBackgroundColor = "blue"
        template.kind = .map(map)
        #expect(validate(template, .navigation)?.code == .invalidArgument)
    }

    @Test func nowPlayingTimesAreFiniteAndNotNegative() {
        var template = Fixture.nowPlaying()
        guard case .nowPlaying(var nowPlaying) = template.kind else { return }
        nowPlaying.elapsedSeconds = -1
        template.kind = .nowPlaying(nowPlaying)
        #expect(validate(template, .audio, .push(onTopOf: .list))?.code == .invalidArgument)
        nowPlaying.elapsedSeconds = 10
        nowPlaying.durationSeconds = .infinity
        template.kind = .nowPlaying(nowPlaying)
        #expect(validate(template, .audio, .push(onTopOf: .list))?.code == .invalidArgument)
        nowPlaying.live = true  // a live stream's duration is ignored
        template.kind = .nowPlaying(nowPlaying)
        #expect(validate(template, .audio, .push(onTopOf: .list)) == nil)
    }

    @Test(arguments: TemplateKind.allCases)
    func everySampleTemplateIsValidForNavigationOrItsColumn(kind: TemplateKind) {
        let category: HUCategory
        switch kind {
        case .nowPlaying: category = .audio
        case .pointOfInterest: category = .parking
        default: category = .navigation
        }
        #expect(validate(Fixture.sample(kind), category, Fixture.placement(kind)) == nil)
    }

    @Test func searchResultsAreValidatedAsListItems() {
        let context = Fixture.context(.navigation, .push(onTopOf: .map))
        #expect(TemplateValidator.validateSearchResults([Fixture.item("r1"), Fixture.item("r2")], context: context) == nil)
        #expect(TemplateValidator.validateSearchResults([Fixture.item("r1"), Fixture.item("r1")], context: context)?.code == .invalidTemplate)
        #expect(TemplateValidator.validateSearchResults([Fixture.messageItem("r1")], context: context)?.code == .notAllowedForCategory)
    }
}
