import ArgumentParser
import Foundation
import HeadUnitClient
import HeadUnitWire
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import SwiftProtobuf

/// The web simulator: connects to headunitd as an HMI and as a cluster peer
/// and serves the car's screens to a browser. The page gets protobuf values
/// as protobuf JSON and sends HMI requests as protobuf JSON envelopes, which
/// go to the daemon unchanged: the app sees exactly what a real car sends.
@main
struct HeadUnitSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "headunit-sim",
        abstract: "A car in the browser: the main screen, dashboard and instrument cluster of headunitd, live and driven over the HMI protocol.",
        discussion: "Connects to headunitd over its Unix socket as an HMI and as a cluster, reconnects by itself when the daemon restarts, and serves the page on --host:--port."
    )

    @Option(help: "The daemon's Unix socket (default: the same search as headunitctl).")
    var unixSocket: String?

    @Option(help: "Address the web server listens on.")
    var host = "127.0.0.1"

    @Option(help: "Port the web server listens on (0: any free port; the URL is printed).")
    var port = 7480

    func run() async throws {
        let endpoint = HeadUnitEndpoint.unix(path: unixSocket ?? HeadUnitEndpoint.defaultUnixSocketPath)
        let hub = Hub()
        let bridge = Bridge(endpoint: endpoint, hub: hub)

        let router = Router(context: BasicWebSocketRequestContext.self)
        router.get("/") { _, _ in try Self.asset("index.html", type: "text/html; charset=utf-8") }
        router.get("/app.js") { _, _ in try Self.asset("app.js", type: "text/javascript; charset=utf-8") }
        router.get("/video-worker.js") { _, _ in try Self.asset("video-worker.js", type: "text/javascript; charset=utf-8") }
        router.get("/style.css") { _, _ in try Self.asset("style.css", type: "text/css; charset=utf-8") }
        router.get("/healthz") { _, _ in "ok" }
        router.get("/favicon.ico") { _, _ in Response(status: .noContent) }
        // The page's socket (state, log, results, the car's output), and its
        // video Worker's own socket (frames; the Worker's keyframe requests):
        // no video frame waits behind the page's main thread.
        router.ws("/ws") { inbound, outbound, _ in try await Self.serve(.page, hub: hub, bridge: bridge, inbound, outbound) }
        router.ws("/video") { inbound, outbound, _ in try await Self.serve(.video, hub: hub, bridge: bridge, inbound, outbound) }
        let app = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: router),
            configuration: .init(address: .hostname(host, port: port), serverName: "headunit-sim"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? port
                print("headunit-sim: open http://\(host):\(port)/ (daemon at \(endpoint))")
                fflush(nil)  // every C stream: `stdout` is a global Swift 6 will not touch
            }
        )
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await bridge.run() }
            group.addTask {
                do { try await app.runService() } catch { print("headunit-sim: web server: \(error)") }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// One WebSocket until it closes: hub -> socket, and each text message
    /// from the socket is one request to the daemon (page -> daemon).
    static func serve(_ kind: PageSocket, hub: Hub, bridge: Bridge, _ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter) async throws {
        let (stream, id) = await hub.join(kind)
        let reader = Task {
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case .text(let text) = message else { continue }
                // The Worker took a frame of this channel off its socket: room for the next.
                if kind == .video, text.hasPrefix("ack "), let channel = UInt32(text.dropFirst(4)) {
                    await hub.videoAcked(id, channel: channel)
                    continue
                }
                await bridge.handle(pageMessage: text, from: id)
            }
        }
        do {
            for await message in stream {
                switch message {
                case .text(let text):
                    try await outbound.write(.text(text))
                case .video(let channel):
                    // The channel's frames that wait now (the Worker decodes them all), not only the one that woke us.
                    for frame in await hub.takeVideo(channel, for: id) { try await outbound.write(.binary(frame)) }
                case .audio:
                    for chunk in await hub.takeAudio(for: id) { try await outbound.write(.binary(chunk)) }
                }
            }
        } catch {
            // The socket went away mid-write: forget it all the same.
            reader.cancel()
            await hub.leave(id)
            throw error
        }
        reader.cancel()
        await hub.leave(id)
    }

    /// Page files ship as resources of this target: no build step, no CDN.
    static func asset(_ name: String, type: String) throws -> Response {
        guard let url = Bundle.module.url(forResource: "Web/" + name, withExtension: nil)
            ?? Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Web"),
            let data = try? Data(contentsOf: url)
        else { throw HTTPError(.notFound) }
        return Response(
            status: .ok,
            headers: [.contentType: type, .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}

/// JSON helpers: protobuf values in protobuf's JSON mapping, wrapped in a small
/// object naming what it is.
enum JSON {
    static func quote(_ string: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: [string], options: [.fragmentsAllowed])
        let array = String(decoding: data, as: UTF8.self)
        return String(array.dropFirst().dropLast())
    }

    static func proto(_ message: some SwiftProtobuf.Message) -> String {
        (try? message.jsonString()) ?? "{}"
    }

    /// `{"type": type, key: value...}` where values are JSON already.
    static func object(_ type: String, _ fields: [(String, String)]) -> String {
        var parts = ["\"type\":\(quote(type))"]
        for (key, value) in fields { parts.append("\(quote(key)):\(value)") }
        return "{" + parts.joined(separator: ",") + "}"
    }

    /// The name of an envelope's body (the oneof case), for the log.
    static func bodyName(_ envelope: HUEnvelope) -> String {
        guard let json = try? envelope.jsonString(),
              let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        else { return "?" }
        return object.keys.filter { $0 != "requestId" }.sorted().first ?? "?"
    }
}

/// A page's socket (`/ws`: state, log, results, audio) or its video
/// Worker's (`/video`: the frames of every screen, answers to its requests).
enum PageSocket: Sendable {
    case page
    case video
}

/// What a page's socket writer is handed: a text message, or word that a
/// video frame of a channel waits (taken with `Hub.takeVideo` when written).
enum PageMessage: Sendable {
    case text(String)
    case video(UInt32)
    /// Chunks of the car's output wait (taken with `Hub.takeAudio`).
    case audio
}

/// The pages connected and what a new one must be told first.
actor Hub {
    private var clients: [Int: AsyncStream<PageMessage>.Continuation] = [:]
    /// The page sockets (state, log, audio), not video Workers' sockets.
    private var pages: Set<Int> = []
    /// Per video socket: the unsent frames of each channel it can decode (latest frame wins: a keyframe replaces them).
    private var video: [Int: LatestVideoFrames<ByteBuffer>] = [:]
    /// Per video socket and channel: frames written that the Worker has not acknowledged
    /// (`ack CHANNEL` when it took one off its socket); no more are written while
    /// `videoInFlight` are (a run taken whole may pass it, by at most its bound). Without
    /// this bound a page slower than the stream had frames queue in the socket's buffers
    /// (half a second and more, measured) while the latest-frame rule above never engaged.
    private var inFlight: [Int: [UInt32: Int]] = [:]
    /// Channels whose writer found no room: the next ack wakes it.
    private var starved: [Int: Set<UInt32>] = [:]
    static let videoInFlight = 2
    /// Per page: the car's output not yet written, at most `audioBacklog` chunks (latest wins).
    private var audio: [Int: [ByteBuffer]] = [:]
    static let audioBacklog = 5  // 100 ms
    private var nextID = 1
    /// The latest message of each kind that describes state (status, home,
    /// each screen, metadata): a page that connects later starts from them.
    private var snapshot: [String: String] = [:]
    private var snapshotOrder: [String] = []
    private var log: [String] = []

    func join(_ kind: PageSocket) -> (AsyncStream<PageMessage>, Int) {
        let (stream, continuation) = AsyncStream.makeStream(of: PageMessage.self, bufferingPolicy: .bufferingNewest(2048))
        let id = nextID
        nextID += 1
        clients[id] = continuation
        switch kind {
        case .video:
            video[id] = LatestVideoFrames()
        case .page:
            pages.insert(id)
            audio[id] = []
            for key in snapshotOrder { if let message = snapshot[key] { continuation.yield(.text(message)) } }
            for entry in log { continuation.yield(.text(entry)) }
        }
        return (stream, id)
    }

    func leave(_ id: Int) {
        clients.removeValue(forKey: id)?.finish()
        pages.remove(id)
        inFlight[id] = nil
        starved[id] = nil
        video[id] = nil
        audio[id] = nil
    }

    /// 20 ms of the car's output for every page; a page whose writer is
    /// behind loses its oldest chunks, never queues stale audio.
    func audio(_ chunk: AudioOutputChunk) {
        let message = PageAudio.message(chunk)
        for (id, continuation) in clients {
            guard var waiting = audio[id] else { continue }
            if waiting.count >= Self.audioBacklog { waiting.removeFirst() }
            waiting.append(message)
            audio[id] = waiting
            if waiting.count == 1 { continuation.yield(.audio) }
        }
    }

    func takeAudio(for id: Int) -> [ByteBuffer] {
        let waiting = audio[id] ?? []
        if audio[id] != nil { audio[id] = [] }
        return waiting
    }

    /// A frame for every page, bounded per page by `LatestVideoFrames` (a
    /// page still writing the channel's last frames gets the ones after them
    /// written together next, or a keyframe in their place; one that stopped
    /// skips P-frames to the next keyframe). True when a page
    /// waits for a keyframe (it fell behind, lost sync or joined mid-stream):
    /// the caller asks the car for one (once until it comes: `VideoWatch`).
    func video(_ frame: VideoFrame, phoneToSimMicroseconds: Int64) -> Bool {
        var lostSync = false
        let message = PageVideo.message(frame, phoneToSimMicroseconds: phoneToSimMicroseconds)
        for (id, continuation) in clients {
            switch video[id]?.offer(message, channel: frame.channel, isKeyframe: frame.header.isKeyframe, bytes: message.readableBytes) {
            case .wake?: continuation.yield(.video(frame.channel))
            case .needKeyframe?: lostSync = true
            case .waiting?, .skipped?, nil: break
            }
        }
        return lostSync
    }

    /// The streams shown now: frames of the others, waiting for a page, go.
    func videoStreams(_ channels: Set<UInt32>) {
        for id in video.keys { video[id]?.keep(only: channels) }
    }

    func takeVideo(_ channel: UInt32, for id: Int) -> [ByteBuffer] {
        guard inFlight[id, default: [:]][channel, default: 0] < Self.videoInFlight else {
            // They wait (a keyframe replaces them) until the Worker acknowledges one in flight.
            starved[id, default: []].insert(channel)
            return []
        }
        guard let frames = video[id]?.take(channel) else { return [] }
        inFlight[id, default: [:]][channel, default: 0] += frames.count
        return frames
    }

    func videoAcked(_ id: Int, channel: UInt32) {
        guard let count = inFlight[id]?[channel], count > 0 else { return }
        inFlight[id]?[channel] = count - 1
        if starved[id]?.remove(channel) != nil { clients[id]?.yield(.video(channel)) }
    }

    /// The page's decoder asked for a keyframe: nothing more of the channel until it comes.
    func pageLostSync(_ id: Int, channel: UInt32) {
        video[id]?.remove(channel)
    }

    /// State: kept for later pages and sent to all.
    func state(_ key: String, _ message: String) {
        if snapshot[key] == nil { snapshotOrder.append(key) }
        snapshot[key] = message
        broadcast(message)
    }

    func forget(_ key: String) {
        snapshot.removeValue(forKey: key)
        snapshotOrder.removeAll { $0 == key }
    }

    /// A log entry: the last 300 are replayed to a page that connects.
    func logEntry(_ message: String) {
        log.append(message)
        if log.count > 300 { log.removeFirst(log.count - 300) }
        broadcast(message)
    }

    func send(_ message: String, to id: Int) {
        clients[id]?.yield(.text(message))
    }

    func broadcast(_ message: String) {
        for id in pages { clients[id]?.yield(.text(message)) }
    }
}

/// The binary WebSocket message of 20 ms of the car's output (big endian):
///
///     0     2 (audio)      1-3  0
///     4-11  when the first sample plays, the car's CLOCK_MONOTONIC in us
///     12-   960 frames of PCM s16le stereo, 48 kHz (little endian, as the car sent it)
enum PageAudio {
    static func message(_ chunk: AudioOutputChunk) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(12 + chunk.pcm.readableBytes)
        buffer.writeInteger(UInt32(2) << 24)
        buffer.writeInteger(chunk.timestampMicroseconds)
        buffer.writeImmutableBuffer(chunk.pcm)
        return buffer
    }
}

/// The binary WebSocket message of a video frame.
enum PageVideo {
    /// The binary WebSocket message (big endian): the frame's header fields,
    /// when the simulator got it, then the access unit as it came.
    ///
    ///     0     1 (video frame)        1  screen (Screen's number)
    ///     2     flags, bit 0 keyframe  3  0
    ///     4-7   channel                8-11  frame_number
    ///     12-19 timestamp_us           20-27 arrival at the simulator, Unix ms (f64)
    ///     28-31 phone-to-simulator latency in us (-1: the timestamp is not on this clock)
    ///     32-   the H.264 access unit, Annex B
    static func message(_ frame: VideoFrame, phoneToSimMicroseconds: Int64) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(32 + frame.accessUnit.readableBytes)
        buffer.writeInteger(UInt8(1))
        buffer.writeInteger(UInt8(truncatingIfNeeded: frame.screen.rawValue))
        buffer.writeInteger(UInt8(frame.header.isKeyframe ? 1 : 0))
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(frame.channel)
        buffer.writeInteger(frame.header.frameNumber)
        buffer.writeInteger(frame.header.timestampMicroseconds)
        buffer.writeInteger((Date().timeIntervalSince1970 * 1000).bitPattern)
        buffer.writeInteger(Int32(clamping: phoneToSimMicroseconds))
        buffer.writeImmutableBuffer(frame.accessUnit)
        return buffer
    }
}
