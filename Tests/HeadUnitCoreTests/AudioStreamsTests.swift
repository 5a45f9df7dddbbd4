import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// PROTOCOL.md section 24: who may stream what, credit, and the microphone, without a socket.
@Suite struct AudioStreamsTests {
    /// The Car asks `MicrophoneRule.stopReason`; here a template dismissed.
    static func dismissed(_: MicrophoneUse) -> HUAudioStreamCloseReason { .voiceControlDismissed }

    static let pcm = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }

    static func frame(timestamp: UInt64, frames: Int, channels: Int = 2) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(timestamp, endianness: .big)
        buffer.writeRepeatingByte(0, count: frames * 2 * channels)
        return buffer
    }

    @Test func aStreamsTypeMustMatchTheAppsFocus() {
        var focus = AudioFocus()
        #expect(AudioStreams.focusProblem(.main, appID: "music", focus: focus) != nil)
        focus.nowPlaying(appID: "music", playing: true, spoken: false)
        #expect(AudioStreams.focusProblem(.main, appID: "music", focus: focus) == nil)
        #expect(AudioStreams.focusProblem(.main, appID: "other", focus: focus) != nil)
        #expect(AudioStreams.focusProblem(.alternate, appID: "maps", focus: focus) != nil)
        _ = focus.startPrompt(appID: "maps", durationMilliseconds: 1000)
        #expect(AudioStreams.focusProblem(.alternate, appID: "maps", focus: focus) == nil)
        #expect(AudioStreams.focusProblem(.voice, appID: "phone", focus: focus) != nil)
        focus.vehicleChanged(carSource: "", callActive: true, voiceSessionActive: false)
        #expect(AudioStreams.focusProblem(.voice, appID: "phone", focus: focus) == nil)
        #expect(AudioStreams.focusProblem(.microphone, appID: "phone", focus: focus) != nil)
    }

    @Test func creditIsAWindowOfTimeAndMediaBeyondItClosesTheStream() throws {
        var streams = AudioStreams()
        var outputs: [AudioStreams.Output] = []
        let info = try streams.open(appID: "music", type: .main, format: Self.pcm, outputs: &outputs).get()
        #expect(info.window == 5760 && info.initialCredit == 5760 && info.jitterMs == 40)
        outputs = []
        streams.media(stream: info.streamID, Self.frame(timestamp: 0, frames: 960), outputs: &outputs)
        #expect(outputs.count == 1)
        if case .engine(.frame(_, _, let frames, let payload)) = outputs[0] { #expect(frames == 960 && payload.readableBytes == 3840) }
        streams.media(stream: info.streamID, Self.frame(timestamp: 20_000, frames: 960), outputs: &outputs)
        // Played: credit comes back once a quarter window is played, or nothing is left in the car.
        outputs = []
        streams.played(stream: info.streamID, frames: 960, outputs: &outputs)
        #expect(outputs.isEmpty)
        streams.played(stream: info.streamID, frames: 960, outputs: &outputs)
        #expect(outputs == [.send(.audioCredit(HUAudioCredit.with { $0.streamID = info.streamID; $0.frames = 1920 }))])
        // Beyond the credit: FLOW_CONTROL, the stream closes, the app is told first.
        outputs = []
        streams.media(stream: info.streamID, Self.frame(timestamp: 40_000, frames: 5761), outputs: &outputs)
        #expect(outputs.count == 3)
        if case .send(.audioStreamClosed(let closed)) = outputs[1] { #expect(closed.reason == .flowControl) } else { Issue.record("\(outputs)") }
        if case .refuse(let code, _) = outputs[2] { #expect(code == .flowControl) } else { Issue.record("\(outputs)") }
        // In flight after the close: dropped without a word.
        outputs = []
        streams.media(stream: info.streamID, Self.frame(timestamp: 60_000, frames: 960), outputs: &outputs)
        #expect(outputs.isEmpty)
    }

    @Test func badMediaFramesAreRefusedAndTheStreamGoesOn() throws {
        var streams = AudioStreams()
        var outputs: [AudioStreams.Output] = []
        let info = try streams.open(appID: "music", type: .main, format: Self.pcm, outputs: &outputs).get()
        for payload in [ByteBuffer(bytes: [1, 2]), ByteBuffer(bytes: [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3])] {
            outputs = []
            streams.media(stream: info.streamID, payload, outputs: &outputs)
            if case .refuse(let code, _) = outputs.first { #expect(code == .badMediaFrame) } else { Issue.record("\(outputs)") }
        }
        outputs = []
        streams.media(stream: info.streamID, Self.frame(timestamp: 0, frames: 10), outputs: &outputs)
        #expect(outputs.count == 1)
    }

    @Test func focusLostClosesTheStreamAndAPromptsTailPlaysOut() throws {
        var focus = AudioFocus()
        focus.nowPlaying(appID: "music", playing: true, spoken: false)
        _ = focus.startPrompt(appID: "maps", durationMilliseconds: 1000)
        var streams = AudioStreams()
        var outputs: [AudioStreams.Output] = []
        let main = try streams.open(appID: "music", type: .main, format: Self.pcm, outputs: &outputs).get()
        let prompt = try streams.open(appID: "maps", type: .alternate, format: Self.pcm, outputs: &outputs).get()
        outputs = []
        streams.settle(focus: focus, appAlive: { _ in true }, microphoneWanted: nil, microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        #expect(outputs == [.engine(.mix(AudioStreams.Mix(duckMain: true)))])
        focus.endPrompt()
        focus.vehicleChanged(carSource: "FM 101.1", callActive: false, voiceSessionActive: false)
        outputs = []
        streams.settle(focus: focus, appAlive: { _ in true }, microphoneWanted: nil, microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        #expect(outputs.contains(.engine(.close(stream: main.streamID, drain: false))))
        #expect(outputs.contains(.engine(.close(stream: prompt.streamID, drain: true))))
        #expect(outputs.contains(.engine(.mix(AudioStreams.Mix()))))
        #expect(streams.openCount == 0)
    }

    @Test func spokenAudioIsPausedNotDuckedAndACallTakesTheOutput() {
        var focus = AudioFocus()
        focus.nowPlaying(appID: "podcast", playing: true, spoken: true)
        _ = focus.startPrompt(appID: "maps", durationMilliseconds: 1000)
        var streams = AudioStreams()
        var outputs: [AudioStreams.Output] = []
        streams.settle(focus: focus, appAlive: { _ in true }, microphoneWanted: nil, microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        #expect(streams.mix == AudioStreams.Mix(duckMain: false, pauseMain: true))
        focus.endPrompt()
        focus.vehicleChanged(carSource: "", callActive: true, voiceSessionActive: false)
        streams.settle(focus: focus, appAlive: { _ in true }, microphoneWanted: nil, microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        #expect(streams.mix == AudioStreams.Mix(duckMain: false, pauseMain: true, call: true))
    }

    /// The car's shortcut after most messages (`Car.settleAudio`): with no
    /// stream or microphone open and none wanted, the mix alone is settled,
    /// and that is exactly what the whole `settle` does in every focus.
    @Test func anIdleSettleIsTheMixAlone() {
        var focuses: [AudioFocus] = []
        for spoken in [false, true] {
            for prompt in [false, true] {
                for call in [false, true] {
                    var focus = AudioFocus()
                    focus.nowPlaying(appID: "podcast", playing: true, spoken: spoken)
                    if prompt { _ = focus.startPrompt(appID: "maps", durationMilliseconds: 1000) }
                    if call { focus.vehicleChanged(carSource: "", callActive: true, voiceSessionActive: false) }
                    focuses.append(focus)
                }
            }
        }
        var whole = AudioStreams()
        var mixOnly = AudioStreams()
        for focus in focuses + focuses.reversed() {
            #expect(whole.isIdle && mixOnly.isIdle)
            var wholeOutputs: [AudioStreams.Output] = []
            var mixOutputs: [AudioStreams.Output] = []
            whole.settle(focus: focus, appAlive: { _ in false }, microphoneWanted: nil, microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &wholeOutputs)
            mixOnly.settleMix(focus: focus, outputs: &mixOutputs)
            #expect(wholeOutputs == mixOutputs)
            #expect(whole.mix == mixOnly.mix)
        }
        // Not idle once a microphone is open: the shortcut does not apply.
        var outputs: [AudioStreams.Output] = []
        whole.settle(focus: AudioFocus(), appAlive: { _ in true }, microphoneWanted: MicrophoneUse(appID: "maps", purpose: .voiceControl), microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        #expect(!whole.isIdle)
    }

    @Test func theMicrophoneStartsAndStopsAndNeverSendsBeyondItsCredit() {
        var streams = AudioStreams()
        var outputs: [AudioStreams.Output] = []
        streams.settle(focus: AudioFocus(), appAlive: { _ in true }, microphoneWanted: MicrophoneUse(appID: "maps", purpose: .voiceControl), microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        guard case .send(.microphoneStarted(let started)) = outputs.first else { Issue.record("\(outputs)"); return }
        #expect(started.stream.window == 1920 && started.stream.format == AudioStreams.microphoneFormat)
        let id = started.stream.streamID
        let chunk = ByteBuffer(repeating: 0, count: 640)
        outputs = []
        for index in 0..<7 {
            streams.captured(stream: id, timestamp: UInt64(index) * 20_000, pcm: chunk, allocator: ByteBufferAllocator(), outputs: &outputs)
        }
        #expect(outputs.count == 6 && streams.microphoneDropped == 1, "six 20 ms chunks fill the 120 ms window; the seventh is dropped")
        #expect(streams.credit(HUAudioCredit.with { $0.streamID = id; $0.frames = 1921 })?.limit == "audio.credit_frames")
        #expect(streams.credit(HUAudioCredit.with { $0.streamID = id; $0.frames = 320 }) == nil)
        #expect(streams.credit(HUAudioCredit.with { $0.streamID = 999; $0.frames = 320 })?.code == .unknownSession)
        outputs = []
        streams.settle(focus: AudioFocus(), appAlive: { _ in true }, microphoneWanted: nil, microphoneStopReason: Self.dismissed, phoneReachable: true, outputs: &outputs)
        #expect(outputs.contains(.engine(.microphone(stream: nil))))
        #expect(outputs.contains { output in
            if case .send(.audioStreamClosed(let closed)) = output { return closed.streamID == id && closed.reason == .voiceControlDismissed }
            return false
        })
    }

    /// RFC 6716 section 3.1: configuration and frame count from the TOC byte.
    @Test func opusPacketLengthsFromTheTOC() {
        func samples(_ bytes: [UInt8]) -> Int? { OpusPacket.samplesAt48k(ByteBuffer(bytes: bytes).readableBytesView) }
        #expect(samples([31 << 3, 0]) == 960)  // CELT 20 ms, one frame
        #expect(samples([16 << 3]) == 120)  // CELT 2.5 ms
        #expect(samples([3 << 3, 0]) == 2880)  // SILK 60 ms
        #expect(samples([(31 << 3) | 1, 0, 0]) == 1920)  // two equal frames
        #expect(samples([(31 << 3) | 1, 0]) == nil)  // two equal frames cannot split an odd length
        #expect(samples([(31 << 3) | 3, 6]) == 5760)  // six 20 ms frames: 120 ms
        #expect(samples([(31 << 3) | 3, 7]) == nil)  // over 120 ms
        #expect(samples([(31 << 3) | 3]) == nil)  // code 3 without its count
        #expect(samples([]) == nil)
    }
}
