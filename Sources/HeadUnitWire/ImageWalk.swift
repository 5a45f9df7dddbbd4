
/// Every `Image` in what the car shows an HMI (home screen, rendered screen,
/// templates): the car swaps inline PNGs for refs (`Image.ref`) and an HMI
/// swaps refs back for the bytes it was sent (PROTOCOL.md section 12.6).
/// The walk names each image field of templates.proto; a test checks none is
/// missed (no inline PNG left after the car's rewrite).
public enum ImageWalk {
    public static func isInline(_ image: HUImage) -> Bool {
        if case .png = image.source { return true }
        return false
    }

    public static func isRef(_ image: HUImage) -> Bool {
        if case .ref = image.source { return true }
        return false
    }

    /// Calls `body` on every image of the home screen that `needs` picks.
    public static func rewrite(_ home: inout HUHomeScreen, where needs: (HUImage) -> Bool, _ body: (inout HUImage) -> Void) {
        guard contains(home, where: needs) else { return }
        withRewriter(needs, body) { walker in
            for index in home.icons.indices { walker.walk(&home.icons[index].icon) }
        }
    }

    /// The same over a screen: its top template, the presented one and the search results.
    public static func rewrite(_ screen: inout HURenderedScreen, where needs: (HUImage) -> Bool, _ body: (inout HUImage) -> Void) {
        guard contains(screen, where: needs) else { return }
        let top = screen.hasTop && contains(screen.top, where: needs)
        let presented = screen.hasPresented && contains(screen.presented, where: needs)
        withRewriter(needs, body) { walker in
            if top { walker.walk(&screen.top) }
            if presented { walker.walk(&screen.presented) }
            for index in screen.searchResults.indices { walker.walk(&screen.searchResults[index]) }
        }
    }

    private static func withRewriter(_ needs: (HUImage) -> Bool, _ body: (inout HUImage) -> Void, _ run: (Rewriter) -> Void) {
        withoutActuallyEscaping(needs) { needs in
            withoutActuallyEscaping(body) { body in run(Rewriter(needs: needs, body: body)) }
        }
    }

    /// Whether any image of the message is one `needs` picks (one read-only walk).
    public static func contains(_ message: some WireMessage, where needs: (HUImage) -> Bool) -> Bool {
        withoutActuallyEscaping(needs) { needs in
            var walker = ImageFinder(needs: needs)
            do { try message.walk(&walker) } catch { return true }
            return false
        }
    }

    /// The refs a message carries, in order of appearance, each once.
    public static func refs(in message: some WireMessage) -> [String] {
        scan(message).refs
    }

    /// In one walk: whether `message` holds an inline PNG, and its refs as
    /// `refs(in:)` returns them. Publishing a screen walked it twice for these.
    /// Inlinable so the walk is specialized for the caller's message type
    /// (a scene's template is scanned once when it is stored).
    @inlinable
    public static func scan(_ message: some WireMessage) -> (hasInline: Bool, refs: [String]) {
        var walker = RefCollector()
        message.walk(&walker)
        return (walker.hasInline, walker.refs)
    }
}

private struct Rewriter {
    let needs: (HUImage) -> Bool
    let body: (inout HUImage) -> Void

    func walk(_ template: inout HUTemplate) {
        switch template.kind {
        case .list(var list):
            walk(&list.leadingButtons)
            walk(&list.trailingButtons)
            for section in list.sections.indices {
                for item in list.sections[section].items.indices { walk(&list.sections[section].items[item]) }
            }
            template.list = list
        case .grid(var grid):
            for index in grid.buttons.indices { walk(&grid.buttons[index].image) }
            walk(&grid.leadingButtons)
            walk(&grid.trailingButtons)
            template.grid = grid
        case .tabBar(var bar):
            for index in bar.tabs.indices { walk(&bar.tabs[index]) }
            template.tabBar = bar
        case .nowPlaying(var nowPlaying):
            walk(&nowPlaying)
            template.nowPlaying = nowPlaying
        case .information(var information):
            walk(&information.leadingButtons)
            walk(&information.trailingButtons)
            template.information = information
        case .pointOfInterest(var poi):
            for index in poi.points.indices { walk(&poi.points[index]) }
            template.pointOfInterest = poi
        case .contact(var contact):
            walk(&contact.image)
            for index in contact.actions.indices { walk(&contact.actions[index].image) }
            walk(&contact.leadingButtons)
            walk(&contact.trailingButtons)
            template.contact = contact
        case .map(var map):
            walk(&map.leadingButtons)
            walk(&map.trailingButtons)
            for index in map.mapButtons.indices {
                walk(&map.mapButtons[index].image)
                walk(&map.mapButtons[index].focusedImage)
            }
            template.map = map
        case .voiceControl(var voice):
            for index in voice.states.indices { walk(&voice.states[index].image) }
            template.voiceControl = voice
        case .alert, .actionSheet, .search, nil:
            break  // no images
        }
    }

    func walk(_ image: inout HUImage) {
        if needs(image) { body(&image) }
    }

    func walk(_ buttons: inout [HUBarButton]) {
        for index in buttons.indices where needs(buttons[index].image) { walk(&buttons[index].image) }
    }

    func walk(_ item: inout HUListItem) {
        switch item.kind {
        case .general(var general):
            guard needs(general.image) || needs(general.accessoryImage) else { return }
            walk(&general.image)
            walk(&general.accessoryImage)
            item.general = general
        case .imageRow(var row):
            guard row.images.contains(where: { needs($0) }) else { return }
            for index in row.images.indices { walk(&row.images[index]) }
            item.imageRow = row
        case .message(var message):
            guard needs(message.leadingImage) || needs(message.trailingImage) else { return }
            walk(&message.leadingImage)
            walk(&message.trailingImage)
            item.message = message
        case nil:
            break
        }
    }

    func walk(_ tab: inout HUTab) {
        guard ImageWalk.contains(tab, where: { needs($0) }) else { return }
        walk(&tab.image)
        if tab.hasTemplate { walk(&tab.template) }
    }

    func walk(_ nowPlaying: inout HUNowPlayingTemplate) {
        walk(&nowPlaying.artwork)
        for index in nowPlaying.buttons.indices { walk(&nowPlaying.buttons[index].image) }
    }

    func walk(_ point: inout HUPointOfInterest) {
        walk(&point.pinImage)
        walk(&point.selectedPinImage)
    }
}

/// `value` as an image when it is one. A metatype comparison, not `as?`:
/// the walks meet every message of a screen, and a dynamic cast per message
/// cost more than the rest of the walk.
@inlinable @inline(__always)
func asImage<M: WireMessage>(_ value: M) -> HUImage? {
    guard M.self == HUImage.self else { return nil }
    return unsafeBitCast(value, to: HUImage.self)
}

/// Collects `Image.ref` values; an image is not walked into.
@usableFromInline
struct RefCollector: WireWalker {
    @usableFromInline typealias Failure = Never
    @usableFromInline var refs: [String] = []
    @usableFromInline var seen: Set<String> = []
    @usableFromInline var hasInline = false

    @inlinable init() {}

    @inlinable
    mutating func enter<M: WireMessage>(_ message: M, field: Int, index: Int?) -> Bool {
        guard let image = asImage(message) else { return true }
        switch image.source {
        case .ref(let ref):
            if seen.insert(ref).inserted { refs.append(ref) }
        case .png:
            hasInline = true
        default:
            break
        }
        return false
    }
}

/// Stops (throws) at the first image that `needs` picks.
private struct ImageFinder: WireWalker {
    struct Found: Error {}
    let needs: (HUImage) -> Bool

    func enter<M: WireMessage>(_ message: M, field: Int, index: Int?) throws(Found) -> Bool {
        guard let image = asImage(message) else { return true }
        if needs(image) { throw Found() }
        return false
    }
}
