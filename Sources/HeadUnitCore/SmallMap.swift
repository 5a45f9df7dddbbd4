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

/// A map read as a dictionary whose keys are usually few but may be many
/// (the phone's apps: most phones carry a handful, `max_apps` allows 256).
/// Up to `scanned` keys a key is found by comparing it with each (an app id
/// compared costs tens of instructions, hashed about 450, and one request
/// looked its app up seven times); past that a hash index finds it, so many
/// keys are never scanned. Iterates in the order keys were first set;
/// equality ignores the order, as a dictionary's does.
public struct GrowingMap<Key: Hashable, Value> {
    private var keys_: [Key] = []
    /// nil only while a `_modify` that may remove the entry runs.
    private var values_: [Value?] = []
    /// Each key's position, kept only past `scanned` keys.
    private var index: [Key: Int]?
    static var scanned: Int { 8 }

    public init() {}

    private func position(of key: Key) -> Int? {
        if let index { return index[key] }
        var position = 0
        while position < keys_.count {
            if keys_[position] == key { return position }
            position += 1
        }
        return nil
    }

    private mutating func position(of key: Key, addingIfAbsent value: @autoclosure () -> Value?) -> Int {
        if let found = position(of: key) { return found }
        keys_.append(key)
        values_.append(value())
        let added = keys_.count - 1
        if index != nil {
            index![key] = added
        } else if keys_.count > Self.scanned {
            index = Dictionary(uniqueKeysWithValues: zip(keys_, keys_.indices))
        }
        return added
    }

    /// Removes the entry at `position` when its value was set to nil.
    private mutating func dropIfEmpty(_ position: Int) {
        guard values_[position] == nil else { return }
        keys_.remove(at: position)
        values_.remove(at: position)
        // Rare (an app closing): the index is made again, or dropped when few are left.
        index = keys_.count > Self.scanned ? Dictionary(uniqueKeysWithValues: zip(keys_, keys_.indices)) : nil
    }

    /// The value for `key`; setting nil removes it. A mutation through the
    /// subscript (`map[key]!.change()`) changes the entry where it is kept.
    public subscript(key: Key) -> Value? {
        get {
            guard let position = position(of: key) else { return nil }
            return values_[position]
        }
        _modify {
            let position = position(of: key, addingIfAbsent: nil)
            defer { dropIfEmpty(position) }
            yield &values_[position]
        }
    }

    public var isEmpty: Bool { keys_.isEmpty }
    public var count: Int { keys_.count }
    public var keys: [Key] { keys_ }
    /// A view, as `Dictionary`'s: reading it allocates nothing.
    public var values: LazyMapSequence<[Value?], Value> { values_.lazy.map { $0! } }
}

extension GrowingMap: Sendable where Key: Sendable, Value: Sendable {}

extension GrowingMap: Sequence {
    public struct Iterator: IteratorProtocol {
        fileprivate var keys: IndexingIterator<[Key]>
        fileprivate var values: IndexingIterator<[Value?]>
        public mutating func next() -> (key: Key, value: Value)? {
            guard let key = keys.next(), let value = values.next() else { return nil }
            return (key, value!)
        }
    }

    public func makeIterator() -> Iterator { Iterator(keys: keys_.makeIterator(), values: values_.makeIterator()) }
    public var underestimatedCount: Int { keys_.count }
}

extension GrowingMap: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (Key, Value)...) {
        for (key, value) in elements {
            precondition(position(of: key) == nil, "GrowingMap literal with the key \(key) twice")
            self[key] = value
        }
    }
}

extension GrowingMap: Equatable where Value: Equatable {
    public static func == (lhs: GrowingMap, rhs: GrowingMap) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (key, value) in lhs where rhs[key] != value { return false }
        return true
    }
}
