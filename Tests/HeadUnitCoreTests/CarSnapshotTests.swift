import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// The Car across a daemon restart (PROTOCOL.md section 22): restoring a
/// snapshot gives a Car that answers every later input as the original would.
@Suite struct CarSnapshotTests {
    let audio = [EntitlementKey.audio]

    /// A phone with an app on screen: a list root, a grid pushed on it, an
    /// alert presented over it, and a selection pending (spinner shown).
    func sessionInProgress() -> (CarHarness, scene: UInt32) {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("com.example.radio", audio), ("com.example.other", audio)])
        let scene = h.launch("com.example.radio")
        #expect(h.template("com.example.radio", scene, .setRoot(listTemplate("root", items: 3))).code == .ok)
        #expect(h.template("com.example.radio", scene, .push(listTemplate("detail", items: 4))).code == .ok)
        let tap = h.request(h.hmi, .hmiInput(HUHmiInput.with {
            $0.templateID = "detail"
            $0.selectItem = HUItemSelected.with { $0.itemID = "item-2" }
        }))
        #expect(tap.code == .ok)
        _ = h.drain(h.phone)
        _ = h.drain(h.hmi)
        return (h, scene)
    }

    /// Through the wire format, as the daemon stores it.
    func roundTrip(_ car: Car) throws -> HUCarSnapshot {
        var daemon = HUDaemonSnapshot()
        daemon.format = CarSnapshotFormat.current
        daemon.car = car.snapshot()
        let bytes: [UInt8] = try daemon.serializedBytes()
        return try HUDaemonSnapshot(serializedBytes: bytes).car
    }

    @Test func aRestoredCarAnswersLikeTheOriginal() throws {
        var (original, scene) = sessionInProgress()
        var restored = original
        let (car, effects) = try Car.restoring(try roundTrip(original.car), configuration: original.car.configuration)
        restored.car = car
        restored.timers = []
        restored.apply(effects)
        // The pending selection's completion timer starts afresh; nothing is sent.
        #expect(restored.timers.count == 1)
        #expect(effects.allSatisfy { if case .startTimer(.completion, _) = $0 { return true } else { return false } })
        #expect(restored.car.snapshot() == original.car.snapshot())

        // The same inputs from here on: the same answers, screen updates and events.
        func script(_ h: inout CarHarness) -> [PeerID: [HUEnvelope]] {
            let eventID = h.car.templates.pendingEvents.keys.first ?? 0
            _ = h.request(h.phone, .completeEvent(HUCompleteEvent.with { $0.appID = "com.example.radio"; $0.eventID = eventID }))
            _ = h.template("com.example.radio", scene, .present(alertTemplate("alert")))
            _ = h.template("com.example.radio", scene, .dismiss(HUPopTemplate()))
            _ = h.template("com.example.radio", scene, .pop(HUPopTemplate()))
            _ = h.template("com.example.radio", scene, .update(listTemplate("root", items: 5)))
            _ = h.request(h.hmi, .hmiInput(HUHmiInput.with { $0.goHome = HUGoHome() }))
            _ = h.request(h.hmi, .launchApp(HULaunchApp.with { $0.appID = "com.example.other" }))
            h.apply(h.car.peerLeft(h.phone))
            return h.sent
        }
        let expected = script(&original)
        let actual = script(&restored)
        #expect(actual[original.phone] == expected[original.phone])
        #expect(actual[original.hmi] == expected[original.hmi])
        #expect((expected[original.hmi] ?? []).count > 3)
    }

    @Test func theHMIsNextChangeIsADiffAgainstWhatItSawBeforeTheRestart() throws {
        var (h, scene) = sessionInProgress()
        let (car, _) = try Car.restoring(try roundTrip(h.car), configuration: h.car.configuration)
        h.car = car
        var updated = listTemplate("detail", items: 4)
        updated.list.sections[0].items[0].general.text = "Changed"
        #expect(h.template("com.example.radio", scene, .update(updated)).code == .ok)
        let updates = h.drain(h.hmi).compactMap { envelope -> HUScreenUpdate? in
            if case .screenUpdate(let update) = envelope.body { return update }
            return nil
        }
        #expect(updates.count == 1)
        guard case .diff(let diff)? = updates.first?.change else {
            Issue.record("expected a diff, got \(updates)")
            return
        }
        #expect(diff.templateID == "detail")
    }

    @Test func accessoryPeersAndAReconnectingPhoneAreNotCarried() throws {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(3, .cluster)
        h.join(4, .accessory)
        h.join(h.phone, .phone)
        _ = h.announce([("app", audio)])
        _ = h.launch("app")
        let snapshot = h.car.snapshot()
        #expect(snapshot.peers.map(\.peerID) == [h.phone, h.hmi, 3])
        #expect(snapshot.apps.map(\.info.appID) == ["app"])
        // A phone lost within its grace period: its session ends with the process.
        h.apply(h.car.peerLeft(h.phone, departure: .lost))
        let away = h.car.snapshot()
        #expect(away.phonePeer == 0)
        #expect(away.apps.isEmpty)
        #expect(away.screens.allSatisfy { $0.ownerAppID.isEmpty })
        let (car, _) = try Car.restoring(away, configuration: h.car.configuration)
        #expect(car.status().scenes == 0)
        #expect(car.hmiPeerIDs == [h.hmi])
        #expect(car.peerIDs == [h.phone, h.hmi, 3].filter { $0 != h.phone })
    }

    @Test func aPhoneThatHadNotAnnouncedStillMustInTime() throws {
        var h = CarHarness()
        h.car = Car(configuration: CarConfiguration(vehicle: .standard, entitlements: .acceptAll, announceTimeoutMilliseconds: 3000))
        h.join(h.phone, .phone)
        let (_, effects) = try Car.restoring(h.car.snapshot(), configuration: h.car.configuration)
        #expect(effects == [.startTimer(.announce(peer: h.phone), milliseconds: 3000)])
    }

    @Test func inconsistentSnapshotsAreRefusedWithAReason() {
        let (h, _) = sessionInProgress()
        let good = h.car.snapshot()
        let configuration = h.car.configuration
        func refusal(_ change: (inout HUCarSnapshot) -> Void) -> String? {
            var snapshot = good
            change(&snapshot)
            do {
                _ = try Car.restoring(snapshot, configuration: configuration)
                return nil
            } catch {
                return error.reason
            }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.phonePeer = 0 }?.contains("apps without a phone") == true)
        #expect(refusal { $0.phonePeer = 2 }?.contains("not a phone peer") == true)
        #expect(refusal { $0.hmiPeers = [1] }?.contains("not an HMI peer") == true)
        #expect(refusal { $0.peers[0].transport = "carrier-pigeon" }?.contains("unknown transport") == true)
        #expect(refusal { $0.peers[0].role = .accessory }?.contains("does not carry") == true)
        #expect(refusal { $0.peers.append($0.peers[0]) }?.contains("repeated") == true)
        #expect(refusal { $0.apps.append($0.apps[0]) }?.contains("repeated") == true)
        #expect(refusal { $0.screens[0].ownerAppID = "com.example.gone" }?.contains("shows no scene") == true)
        #expect(refusal { $0.pendingEvents[0].appID = "com.example.other" }?.contains("belongs to no scene") == true)
        #expect(refusal { $0.apps[0].scenes.append($0.apps[0].scenes[0]) }?.contains("two scenes") == true)
        #expect(refusal { $0.peers[0].deviceID = "unpaired" }?.contains("no longer paired") == true)
        #expect(refusal { $0.navigation.sessions = [HUNavigationSessionSnapshot.with { $0.appID = "gone" }] }?.contains("not an app of the phone") == true)
        #expect(refusal { $0.navigation.sessions = [HUNavigationSessionSnapshot.with { $0.appID = "com.example.radio"; $0.state = 7 }] }?.contains("unknown state") == true)
        #expect(refusal { $0.metadataSubscribers = [1] }?.contains("not an HMI or cluster peer") == true)
    }

    @Test func guidanceGoesOnAcrossTheRestartAndOnlyAnAlertIsDismissed() throws {
        var h = CarHarness()
        _ = h.navigationApp()
        h.startGuidance()
        #expect(h.navigate(.addLaneGuidances(HULaneGuidances.with { $0.laneGuidances = [LaneGuidanceTests.guidance("g1"), LaneGuidanceTests.guidance("g2")] })).code == .ok)
        var linked = Nav.maneuver("m1")
        linked.linkedLaneGuidanceID = "g1"
        h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [linked, Nav.second("m2")] }))
        #expect(h.navigate(.setCurrentLaneGuidance(HUCurrentLaneGuidance.with { $0.laneGuidanceID = "g2" })).code == .ok)
        #expect(h.navigate(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = ["Main Street"] })).code == .ok)
        #expect(h.navigate(.setManeuverState(HUCurrentManeuverState.with { $0.state = .prepare })).code == .ok)
        h.navigate(.showAlert(Nav.alert()))
        _ = h.drain(h.phone)
        h.apply(h.car.prepareForHandover())
        let events = h.navigationEvents()
        #expect(events == [.alertDismissed(HUAlertDismissed.with { $0.alertID = "speed-trap"; $0.reason = .system })])
        var restored = h
        let (car, _) = try Car.restoring(try roundTrip(h.car), configuration: h.car.configuration)
        restored.car = car
        #expect(restored.car.navigation.sessions == h.car.navigation.sessions)
        #expect(restored.car.navigation.guidanceAppID == Nav.appID)
        #expect(restored.metadata() == h.metadata())
        #expect(restored.metadata().maneuvers.laneGuidances.map(\.id) == ["g2", "g1"])
        #expect(restored.metadata().maneuvers.maneuverState == .prepare)
        // Guidance continues: the next maneuver update is taken as before the restart.
        func script(_ h: inout CarHarness) -> [PeerID: [HUEnvelope]] {
            h.sent = [:]
            h.navigate(.updateManeuvers(HUManeuverUpdate.with { $0.maneuvers = [Nav.second("m2")] }))
            h.navigate(.finish(HUFinishNavigation()))
            h.startGuidance(trip: Nav.trip("t2"))
            return h.sent
        }
        let expected = script(&h)
        #expect(script(&restored) == expected)
    }

    @Test func metadataSubscriptionsAreCarriedAndTheirVersionsGoOn() throws {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(3, .cluster)
        #expect(h.request(h.hmi, .subscribeMetadata(HUSubscribeMetadata())).code == .ok)
        #expect(h.request(3, .subscribeMetadata(HUSubscribeMetadata())).code == .ok)
        h.join(h.phone, .phone)
        _ = h.announce([("app", audio)])
        _ = h.car.takeMetadata()
        let version = h.car.clusterFeed.version
        #expect(version > 0)
        let (car, _) = try Car.restoring(try roundTrip(h.car), configuration: h.car.configuration)
        #expect(car.clusterFeed.subscribers == [h.hmi, 3])
        h.car = car
        let taken = h.car.takeMetadata()
        #expect(Set(taken.snapshots) == [h.hmi, 3])
        #expect(h.car.clusterFeed.version >= version)
        #expect(h.car.clusterFeed.state.phone.link == .connected)
    }

    @Test func whoOwnsTheMainAudioIsCarried() throws {
        var (h, scene) = sessionInProgress()
        var np = HUNowPlayingTemplate()
        (np.title, np.playbackRate, np.spokenAudio) = ("Episode 12", 1, true)
        #expect(h.template("com.example.radio", scene, .updateNowPlaying(np)).code == .ok)
        var state = h.car.vehicleState
        state.callActive = true
        #expect(h.request(h.hmi, .setVehicleState(HUSetVehicleState.with { $0.state = state })).code == .ok)
        #expect(h.car.audio.main == .phone(appID: "com.example.radio"))
        let (car, _) = try Car.restoring(try roundTrip(h.car), configuration: h.car.configuration)
        #expect(car.audio == h.car.audio)
        #expect(car.audio.mainSpoken && car.audio.callActive)
        #expect(car.navigation.announcedPromptStyle == .short)
        var snapshot = h.car.snapshot()
        snapshot.audio.mainKind = 9
        #expect(throws: SnapshotError.self) { try Car.restoring(snapshot, configuration: h.car.configuration) }
    }
    /// Issue 47 item 5: a restart does not carry the phone's audio streams or
    /// the microphone (their buffers and credit live in the mixer of the
    /// process that ends); the next process closes each towards the phone
    /// with RESTARTED once the connections are back, drops their MEDIA still
    /// in flight without a word, and carries who hears the car's output.
    @Test func aRestartClosesTheAudioStreamsWithTheirReasonAndCarriesTheOutputWatchers() throws {
        var (h, scene) = sessionInProgress()
        var np = HUNowPlayingTemplate()
        (np.title, np.playbackRate) = ("Song", 1)
        #expect(h.template("com.example.radio", scene, .updateNowPlaying(np)).code == .ok)
        let pcm = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = 48_000; $0.channels = 2 }
        let opened = h.request(h.phone, .openAudioStream(HUOpenAudioStream.with { $0.appID = "com.example.radio"; $0.type = .main; $0.format = pcm }))
        #expect(opened.code == .ok)
        let stream = opened.audioStream.streamID
        #expect(h.request(h.hmi, .watchAudio(HUWatchAudio())).code == .ok)
        var snapshot = try roundTrip(h.car)
        #expect(snapshot.audio.streams.map(\.streamID) == [stream])
        // A microphone open at the restart is named the same way (as the snapshot writes it).
        let microphone = stream + 7
        snapshot.audio.streams.append(HUAudioStreamSnapshot.with { $0.appID = "com.example.radio"; $0.streamID = microphone; $0.type = .microphone })

        let (car, effects) = try Car.restoring(snapshot, configuration: h.car.configuration)
        var next = CarHarness()
        next.car = car
        next.apply(effects)
        #expect(next.engine == [.tap(true)], "the HMI still hears the output")
        #expect(next.car.audioTap.watchers == [h.hmi])
        #expect(next.drain(h.phone).isEmpty, "nothing is told before the connections are back")

        next.apply(next.car.restoredConnectionsBack())
        let closed = next.drain(h.phone).compactMap { envelope -> HUAudioStreamClosed? in
            if case .audioStreamClosed(let closed) = envelope.body { return closed }
            return nil
        }
        #expect(closed.map(\.streamID) == [stream, microphone])
        #expect(closed.map(\.type) == [.main, .microphone])
        #expect(closed.allSatisfy { $0.reason == .restarted && $0.appID == "com.example.radio" && !$0.detail.isEmpty })
        #expect(next.car.restoredConnectionsBack().isEmpty, "told once")

        // MEDIA the phone sent before it read that is dropped without a word; a new stream gets a new id and credit.
        next.apply(next.car.receiveMedia(channel: stream, ByteBuffer(bytes: [UInt8](repeating: 0, count: 8 + 4 * 960)), from: h.phone))
        #expect(next.refusedData[h.phone, default: []].isEmpty)
        let again = next.request(h.phone, .openAudioStream(HUOpenAudioStream.with { $0.appID = "com.example.radio"; $0.type = .main; $0.format = pcm }))
        #expect(again.code == .ok)
        #expect(again.audioStream.streamID != stream && again.audioStream.streamID != microphone)
        #expect(again.audioStream.initialCredit == again.audioStream.window)

        // A stream of no app of the phone, or a watcher that is not an HMI or cluster, is a bad snapshot.
        var bad = snapshot
        bad.audio.streams[0].appID = "com.example.unknown"
        #expect(throws: SnapshotError.self) { try Car.restoring(bad, configuration: h.car.configuration) }
        bad = snapshot
        bad.audio.outputWatchers = [h.phone]
        #expect(throws: SnapshotError.self) { try Car.restoring(bad, configuration: h.car.configuration) }
    }
    /// Issue 47 item 5: an HMI watching a screen's base-view video keeps
    /// watching across a restart (before, the watch ended without a word):
    /// once the connections are back it is sent its streams again and the
    /// phone is asked for a keyframe, from which the viewer takes frames.
    @Test func videoWatchersAreCarriedAndResyncedOnAKeyframe() throws {
        var h = CarHarness()
        let scene = h.navigationApp()
        #expect(h.request(h.hmi, .watchVideo(HUWatchVideo.with { $0.screen = .main })).code == .ok)
        _ = h.drain(h.phone)
        _ = h.drain(h.hmi)
        let snapshot = try roundTrip(h.car)
        #expect(snapshot.videoWatchers.map(\.peerID) == [h.hmi])

        let (car, effects) = try Car.restoring(snapshot, configuration: h.car.configuration)
        var next = CarHarness()
        next.car = car
        next.apply(effects)
        #expect(next.drain(h.hmi).isEmpty && next.drain(h.phone).isEmpty, "nothing is said before the connections are back")
        next.apply(next.car.restoredConnectionsBack())
        let streams = next.drain(h.hmi).compactMap { if case .videoStreams(let s) = $0.body { return s } else { return nil } }
        #expect(streams.last?.streams.map(\.sceneID) == [scene], "the viewer is told its stream again")
        let asked = next.drain(h.phone).compactMap { if case .requestKeyframe(let r) = $0.body { return r } else { return nil } }
        #expect(asked.map(\.channel) == [scene], "the phone is asked for a keyframe")
        var header = ByteBuffer()
        VideoFrameHeader(timestampMicroseconds: 0, frameNumber: 1, isKeyframe: true).write(into: &header)
        header.writeBytes([0, 0, 1, 0x65])
        next.apply(next.car.receiveVideo(
            channel: scene, VideoFrameHeader(timestampMicroseconds: 0, frameNumber: 1, isKeyframe: true), header, from: h.phone, now: next.now))
        #expect(next.video[h.hmi]?.count == 1, "the keyframe reaches the viewer")

        var bad = snapshot
        bad.videoWatchers[0].peerID = h.phone
        #expect(throws: SnapshotError.self) { try Car.restoring(bad, configuration: h.car.configuration) }
    }
    /// The microphone open at a restart is named by the snapshot as the
    /// restart found it; the next process closes it (RESTARTED) and, the
    /// voice-control template still shown, starts a new one right after.
    @Test func theMicrophoneOpenAtARestartIsClosedThenStartedAnew() throws {
        var h = CarHarness()
        let scene = h.navigationApp()
        #expect(h.template(Nav.appID, scene, .present(Fixture.voiceControl("voice"))).code == .ok)
        let started = h.drain(h.phone).compactMap { if case .microphoneStarted(let m) = $0.body { return m } else { return nil } }
        guard let microphone = started.first?.stream.streamID else { Issue.record("no microphone for the shown voice control"); return }
        let snapshot = try roundTrip(h.car)
        #expect(snapshot.audio.streams.map(\.streamID) == [microphone] && snapshot.audio.streams.first?.type == .microphone)

        var next = CarHarness()
        (next.car, _) = try Car.restoring(snapshot, configuration: h.car.configuration)
        next.apply(next.car.restoredConnectionsBack())
        let told = next.drain(h.phone).compactMap { envelope -> String? in
            switch envelope.body {
            case .audioStreamClosed(let closed) where closed.streamID == microphone && closed.reason == .restarted: return "closed"
            case .microphoneStarted(let again) where again.stream.streamID != microphone && again.appID == Nav.appID: return "started"
            default: return nil
            }
        }
        #expect(told == ["closed", "started"])
    }
}
