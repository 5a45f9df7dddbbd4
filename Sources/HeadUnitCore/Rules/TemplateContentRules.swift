import HeadUnitWire

/// Counts, field ranges and image sizes of each template (Protocol/TEMPLATES.md sections 5 and 6).
/// Ids, category and placement are checked before, by TemplateValidator.
struct TemplateContentRules {
    let context: TemplateContext

    var scale: UInt32 { context.displayScale }

    func check(_ template: HUTemplate) -> RuleViolation? {
        switch template.kind {
        case nil: return RuleViolation(.invalidTemplate, "template \(template.id) has no kind")
        case .list(let list): return check(list)
        case .grid(let grid): return check(grid)
        case .tabBar(let tabBar): return check(tabBar)
        case .nowPlaying(let nowPlaying): return check(nowPlaying)
        case .alert(let alert): return check(alert)
        case .actionSheet(let sheet): return check(sheet)
        case .information(let information): return check(information)
        case .pointOfInterest(let poi): return check(poi)
        case .contact(let contact): return check(contact)
        case .map(let map): return check(map)
        case .search: return nil  // only a placeholder text
        case .voiceControl(let voice): return check(voice)
        }
    }

    // MARK: shared pieces

    // Names are autoclosures: built only when a rule is broken.
    func atMost(_ limit: @autoclosure () -> String, _ count: Int, _ maximum: Int) -> RuleViolation? {
        count > maximum ? .limitExceeded(limit(), count: count, maximum: maximum) : nil
    }

    func atLeast(_ limit: @autoclosure () -> String, _ count: Int, _ minimum: Int) -> RuleViolation? {
        count < minimum ? .tooFew(limit(), count: count, minimum: minimum) : nil
    }

    /// The image is an autoclosure: read only when present (reading an
    /// absent one builds a default image, then destroys it; twice per list item).
    func image(_ image: @autoclosure () -> HUImage, present: Bool, _ use: ImageUse, _ what: @autoclosure () -> String) -> RuleViolation? {
        guard present else { return nil }
        return ImageRules.check(image(), use: use, scale: scale, what: what())
    }

    /// Leading and trailing navigation-bar buttons: at most 2 a side, images bar-sized.
    func barButtons(_ kind: TemplateKind, _ leading: [HUBarButton], _ trailing: [HUBarButton]) -> RuleViolation? {
        if let violation = atMost("\(kind.rawValue).leadingButtons", leading.count, TemplateLimits.barButtonsPerSide)
            ?? atMost("\(kind.rawValue).trailingButtons", trailing.count, TemplateLimits.barButtonsPerSide) {
            return violation
        }
        for buttons in [leading, trailing] {
            for button in buttons where button.hasImage {
                if let violation = image(button.image, present: true, .barButton, "bar button \(button.id)") {
                    return violation
                }
            }
        }
        return nil
    }

    // MARK: list

    func check(_ list: HUListTemplate) -> RuleViolation? {
        if let violation = atMost("list.emptyViewTitleVariants", list.emptyViewTitleVariants.count, TemplateLimits.variants)
            ?? atMost("list.emptyViewSubtitleVariants", list.emptyViewSubtitleVariants.count, TemplateLimits.variants)
        {
            return violation
        }
        if let maximum = CategoryRules.maxListItems(for: context.category) {
            let count = list.sections.reduce(0) { $0 + $1.items.count }
            if let violation = atMost("list.items", count, maximum) { return violation }
        }
        if let violation = itemViolation(list) { return violation }
        if let violation = assistantCellViolation(list) { return violation }
        return barButtons(.list, list.leadingButtons, list.trailingButtons)
    }

    /// The "Ask Siri" row (CPAssistantCellConfiguration): an audio app's plays
    /// media, a communication app's starts a call; no other app has one.
    private func assistantCellViolation(_ list: HUListTemplate) -> RuleViolation? {
        guard list.hasAssistantCell, list.assistantCell.visibility != .off else { return nil }
        let wanted: HUAssistantCellAction
        switch context.category {
        case .audio: wanted = .playMedia
        case .communication: wanted = .startCall
        default:
            return RuleViolation(.notAllowedForCategory, "the assistant cell is for audio and communication apps, not \(context.category)")
        }
        guard list.assistantCell.action == wanted else {
            return RuleViolation(.invalidTemplate, "an assistant cell of a \(context.category) app's list has the action \(wanted), not \(list.assistantCell.action)")
        }
        return nil
    }

    private func itemViolation(_ list: HUListTemplate) -> RuleViolation? {
        // In place: a list item is a large struct (its oneof is 288 bytes),
        // and a copy per item cost more than its checks.
        for section in list.sections.indices {
            let violation: RuleViolation? = list.sections[section].items.withUnsafeBufferPointer { items in
                guard var item = items.baseAddress else { return nil }
                for _ in items.indices {
                    if let violation = check(itemAt: item) { return violation }
                    item += 1
                }
                return nil
            }
            if let violation { return violation }
        }
        return nil
    }

    func check(_ item: HUListItem) -> RuleViolation? {
        withUnsafePointer(to: item) { check(itemAt: $0) }
    }

    /// The item read where it is: passed by value (even from a buffer), each was copied whole.
    private func check(itemAt item: UnsafePointer<HUListItem>) -> RuleViolation? {
        switch item.pointee.kind {
        case nil:
            return RuleViolation(.invalidTemplate, "list item \(item.pointee.id) has no kind (general, image row or message)")
        case .general(let general):
            // Also NaN: the comparison fails for it.
            if !(0...1).contains(general.progress) {
                return RuleViolation(.invalidArgument, "list item \(item.pointee.id): progress \(general.progress) is outside 0...1")
            }
            return image(general.image, present: general.hasImage, .listItem, "list item \(item.pointee.id)")
                ?? image(general.accessoryImage, present: general.hasAccessoryImage, .listItemAccessory, "accessory of list item \(item.pointee.id)")
        case .imageRow(let row):
            if let violation = atMost("list.imageRow.images", row.images.count, TemplateLimits.imageRowImages) {
                return violation
            }
            if row.imageTitles.count > row.images.count {
                return RuleViolation(.invalidArgument, "image row \(item.pointee.id): \(row.imageTitles.count) titles for \(row.images.count) images")
            }
            for (index, rowImage) in row.images.enumerated() {
                if let violation = image(rowImage, present: true, .imageRow, "image \(index) of image row \(item.pointee.id)") {
                    return violation
                }
            }
            return nil
        case .message(let message):
            // Tapping a message item starts a voice flow: only communication apps have one.
            if context.category != .communication {
                return RuleViolation(.notAllowedForCategory, "message item \(item.pointee.id) is only allowed for the communication category, not \(context.category)")
            }
            if message.conversationID.isEmpty && message.phoneOrEmail.isEmpty {
                return RuleViolation(.invalidTemplate, "message item \(item.pointee.id) needs conversation_id or phone_or_email")
            }
            if message.trailingKind == .image && !message.hasTrailingImage {
                return RuleViolation(.invalidTemplate, "message item \(item.pointee.id) has trailing kind image but no trailing_image")
            }
            return image(message.leadingImage, present: message.hasLeadingImage, .messageItem, "leading image of message item \(item.pointee.id)")
                ?? image(message.trailingImage, present: message.hasTrailingImage, .messageItem, "trailing image of message item \(item.pointee.id)")
        }
    }

    // MARK: grid

    func check(_ grid: HUGridTemplate) -> RuleViolation? {
        if let violation = atMost("grid.buttons", grid.buttons.count, TemplateLimits.gridButtons) { return violation }
        for button in grid.buttons {
            if let violation = atMost("grid.button.titleVariants", button.titleVariants.count, TemplateLimits.variants) { return violation }
            if let violation = image(button.image, present: button.hasImage, .gridButton, "grid button \(button.id)") {
                return violation
            }
        }
        return barButtons(.grid, grid.leadingButtons, grid.trailingButtons)
    }

    // MARK: tab bar

    func check(_ tabBar: HUTabBarTemplate) -> RuleViolation? {
        if let violation = atLeast("tabBar.tabs", tabBar.tabs.count, TemplateLimits.tabBarMinimumTabs)
            ?? atMost("tabBar.tabs", tabBar.tabs.count, CategoryRules.maxTabs(for: context.category)) {
            return violation
        }
        if !tabBar.selectedTabID.isEmpty && !tabBar.tabs.contains(where: { $0.id == tabBar.selectedTabID }) {
            return RuleViolation(.invalidArgument, "selected_tab_id \(tabBar.selectedTabID) names no tab")
        }
        var tabContext = context
        tabContext.placement = .tab
        for tab in tabBar.tabs {
            guard tab.hasTemplate else {
                return RuleViolation(.invalidTemplate, "tab \(tab.id) has no template")
            }
            if let violation = image(tab.image, present: tab.hasImage, .tab, "tab \(tab.id)")
                ?? TemplateValidator.validate(tab.template, context: tabContext) {
                return violation
            }
        }
        return nil
    }

    // MARK: now playing

    /// Ids the car itself uses in NowPlayingButtonPressed for its built-in buttons.
    static let reservedNowPlayingButtonIDs: Set<String> = ["up-next", "album-artist"]

    func check(_ nowPlaying: HUNowPlayingTemplate) -> RuleViolation? {
        if let violation = atMost("nowPlaying.buttons", nowPlaying.buttons.count, TemplateLimits.nowPlayingButtons) {
            return violation
        }
        for button in nowPlaying.buttons {
            if Self.reservedNowPlayingButtonIDs.contains(button.id) {
                return RuleViolation(.invalidTemplate, "now playing button id \(button.id) is reserved for the car's built-in button")
            }
            if button.kind == .image && !button.hasImage {
                return RuleViolation(.invalidTemplate, "now playing button \(button.id) of kind image has no image")
            }
            if let violation = image(button.image, present: button.hasImage, .nowPlayingButton, "now playing button \(button.id)") {
                return violation
            }
        }
        if !(nowPlaying.elapsedSeconds >= 0 && nowPlaying.elapsedSeconds.isFinite) {
            return RuleViolation(.invalidArgument, "now playing: elapsed_seconds \(nowPlaying.elapsedSeconds) must be a finite number >= 0")
        }
        if !nowPlaying.live && !(nowPlaying.durationSeconds >= 0 && nowPlaying.durationSeconds.isFinite) {
            return RuleViolation(.invalidArgument, "now playing: duration_seconds \(nowPlaying.durationSeconds) must be a finite number >= 0")
        }
        if !(nowPlaying.playbackRate >= 0 && nowPlaying.playbackRate.isFinite) {
            return RuleViolation(.invalidArgument, "now playing: playback_rate \(nowPlaying.playbackRate) must be a finite number >= 0")
        }
        return image(nowPlaying.artwork, present: nowPlaying.hasArtwork, .nowPlayingArtwork, "now playing artwork")
    }

    // MARK: alert and action sheet

    func check(_ alert: HUAlertTemplate) -> RuleViolation? {
        atLeast("alert.titleVariants", alert.titleVariants.count, TemplateLimits.alertMinimumTitleVariants)
            ?? atMost("alert.titleVariants", alert.titleVariants.count, TemplateLimits.variants)
            ?? atLeast("alert.actions", alert.actions.count, TemplateLimits.alertMinimumActions)
    }

    func check(_ sheet: HUActionSheetTemplate) -> RuleViolation? {
        atLeast("actionSheet.actions", sheet.actions.count, TemplateLimits.actionSheetMinimumActions)
    }

    // MARK: information

    func check(_ information: HUInformationTemplate) -> RuleViolation? {
        atMost("information.items", information.items.count, CategoryRules.maxInformationItems(for: context.category))
            ?? atMost("information.actions", information.actions.count, TemplateLimits.informationActions)
            ?? barButtons(.information, information.leadingButtons, information.trailingButtons)
    }

    // MARK: point of interest

    func check(_ poi: HUPointOfInterestTemplate) -> RuleViolation? {
        if let violation = atMost("pointOfInterest.points", poi.points.count, TemplateLimits.pointsOfInterest) {
            return violation
        }
        // Negative: none selected. 0 with no points is proto3's default, not a selection.
        let index = Int(poi.selectedIndex)
        if index >= poi.points.count && !(index == 0 && poi.points.isEmpty) {
            return RuleViolation(.invalidArgument, "selected_index \(index) is out of range for \(poi.points.count) points (negative: none selected)")
        }
        for point in poi.points {
            if let violation = image(point.pinImage, present: point.hasPinImage, .pointOfInterestPin, "pin of point \(point.id)")
                ?? image(point.selectedPinImage, present: point.hasSelectedPinImage, .pointOfInterestSelectedPin, "selected pin of point \(point.id)") {
                return violation
            }
        }
        return nil
    }

    // MARK: contact

    func check(_ contact: HUContactTemplate) -> RuleViolation? {
        if let violation = atMost("contact.informativeTexts", contact.informativeTexts.count, TemplateLimits.contactInformativeTexts)
            ?? atMost("contact.actions", contact.actions.count, TemplateLimits.contactActions) {
            return violation
        }
        for action in contact.actions {
            if let violation = image(action.image, present: action.hasImage, .contactAction, "contact action \(action.id)") {
                return violation
            }
        }
        return image(contact.image, present: contact.hasImage, .contact, "contact image")
            ?? barButtons(.contact, contact.leadingButtons, contact.trailingButtons)
    }

    // MARK: map

    func check(_ map: HUMapTemplate) -> RuleViolation? {
        if let violation = atMost("map.leadingButtons", map.leadingButtons.count, TemplateLimits.barButtonsPerSide)
            ?? atMost("map.trailingButtons", map.trailingButtons.count, TemplateLimits.barButtonsPerSide)
            ?? atMost("map.mapButtons", map.mapButtons.count, TemplateLimits.mapButtons) {
            return violation
        }
        // Cars with only a knob or touchpad pan through panning mode, entered by
        // a map button the app must provide: by convention its id starts with "pan".
        if map.panningSupported && !map.mapButtons.contains(where: { $0.id.hasPrefix("pan") }) {
            return RuleViolation(.invalidTemplate, "panning_supported requires a map button whose id starts with \"pan\"")
        }
        if !map.guidanceBackgroundColor.isEmpty && !Self.isHexColor(map.guidanceBackgroundColor) {
            return RuleViolation(.invalidArgument, "guidance_background_color \(map.guidanceBackgroundColor) is not #RRGGBB")
        }
        for button in map.mapButtons {
            if let violation = image(button.image, present: button.hasImage, .mapButton, "map button \(button.id)")
                ?? image(button.focusedImage, present: button.hasFocusedImage, .mapButton, "focused image of map button \(button.id)") {
                return violation
            }
        }
        return barButtons(.map, map.leadingButtons, map.trailingButtons)
    }

    /// "#RRGGBB", hexadecimal digits in either case.
    static func isHexColor(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 7, bytes[0] == UInt8(ascii: "#") else { return false }
        return bytes.dropFirst().allSatisfy { byte in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
        }
    }

    // MARK: voice control

    func check(_ voice: HUVoiceControlTemplate) -> RuleViolation? {
        if let violation = atLeast("voiceControl.states", voice.states.count, TemplateLimits.voiceControlMinimumStates) {
            return violation
        }
        if !voice.states.contains(where: { $0.id == voice.activeStateID }) {
            return RuleViolation(.invalidTemplate, "active_state_id \"\(voice.activeStateID)\" names no voice control state")
        }
        for state in voice.states {
            if let violation = atMost("voiceControl.state.titleVariants", state.titleVariants.count, TemplateLimits.variants) { return violation }
            if let violation = image(state.image, present: state.hasImage, .voiceControlState, "voice control state \(state.id)") {
                return violation
            }
        }
        return nil
    }
}
