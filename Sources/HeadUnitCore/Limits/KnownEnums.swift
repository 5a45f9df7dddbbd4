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
    public static func firstUnknown(in message: some WireMessage) -> Unknown? {
        var walker = EnumWalker()
        do {
            try message.walk(&walker)
        } catch {
            return error.unknown
        }
        return nil
    }

    /// Whether `value` is one of its type's declared cases (not `UNRECOGNIZED`).
    public static func isKnown<E: WireEnum>(_ value: E) -> Bool {
        value.isRecognized
    }
}

private struct FoundUnknown: Error {
    var unknown: KnownEnums.Unknown
}

extension KnownEnums {
    /// `value` as an `Unknown` at `fieldPath` (field numbers, Envelope first), nil when its type lists it.
    static func unknown<E: WireEnum>(_ value: E, fieldPath: @autoclosure () -> [Int]) -> Unknown? {
        guard !isKnown(value) else { return nil }
        // The standard library's prefix test, not `replacingOccurrences`: that is
        // Foundation's, and it links Foundation and ICU's data (34 MiB) into the package.
        let full = String(describing: E.self)
        let name = full.hasPrefix("HU") ? String(full.dropFirst(2)) : full
        return Unknown(fieldPath: fieldPath().map(String.init).joined(separator: "."), typeName: name, value: value.rawValue)
    }
}

private struct EnumWalker: WireWalker {
    typealias Failure = FoundUnknown
    var path: [Int] = []

    func enumValue<E: WireEnum>(_ value: E, field: Int) throws(FoundUnknown) {
        if let unknown = KnownEnums.unknown(value, fieldPath: path + [field]) { throw FoundUnknown(unknown: unknown) }
    }

    mutating func enter<M: WireMessage>(_ message: M, field: Int, index: Int?) -> Bool {
        path.append(field)
        return true
    }

    mutating func leave() { path.removeLast() }
}
