// An audio app: a list of stations, in-place updates, the shared Now Playing
// screen fed by MPNowPlayingInfoCenter, and the car's transport controls and
// steering-wheel buttons through MPRemoteCommandCenter; the station on air
// streams a generated signal (a sine tone per station) through the car's
// mixer with AVAudioSession and CPAudioPlayer, and stops on pause.
// Run: swift run RadioApp [socket path]; launch "Radio" on the car.
import CarPlayKit
import Foundation

func log(_ line: String) { print(line); fflush(nil) }  // fflush(nil): every C stream (Swift 6 will not touch `stdout`)

final class RadioSceneDelegate: CPTemplateApplicationSceneDelegate, CPNowPlayingTemplateObserver,
    CPSessionConfigurationDelegate {
    var interfaceController: CPInterfaceController?
    var sessionConfiguration: CPSessionConfiguration?
    var audio: StationAudio?
    let jazz = CPListItem(text: "Jazz FM", detailText: "Smooth jazz", identifier: "jazz")
    let news = CPListItem(text: "News 24", detailText: "Headlines", identifier: "news")
    lazy var stations = CPListTemplate(title: "Radio", sections: [CPListSection(items: [jazz, news], header: "Stations")],
                                       identifier: "stations")

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didConnect interfaceController: CPInterfaceController) {
        self.interfaceController = interfaceController
        sessionConfiguration = CPSessionConfiguration(delegate: self)
        for station in [jazz, news] {
            station.handler = { [unowned self] item, completion in self.play(item as! CPListItem, completion: completion) }
        }
        stations.trailingNavigationBarButtons = [CPBarButton(title: "More", identifier: "more") { [unowned self] _ in
            // Mutating the template on screen redraws it in place.
            let podcasts = CPListItem(text: "Podcasts", detailText: "3 new", identifier: "podcasts")
            podcasts.handler = { _, completion in log("selected Podcasts"); completion() }
            self.stations.updateSections(self.stations.sections + [CPListSection(items: [podcasts], header: "More")])
            log("added Podcasts")
        }]
        setUpRemoteCommands()
        CPNowPlayingTemplate.shared.updateNowPlayingButtons([CPNowPlayingShuffleButton(identifier: "shuffle") { _ in log("shuffle") }])
        CPNowPlayingTemplate.shared.isUpNextButtonEnabled = true
        CPNowPlayingTemplate.shared.add(self)
        interfaceController.setRootTemplate(stations, animated: false) { success, error in
            log("root set: \(success) \(error.map { "\($0)" } ?? "")")
        }
    }

    func templateApplicationScene(_ templateApplicationScene: CPTemplateApplicationScene,
                                  didDisconnectInterfaceController interfaceController: CPInterfaceController) {
        self.interfaceController = nil
        audio?.stop()
        log("disconnected")
    }

    /// The station on air and whether it plays (the remote commands change both).
    var onAir: CPListItem?
    var playing = false

    /// What the car's Now Playing screen, its transport buttons and the media keys do.
    func setUpRemoteCommands() {
        let center = MPRemoteCommandCenter.shared()
        center.playCommand.addTarget { [unowned self] _ in self.setPlaying(true) }
        center.pauseCommand.addTarget { [unowned self] _ in self.setPlaying(false) }
        center.togglePlayPauseCommand.addTarget { [unowned self] _ in self.setPlaying(!self.playing) }
        center.nextTrackCommand.addTarget { [unowned self] _ in self.tune(by: 1) }
        center.previousTrackCommand.addTarget { [unowned self] _ in self.tune(by: -1) }
        // Live radio cannot skip or seek: offered but disabled, the car draws them greyed.
        center.skipForwardCommand.preferredIntervals = [15, 30]
        center.skipForwardCommand.addTarget { event in
            log("skip forward \((event as! MPSkipIntervalCommandEvent).interval)")
            return .success
        }
        center.skipForwardCommand.isEnabled = false
        center.likeCommand.localizedTitle = "Like this station"
        center.likeCommand.addTarget { [unowned self] event in
            center.likeCommand.isActive = !(event as! MPFeedbackCommandEvent).isNegative
            log("like \(self.onAir?.text ?? "")")
            return .success
        }
    }

    func setPlaying(_ playing: Bool) -> MPRemoteCommandHandlerStatus {
        guard let station = onAir else { return .noActionableNowPlayingItem }
        self.playing = playing
        log(playing ? "play" : "pause")
        showNowPlaying(station)
        if playing { audio?.play(station) } else { audio?.stop() }
        return .success
    }

    func tune(by step: Int) -> MPRemoteCommandHandlerStatus {
        let stations = [jazz, news]
        let index = stations.firstIndex { $0 === onAir } ?? 0
        let next = stations[(index + step + stations.count) % stations.count]
        onAir = next
        playing = true
        for item in stations { item.setPlaying(item === next) }
        log("tuned to \(next.text ?? "")")
        showNowPlaying(next)
        audio?.play(next)
        return .success
    }

    func showNowPlaying(_ station: CPListItem) {
        MPNowPlayingInfoCenter.default().nowPlayingInfo = [
            MPMediaItemPropertyTitle: station.text ?? "",
            MPMediaItemPropertyArtist: "Radio",
            MPMediaItemPropertyArtwork: MPMediaItemArtwork(image: CPImage(named: "station-\(station.identifier)", pixelWidth: 300, pixelHeight: 300)),
            MPNowPlayingInfoPropertyIsLiveStream: true,
            MPNowPlayingInfoPropertyPlaybackRate: playing ? 1.0 : 0.0,
        ]
    }

    func play(_ station: CPListItem, completion: @escaping @Sendable () -> Void) {
        Task {
            onAir = station
            playing = true
            showNowPlaying(station)
            audio?.play(station)
            for item in [jazz, news] { item.setPlaying(item === station) }
            station.setDetailText("On air")  // an in-place item update
            try await interfaceController?.pushTemplate(CPNowPlayingTemplate.shared, animated: true)
            completion()  // stops the car's spinner
            log("playing \(station.text ?? "")")
        }
    }

    func nowPlayingTemplateUpNextButtonTapped(_ nowPlayingTemplate: CPNowPlayingTemplate) { log("up next") }

    func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration,
                              limitedUserInterfacesChanged limitedUserInterfaces: CPLimitableUserInterface) {
        log("limited lists: \(limitedUserInterfaces.contains(.lists))")
    }

    func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration, contentStyleChanged contentStyle: CPContentStyle) {
        log("content style: \(contentStyle)")
    }
}

/// The station on air as sound: a sine tone per station (Jazz FM 440 Hz,
/// News 24 660 Hz), 48 kHz stereo, written as fast as the car's credit
/// allows, which is real time.
@MainActor
final class StationAudio {
    static let tones = ["jazz": 440.0, "news": 660.0]
    let session: AVAudioSession
    private var task: Task<Void, Never>?

    init(session: AVAudioSession) {
        self.session = session
        try? session.setCategory(.playback, mode: .default, options: [])
        try? session.setActive(true)
    }

    /// Plays the station's tone, after the stream before ends. The now-playing
    /// update (playback rate 1) went first: it gives the app the main audio.
    func play(_ station: CPListItem) {
        let hertz = Self.tones[station.identifier] ?? 440
        let previous = task
        previous?.cancel()
        task = Task { [session] in
            await previous?.value
            let player = CPAudioPlayer(format: .pcm(sampleRate: 48_000, channels: 2), session: session)
            player.stopHandler = { reason in log("audio stopped by the car: \(reason)") }
            do {
                try await player.play()
                log("streaming \(Int(hertz)) Hz")
                var frame = 0
                while !Task.isCancelled {
                    var samples: [Int16] = []
                    samples.reserveCapacity(960 * 2)
                    for index in frame..<(frame + 960) {
                        let value = Int16(0.3 * 32767 * sin(2 * Double.pi * hertz * Double(index) / 48_000))
                        samples.append(value)
                        samples.append(value)
                    }
                    try await player.write(samples)  // 20 ms; waits for the car's credit
                    frame += 960
                }
            } catch {
                log("audio: \(error)")
            }
            await player.stop()
            log("stream stopped")
        }
    }

    func stop() {
        task?.cancel()
    }
}

let socket = CommandLine.arguments.dropFirst().first ?? HeadUnitEndpoint.defaultUnixSocketPath
let app = CPApplication(bundleIdentifier: "com.example.radio", displayName: "Radio", entitlements: [.audio])
let sceneDelegate = RadioSceneDelegate()
app.sceneDelegate = sceneDelegate
sceneDelegate.audio = StationAudio(session: app.audioSession)
try await app.connect(to: .unix(path: socket), deviceName: "Example iPhone")
log("connected")
await app.run()
