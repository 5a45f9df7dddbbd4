/// A value kept behind one reference, copied when it is first changed after
/// the struct holding it was copied. `Car` keeps its larger sub-states so:
/// a request that may be rolled back copies the whole `Car` first
/// (Car+Bounds), and each such sub-state costs that copy one retain instead of
/// one per string, array and dictionary inside it (~135 a copy in all).
@propertyWrapper
public struct CopyOnWrite<Value: Sendable>: Sendable {
    /// Changed only while uniquely referenced (`_modify`), so sharing it across threads is as safe as sharing `Value`.
    private final class Box: @unchecked Sendable {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private var box: Box

    public init(wrappedValue: Value) {
        box = Box(wrappedValue)
    }

    public var wrappedValue: Value {
        _read { yield box.value }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.value) }
            yield &box.value
        }
    }

    /// `$name`: the wrapper itself, to keep a reference to the value as it is now.
    public var projectedValue: CopyOnWrite<Value> { self }

    /// The same storage: the value has not changed since one was copied from the other.
    public func isIdentical(to other: CopyOnWrite<Value>) -> Bool { box === other.box }
}

/// Equal when they share storage (a value is changed in place only while
/// nothing else refers to it, so shared storage has not changed since), else
/// when the values are equal: comparing a kept copy with the current one is
/// then one identity check until the value changes.
extension CopyOnWrite: Equatable where Value: Equatable {
    public static func == (lhs: CopyOnWrite, rhs: CopyOnWrite) -> Bool {
        lhs.box === rhs.box || lhs.box.value == rhs.box.value
    }
}
