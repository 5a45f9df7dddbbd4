/// A map of a few keys (an app's scenes by kind, the car's screens), read
/// as a dictionary but kept as a short array: finding a key is a scan of at
/// most a handful of entries, where a `Dictionary` hashes it. A protobuf
/// enum's hash (the `Hasher` set up, fed and finalised) cost ~250
/// instructions a lookup, and a push/pop pair made ~50 of them.
///
/// Iterates in the order the keys were first set. Equality ignores the
/// order, as a dictionary's does.
public struct SmallMap<Key: Equatable, Value> {
    fileprivate struct Entry {
        var key: Key
        /// nil only while a `_modify` that may remove the entry runs.
        var value: Value?
    }

    private var entries: [Entry] = []

    public init() {}

    private func index(of key: Key) -> Int? {
        var index = 0
        while index < entries.count {
            if entries[index].key == key { return index }
            index += 1
        }
        return nil
    }

    private mutating func index(of key: Key, addingIfAbsent value: @autoclosure () -> Value?) -> Int {
        if let found = index(of: key) { return found }
        entries.append(Entry(key: key, value: value()))
        return entries.count - 1
    }

    /// The value for `key`; setting nil removes it. A mutation through the
    /// subscript (`map[key]?.change()`) changes the entry where it is kept.
    public subscript(key: Key) -> Value? {
        get {
            guard let index = index(of: key) else { return nil }
            return entries[index].value
        }
        _modify {
            let index = index(of: key, addingIfAbsent: nil)
            defer { if entries[index].value == nil { entries.remove(at: index) } }
            yield &entries[index].value
        }
    }

    /// The value for `key`, or `defaultValue` (kept once modified), as `Dictionary`'s.
    public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        _modify {
            let index = index(of: key, addingIfAbsent: defaultValue())
            yield &entries[index].value!
        }
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }
    public var keys: [Key] { entries.map(\.key) }
    public var values: [Value] { entries.map { $0.value! } }
}

extension SmallMap: Sendable where Key: Sendable, Value: Sendable {}
extension SmallMap.Entry: Sendable where Key: Sendable, Value: Sendable {}

extension SmallMap: Sequence {
    public struct Iterator: IteratorProtocol {
        fileprivate var base: IndexingIterator<[Entry]>
        public mutating func next() -> (key: Key, value: Value)? {
            guard let entry = base.next() else { return nil }
            return (entry.key, entry.value!)
        }
    }

    public func makeIterator() -> Iterator { Iterator(base: entries.makeIterator()) }
    public var underestimatedCount: Int { entries.count }
}

extension SmallMap: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (Key, Value)...) {
        for (key, value) in elements {
            precondition(index(of: key) == nil, "SmallMap literal with the key \(key) twice")
            entries.append(Entry(key: key, value: value))
        }
    }
}

extension SmallMap: Equatable where Value: Equatable {
    public static func == (lhs: SmallMap, rhs: SmallMap) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for entry in lhs.entries where rhs[entry.key] != entry.value { return false }
        return true
    }
}

extension SmallMap: CustomStringConvertible {
    public var description: String {
        entries.isEmpty ? "[:]" : "[" + entries.map { "\($0.key): \($0.value!)" }.joined(separator: ", ") + "]"
    }
}
