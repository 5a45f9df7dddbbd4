import Foundation
import HeadUnitWire
import NIOConcurrencyHelpers
import NIOCore

// Scenario steps for an app's audio streams (PROTOCOL.md section 24): open
// one, send it PCM through the car's credit, close it, or wait for the car
// to close it (focus lost, replaced...).
extension ScenarioPlayer {
    static func audioKey(_ appID: String, _ type: HUAudioStreamType) -> String {
        "\(appID)/\(type.rawValue)"
    }

    func openAudioStream(_ step: HUScenarioOpenAudioStream) async -> Outcome {
        guard let phone else { return .failed("phone disconnected") }
        let format = step.hasFormat ? step.format : HUAudioFormat.pcm(sampleRate: 48000, channels: 2)
        do {
            let stream = try await phone.openAudioStream(appID: step.appID, type: step.type, format: format)
            if step.expect != .ok {
                try? await stream.close()
                return .failed("expected \(ErrorCodeNames.name(step.expect)), the stream opened")
            }
            audioStreams[Self.audioKey(step.appID, step.type)] = stream
            return .ok("stream \(stream.streamID), window \(stream.window) frames")
        } catch let error as HeadUnitError where error.origin == .result {
            if step.expect == .ok || error.code != step.expect { return .failed("\(error)") }
            if !step.expectLimit.isEmpty && error.limit != step.expectLimit {
                return .failed("limit '\(error.limit)', expected '\(step.expectLimit)' (\(error))")
            }
            return .expectedError(step.expect)
        } catch {
            return failure(error)
        }
    }

    func sendAudio(_ step: HUScenarioSendAudio) async -> Outcome {
        guard let stream = audioStreams[Self.audioKey(step.appID, step.type)] else {
            return .failed("\(step.appID) has no open \(step.type) stream (open_audio_stream first)")
        }
        guard stream.format.codec == .pcmS16Le else { return .failed("send_audio sends PCM; the stream is \(stream.format.codec)") }
        guard (1...60_000).contains(step.durationMs) else { return .failed("duration_ms \(step.durationMs) is not 1 to 60000") }
        let rate = Int(stream.format.sampleRate)
        let channels = Int(stream.format.channels)
        let totalFrames = rate * Int(step.durationMs) / 1000
        let unitFrames = max(1, min(rate / 50, stream.window))  // 20 ms, within the window
        let toneHz = Double(step.toneHz)
        // Writes wait for credit and the car plays in real time: allow the audio's own length on top.
        let deadline = NIODeadline.now() + timeout + .milliseconds(Int64(step.durationMs))
        let outcome = NIOLockedValueBox<String?>(nil)
        let sending = Task {
            do {
                var sent = 0
                while sent < totalFrames {
                    let frames = min(unitFrames, totalFrames - sent)
                    var samples = [Int16](repeating: 0, count: frames * channels)
                    if toneHz > 0 {
                        for frame in 0..<frames {
                            let value = Int16(8000 * sin(2 * Double.pi * toneHz * Double(sent + frame) / Double(rate)))
                            for channel in 0..<channels { samples[frame * channels + channel] = value }
                        }
                    }
                    try await stream.write(samples: samples)
                    sent += frames
                }
                await stream.waitUntilPlayed()
                if let closed = await stream.closeReason {
                    outcome.withLockedValue { $0 = "the car closed the stream: \(closed.reason) \(closed.detail)" }
                } else {
                    outcome.withLockedValue { $0 = "" }
                }
            } catch {
                outcome.withLockedValue { $0 = "\(error)" }
            }
        }
        while NIODeadline.now() < deadline {
            if let result = outcome.withLockedValue({ $0 }) {
                return result.isEmpty ? .ok("\(totalFrames) frames sent and played") : .failed(result)
            }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        sending.cancel()  // a write waiting for credit ends unsent
        return .failed("not sent and played within \((timeout.nanoseconds / 1_000_000) + Int64(step.durationMs)) ms")
    }

    func closeAudioStream(_ step: HUScenarioCloseAudioStream) async -> Outcome {
        let key = Self.audioKey(step.appID, step.type)
        guard let stream = audioStreams[key] else { return .failed("\(step.appID) has no open \(step.type) stream") }
        audioStreams[key] = nil
        do {
            try await stream.close()
            return .ok("stream \(stream.streamID)")
        } catch {
            return failure(error)
        }
    }

    func expectAudioStreamClosed(_ step: HUScenarioExpectAudioStreamClosed) async -> Outcome {
        let key = Self.audioKey(step.appID, step.type)
        guard let stream = audioStreams[key] else { return .failed("\(step.appID) has no open \(step.type) stream") }
        let wait = step.timeoutMs == 0 ? timeout : .milliseconds(Int64(step.timeoutMs))
        let deadline = NIODeadline.now() + wait
        while NIODeadline.now() < deadline {
            if let closed = await stream.closeReason {
                audioStreams[key] = nil
                if closed.reason != step.reason {
                    return .failed("closed with \(closed.reason) (\(closed.detail)), expected \(step.reason)")
                }
                return .ok("stream \(stream.streamID)")
            }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return .failed("stream \(stream.streamID) still open after \(wait.nanoseconds / 1_000_000) ms")
    }
}
