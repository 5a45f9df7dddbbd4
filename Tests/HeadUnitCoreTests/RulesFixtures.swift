import Foundation
import HeadUnitWire
@testable import HeadUnitCore

// Small builders for the rules tests: each returns a valid element, which a
// test then breaks in exactly one way.

enum Fixture {
    static func context(_ category: HUCategory, _ placement: TemplatePlacement = .root, scale: UInt32 = 2) -> TemplateContext {
        TemplateContext(category: category, placement: placement, displayScale: scale)
    }

    static func template(_ id: String, _ kind: HUTemplate.OneOf_Kind) -> HUTemplate {
        var template = HUTemplate()
        template.id = id
        template.kind = kind
        return template
    }

    static func item(_ id: String, _ text: String = "item") -> HUListItem {
        var general = HUGeneralItem()
        general.text = text
        var item = HUListItem()
        item.id = id
        item.kind = .general(general)
        return item
    }

    static func messageItem(_ id: String, conversation: String = "c1") -> HUListItem {
        var message = HUMessageItem()
        message.text = "Alice"
        message.conversationID = conversation
        var item = HUListItem()
        item.id = id
        item.kind = .message(message)
        return item
    }

    static func list(_ id: String = "list", items count: Int = 3, sections: Int = 1) -> HUTemplate {
        var list = HUListTemplate()
        list.title = "Albums"
        for s in 0..<sections {
            var section = HUListSection()
            section.id = "s\(s)"
            section.items = (0..<count).map { item("s\(s).i\($0)", "Item \($0)") }
            list.sections.append(section)
        }
        return template(id, .list(list))
    }

    static func listTemplate(_ template: HUTemplate) -> HUListTemplate {
        guard case .list(let list) = template.kind else { fatalError("not a list") }
        return list
    }

    static func barButton(_ id: String) -> HUBarButton {
        var button = HUBarButton()
        button.id = id
        button.title = id
        return button
    }

    static func textButton(_ id: String) -> HUTextButton {
        var button = HUTextButton()
        button.id = id
        button.title = id
        return button
    }

    static func grid(_ id: String = "grid", buttons count: Int = 4) -> HUTemplate {
        var grid = HUGridTemplate()
        grid.title = "Menu"
        grid.buttons = (0..<count).map { index in
            var button = HUGridButton()
            button.id = "g\(index)"
            button.titleVariants = ["Button \(index)"]
            return button
        }
        return template(id, .grid(grid))
    }

    static func tab(_ id: String, _ content: HUTemplate) -> HUTab {
        var tab = HUTab()
        tab.id = id
        tab.title = id
        tab.template = content
        return tab
    }

    static func tabBar(_ id: String = "tabs", tabs count: Int = 2) -> HUTemplate {
        var tabBar = HUTabBarTemplate()
        tabBar.tabs = (0..<count).map { tab("tab\($0)", list("tab\($0).list")) }
        return template(id, .tabBar(tabBar))
    }

    static func nowPlaying(_ id: String = "now-playing", buttons count: Int = 2) -> HUTemplate {
        var nowPlaying = HUNowPlayingTemplate()
        nowPlaying.title = "Song"
        nowPlaying.artist = "Artist"
        nowPlaying.durationSeconds = 200
        nowPlaying.playbackRate = 1
        nowPlaying.buttons = (0..<count).map { index in
            var button = HUNowPlayingButton()
            button.id = "b\(index)"
            button.kind = .shuffle
            return button
        }
        return template(id, .nowPlaying(nowPlaying))
    }

    static func alert(_ id: String = "alert", titles: Int = 1, actions: Int = 1) -> HUTemplate {
        var alert = HUAlertTemplate()
        alert.titleVariants = (0..<titles).map { "Title \($0)" }
        alert.actions = (0..<actions).map { textButton("a\($0)") }
        return template(id, .alert(alert))
    }

    static func actionSheet(_ id: String = "sheet", actions: Int = 2) -> HUTemplate {
        var sheet = HUActionSheetTemplate()
        sheet.title = "Choose"
        sheet.actions = (0..<actions).map { textButton("a\($0)") }
        return template(id, .actionSheet(sheet))
    }

    static func information(_ id: String = "info", items count: Int = 3, actions: Int = 1) -> HUTemplate {
        var information = HUInformationTemplate()
        information.title = "Order"
        information.items = (0..<count).map { index in
            var item = HUInformationItem()
            item.id = "i\(index)"
            item.title = "Label \(index)"
            item.detail = "Value \(index)"
            return item
        }
        information.actions = (0..<actions).map { textButton("act\($0)") }
        return template(id, .information(information))
    }

    static func point(_ id: String) -> HUPointOfInterest {
        var point = HUPointOfInterest()
        point.id = id
        point.title = "Charger \(id)"
        var location = HULocation()
        location.latitude = 48.1
        location.longitude = 11.5
        point.location = location
        return point
    }

    static func pointOfInterest(_ id: String = "poi", points count: Int = 3, selected: Int32 = -1) -> HUTemplate {
        var poi = HUPointOfInterestTemplate()
        poi.title = "Nearby"
        poi.points = (0..<count).map { point("p\($0)") }
        poi.selectedIndex = selected
        return template(id, .pointOfInterest(poi))
    }

    static func contact(_ id: String = "contact", texts: Int = 2, actions: Int = 2) -> HUTemplate {
        var contact = HUContactTemplate()
        contact.title = "Alice"
        contact.informativeTexts = (0..<texts).map { "Line \($0)" }
        contact.actions = (0..<actions).map { index in
            var action = HUContactAction()
            action.id = "c\(index)"
            action.kind = .call
            return action
        }
        return template(id, .contact(contact))
    }

    static func mapButton(_ id: String) -> HUMapButton {
        var button = HUMapButton()
        button.id = id
        return button
    }

    static func map(_ id: String = "map", leading: Int = 1, trailing: Int = 1, mapButtons: Int = 2) -> HUTemplate {
        var map = HUMapTemplate()
        map.leadingButtons = (0..<leading).map { barButton("l\($0)") }
        map.trailingButtons = (0..<trailing).map { barButton("t\($0)") }
        map.mapButtons = (0..<mapButtons).map { mapButton("m\($0)") }
        return template(id, .map(map))
    }

    static func search(_ id: String = "search") -> HUTemplate {
        var search = HUSearchTemplate()
        search.placeholder = "Where to?"
        return template(id, .search(search))
    }

    static func voiceControl(_ id: String = "voice", states count: Int = 2, active: String = "v0") -> HUTemplate {
        var voice = HUVoiceControlTemplate()
        voice.states = (0..<count).map { index in
            var state = HUVoiceControlState()
            state.id = "v\(index)"
            state.titleVariants = ["Listening"]
            return state
        }
        voice.activeStateID = active
        return template(id, .voiceControl(voice))
    }

    /// A valid template of each kind.
    static func sample(_ kind: TemplateKind) -> HUTemplate {
        switch kind {
        case .list: return list()
        case .grid: return grid()
        case .tabBar: return tabBar()
        case .nowPlaying: return nowPlaying()
        case .alert: return alert()
        case .actionSheet: return actionSheet()
        case .information: return information()
        case .pointOfInterest: return pointOfInterest()
        case .contact: return contact()
        case .map: return map()
        case .search: return search()
        case .voiceControl: return voiceControl()
        }
    }

    /// Where a template of this kind is normally put.
    static func placement(_ kind: TemplateKind) -> TemplatePlacement {
        if kind.isModal { return .present }
        return kind == .nowPlaying ? .push(onTopOf: .list) : .root
    }

    // MARK: images

    /// The first 33 bytes of a PNG (signature + IHDR chunk with a correct CRC) and an IEND chunk.
    static func pngBytes(width: UInt32, height: UInt32) -> [UInt8] {
        var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        let chunk: [UInt8] = Array("IHDR".utf8) + be(width) + be(height) + [8, 6, 0, 0, 0]
        bytes += be(13) + chunk + be(ImageRules.crc32(chunk))
        bytes += be(0) + Array("IEND".utf8) + be(0xAE42_6082)
        return bytes
    }

    static func png(width: UInt32, height: UInt32) -> HUImage {
        var image = HUImage()
        image.png = Data(pngBytes(width: width, height: height))
        return image
    }

    static func asset(_ name: String = "icon", width: UInt32, height: UInt32) -> HUImage {
        var image = HUImage()
        image.asset = name
        image.widthPx = width
        image.heightPx = height
        return image
    }
}
