import HeadUnitClient
import HeadUnitWire
import NIOCore

/// Plays audio through the car in real time (ours; iOS plays through
/// `AVAudioEngine` / `AVAudioPlayerNode` and the system routes it to the car).
/// The session's mode decides the stream: main audio, or a voicePrompt
/// session's alternate audio (PROTOCOL.md section 24). Writes are paced by
/// the car's credit: each returns once the car has room for it, so a loop
/// that writes as fast as it can plays in real time, never more than the
/// car's window (120 ms) ahead, and nothing piles up on the phone.
///
///     let player = CPAudioPlayer(format: .pcm(sampleRate: 48_000, channels: 2))
///     try await player.play()                // opens the stream
///     while playing { try await player.write(nextTwentyMilliseconds()) }
///     await player.stop()                    // closes it at once
@MainActor
public final class CPAudioPlayer {
    /// What the app writes.
    public enum Format: Sendable, Equatable {
        /// Interleaved signed 16-bit samples (`AVAudioCommonFormat.pcmFormatInt16`, interleaved).
        case pcm(sampleRate: Int, channels: Int)
        /// One Opus packet (RFC 6716) per ``CPAudioPlayer/write(opusPacket:)``.
        case opus(sampleRate: Int, channels: Int)

        var wire: HUAudioFormat {
            switch self {
            case .pcm(let rate, let channels): return .pcm(sampleRate: UInt32(rate), channels: UInt32(channels))
            case .opus(let rate, let channels): return .opus(sampleRate: UInt32(rate), channels: UInt32(channels))
            }
        }
    }

    /// Why playback ended.
    public enum StopReason: Sendable, Equatable {
        /// ``stop()`` or ``finish()``.
        case stopped
        /// The app lost the focus its stream needs: another source took the
        /// main audio, the prompt ended or timed out.
        case focusLost(String)
        /// The app opened another stream of the same kind.
        case replaced
        /// The app's scenes ended or the connection closed.
        case appClosed
        /// Anything else the car said (`FLOW_CONTROL`, shutting down).
        case other(String)
    }

    public let format: Format
    public let session: AVAudioSession
    /// Called (on the main actor) when the car ends playback on its own.
    public var stopHandler: (@MainActor @Sendable (StopReason) -> Void)?
    private var stream: AudioStream?
    private var watcher: Task<Void, Never>?

    /// A player for the session (by default `AVAudioSession.sharedInstance()`).
    public init(format: Format, session: AVAudioSession = .sharedInstance()) {
        self.format = format
        self.session = session
    }

    /// True between ``play()`` and the end of playback.
    public var isPlaying: Bool { stream != nil }

    /// Opens the stream, after the app's earlier requests (its now-playing
    /// update, the session's `start_prompt`). Throws the car's refusal as a
    /// ``CPError``: `NO_AUDIO_FOCUS` (175) when the app's now-playing does
    /// not play (main audio) or no prompt is started (voicePrompt),
    /// `UNSUPPORTED_AUDIO_FORMAT` (176).
    public func play() async throws {
        guard stream == nil else { return }
        guard let application = session.application, let phone = application.phone else {
            throw CPError.usage(.notConnected, "the player's audio session belongs to no connected app")
        }
        let appID = application.bundleIdentifier
        let type = session.streamType
        let wire = format.wire
        do {
            if type == .alternate {
                guard session.isActive, let activation = session.activation else {
                    throw CPError.usage(.invalidArgument, "activate the voicePrompt session before playing a prompt")
                }
                try await activation.value
            }
            let opened = try await application.queue.run { try await phone.openAudioStream(appID: appID, type: type, format: wire) }
            stream = opened
            watcher = Task { [weak self] in
                let closed = await opened.waitUntilClosed()
                guard let self, self.stream === opened else { return }
                self.stream = nil
                let reason = Self.reason(closed)
                self.stopHandler?(reason)
            }
        } catch let error as CPError {
            throw error
        } catch {
            throw CPError(error)
        }
    }

    /// Plays interleaved 16-bit samples (whole frames), in units of at most
    /// 20 ms; returns when the car took the last unit (it plays it within
    /// its window). Throws when playback ended (``stopHandler`` says why).
    public func write(_ samples: [Int16]) async throws {
        guard case .pcm(let rate, let channels) = format else {
            throw CPError.usage(.invalidArgument, "write(_:) takes PCM; this player plays Opus packets")
        }
        let stream = try current()
        let unitSamples = max(1, rate / 50) * channels
        var at = 0
        while at < samples.count {
            let end = min(samples.count, at + unitSamples)
            var buffer = ByteBufferAllocator().buffer(capacity: (end - at) * 2)
            for index in at..<end { buffer.writeInteger(samples[index], endianness: .little) }
            do { try await stream.write(buffer) } catch { throw CPError(error) }
            at = end
        }
    }

    /// Plays one Opus packet; returns when the car took it.
    public func write(opusPacket: [UInt8]) async throws {
        guard case .opus = format else {
            throw CPError.usage(.invalidArgument, "write(opusPacket:) takes Opus; this player plays PCM")
        }
        let stream = try current()
        do { try await stream.write(ByteBuffer(bytes: opusPacket)) } catch { throw CPError(error) }
    }

    /// Stops at once: the car drops what it holds of the stream.
    public func stop() async {
        guard let stream else { return }
        self.stream = nil
        watcher?.cancel()
        try? await stream.close()
    }

    /// Ends after what was written has played: waits until the car granted
    /// back its whole window (it does so once nothing of the stream is left,
    /// PROTOCOL.md 24.5), then stops.
    public func finish() async {
        guard let stream else { return }
        await stream.waitUntilPlayed()
        await stop()
    }

    private func current() throws -> AudioStream {
        guard let stream else { throw CPError.usage(.notConnected, "the player is not playing: call play() first") }
        return stream
    }

    static func reason(_ closed: HUAudioStreamClosed) -> StopReason {
        switch closed.reason {
        case .unspecified: return .stopped
        case .focusLost: return .focusLost(closed.detail)
        case .replaced: return .replaced
        case .appClosed: return .appClosed
        default: return .other("\(closed.reason) \(closed.detail)")
        }
    }
}
