import Testing
@testable import HeadUnitCore

/// The box the Car keeps its larger sub-states in, and the comparison the
/// metadata feed's inputs rely on (equal by shared storage, else by value).
@Suite struct CopyOnWriteTests {
    @Test func aCopySharesStorageUntilItIsChanged() {
        var original = CopyOnWrite(wrappedValue: [1, 2, 3])
        let kept = original
        #expect(kept == original)
        original.wrappedValue.append(4)
        #expect(kept.wrappedValue == [1, 2, 3], "the kept copy did not change")
        #expect(original.wrappedValue == [1, 2, 3, 4])
        #expect(kept != original)
    }

    @Test func separateStorageIsComparedByValue() {
        var changed = CopyOnWrite(wrappedValue: "a")
        let kept = changed
        changed.wrappedValue = "a"  // written, so stored anew: same value, other storage
        #expect(kept == changed)
        #expect(CopyOnWrite(wrappedValue: "x") == CopyOnWrite(wrappedValue: "x"))
        #expect(CopyOnWrite(wrappedValue: "x") != CopyOnWrite(wrappedValue: "y"))
    }
}
