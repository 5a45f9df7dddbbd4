import Testing

@testable import HeadUnitServer

/// Refused connections, evictions and failed accepts are logged once a
/// second with how many each line stands for (section 10.1): time passed in.
@Suite struct FloodLogTests {
    @Test func aFloodIsOneLineASecondWithItsCount() {
        var log = FloodLog()
        #expect(log.note(now: 0) == 1)
        #expect(log.note(now: 1) == nil)
        #expect(log.note(now: 500) == nil)
        #expect(log.note(now: 999) == nil)
        // A second after the last line: it stands for the four since.
        #expect(log.note(now: 1_000) == 4)
        #expect(log.note(now: 1_999) == nil)
        #expect(log.note(now: 5_000) == 2)
    }
}
