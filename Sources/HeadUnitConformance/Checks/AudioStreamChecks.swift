import HeadUnitWire

/// PROTOCOL.md §24: audio streams through the car's mixer: each type's focus
/// rule, credit granted and returned as the car plays, MEDIA frames and their
/// refusals, why a stream ends, and the car's output heard by an HMI.
enum AudioStreamChecks {
    static let musicID = "com.example.conformance.audio"
    static let mapsID = "com.example.conformance.prompts"
    /// 20 ms of 48 kHz audio: a packet.
    static let packetFrames = 960
    /// Watchers of the car's output at once (§24.7: 8, fixed).
    static let maxOutputWatchers = 8

    static func format(_ codec: HUAudioCodec = .pcmS16Le, rate: UInt32 = 48_000, channels: UInt32 = 2) -> HUAudioFormat {
        var format = HUAudioFormat()
        format.codec = codec
        format.sampleRate = rate
        format.channels = channels
        return format
    }

    static func open(_ phone: WireConnection, _ appID: String, _ type: HUAudioStreamType, _ format: HUAudioFormat = format()) throws -> HUResult {
        var open = HUOpenAudioStream()
        open.appID = appID
        open.type = type
        open.format = format
        return try phone.request(.openAudioStream(open), "OpenAudioStream{\(appID), \(type)}")
    }

    /// A stream that must open: its Result's `audio_stream`, checked against §24.2.
    static func opened(_ phone: WireConnection, _ appID: String, _ type: HUAudioStreamType, _ format: HUAudioFormat = format()) throws -> HUAudioStreamInfo {
        let result = try open(phone, appID, type, format)
        try requireCode(result, .ok, "OpenAudioStream \(type)")
        let info = result.audioStream
        try require(info.streamID != 0 && info.type == type && info.format == format, "audio_stream{a stream id, \(type), the format asked}", got: "\(info)")
        // The window is audio_window_ms (120 to 2000) of the stream's rate; the whole of it is granted at once.
        let rate = Int(format.sampleRate)
        try require(Int(info.window) >= rate * 120 / 1000 && Int(info.window) <= rate * 2, "a window of 120 to 2000 ms of \(rate) Hz", got: "window \(info.window)")
        try require(info.initialCredit == info.window, "initial_credit the whole window (\(info.window))", got: "initial_credit \(info.initialCredit)")
        return info
    }

    /// MEDIA: the u64 BE timestamp, then `frames` of silent 16-bit PCM at `channels`.
    static func media(timestamp: UInt64, frames: Int, channels: Int = 2) -> [UInt8] {
        timestampBytes(timestamp) + [UInt8](repeating: 0, count: frames * channels * 2)
    }

    static func timestampBytes(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    /// The refusal of a one-way frame: a Result with request_id 0 (§24.4).
    static func refusal(_ connection: WireConnection, _ what: String) throws -> HUResult {
        try connection.take("Result (request 0) refusing \(what)") { envelope -> HUResult? in
            if case .result(let result) = envelope.body, envelope.requestID == 0 { return result }
            return nil
        }
    }

    static func closed(_ phone: WireConnection, _ stream: UInt32, _ what: String) throws -> HUAudioStreamClosed {
        try phone.take("AudioStreamClosed for stream \(stream) after \(what)") { envelope -> HUAudioStreamClosed? in
            if case .audioStreamClosed(let closed) = envelope.body, closed.streamID == stream { return closed }
            return nil
        }
    }

    /// AudioCredit for `stream` until `frames` came back (never more, §24.5).
    static func creditBack(_ phone: WireConnection, _ stream: UInt32, _ frames: Int, timeoutMs: Int) throws {
        var back = 0
        while back < frames {
            let credit = try phone.take("AudioCredit for stream \(stream) (\(back) of \(frames) frames back so far)", timeoutMs: timeoutMs) { envelope -> HUAudioCredit? in
                if case .audioCredit(let credit) = envelope.body, credit.streamID == stream { return credit }
                return nil
            }
            back += Int(credit.frames)
        }
        try require(back == frames, "\(frames) frames of credit back for \(frames) played", got: "\(back)")
    }

    static func play(_ app: LaunchedApp) throws {
        var playing = HUNowPlayingTemplate()
        playing.title = "Conformance Song"
        playing.playbackRate = 1
        try app.ok(.updateNowPlaying(playing), "updateNowPlaying (playing)")
    }

    static func vehicle(_ hmi: WireConnection, callActive: Bool) throws -> HUResult {
        var state = HUSetVehicleState()
        state.state.callActive = callActive
        return try hmi.request(.setVehicleState(state), "SetVehicleState{call_active \(callActive)}")
    }

    static func navigation(_ app: LaunchedApp, _ op: HUNavigationRequest.OneOf_Op, _ what: String) throws -> HUResult {
        var request = HUNavigationRequest()
        request.appID = app.appID
        request.op = op
        return try app.phone.request(.navigationRequest(request), what)
    }

    static func watch(_ hmi: WireConnection, stop: Bool = false) throws -> HUResult {
        var watch = HUWatchAudio()
        watch.stop = stop
        return try hmi.request(.watchAudio(watch), "WatchAudio{stop \(stop)}")
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "audio.open-refusals", .p("24.2"),
            "OpenAudioStream is refused in the order of §24.2: an app never announced UNKNOWN_APP, the MICROPHONE type INVALID_ARGUMENT, PCM at 11025 Hz, Opus at 44100 Hz, 3 channels or no codec UNSUPPORTED_AUDIO_FORMAT, MAIN of an app that does not play, ALTERNATE without a prompt and VOICE without a call NO_AUDIO_FOCUS; from an HMI NOT_FOR_ROLE",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio], appID: musicID)
            try requireCode(try open(app.phone, "com.example.conformance.never-announced", .main), .unknownApp, "an app never announced")
            try requireCode(try open(app.phone, app.appID, .microphone), .invalidArgument, "the MICROPHONE type (the phone never opens it)")
            try requireCode(try open(app.phone, app.appID, .main, format(rate: 11_025)), .unsupportedAudioFormat, "PCM at 11025 Hz")
            try requireCode(try open(app.phone, app.appID, .main, format(.opus, rate: 44_100)), .unsupportedAudioFormat, "Opus at 44100 Hz")
            try requireCode(try open(app.phone, app.appID, .main, format(channels: 3)), .unsupportedAudioFormat, "3 channels")
            try requireCode(try open(app.phone, app.appID, .main, format(.unspecified)), .unsupportedAudioFormat, "no codec")
            // The format is checked before the focus: an unsupported format without focus is still UNSUPPORTED_AUDIO_FORMAT (above).
            try requireCode(try open(app.phone, app.appID, .main), .noAudioFocus, "MAIN of an app whose now-playing never played")
            try requireCode(try open(app.phone, app.appID, .alternate), .noAudioFocus, "ALTERNATE without a prompt")
            try requireCode(try open(app.phone, app.appID, .voice), .noAudioFocus, "VOICE without a call")
            var fromHMI = HUOpenAudioStream()
            fromHMI.appID = app.appID
            fromHMI.type = .main
            fromHMI.format = format()
            try requireCode(try app.hmi.request(.openAudioStream(fromHMI), "OpenAudioStream from the HMI"), .notForRole, "OpenAudioStream from an HMI")
        },
        ConformanceCheck(
            "audio.focus-per-type", .p("24.2"),
            "the focus each type needs besides MAIN (audio.credit opens MAIN once the now-playing plays): ALTERNATE once a navigation app started a prompt (end_prompt then closes the stream FOCUS_LOST, §24.3), VOICE during the car's call (call_active; the call's end closes it FOCUS_LOST)",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.maps], appID: mapsID)
            ctx.onCleanup { _ = try? vehicle(app.hmi, callActive: false) }
            try requireCode(try open(app.phone, app.appID, .alternate, format(.opus, rate: 48_000, channels: 1)), .noAudioFocus, "ALTERNATE before the prompt")
            var prompt = HUAudioPrompt()
            prompt.durationMs = 5000
            try requireCode(try navigation(app, .startPrompt(prompt), "NavigationRequest start_prompt"), .ok, "start_prompt")
            let alternate = try opened(app.phone, app.appID, .alternate, format(.opus, rate: 48_000, channels: 1))
            try requireCode(try navigation(app, .endPrompt(HUEndPrompt()), "NavigationRequest end_prompt"), .ok, "end_prompt")
            let promptEnded = try closed(app.phone, alternate.streamID, "the prompt ended")
            try require(promptEnded.reason == .focusLost && promptEnded.type == .alternate && promptEnded.appID == app.appID,
                        "AudioStreamClosed{\(app.appID), ALTERNATE, FOCUS_LOST}", got: "\(promptEnded)")

            try requireCode(try vehicle(app.hmi, callActive: true), .ok, "SetVehicleState{call_active}")
            let voice = try opened(app.phone, app.appID, .voice, format(rate: 16_000, channels: 1))
            try requireCode(try vehicle(app.hmi, callActive: false), .ok, "SetVehicleState{call_active false}")
            let callEnded = try closed(app.phone, voice.streamID, "the car's call ended")
            try require(callEnded.reason == .focusLost && callEnded.type == .voice, "AudioStreamClosed{VOICE, FOCUS_LOST}", got: "\(callEnded)")
        },
        ConformanceCheck(
            "audio.credit", .p("24.5"),
            "MEDIA within the credit is accepted without an answer and its credit comes back as AudioCredit{stream_id, frames} as it plays, all of it once nothing of the stream is left in the car; CloseAudioStream is answered OK without an AudioStreamClosed, a second time OK, and a stream never opened UNKNOWN_SESSION (§16.20)",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio], appID: musicID)
            try play(app)
            let stream = try opened(app.phone, app.appID, .main)
            let packets = 3
            try require(Int(stream.initialCredit) >= packets * packetFrames, "a window of at least 60 ms", got: "\(stream.initialCredit) frames")
            for index in 0..<packets {
                try app.phone.sendFrame(.media, channel: stream.streamID, payload: media(timestamp: UInt64(index * 20_000), frames: packetFrames))
            }
            // Played by the car's clock: 60 ms of audio after a jitter buffer, well within the time-out.
            try creditBack(app.phone, stream.streamID, packets * packetFrames, timeoutMs: ctx.timeoutMs + 2000)
            if let refused = app.phone.backlog.first(where: { if case .result = $0.body { return $0.requestID == 0 } else { return false } }) {
                throw CheckFailure(expected: "MEDIA within the credit accepted without an answer", got: describe(refused))
            }
            var close = HUCloseAudioStream()
            close.streamID = stream.streamID
            try requireCode(try app.phone.request(.closeAudioStream(close), "CloseAudioStream"), .ok, "CloseAudioStream")
            try requireCode(try app.phone.request(.closeAudioStream(close), "CloseAudioStream again"), .ok, "CloseAudioStream of a stream just closed")
            if let notice = app.phone.backlog.first(where: { if case .audioStreamClosed(let closed) = $0.body { return closed.streamID == stream.streamID } else { return false } }) {
                throw CheckFailure(expected: "no AudioStreamClosed for a stream the app closed", got: describe(notice))
            }
            close.streamID = stream.streamID &+ 100_000
            try requireCode(try app.phone.request(.closeAudioStream(close), "CloseAudioStream of a stream never opened"), .unknownSession, "a stream never opened")
        },
        ConformanceCheck(
            "audio.media-refusals", .p("24.4"),
            "MEDIA refused with request_id 0: without a timestamp or with half a PCM frame BAD_MEDIA_FRAME (the frame dropped, the stream goes on: a good frame after it plays and its credit comes back), a timestamp going back BAD_MEDIA_FRAME, a channel that is no stream NOT_CONNECTED, from an HMI NOT_FOR_ROLE; a frame beyond the credit closes the stream (AudioStreamClosed{FLOW_CONTROL}) then Result{FLOW_CONTROL}",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio], appID: musicID)
            try play(app)
            let stream = try opened(app.phone, app.appID, .main)
            let channel = stream.streamID
            try app.phone.sendFrame(.media, channel: channel, payload: [1, 2, 3])
            try requireCode(try refusal(app.phone, "MEDIA without a timestamp"), .badMediaFrame, "MEDIA without a timestamp")
            try app.phone.sendFrame(.media, channel: channel, payload: timestampBytes(0) + [1, 2, 3])
            try requireCode(try refusal(app.phone, "MEDIA with half a stereo frame"), .badMediaFrame, "MEDIA with half a stereo frame")
            try app.phone.sendFrame(.media, channel: channel, payload: media(timestamp: 100_000, frames: packetFrames))
            try creditBack(app.phone, channel, packetFrames, timeoutMs: ctx.timeoutMs + 2000)
            try app.phone.sendFrame(.media, channel: channel, payload: media(timestamp: 50_000, frames: packetFrames))
            try requireCode(try refusal(app.phone, "MEDIA with a timestamp before the previous frame's"), .badMediaFrame, "a timestamp going back")
            try app.phone.sendFrame(.media, channel: channel &+ 100_000, payload: media(timestamp: 0, frames: 10))
            try requireCode(try refusal(app.phone, "MEDIA on a channel that is no stream"), .notConnected, "MEDIA on a channel that is no stream")
            try app.hmi.sendFrame(.media, channel: channel, payload: media(timestamp: 0, frames: 10))
            try requireCode(try refusal(app.hmi, "MEDIA from an HMI"), .notForRole, "MEDIA from an HMI")
            // The whole window is free again (its credit came back): one frame more than it is too much.
            try app.phone.sendFrame(.media, channel: channel, payload: media(timestamp: 200_000, frames: Int(stream.window) + 1))
            let ended = try closed(app.phone, channel, "MEDIA beyond the credit")
            try require(ended.reason == .flowControl && ended.type == .main, "AudioStreamClosed{MAIN, FLOW_CONTROL}", got: "\(ended)")
            try requireCode(try refusal(app.phone, "MEDIA beyond the credit"), .flowControl, "MEDIA beyond the credit")
            try app.phone.requireAlive("the stream's FLOW_CONTROL")
        },
        ConformanceCheck(
            "audio.close-reasons", .p("24.3"),
            "an app's second stream of a type replaces the first (AudioStreamClosed{REPLACED} before the Result); when the HMI closes the app (CloseApp) its stream ends APP_CLOSED, not FOCUS_LOST, though its now-playing ends with it",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio], appID: musicID)
            try play(app)
            let first = try opened(app.phone, app.appID, .main)
            let id = app.phone.newRequestID()
            var open = HUOpenAudioStream()
            open.appID = app.appID
            open.type = .main
            open.format = format()
            try app.phone.send(.openAudioStream(open), requestID: id)
            let replaced = try closed(app.phone, first.streamID, "a second MAIN stream")
            try require(replaced.reason == .replaced, "AudioStreamClosed{REPLACED}", got: "\(replaced)")
            // The backlog keeps arrival order: the Result must not have come before the notice.
            let resultFirst = app.phone.backlog.contains { if case .result = $0.body { return $0.requestID == id } else { return false } }
            try require(!resultFirst, "AudioStreamClosed{REPLACED} before the Result (§24.2)", got: "the Result first")
            let second = try app.phone.result(for: id, "the replacing OpenAudioStream")
            try requireCode(second, .ok, "the replacing OpenAudioStream")
            try require(second.audioStream.streamID != first.streamID, "a new stream id", got: "\(second.audioStream.streamID) again")

            var close = HUCloseApp()
            close.appID = app.appID
            try requireCode(try app.hmi.request(.closeApp(close), "CloseApp"), .ok, "CloseApp")
            let ended = try closed(app.phone, second.audioStream.streamID, "the HMI closed the app")
            try require(ended.reason == .appClosed && ended.appID == app.appID && ended.type == .main, "AudioStreamClosed{\(app.appID), MAIN, APP_CLOSED}", got: "\(ended)")
        },
        ConformanceCheck(
            "audio.watch-output", .p("24.7"),
            "WatchAudio from a phone NOT_FOR_ROLE; from an HMI Result{audio_stream{stream_id 1, OUTPUT, PCM_S16LE 48000 2, no credit}}, then MEDIA on channel 1 of 3,848 bytes (timestamp and 20 ms of stereo) 20 ms apart; watching twice is once; the 9th watcher TOO_MANY_VIEWERS audio.output_watchers 8; stop OK",
            needsCarRole: true
        ) { ctx in
            let phone = try ctx.phone()
            try requireCode(try watch(phone), .notForRole, "WatchAudio from a phone")
            let hmi = try ctx.hmi()
            hmi.keepsStreamFrames = true
            let result = try watch(hmi)
            try requireCode(result, .ok, "WatchAudio")
            let info = result.audioStream
            try require(info.streamID == 1 && info.type == .output && info.format == format() && info.initialCredit == 0 && info.window == 0,
                        "audio_stream{1, OUTPUT, PCM_S16LE 48000 2, no credit}", got: "\(info)")
            let first = try hmi.takeStreamFrame("MEDIA of the car's output") { $0.kind == FrameKind.media.rawValue }
            let second = try hmi.takeStreamFrame("a second MEDIA of the car's output") { $0.kind == FrameKind.media.rawValue }
            for frame in [first, second] {
                try require(frame.channel == 1 && frame.payload.count == 8 + 960 * 4, "MEDIA on channel 1 of 3,848 bytes", got: "channel \(frame.channel), \(frame.payload.count) bytes")
            }
            func time(_ frame: WireFrame) -> UInt64 { frame.payload.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }
            // Consecutive chunks are 20 ms apart; a jump is audio skipped for this watcher (never less).
            let gap = Int64(bitPattern: time(second) &- time(first))
            let chunks = (gap + 10_000) / 20_000
            try require(chunks >= 1 && abs(gap - chunks * 20_000) <= 1,
                        "timestamps 20,000 us apart (or a multiple: chunks skipped)", got: "\(time(first)) then \(time(second))")
            try requireCode(try watch(hmi), .ok, "WatchAudio a second time (watching once)")
            var watchers = [hmi]
            for index in 2...maxOutputWatchers {
                let other = try ctx.hmi("hmi watcher \(index)")
                other.keepsStreamFrames = true
                try requireCode(try watch(other), .ok, "WatchAudio by watcher \(index) of \(maxOutputWatchers)")
                watchers.append(other)
            }
            let extra = try ctx.hmi("hmi watcher \(maxOutputWatchers + 1)")
            let over = try watch(extra)
            try requireCode(over, .tooManyViewers, "a watcher past \(maxOutputWatchers)")
            try require(over.limit == "audio.output_watchers" && over.limitValue == UInt32(maxOutputWatchers), "limit audio.output_watchers=\(maxOutputWatchers)", got: describe(over))
            try requireCode(try watch(extra, stop: true), .ok, "WatchAudio{stop} while not watching")
            for watcher in watchers {
                try requireCode(try watch(watcher, stop: true), .ok, "WatchAudio{stop}")
            }
        },
    ]
}
