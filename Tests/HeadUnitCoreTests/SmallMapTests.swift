import HeadUnitCore
import HeadUnitWire
import Testing

/// `SmallMap` behaves as the `Dictionary` it replaced for scenes and screens.
@Suite struct SmallMapTests {
    @Test func itAnswersAsADictionaryThroughRandomChanges() {
        var generator = SystemRandomNumberGenerator()
        let kinds: [HUSceneKind] = [.main, .dashboard, .instrumentCluster, .unspecified, .UNRECOGNIZED(9)]
        var map: SmallMap<HUSceneKind, Int> = [:]
        var dictionary: [HUSceneKind: Int] = [:]
        for step in 0..<5_000 {
            let kind = kinds.randomElement(using: &generator)!
            let value = Int.random(in: 0..<4, using: &generator)
            switch Int.random(in: 0..<6, using: &generator) {
            case 0: map[kind] = value; dictionary[kind] = value
            case 1: map[kind] = nil; dictionary[kind] = nil
            case 2: map[kind]? += value; dictionary[kind]? += value
            case 3: map[kind, default: 7] += value; dictionary[kind, default: 7] += value
            case 4:  // a mutation that removes through the optional
                map[kind] = map[kind].flatMap { $0 == 0 ? nil : $0 }
                dictionary[kind] = dictionary[kind].flatMap { $0 == 0 ? nil : $0 }
            default:
                #expect(map[kind, default: -1] == dictionary[kind, default: -1])
            }
            #expect(map.count == dictionary.count && map.isEmpty == dictionary.isEmpty, "step \(step)")
            for kind in kinds { #expect(map[kind] == dictionary[kind], "step \(step): \(kind)") }
            #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == dictionary)
            #expect(Set(map.keys) == Set(dictionary.keys) && map.values.sorted() == dictionary.values.sorted())
        }
    }

    @Test func itIteratesInTheOrderKeysWereFirstSetAndComparesWithoutOrder() {
        var first: SmallMap<HUScreen, String> = [:]
        first[.dashboard] = "d"
        first[.main] = "m"
        first[.dashboard] = "d2"
        #expect(first.keys == [.dashboard, .main])
        #expect(first.map(\.value) == ["d2", "m"])
        let second: SmallMap<HUScreen, String> = [.main: "m", .dashboard: "d2"]
        #expect(first == second)
        #expect(first != [.main: "m", .dashboard: "d"])
        #expect(first != [.main: "m"])
        #expect(first.description == "[dashboard: d2, main: m]")
        #expect(SmallMap<HUScreen, String>().description == "[:]")
    }

    /// A value changed through the subscript is changed where it is kept:
    /// the reference a copy-on-write value holds stays unique meanwhile (a get
    /// and a set would hold it twice and make the value copy its storage).
    @Test func aChangeThroughTheSubscriptDoesNotCopyTheValue() {
        final class Storage {}
        struct Value {
            var storage = Storage()
            mutating func isUnique() -> Bool { isKnownUniquelyReferenced(&storage) }
        }
        var map: SmallMap<HUScreen, Value> = [:]
        map[.dashboard] = Value()
        map[.main] = Value()
        let changedInPlace = map[.main]?.isUnique()
        let defaultInPlace = map[.main, default: Value()].isUnique()
        let defaultKept = map[.instrumentCluster, default: Value()].isUnique()
        #expect(changedInPlace == true && defaultInPlace && defaultKept)
        #expect(map.count == 3, "a default kept once modified")
        var copy = map
        let shared = copy[.main]?.isUnique()
        #expect(shared == false, "shared with the copy: the check can fail")
        copy[.main] = nil
        #expect(copy.count == 2 && map.count == 3)
    }
}

/// `SmallMap` with many keys (the phone's apps) behaves as the `Dictionary`
/// it replaced, with few keys (compared) and many (hashed), across the
/// change both ways.
@Suite struct SmallMapWithManyKeysTests {
    @Test func itAnswersAsADictionaryThroughRandomChangesAcrossTheIndex() {
        var generator = SystemRandomNumberGenerator()
        // Up to 24 keys: past `scanned` (8) and back under it as keys go.
        let keys = (0..<24).map { "com.example.app\($0)" }
        var map: SmallMap<String, Int> = [:]
        var dictionary: [String: Int] = [:]
        for step in 0..<8_000 {
            let key = keys.randomElement(using: &generator)!
            let value = Int.random(in: 0..<4, using: &generator)
            switch Int.random(in: 0..<5, using: &generator) {
            case 0, 1: map[key] = value; dictionary[key] = value
            case 2: map[key] = nil; dictionary[key] = nil
            case 3: map[key]? += value; dictionary[key]? += value
            default:  // a mutation that removes through the optional
                map[key] = map[key].flatMap { $0 == 0 ? nil : $0 }
                dictionary[key] = dictionary[key].flatMap { $0 == 0 ? nil : $0 }
            }
            #expect(map.count == dictionary.count && map.isEmpty == dictionary.isEmpty, "step \(step)")
            for key in keys { #expect(map[key] == dictionary[key], "step \(step): \(key)") }
            #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == dictionary)
            #expect(Set(map.keys) == Set(dictionary.keys) && map.values.sorted() == dictionary.values.sorted())
        }
    }

    @Test func itIteratesInTheOrderKeysWereFirstSetAndComparesWithoutOrder() {
        var first: SmallMap<String, Int> = [:]
        for number in (0..<12).reversed() { first["app\(number)"] = number }
        #expect(first.keys == (0..<12).reversed().map { "app\($0)" })
        var second: SmallMap<String, Int> = [:]
        for number in 0..<12 { second["app\(number)"] = number }
        #expect(first == second)
        second["app3"] = 4
        #expect(first != second)
        second["app3"] = nil
        #expect(first != second && second.count == 11 && second["app3"] == nil && second["app11"] == 11)
    }

    /// As with few keys: a change through the subscript is made where the value is kept.
    @Test func aChangeThroughTheSubscriptDoesNotCopyTheValue() {
        final class Storage {}
        struct Value {
            var storage = Storage()
            mutating func isUnique() -> Bool { isKnownUniquelyReferenced(&storage) }
        }
        for count in [2, 20] {
            var map: SmallMap<String, Value> = [:]
            for number in 0..<count { map["app\(number)"] = Value() }
            let changedInPlace = map["app1"]?.isUnique()
            #expect(changedInPlace == true, "\(count) keys")
            var copy = map
            let shared = copy["app1"]?.isUnique()
            #expect(shared == false, "shared with the copy: the check can fail")
        }
    }
}
