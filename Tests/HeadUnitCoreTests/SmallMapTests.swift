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
