import HeadUnitCore
import HeadUnitWire
import Testing

/// `AudioTap`: who hears the car's output, the cap, and when the engine is told (PROTOCOL.md 24.7).
@Suite struct AudioTapTests {
    @Test func theFirstWatcherTurnsTheTapOnAndTheLastOneOff() throws {
        var tap = AudioTap(maxWatchers: 2)
        #expect(try tap.watch(1, stop: false).get() == .tap(true))
        #expect(try tap.watch(1, stop: false).get() == nil, "watching twice is watching once")
        #expect(try tap.watch(2, stop: false).get() == nil)
        #expect(tap.watchers == [1, 2])
        #expect(try tap.watch(1, stop: true).get() == nil)
        #expect(try tap.watch(3, stop: true).get() == nil, "a stop of a peer not watching is fine")
        #expect(tap.forget(2) == .tap(false))
        #expect(tap.forget(2) == nil)
        #expect(tap.watchers.isEmpty)
    }

    @Test func theCapRefusesWithItsLimit() {
        var tap = AudioTap(maxWatchers: 1)
        _ = tap.watch(1, stop: false)
        guard case .failure(let violation) = tap.watch(2, stop: false) else {
            Issue.record("a second watcher over a cap of 1 was accepted")
            return
        }
        #expect(violation.code == .tooManyViewers && violation.limit == "audio.output_watchers" && violation.limitValue == 1)
        #expect(tap.watchers == [1])
        #expect(AudioTap.info.streamID == AudioTap.channel && AudioTap.info.type == .output && AudioTap.info.format.sampleRate == 48_000)
    }
}
