import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore

/// The simulator's two connections to the daemon (HMI and cluster), kept up
/// for as long as the simulator runs: when the daemon goes away the page is
/// told and the bridge reconnects until it is back.
actor Bridge {
    let endpoint: HeadUnitEndpoint
    let hub: Hub
    private var hmi: HMISession?
    private var cluster: ClusterSession?
    private var videoWatch: VideoWatch?

    init(endpoint: HeadUnitEndpoint, hub: Hub) {
        self.endpoint = endpoint
        self.hub = hub
    }

    func run() async {
        var attempt = 0
        while !Task.isCancelled {
            attempt += 1
            let hmi: HMISession
            let cluster: ClusterSession
            do {
                hmi = try await HMISession.connect(to: endpoint, name: "headunit-sim")
                do {
                    cluster = try await ClusterSession.connect(to: endpoint, name: "headunit-sim-cluster")
                } catch {
                    await hmi.close()
                    throw error
                }
            } catch {
                await daemonDown("cannot reach headunitd at \(endpoint): \(error)", attempt: attempt)
                try? await Task.sleep(nanoseconds: attempt < 5 ? 500_000_000 : 2_000_000_000)
                continue
            }
            attempt = 0
            self.hmi = hmi
            self.cluster = cluster
            await hub.state("daemon", JSON.object("daemon", [
                ("connected", "true"), ("endpoint", JSON.quote("\(endpoint)")),
                ("welcome", JSON.proto(hmi.connection.welcome)),
            ]))
            await log("in", "hmi", { $0.body = .welcome(hmi.connection.welcome) })

            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.pumpHMI(hmi) }
                group.addTask { await self.pumpCluster(cluster) }
                group.addTask { await self.pumpVideo(hmi) }
                group.addTask { await self.pumpAudio(hmi) }
                // Either connection ending means the daemon went away (or cut us off): start over.
                await group.next()
                group.cancelAll()
            }
            var reason = await hmi.connection.closedReason()
            if reason == nil { reason = await cluster.connection.closedReason() }
            await hmi.close()
            await cluster.close()
            self.hmi = nil
            self.cluster = nil
            self.videoWatch = nil
            await daemonDown("connection to headunitd lost" + (reason.map { ": \($0)" } ?? ""), attempt: 0)
            try? await Task.sleep(nanoseconds: 300_000_000)
        }
    }

    private func daemonDown(_ message: String, attempt: Int) async {
        for key in ["home", "video", "screen:SCREEN_MAIN", "screen:SCREEN_DASHBOARD", "screen:SCREEN_INSTRUMENT_CLUSTER", "metadata"] {
            await hub.forget(key)
        }
        await hub.state("daemon", JSON.object("daemon", [
            ("connected", "false"), ("endpoint", JSON.quote("\(endpoint)")),
            ("error", JSON.quote(message)), ("attempt", "\(attempt)"),
        ]))
    }

    private func pumpHMI(_ hmi: HMISession) async {
        for await update in hmi.updates {
            switch update {
            case .homeScreen(let home):
                await log("in", "hmi", { $0.body = .homeScreen(home) })
                await hub.state("home", JSON.object("home", [("home", JSON.proto(home))]))
            case .screen(let screenUpdate, let rendered):
                await log("in", "hmi", { $0.body = .screenUpdate(screenUpdate) })
                let screenName = HUScreen.name(screenUpdate.screen)
                await hub.state("screen:" + screenName, JSON.object("screen", [
                    ("screen", JSON.quote(screenName)),
                    ("update", JSON.proto(screenUpdate)),
                    ("rendered", JSON.proto(rendered)),
                ]))
            case .image(var data):
                // The page shows the bytes in place of the ref (the screens' "rendered"); the log names it only.
                let size = data.png.count
                data.png = Data()
                await log("in", "hmi", { $0.body = .imageData(data) })
                await hub.logEntry(JSON.object("notice", [("text", JSON.quote("image \(data.ref.prefix(12)): \(size) bytes, sent once"))]))
            case .notice(let result):
                await log("in", "hmi", { $0.body = .result(result) })
            case .goodbye(let goodbye):
                await log("in", "hmi", { $0.body = .goodbye(goodbye) })
            case .other(let envelope):
                await log("in", "hmi", { $0 = envelope })
            }
        }
    }

    private func pumpCluster(_ cluster: ClusterSession) async {
        do {
            try await cluster.subscribe()
        } catch {
            await hub.logEntry(JSON.object("notice", [("text", JSON.quote("cluster: SubscribeMetadata failed: \(error)"))]))
            return
        }
        var model = MetadataModel()
        for await update in cluster.updates {
            await log("in", "cluster", { $0.body = .metadataUpdate(update) })
            model.apply(update)
            await hub.state("metadata", JSON.object("metadata", [
                ("version", "\(model.version)"), ("state", JSON.proto(model.state)),
            ]))
        }
    }

    /// The base view of every screen (PROTOCOL.md section 25): `VideoStreams`
    /// as state, each frame to the pages as a binary message, newest first.
    private func pumpVideo(_ hmi: HMISession) async {
        let welcome = hmi.connection.welcome
        var screens: [HUScreen] = [.main]
        if welcome.vehicle.dashboardPresent { screens.append(.dashboard) }
        if welcome.vehicle.instrumentClusterPresent { screens.append(.instrumentCluster) }
        let watch: VideoWatch
        do {
            watch = try await hmi.watchVideo(screens)
        } catch {
            await hub.logEntry(JSON.object("notice", [("text", JSON.quote("video: WatchVideo failed: \(error)"))]))
            // Not a reason to reconnect: wait for the connection's end like the other pumps.
            try? await hmi.connection.closeFuture.get()
            return
        }
        videoWatch = watch
        for await event in watch {
            switch event {
            case .streams(let streams):
                await log("in", "hmi", { $0.body = .videoStreams(streams) })
                await hub.videoStreams(Set(streams.streams.map(\.params.channel)))
                await hub.state("video", JSON.object("video", [("streams", JSON.proto(streams))]))
            case .frames(let frames):
                for frame in frames {
                    let latency = frame.latencyMicroseconds.map { Int64($0) } ?? -1
                    if await hub.video(frame, phoneToSimMicroseconds: latency) {
                        watch.requestKeyframe(channel: frame.channel)
                    }
                }
            }
        }
    }

    /// The car's mixed output (PROTOCOL.md section 24.7), each 20 ms chunk to
    /// the pages as a binary message; the watch keeps at most 5 unread (latest wins).
    private func pumpAudio(_ hmi: HMISession) async {
        let watch: AudioWatch
        do {
            watch = try await hmi.watchAudio(capacity: 5)
        } catch {
            await hub.logEntry(JSON.object("notice", [("text", JSON.quote("audio: WatchAudio failed: \(error)"))]))
            try? await hmi.connection.closeFuture.get()
            return
        }
        for await chunk in watch {
            await hub.audio(chunk)
        }
    }

    /// One log entry: the envelope as protobuf JSON, with its body's name.
    private func log(_ direction: String, _ peer: String, _ build: (inout HUEnvelope) -> Void) async {
        var envelope = HUEnvelope()
        build(&envelope)
        await hub.logEntry(JSON.object("log", [
            ("dir", JSON.quote(direction)), ("peer", JSON.quote(peer)),
            ("name", JSON.quote(JSON.bodyName(envelope))), ("envelope", JSON.proto(envelope)),
        ]))
    }

    /// A request from the page: `{"id": n, "to": "hmi"|"cluster", "envelope": {...}}`,
    /// the envelope in protobuf JSON. Answered with `{"type": "result", "id": n, "result": {...}}`.
    func handle(pageMessage text: String, from client: Int) async {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            return await hub.send(JSON.object("result", [("id", "0"), ("error", JSON.quote("not a JSON object"))]), to: client)
        }
        let id = (object["id"] as? NSNumber)?.intValue ?? 0
        func answer(_ fields: [(String, String)]) async {
            await hub.send(JSON.object("result", [("id", "\(id)")] + fields), to: client)
        }
        guard let envelopeObject = object["envelope"],
              let data = try? JSONSerialization.data(withJSONObject: envelopeObject)
        else { return await answer([("error", JSON.quote("no envelope"))]) }
        let envelope: HUEnvelope
        do {
            envelope = try HUEnvelope(jsonUTF8Data: data)
        } catch {
            return await answer([("error", JSON.quote("not an Envelope: \(error)"))])
        }
        guard let body = envelope.body else { return await answer([("error", JSON.quote("the envelope has no body"))]) }
        if case .requestKeyframe(let ask) = body {
            // The page's decoder lost sync: hold the channel's P-frames back until the keyframe.
            await hub.pageLostSync(client, channel: ask.channel)
        }
        let peer = (object["to"] as? String) == "cluster" ? "cluster" : "hmi"
        guard let connection = peer == "cluster" ? cluster?.connection : hmi?.connection else {
            return await answer([("error", JSON.quote("not connected to headunitd"))])
        }
        await log("out", peer, { $0.body = body })
        do {
            let result = try await connection.resultOf(body)
            await log("in", peer, { $0.body = .result(result) })
            await answer([("result", JSON.proto(result)), ("code", JSON.quote(ErrorCodeNames.name(result.code)))])
        } catch {
            await answer([("error", JSON.quote("\(error)"))])
        }
    }
}

extension HUScreen {
    /// The enum value's protobuf name, as the page sees it in JSON.
    static func name(_ screen: HUScreen) -> String {
        switch screen {
        case .main: return "SCREEN_MAIN"
        case .dashboard: return "SCREEN_DASHBOARD"
        case .instrumentCluster: return "SCREEN_INSTRUMENT_CLUSTER"
        default: return "SCREEN_UNSPECIFIED"
        }
    }
}
