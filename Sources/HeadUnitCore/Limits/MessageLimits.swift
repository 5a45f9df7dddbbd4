#if canImport(FoundationEssentials)
import FoundationEssentials  // Data, in the walker's signatures
#else
import Foundation
#endif
import HeadUnitWire
import SwiftProtobuf

/// How big one message from a peer may be inside its frame: string and
/// image lengths and the number of repeated elements, nested ones included.
/// The frame limit alone bounds bytes, not the work or the amplification a
/// message can cause (a 1 MB device name repeated in every status answer, a
/// 60,000-item list rendered, diffed and fanned out to every HMI).
public struct MessageLimits: Sendable, Equatable {
    public var maxStringBytes: Int
    public var maxImageBytes: Int
    public var maxElements: Int

    /// The ranges the daemon accepts at start (PROTOCOL.md section 20.6):
    /// room for an id or a UUID; no more than a frame can carry.
    public static let maxStringBytesRange = 64...65_536
    public static let maxImageBytesRange = 1_024...16 << 20
    public static let maxElementsRange = 100...100_000

    public init(maxStringBytes: Int = 1024, maxImageBytes: Int = 256 << 10, maxElements: Int = 2000) {
        self.maxStringBytes = maxStringBytes
        self.maxImageBytes = maxImageBytes
        self.maxElements = maxElements
    }

    /// The first limit `message` breaks, or nil, and on the same walk
    /// `KnownEnums.firstUnknown` (found when no limit is broken; the car
    /// answers that after the role checks). One walk over the decoded
    /// message; it stops at the first violation.
    public func checkAll(_ message: some WireMessage) -> (violation: MessageLimitViolation?, unknownEnum: KnownEnums.Walked) {
        var walker = LimitWalker(limits: self)
        do {
            try message.walk(&walker)
        } catch {
            return (error, .notYet)
        }
        return (nil, .found(walker.firstUnknownEnum))
    }
}

/// Which limit, where, and by how much.
public struct MessageLimitViolation: Error, Sendable, Equatable {
    /// The configuration name: "max_string_bytes", "max_image_bytes" or "max_message_elements".
    public var limit: String
    public var limitValue: Int
    public var actual: Int
    /// Field numbers from the Envelope down to the offending field, an element
    /// of a repeated field with its 0-based index: "11.10.10.2[0].3[10].1"
    /// (PROTOCOL.md section 10.3), so an app can tell which item was too long.
    public var fieldPath: String

    public var message: String {
        switch limit {
        case "max_string_bytes": return "a string of \(actual) bytes at field \(fieldPath) is over max_string_bytes (\(limitValue))"
        case "max_image_bytes": return "a bytes field of \(actual) bytes at field \(fieldPath) is over max_image_bytes (\(limitValue))"
        default: return "the message has more than \(limitValue) repeated elements (max_message_elements; over at field \(fieldPath))"
        }
    }
}

private struct LimitWalker: WireWalker {
    let limits: MessageLimits
    var elements = 0
    /// Where the walk is, as numbers: the path's text is built only for a
    /// violation (building it per field cost more than the checks).
    var path: [Step] = []
    /// The first enum value its type does not list (KnownEnums).
    var firstUnknownEnum: KnownEnums.Unknown?

    /// A field number, with the element's index when it is one of a repeated field's.
    struct Step {
        var field: Int
        var index: Int?
        var text: String { index.map { "\(field)[\($0)]" } ?? String(field) }
    }

    init(limits: MessageLimits) {
        self.limits = limits
        path.reserveCapacity(16)
    }

    private func violation(_ limit: String, _ value: Int, _ actual: Int, _ leaf: Step) -> MessageLimitViolation {
        MessageLimitViolation(limit: limit, limitValue: value, actual: actual, fieldPath: (path + [leaf]).map(\.text).joined(separator: "."))
    }

    mutating func repeated(count: Int, field: Int) throws(MessageLimitViolation) {
        elements += count
        if elements > limits.maxElements { throw violation("max_message_elements", limits.maxElements, elements, Step(field: field)) }
    }

    func string(_ value: String, field: Int, index: Int?) throws(MessageLimitViolation) {
        let bytes = value.utf8.count
        if bytes > limits.maxStringBytes { throw violation("max_string_bytes", limits.maxStringBytes, bytes, Step(field: field, index: index)) }
    }

    func bytes(_ value: Data, field: Int, index: Int?) throws(MessageLimitViolation) {
        if value.count > limits.maxImageBytes { throw violation("max_image_bytes", limits.maxImageBytes, value.count, Step(field: field, index: index)) }
    }

    mutating func enter<M: WireMessage>(_ message: M, field: Int, index: Int?) -> Bool {
        path.append(Step(field: field, index: index))
        return true
    }

    mutating func leave() { path.removeLast() }

    /// KnownEnums' path names fields only (no element indices).
    mutating func enumValue<E: WireEnum>(_ value: E, field: Int) {
        guard firstUnknownEnum == nil else { return }
        firstUnknownEnum = KnownEnums.unknown(value, fieldPath: path.map(\.field) + [field])
    }
}
