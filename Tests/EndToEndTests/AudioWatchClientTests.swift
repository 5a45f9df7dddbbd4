import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// HeadUnitClient's `AudioWatch` (the HMI side of PROTOCOL.md section 24.7)
/// against the real daemon: 20 ms chunks in play order, and a consumer that
/// stops reading finds the newest few kept, the older ones dropped, never a queue.
@Suite("AudioWatch: the HMI SDK's way to hear the car", .ownThread)
struct AudioWatchClientTests {
    @Test func chunksInOrderAndASlowConsumerGetsTheNewest() async throws {
        let daemon = try TestDaemon.launch(configJSON: "\"audio\": {\"output\": \"none\"}")
        defer { _ = try? daemon.terminate() }
        let hmi = try await HMISession.connect(to: .unix(path: daemon.unixSocketPath), name: "audio watch test")
        defer { Task { await hmi.close() } }

        let watch = try await hmi.watchAudio(capacity: 4)
        #expect(watch.info.streamID == 1 && watch.info.type == .output && watch.info.format.sampleRate == 48_000 && watch.info.format.channels == 2)
        var chunks = watch.makeAsyncIterator()
        // Nothing plays: the car renders silence for its watcher, 20 ms a chunk, stamped in order.
        var stamps: [UInt64] = []
        for _ in 0..<10 {
            guard let chunk = await chunks.next() else { Issue.record("the watch ended"); return }
            #expect(chunk.frames == 960 && chunk.pcm.readableBytesView.allSatisfy { $0 == 0 })
            stamps.append(chunk.timestampMicroseconds)
        }
        // Each 20 ms after the last; under load (the whole suite on two
        // cores) the test may read late enough that a chunk is dropped, which
        // is the behaviour under test below: a step of 40 ms, never a step back.
        let steps = zip(stamps.dropFirst(), stamps).map { Int64($0) - Int64($1) }
        #expect(steps.allSatisfy { $0 >= 19_999 && ($0 + 1) % 20_000 <= 2 }, "\(stamps)")
        #expect(steps.filter { abs($0 - 20_000) <= 1 }.count >= 7, "\(stamps)")

        // Not read for 500 ms (25 chunks): 4 kept, the rest dropped; what comes next is recent.
        try await Task.sleep(for: .milliseconds(500))
        let counts = await watch.counts()
        #expect(counts.dropped >= 10, "\(counts)")
        guard let next = await chunks.next() else { Issue.record("the watch ended"); return }
        let now = AudioWatchClientTests.monotonicMicroseconds()
        #expect(now - next.receivedMicroseconds < 300_000, "the oldest kept chunk arrived \(now - next.receivedMicroseconds) us ago")
        #expect(next.timestampMicroseconds - stamps.last! > 300_000, "older chunks were dropped, not queued")

        // stop() ends the sequence.
        await watch.stop()
        var ended = false
        for _ in 0..<10 where !ended { ended = await chunks.next() == nil }
        #expect(ended)
    }

    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}
