import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// HeadUnitClient's AudioStream against the daemon: a write waits for the
/// car's credit, and a waiting write can be cancelled without harm.
// A time limit: a write or waitUntilPlayed the car never answers (a stream
// tail the mixer held, found in a CI run) fails this test instead of hanging the run.
@Suite("HeadUnitClient audio streams", .serialized, .timeLimit(.minutes(2)))
struct AudioStreamClientTests {
    /// Spoken audio is not read while a prompt lasts (PROTOCOL.md 24.3), so
    /// the window's worth of writes goes out and the next one waits; that
    /// waiting write is cancelled (CancellationError, nothing sent), and the
    /// stream goes on once the prompt ends: its credit comes back.
    @Test func aWriteWaitsForCreditAndCanBeCancelled() async throws {
        let daemon = try await onOwnThread(gated: false) { () throws -> TestDaemon in
            let directory = try TestDaemon.makeScratchDirectory()
            return try TestDaemon.launch(configJSON: "\"audio\": {\"output\": \"wav:\(directory)/out.wav\"}")
        }
        defer { _ = try? daemon.terminate() }
        let hmi = try await HMISession.connect(to: .unix(path: daemon.unixSocketPath))
        let phone = try await PhoneSession.connect(to: .unix(path: daemon.unixSocketPath), deviceName: "phone")
        defer { Task { await phone.close() } }
        let podcast = "com.example.podcast"
        let maps = "com.example.maps"
        try await phone.announce([
            HUAppInfo.with { $0.appID = podcast; $0.displayName = "Podcasts"; $0.entitlements = ["com.apple.developer.carplay-audio"] },
            HUAppInfo.with { $0.appID = maps; $0.displayName = "Maps"; $0.entitlements = ["com.apple.developer.carplay-maps"] },
        ])
        try await hmi.launch(podcast)
        try await phone.waitForScene(appID: podcast).updateNowPlaying(HUNowPlayingTemplate.with { $0.title = "Episode"; $0.playbackRate = 1; $0.spokenAudio = true })
        try await hmi.launch(maps)
        _ = try await phone.waitForScene(appID: maps)
        let stream = try await phone.openAudioStream(appID: podcast, type: .main, format: .pcm(sampleRate: 48_000, channels: 1))
        #expect(stream.window == 5760)
        // A unit longer than the window is refused before anything is sent.
        await #expect(throws: HeadUnitError.self) { try await stream.write(samples: [Int16](repeating: 0, count: 5761)) }
        try await phone.connection.request(.navigationRequest(HUNavigationRequest.with {
            $0.appID = maps; $0.op = .startPrompt(HUAudioPrompt.with { $0.durationMs = 5000 })
        }))
        let unit = [Int16](repeating: 1000, count: 960)
        for _ in 0..<6 { try await stream.write(samples: unit) }  // the whole window: the car holds it, paused
        let waiting = Task { try await stream.write(samples: unit) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        // The prompt ends: the podcast plays again, credit comes back, writes go on.
        try await phone.connection.request(.navigationRequest(HUNavigationRequest.with { $0.appID = maps; $0.op = .endPrompt(HUEndPrompt()) }))
        for _ in 0..<12 { try await stream.write(samples: unit) }
        await stream.waitUntilPlayed()
        try await stream.close()
        #expect(await stream.closeReason != nil)
        await #expect(throws: HeadUnitError.self) { try await stream.write(samples: unit) }
    }
}
