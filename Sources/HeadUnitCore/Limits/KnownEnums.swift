#if canImport(FoundationEssentials)
import FoundationEssentials  // Data, in SwiftProtobuf's Visitor signatures
#else
import Foundation
#endif
import HeadUnitWire
import SwiftProtobuf

/// Unknown enum values in what a peer sends (PROTOCOL.md section 9, code 113:
/// "an unknown enum value" is INVALID_ARGUMENT). proto3 keeps a value this
/// version does not know as `UNRECOGNIZED(n)`; one walk over the decoded
/// message finds the first such field, whatever message family it is in, so
/// an enum added to the protocol later is covered without a line here.
public enum KnownEnums {
    public struct Unknown: Equatable, Sendable {
        /// Field numbers from the Envelope down to the field, e.g. "54.3.2".
        public var fieldPath: String
        public var typeName: String
        public var value: Int

        public var message: String {
            "unknown \(typeName) value \(value) at field \(fieldPath)"
        }
    }

    /// What a walk made before found: `MessageLimits.checkAll` looks for
    /// unknown values on its way, so the car need not walk the message again.
    public enum Walked: Sendable, Equatable {
        case notYet
        case found(Unknown?)
    }

    /// The first enum field (singular or repeated) holding a value its type does not list.
    public static func firstUnknown(in message: some SwiftProtobuf.Message) -> Unknown? {
        var visitor = EnumVisitor()
        do {
            try message.traverse(visitor: &visitor)
        } catch let unknown as FoundUnknown {
            return unknown.unknown
        } catch {
            return nil  // our visitor throws nothing else
        }
        return nil
    }

    /// Whether `value` is one of its type's declared cases (generated proto3
    /// enums are `CaseIterable` without their `UNRECOGNIZED` case).
    public static func isKnown<E: SwiftProtobuf.Enum>(_ value: E) -> Bool {
        guard let type = E.self as? any CaseIterable.Type else { return true }
        return contains(type, value)
    }

    private static func contains<C: CaseIterable, E: SwiftProtobuf.Enum>(_: C.Type, _ value: E) -> Bool {
        C.allCases.contains { ($0 as? E) == value }
    }
}

private struct FoundUnknown: Error {
    var unknown: KnownEnums.Unknown
}

extension KnownEnums {
    /// `value` as an `Unknown` at `fieldPath` (field numbers, Envelope first), nil when its type lists it.
    static func unknown<E: SwiftProtobuf.Enum>(_ value: E, fieldPath: @autoclosure () -> [Int]) -> Unknown? {
        guard !isKnown(value) else { return nil }
        // The standard library's prefix test, not `replacingOccurrences`: that is
        // Foundation's, and it links Foundation and ICU's data (34 MiB) into the package.
        let full = String(describing: E.self)
        let name = full.hasPrefix("HU") ? String(full.dropFirst(2)) : full
        return Unknown(fieldPath: fieldPath().map(String.init).joined(separator: "."), typeName: name, value: value.rawValue)
    }
}

private struct EnumVisitor: SwiftProtobuf.Visitor {
    var path: [Int] = []

    private func check<E: SwiftProtobuf.Enum>(_ value: E, _ field: Int) throws {
        if let unknown = KnownEnums.unknown(value, fieldPath: path + [field]) { throw FoundUnknown(unknown: unknown) }
    }

    mutating func visitSingularEnumField<E: SwiftProtobuf.Enum>(value: E, fieldNumber: Int) throws { try check(value, fieldNumber) }
    mutating func visitRepeatedEnumField<E: SwiftProtobuf.Enum>(value: [E], fieldNumber: Int) throws {
        for element in value { try check(element, fieldNumber) }
    }
    mutating func visitPackedEnumField<E: SwiftProtobuf.Enum>(value: [E], fieldNumber: Int) throws {
        for element in value { try check(element, fieldNumber) }
    }
    mutating func visitSingularMessageField<M: Message>(value: M, fieldNumber: Int) throws {
        path.append(fieldNumber)
        try value.traverse(visitor: &self)
        path.removeLast()
    }
    mutating func visitRepeatedMessageField<M: Message>(value: [M], fieldNumber: Int) throws {
        path.append(fieldNumber)
        // By index: the elements are traversed in place, not copied.
        try value.withUnsafeBufferPointer { elements in
            for index in elements.indices { try elements[index].traverse(visitor: &self) }
        }
        path.removeLast()
    }

    // Nothing else can hold an enum.
    mutating func visitSingularDoubleField(value: Double, fieldNumber: Int) throws {}
    mutating func visitSingularInt64Field(value: Int64, fieldNumber: Int) throws {}
    mutating func visitSingularUInt64Field(value: UInt64, fieldNumber: Int) throws {}
    mutating func visitSingularBoolField(value: Bool, fieldNumber: Int) throws {}
    mutating func visitSingularStringField(value: String, fieldNumber: Int) throws {}
    mutating func visitSingularBytesField(value: Data, fieldNumber: Int) throws {}
    mutating func visitRepeatedStringField(value: [String], fieldNumber: Int) throws {}
    mutating func visitRepeatedBytesField(value: [Data], fieldNumber: Int) throws {}
    mutating func visitMapField<KeyType, ValueType: MapValueType>(
        fieldType: _ProtobufMap<KeyType, ValueType>.Type, value: _ProtobufMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws {}
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufEnumMap<KeyType, ValueType>.Type, value: _ProtobufEnumMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws where ValueType.RawValue == Int {}
    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufMessageMap<KeyType, ValueType>.Type, value: _ProtobufMessageMap<KeyType, ValueType>.BaseType, fieldNumber: Int
    ) throws {}
    mutating func visitUnknown(bytes: Data) throws {}
}
