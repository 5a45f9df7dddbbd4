
/// Every `Image` in what the car shows an HMI (home screen, rendered screen,
/// templates): the car swaps inline PNGs for refs (`Image.ref`) and an HMI
/// swaps refs back for the bytes it was sent (PROTOCOL.md section 12.6).
/// The walks are the generated ones (`walk`, `rewriteMessages`): every image
/// field of the .proto files is found without naming any of them here.
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
        rewrite(message: &home, where: needs, body)
    }

    /// The same over a screen: its top template, the presented one, the search
    /// results, whatever holds an image.
    public static func rewrite(_ screen: inout HURenderedScreen, where needs: (HUImage) -> Bool, _ body: (inout HUImage) -> Void) {
        rewrite(message: &screen, where: needs, body)
    }

    /// Only the messages on the way to a picked image are written: the rest
    /// keeps sharing its storage (and a template its kept encoding).
    static func rewrite<M: WireMessage>(message: inout M, where needs: (HUImage) -> Bool, _ body: (inout HUImage) -> Void) {
        guard contains(message, where: needs) else { return }
        withoutActuallyEscaping(needs) { needs in
            withoutActuallyEscaping(body) { body in
                var rewriter = ImageRewriter(needs: needs, body: body)
                message.rewriteMessages(&rewriter)
            }
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

/// Calls `body` on each image `needs` picks; goes into a message only when
/// one is inside it (a read-only walk first).
private struct ImageRewriter: WireRewriter {
    let needs: (HUImage) -> Bool
    let body: (inout HUImage) -> Void

    func wants<M: WireMessage>(_ message: M) -> Bool {
        if let image = asImage(message) { return needs(image) }
        return ImageWalk.contains(message, where: needs)
    }

    mutating func rewrite<M: WireMessage>(_ message: inout M) -> Bool {
        guard var image = asImage(message) else { return true }
        body(&image)
        message = unsafeBitCast(image, to: M.self)  // M is HUImage (asImage)
        return false
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
