#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import HeadUnitWire
import SwiftProtobuf

/// Images sent to an HMI once (PROTOCOL.md section 12.6). What the HMIs are
/// shown (home screen, screens) carries each inline PNG as `Image.ref`, the
/// hex SHA-256 of its bytes; the bytes themselves go to each HMI once, as
/// `ImageData`, before the first state that shows them. So a home screen of
/// 64 icons of 256 KiB is a few kilobytes, whatever the icons weigh.
///
/// Holds the PNGs the HMIs' current state shows (an HMI may ask for one again
/// with `GetImage`), and remembers the hash of each PNG by its storage: a PNG
/// is hashed once when it first reaches the screens, not on every render.
public struct HMIImages: Sendable {
    /// The bytes of every image the current state shows, by ref.
    private var store: [String: Entry] = [:]
    /// Refs by the PNG's storage (address and length). Each entry keeps its
    /// `Data` alive, so no other PNG can be at that address meanwhile.
    private var known: [StorageKey: Known] = [:]
    /// Rounds of publishing: what no round used since the last one ended is dropped.
    private var round: UInt64 = 0

    private struct Entry: Sendable {
        var png: Data
        var used: UInt64
    }

    private struct Known: Sendable {
        var png: Data
        var ref: String
        var used: UInt64
    }

    private struct StorageKey: Hashable, Sendable {
        var address: Int
        var count: Int
    }

    public init() {}

    /// The PNG with this ref, if the current state shows it.
    public func png(_ ref: String) -> Data? { store[ref]?.png }

    public var count: Int { store.count }

    /// The lowercase hex SHA-256 of `png`.
    public static func ref(of png: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var hex = [UInt8]()
        hex.reserveCapacity(64)
        for byte in SHA256.hash(data: png) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    // MARK: - Externalizing

    /// Replaces every inline PNG of the home screen by its ref.
    mutating func externalize(_ home: inout HUHomeScreen) {
        ImageWalk.rewrite(&home, where: ImageWalk.isInline) { intern(&$0) }
    }

    /// Replaces every inline PNG of the screen (top, presented, search results)
    /// by its ref. Returns the screen's refs (`refs(in:)`) when it had no inline
    /// PNG: the walk that found none found them, so publishing the screen need
    /// not walk it again; nil when PNGs were replaced.
    @discardableResult
    mutating func externalize(_ screen: inout HURenderedScreen) -> [String]? {
        let scan = ImageWalk.scan(screen)
        guard scan.hasInline else { return scan.refs }
        ImageWalk.rewrite(&screen, where: ImageWalk.isInline) { intern(&$0) }
        return nil
    }

    /// Keeps images already interned (`refs` of a screen shown again
    /// unchanged) in use this round, as `externalize` of that screen would.
    mutating func keepShowing(_ refs: [String]) {
        guard !refs.isEmpty else { return }
        for ref in refs { store[ref]?.used = round }
        let keys = known.compactMap { refs.contains($0.value.ref) ? $0.key : nil }
        for key in keys { known[key]!.used = round }
    }

    /// The home screen as HMIs are sent it (every inline PNG by its 64-character
    /// ref), for measuring it without interning anything (ComposedLimits).
    static func rewriteAsSent(_ home: inout HUHomeScreen) {
        ImageWalk.rewrite(&home, where: ImageWalk.isInline) { $0.source = .ref(placeholderRef) }
    }

    /// The screen as HMIs are sent it (inline PNGs by ref), for measuring.
    static func rewriteAsSent(_ screen: inout HURenderedScreen) {
        ImageWalk.rewrite(&screen, where: ImageWalk.isInline) { $0.source = .ref(placeholderRef) }
    }

    /// As long as every ref (a hex SHA-256), so sizes measured with it are exact.
    private static let placeholderRef = String(repeating: "0", count: 64)

    /// Ends a round of publishing: images no state showed since the previous
    /// round ended are forgotten (an HMI asking for one gets UNKNOWN_IMAGE).
    mutating func endRound() {
        let current = round
        store = store.filter { $0.value.used >= current }
        known = known.filter { $0.value.used >= current }
        round += 1
    }

    private mutating func intern(_ image: inout HUImage) {
        guard case .png(let png) = image.source else { return }
        let ref: String
        if png.count > 14, let key = Self.key(png) {
            // Larger Data lives in heap storage with a stable address.
            if var entry = known[key] {
                entry.used = round
                known[key] = entry
                ref = entry.ref
            } else {
                ref = Self.ref(of: png)
                known[key] = Known(png: png, ref: ref, used: round)
            }
        } else {
            ref = Self.ref(of: png)
        }
        if store[ref] == nil {
            store[ref] = Entry(png: png, used: round)
        } else {
            store[ref]!.used = round
        }
        image.source = .ref(ref)
    }

    private static func key(_ png: Data) -> StorageKey? {
        png.withUnsafeBytes { raw in
            raw.baseAddress.map { StorageKey(address: Int(bitPattern: $0), count: raw.count) }
        }
    }

    /// The refs a message carries, in order of appearance, each once.
    public static func refs(in message: some WireMessage) -> [String] {
        ImageWalk.refs(in: message)
    }
}
