#if canImport(FoundationEssentials)
import FoundationEssentials  // Data, in SwiftProtobuf's Visitor signatures
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
    public func checkAll(_ message: some SwiftProtobuf.Message) -> (violation: MessageLimitViolation?, unknownEnum: KnownEnums.Walked) {
        var visitor = LimitVisitor(limits: self)
        do {
            try message.traverse(visitor: &visitor)
        } catch let violation as MessageLimitViolation {
            return (violation, .notYet)
        } catch {
            return (nil, .notYet)  // our visitor throws nothing else
        }
        return (nil, .found(visitor.firstUnknownEnum))
    }

    /// Whether a message whose decoder measured `sizes` breaks none of these
    /// limits: the same tests `checkAll` makes, on the counts the decoder kept
    /// (`TemplateRequestDecoder`). A message that does not fit is walked by
    /// `checkAll`, which names the field.
    public func admits(_ sizes: WireSizes) -> Bool {
        sizes.elements <= maxElements && sizes.longestString <= maxStringBytes && sizes.longestBytes <= maxImageBytes
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

private struct LimitVisitor: SwiftProtobuf.Visitor {
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

    private mutating func count(_ n: Int, _ field: Int) throws {
        elements += n
        if elements > limits.maxElements { throw violation("max_message_elements", limits.maxElements, elements, Step(field: field)) }
    }

    private func checkString(_ value: String, _ field: Int, index: Int? = nil) throws {
        let bytes = value.utf8.count
        if bytes > limits.maxStringBytes { throw violation("max_string_bytes", limits.maxStringBytes, bytes, Step(field: field, index: index)) }
    }

    private func checkBytes(_ value: Data, _ field: Int, index: Int? = nil) throws {
        if value.count > limits.maxImageBytes { throw violation("max_image_bytes", limits.maxImageBytes, value.count, Step(field: field, index: index)) }
    }

    mutating func visitSingularStringField(value: String, fieldNumber: Int) throws { try checkString(value, fieldNumber) }
    mutating func visitSingularBytesField(value: Data, fieldNumber: Int) throws { try checkBytes(value, fieldNumber) }
    mutating func visitSingularMessageField<M: Message>(value: M, fieldNumber: Int) throws {
        path.append(Step(field: fieldNumber))
        try value.traverse(visitor: &self)
        path.removeLast()
    }

    mutating func visitRepeatedStringField(value: [String], fieldNumber: Int) throws {
        try count(value.count, fieldNumber)
        for index in value.indices { try checkString(value[index], fieldNumber, index: index) }
    }
    mutating func visitRepeatedBytesField(value: [Data], fieldNumber: Int) throws {
        try count(value.count, fieldNumber)
        for index in value.indices { try checkBytes(value[index], fieldNumber, index: index) }
    }
    mutating func visitRepeatedEnumField<E: Enum>(value: [E], fieldNumber: Int) throws {
        try count(value.count, fieldNumber)
        for element in value { noteEnum(element, fieldNumber) }
    }
    mutating func visitPackedEnumField<E: Enum>(value: [E], fieldNumber: Int) throws {
        try count(value.count, fieldNumber)
        for element in value { noteEnum(element, fieldNumber) }
    }

    /// KnownEnums' path names fields only (no element indices).
    private mutating func noteEnum<E: Enum>(_ value: E, _ field: Int) {
        guard firstUnknownEnum == nil else { return }
        firstUnknownEnum = KnownEnums.unknown(value, fieldPath: path.map(\.field) + [field])
    }
    mutating func visitRepeatedMessageField<M: Message>(value: [M], fieldNumber: Int) throws {
        try count(value.count, fieldNumber)
        // By index: the elements are traversed in place, not copied.
        try value.withUnsafeBufferPointer { elements in
            for index in elements.indices {
                path.append(Step(field: fieldNumber, index: index))
                try elements[index].traverse(visitor: &self)
                path.removeLast()
            }
        }
    }

    // Numbers carry no length; their repeated forms (none in the protocol today) count as elements.
    mutating func visitRepeatedUInt32Field(value: [UInt32], fieldNumber: Int) throws { try count(value.count, fieldNumber) }
    mutating func visitPackedUInt32Field(value: [UInt32], fieldNumber: Int) throws { try count(value.count, fieldNumber) }
    mutating func visitSingularDoubleField(value: Double, fieldNumber: Int) throws {}
    mutating func visitSingularInt64Field(value: Int64, fieldNumber: Int) throws {}
    mutating func visitSingularUInt64Field(value: UInt64, fieldNumber: Int) throws {}
    mutating func visitSingularBoolField(value: Bool, fieldNumber: Int) throws {}
    mutating func visitSingularEnumField<E: Enum>(value: E, fieldNumber: Int) throws { noteEnum(value, fieldNumber) }
    mutating func visitMapField<KeyType, ValueType: MapValueType>(
        fieldType: _ProtobufMap<KeyType, ValueType>.Type, value: _ProtobufMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws { try count(value.count, fieldNumber) }
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufEnumMap<KeyType, ValueType>.Type, value: _ProtobufEnumMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws where ValueType.RawValue == Int { try count(value.count, fieldNumber) }
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufMessageMap<KeyType, ValueType>.Type, value: _ProtobufMessageMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws { try count(value.count, fieldNumber) }
    mutating func visitUnknown(bytes: Data) throws {}
}
