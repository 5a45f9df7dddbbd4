/// A map read as a dictionary whose keys are usually few (an app's scenes by
/// kind, the car's screens, the phone's apps), kept as an array: up to
/// `scanned` keys a key is found by comparing it with each, where a
/// `Dictionary` hashes it (a protobuf enum's hash cost ~250 instructions a
/// lookup, an app id's ~450, and a push/pop pair made dozens). Past
/// `scanned` keys (the phone's apps may be 256, `max_apps`) a hash index
/// finds it, so many keys are never scanned.
///
/// Iterates in the order the keys were first set. Equality ignores the
/// order, as a dictionary's does.
public struct SmallMap<Key: Hashable, Value> {
    /// Public only as the element type `values` views.
    public struct Entry {
        var key: Key
        /// nil only while a `_modify` that may remove the entry runs.
        var value: Value?
    }

    private var entries: [Entry] = []
    /// Each key's position, kept only past `scanned` keys.
    private var positions: [Key: Int]?
    static var scanned: Int { 8 }

    public init() {}

    private func index(of key: Key) -> Int? {
        if let positions { return positions[key] }
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
        let added = entries.count - 1
        if positions != nil {
            positions![key] = added
        } else if entries.count > Self.scanned {
            indexPositions()
        }
        return added
    }

    /// Removes the entry at `index` when its value was set to nil. Rare for
    /// a large map (an app closing): the hash index is made again, or
    /// dropped when few keys are left.
    private mutating func removeIfEmpty(_ index: Int) {
        guard entries[index].value == nil else { return }
        entries.remove(at: index)
        if positions != nil { indexPositions() }
    }

    private mutating func indexPositions() {
        positions = entries.count > Self.scanned
            ? Dictionary(uniqueKeysWithValues: entries.indices.map { (entries[$0].key, $0) }) : nil
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
            defer { removeIfEmpty(index) }
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
    /// A view, as `Dictionary`'s: reading it allocates nothing.
    public var values: LazyMapSequence<[Entry], Value> { entries.lazy.map { $0.value! } }
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
            self[key] = value
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

