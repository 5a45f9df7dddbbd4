import Foundation
import HeadUnitWire
import TestSupport
import Testing

/// The daemon as a process: its sockets, its configuration file, its status.
@Suite("Daemon lifecycle")
struct DaemonLifecycleTests {
    /// A `DaemonLimits` value out of its range (PROTOCOL.md section 20.6)
    /// stops the start: exit status non-zero, the message naming the key, the
    /// value and the range, including ranges that depend on another key and
    /// `--max-payload`, which is checked as the file's `max_payload_bytes`.
    @Test func limitsOutOfRangeStopTheDaemonAtStart() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/config.json"
            let cases: [(limits: String, flags: [String], message: String)] = [
                ("\"maxPayloadBytes\": 1023", [], "limits.max_payload_bytes is 1023, must be 1024 to 16777216"),
                ("", ["--max-payload", "16777217"], "limits.max_payload_bytes is 16777217, must be 1024 to 16777216"),
                ("\"slowConsumerTimeoutMs\": 600001", [], "limits.slow_consumer_timeout_ms is 600001, must be 100 to 600000"),
                ("\"heartbeatIntervalMs\": 99", [], "limits.heartbeat_interval_ms is 99, must be 100 to 600000"),
                ("\"maxTcpConnections\": 1025", [], "limits.max_tcp_connections is 1025, must be 1 to 1024"),
                ("\"maxAudioStreams\": 65", [], "limits.max_audio_streams is 65, must be 1 to 64"),
                // Depends on max_outbound_bytes (4 MiB: high-water mark 1 MiB).
                ("\"videoViewerBufferBytes\": 524289", [], "limits.video_viewer_buffer_bytes is 524289, must be 1024 to 524288"),
                ("\"audioWindowMs\": 300, \"audioJitterMs\": 300", [], "limits.audio_jitter_ms is 300, must be 10 to 299"),
            ]
            for (limits, flags, message) in cases {
                try "{\"limits\": {\(limits)}}".write(toFile: path, atomically: true, encoding: .utf8)
                let result = try TestDaemon.run(["--config", path, "--unix-socket", directory + "/x.sock", "--no-tcp"] + flags)
                #expect(result.status != 0 && result.stderr.contains(message), "\(limits) \(flags): \(result.status) \(result.stderr)")
                #expect(!result.stdout.contains("ready"))
            }
        }
    }

    /// The bounds themselves are served: a daemon configured at them starts.
    @Test func limitsAtTheirBoundsStart() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(
                limits: [
                    "maxCalls": 16, "audioWindowMs": 2_000, "audioJitterMs": 1_999, "videoViewerBufferBytes": 524_288,
                    "maxTcpFirstFlight": 8, "maxTcpFirstFlightPerSource": 8, "maxUnauthenticatedFrames": 2, "maxPayloadBytes": 16 << 20,
                ], tcp: false)
            let hmi = try daemon.connectUnix()
            let welcome = try hmi.handshake(role: .hmi)
            #expect(welcome.limits.maxPayloadBytes == 16 << 20)
            #expect(try daemon.terminate() == 0)
        }
    }

    @Test func socketIsPrivateAndListenersAreAnnounced() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            var info = stat()
            #expect(lstat(daemon.unixSocketPath, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
            #expect(daemon.tcpPort != nil && daemon.tcpPort != 0)
            let phone = try daemon.connectTCP()
            try phone.handshake(role: .phone)
        }
    }

    @Test func staleSocketFileIsReplaced() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/stale.sock"
            // A socket file nobody listens on any more (a crashed daemon's leftover).
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: Array(path.utf8))
                raw[path.utf8.count] = 0
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(bound == 0)
            close(fd)
            #expect(access(path, F_OK) == 0)

            let daemon = try TestDaemon.launch(tcp: false, unixSocketPath: path)
            let client = try daemon.connectUnix()
            try client.handshake(role: .phone)
        }
    }

    @Test func refusesToStartWhenAnotherDaemonListens() async throws {
        try await onOwnThread {
            let first = try TestDaemon.launch(tcp: false)
            let second = try TestDaemon.run(["--unix-socket", first.unixSocketPath, "--no-tcp"])
            #expect(second.status != 0)
            #expect(second.stderr.contains("already listening"))
            // The first one is untouched, its socket file too.
            let client = try first.connectUnix()
            try client.handshake(role: .phone)
        }
    }

    @Test func refusesToReplaceAFileThatIsNotASocket() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/precious.txt"
            try "keep me".write(toFile: path, atomically: true, encoding: .utf8)
            let result = try TestDaemon.run(["--unix-socket", path, "--no-tcp"])
            #expect(result.status != 0)
            #expect((try? String(contentsOfFile: path, encoding: .utf8)) == "keep me")
        }
    }

    /// Someone else's world-writable directory could hold a socket of theirs in place of ours.
    @Test func refusesASocketDirectoryOthersCanWrite() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let open = directory + "/open"
            #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
            let result = try TestDaemon.run(["--unix-socket", open + "/hu.sock", "--no-tcp"])
            #expect(result.status != 0)
            #expect(result.stderr.contains("writable by other users"), "\(result.stderr)")
            #expect(access(open + "/hu.sock", F_OK) != 0)
            // A sticky directory (like /tmp) is fine: others cannot remove or replace our socket there.
            #expect(chmod(open, 0o1777) == 0)
            let daemon = try TestDaemon.launch(tcp: false, unixSocketPath: open + "/hu.sock")
            try daemon.connectUnix().handshake(role: .phone)
        }
    }

    @Test func printedDefaultConfigIsAValidConfig() async throws {
        try await onOwnThread {
            let printed = try TestDaemon.run(["--print-default-config"])
            #expect(printed.status == 0)
            #expect(printed.stdout.contains("\"heartbeatTimeoutMs\":15000"))
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // Point it somewhere private, keep every other default, and serve with it.
            let path = directory + "/config.json"
            let socket = directory + "/from-config.sock"
            let edited = printed.stdout.replacingOccurrences(
                of: #""unixSocketPath":"[^"]*""#, with: "\"unixSocketPath\":\"\(socket)\"", options: .regularExpression
            ).replacingOccurrences(of: #""tcpListen":"[^"]*""#, with: "\"tcpListen\":\"127.0.0.1:0\"", options: .regularExpression)
            try edited.write(toFile: path, atomically: true, encoding: .utf8)
            // --unix-socket given by the launcher overrides the file; check the file itself via `run`.
            let daemon = try TestDaemon.launch(arguments: ["--config", path], tcp: true, unixSocketPath: socket)
            let phone = try daemon.connectUnix()
            let welcome = try phone.handshake(role: .phone)
            #expect(welcome.vehicle.manufacturer == "Open Motors")
            #expect(welcome.limits.heartbeatTimeoutMs == 15000)
        }
    }

    @Test func unknownConfigFieldIsRefused() async throws {
        try await onOwnThread {
            let directory = try TestDaemon.makeScratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/config.json"
            try #"{"limits": {"heartbeatTimeoutMs": 1000}, "hartbeat": 3}"#.write(toFile: path, atomically: true, encoding: .utf8)
            let result = try TestDaemon.run(["--config", path, "--unix-socket", directory + "/x.sock", "--no-tcp"])
            #expect(result.status != 0)
            #expect(result.stderr.contains("hartbeat") || result.stderr.contains("config"))
        }
    }

    @Test func vehicleFromConfigIsAnnouncedInWelcome() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch(
                configJSON: #""vehicle": {"manufacturer": "Test Cars", "model": "T1", "mainDisplay": {"widthPt": 1920, "heightPt": 720, "scale": 3}}"#)
            let phone = try daemon.connectUnix()
            let welcome = try phone.handshake(role: .phone)
            #expect(welcome.vehicle.manufacturer == "Test Cars")
            #expect(welcome.vehicle.mainDisplay.widthPt == 1920)
        }
    }

    @Test func statusChangesAreReported() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            var app = HUAppInfo()
            app.appID = "com.example.audio"
            app.displayName = "Audio"
            app.entitlements = ["com.apple.developer.carplay-audio"]
            var announce = HUAnnounceApps()
            announce.apps = [app]
            try phone.send(.announceApps(announce), requestID: 1)
            _ = try phone.readResult()
            // The daemon logs what it tells systemd (STATUS=) at debug level.
            let deadline = Date().addingTimeInterval(5)
            while !daemon.log.contains("1 phone, 1 app, 0 scenes"), Date() < deadline { usleep(20_000) }
            #expect(daemon.log.contains("1 phone, 1 app, 0 scenes"))
        }
    }

    @Test func sigintIsAGracefulStopToo() async throws {
        try await onOwnThread {
            let daemon = try TestDaemon.launch()
            let phone = try daemon.connectUnix()
            try phone.handshake(role: .phone)
            kill(daemon.process.processIdentifier, SIGINT)
            #expect(try phone.readGoodbye().code == .shuttingDown)
            #expect(try daemon.terminate() == 0)
        }
    }
}
