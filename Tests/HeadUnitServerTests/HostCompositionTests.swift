import HeadUnitCore
import HeadUnitWire
import Testing

@testable import HeadUnitServer

/// Issue 50 item 2: the host is split by concern (dispatch and batching in
/// `CarHost`; connections, the batch, the lifecycle, the observers,
/// admission and pairing each a value or object of its own), and neither it
/// nor any type it composes holds more than 12 stored properties. `Mirror`
/// lists a struct's or a class's stored properties (a lazy one too).
@Suite struct HostCompositionTests {
    static let maximum = 12

    static func storedProperties(of value: Any) -> [String] {
        Mirror(reflecting: value).children.map { $0.label ?? "?" }
    }

    /// A host in memory with a connection, so the handler is counted too.
    static func composed() throws -> [(String, Any)] {
        let server = InMemoryServer()
        let host = server.host
        let hmi = try server.connectUnix()
        try hmi.handshake(role: .hmi)
        let handler = try #require(host.connections.values.first)
        return [
            ("CarHost", host), ("ConnectionTable", host.connections), ("ConnectionHandler", handler),
            ("HostLifecycle", host.lifecycle), ("Observers", host.observers), ("HMIHub", host.observers.hmi),
            ("ClusterHub", host.observers.cluster), ("StatusReport", host.observers.status), ("HostAdmission", host.admission),
            ("HostPairing", host.pairing), ("PairingWrites", host.pairing.writes), ("Batch", Batch()),
        ]
    }

    @Test func theHostAndWhatItComposesHoldAtMostTwelveStoredProperties() throws {
        for (name, value) in try Self.composed() {
            let stored = Self.storedProperties(of: value)
            #expect(stored.count <= Self.maximum, "\(name) holds \(stored.count) stored properties: \(stored)")
        }
    }

    @Test func theHostComposesOneValuePerConcern() throws {
        let stored = Self.storedProperties(of: InMemoryServer().host)
        for concern in ["connections", "batch", "timers", "lifecycle", "observers", "admission", "pairing", "audioEngine"] {
            #expect(stored.contains(concern), "CarHost composes no '\(concern)': \(stored)")
        }
    }

    /// `value` and every value of this module it holds (through optionals and
    /// enum payloads too), each as its type's name and stored properties.
    /// `seen` keeps the objects met alive, so no identity is reused.
    static func walk(_ value: Any, into found: inout [(type: String, stored: [String])], seen: inout [AnyObject]) {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            for child in mirror.children { walk(child.value, into: &found, seen: &seen) }
            return
        }
        let name = String(reflecting: type(of: value))
        guard name.hasPrefix("HeadUnitServer.") else { return }
        if type(of: value) is AnyClass {
            let object = value as AnyObject
            if seen.contains(where: { $0 === object }) { return }
            seen.append(object)
        }
        if mirror.displayStyle != .enum { found.append((name, Self.storedProperties(of: value))) }
        for child in mirror.children { walk(child.value, into: &found, seen: &seen) }
    }

    /// The audio engine (Sources/HeadUnitServer/Audio) and every part it
    /// holds; and what a fresh engine does not hold yet: a mixer's stream
    /// and its decoder, the file and ALSA sinks, an ALSA microphone.
    static func audioParts() -> [(type: String, stored: [String])] {
        var found: [(type: String, stored: [String])] = []
        var seen: [AnyObject] = []
        walk(InMemoryServer().host.audioEngine, into: &found, seen: &seen)
        var format = HUAudioFormat()
        format.codec = .opus
        format.sampleRate = 48_000
        format.channels = 2
        let stream = AudioMixer.Stream(id: 1, type: .main, format: format)
        for value: Any in [
            stream, stream.decoder, FileSink(path: "/nonexistent/out.wav", wav: true), AlsaSink(device: "default"),
            MicrophoneSource(kind: .alsa(AlsaCapture(device: "default"))),
        ] {
            walk(value, into: &found, seen: &seen)
        }
        return found
    }

    @Test func theAudioEngineAndWhatItComposesHoldAtMostTwelveStoredProperties() {
        let parts = Self.audioParts()
        let names = Set(parts.map(\.type))
        for expected in [
            "AudioEngine", "AudioCommandQueue", "AudioOutputWriter", "DiscardSink", "AudioOutputMonitor", "AudioMixer",
            "MicrophoneCapture", "MicrophoneSource", "OutputTap", "AudioMixer.Stream", "AudioMixer.PacketDecoder", "FileSink",
            "AlsaSink", "AlsaCapture",
        ] {
            #expect(names.contains("HeadUnitServer.\(expected)"), "no \(expected) among the audio parts: \(names.sorted())")
        }
        for (name, stored) in parts {
            #expect(stored.count <= Self.maximum, "\(name) holds \(stored.count) stored properties: \(stored)")
        }
    }

    @Test func theAudioEngineComposesOnePartPerConcern() {
        let stored = Self.storedProperties(of: InMemoryServer().host.audioEngine)
        for concern in ["commands", "mixer", "output", "monitor", "microphone", "tap"] {
            #expect(stored.contains(concern), "AudioEngine composes no '\(concern)': \(stored)")
        }
    }
}
