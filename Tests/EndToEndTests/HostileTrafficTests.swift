import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 10's red-team findings, each reproduced over real sockets against
/// the real daemon: valid traffic that used to deny service to the car, and
/// the limits (PROTOCOL.md section 10) that now stop it.
@Suite("Hostile but valid traffic", .ownThread)
struct HostileTrafficTests {
    static let audio = "com.apple.developer.carplay-audio"

    /// A list as large as the default limits allow: 1,800 items of ~500 bytes
    /// (1,801 elements of 2,000; about 0.93 MB of a 1 MiB frame).
    static func largestList(_ id: String, generation: Int) -> HUTemplate {
        let filler = String(repeating: "x", count: 480)
        return HUTemplate.with { template in
            template.id = id
            template.list = HUListTemplate.with {
                $0.title = "generation \(generation)"
                $0.sections = [HUListSection.with { section in
                    section.id = "s"
                    section.items = (0..<1800).map { index in
                        HUListItem.with { $0.id = "i\(index)"; $0.general = HUGeneralItem.with { $0.text = "\(generation) \(index) \(filler)" } }
                    }
                }]
            }
        }
    }

    static func parked() -> HUEnvelope.OneOf_Body {
        .setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.driving = false; $0.limitLists = false; $0.contentStyle = .dark } })
    }

    static func setRoot(_ template: HUTemplate, scene: UInt32) -> HUEnvelope.OneOf_Body {
        .templateRequest(HUTemplateRequest.with { $0.appID = "com.example.app"; $0.sceneID = scene; $0.op = .setRoot(template) })
    }

    static func update(_ template: HUTemplate, scene: UInt32) -> HUEnvelope.OneOf_Body {
        .templateRequest(HUTemplateRequest.with { $0.appID = "com.example.app"; $0.sceneID = scene; $0.op = .update(template) })
    }

    // MARK: - Connections

    /// Bullet 1: 2,000 TCP connections attempted (and held open) while an HMI
    /// connects on the Unix socket: the HMI is welcomed at once. TCP is TLS,
    /// so a flood of bare connects that never start TLS costs the attacker
    /// nothing: that is the attack. TCP holds at most 2 unauthenticated
    /// connections of this one address (issue 23): each newcomer evicts the
    /// address's oldest, or is refused, and is closed (with no frame: it never
    /// started TLS).
    @Test func hmiIsWelcomedWhile2000TCPConnectionsAreAttempted() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        guard let port = daemon.tcpPort else { Issue.record("no TCP port"); return }
        var flood: [RawSocketClient] = []
        defer { for client in flood { client.close() } }
        for _ in 0..<2000 {
            // A refused connect (the backlog full for a moment) is part of the attack, not a test failure.
            if let client = try? RawSocketClient.plainTCP(port: port) { flood.append(client) }
        }
        let hmi = try daemon.connectUnix()
        let welcome = try hmi.handshake(role: .hmi, timeout: 5)
        #expect(welcome.version == 1)
        // Connections past the caps were closed; the address's two newest are held.
        // A generous deadline: a daemon still working through the flood's backlog
        // on a busy machine closes them late, not never (a CI run at load 8 saw one after 5 s).
        var refused = 0
        for client in flood.suffix(22).prefix(20) where client.waitForClose(timeout: 30) { refused += 1 }
        #expect(refused == 20)

        // The daemon holds no more than the cap (the HMI counts itself).
        try hmi.send(.getStatus(HUGetStatus()), requestID: 7)
        let status = try hmi.readResult().result.status
        #expect(status.peers >= 1)
        #expect(try hmi.pingRoundTrip())
        // Once the flood is gone, a phone gets a TCP slot again.
        for client in flood { client.close() }
        flood = []
        var phone: RawSocketClient?
        for _ in 0..<50 where phone == nil {
            if let client = try? RawSocketClient.tcp(port: port), (try? client.handshake(role: .phone, timeout: 2)) != nil {
                phone = client
            } else {
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        #expect(phone != nil)
    }

    /// The Unix socket's own cap gives TOO_MANY_CONNECTIONS too.
    @Test func unixConnectionsOverTheirCapAreToldSo() throws {
        let daemon = try TestDaemon.launch(limits: ["maxUnixConnections": 2])
        defer { _ = try? daemon.terminate() }
        let first = try daemon.connectUnix()
        try first.handshake(role: .hmi)
        let second = try daemon.connectUnix()
        try second.handshake(role: .cluster)
        let third = try daemon.connectUnix()
        let goodbye = try third.readGoodbye()
        #expect(goodbye.code == .tooManyConnections)
        #expect(goodbye.reason.contains("Unix"))
        #expect(third.waitForClose())
        // A slot frees when a connection goes.
        second.close()
        Thread.sleep(forTimeInterval: 0.3)
        let fourth = try daemon.connectUnix()
        try fourth.handshake(role: .hmi)
    }

    /// A handshaken phone whose apps are not accepted in time is closed.
    @Test func aPhoneThatDoesNotAnnounceIsClosed() throws {
        let daemon = try TestDaemon.launch(limits: ["announceTimeoutMs": 400])
        defer { _ = try? daemon.terminate() }
        let idle = try daemon.connectUnix()
        try idle.handshake(role: .phone)
        let announcing = try daemon.connectUnix()
        try announcing.handshake(role: .phone)
        _ = try RequestErrorTests.announce(announcing, [RequestErrorTests.app("com.example.app")])
        let goodbye = try idle.readGoodbye(timeout: 5)
        #expect(goodbye.code == .announceTimeout)
        // The phone carrying apps stays.
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try announcing.pingRoundTrip())
    }

    // MARK: - Requests

    /// A rate limit on valid requests: over it, TOO_MANY_REQUESTS (not
    /// served); a peer that keeps going is cut off with the same code.
    @Test func requestsOverTheRateAreRefusedThenCutOff() throws {
        let daemon = try TestDaemon.launch(limits: ["maxRequestsPerSecond": 40, "maxErrorsPerSecond": 10])
        defer { _ = try? daemon.terminate() }
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        // 45 at once: 40 served (the burst), 5 refused, each answered with its own id.
        let start = DispatchTime.now()
        for id in 1...45 { try hmi.send(.getStatus(HUGetStatus()), requestID: UInt32(id)) }
        var served = 0, refused: [UInt32] = []
        while served + refused.count < 45 {
            let (id, result) = try hmi.readResult()
            if result.code == .ok { served += 1 } else if result.code == .tooManyRequests { refused.append(id) }
        }
        // The bucket refills a token every 25 ms while the daemon reads the
        // batch: on a loaded machine a few more may be served (no more than
        // the time taken refilled), never fewer.
        let refilled = Int(Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 25_000_000)
        #expect((40...41 + refilled).contains(served), "served \(served), \(refilled) tokens refilled meanwhile")
        #expect(refused.count == 45 - served && refused.allSatisfy { $0 > 40 })
        // The bucket refills: a second later requests are served again.
        Thread.sleep(forTimeInterval: 1.1)
        try hmi.send(.getStatus(HUGetStatus()), requestID: 100)
        #expect(try hmi.readResult().result.code == .ok)
        // A flood far over the rate is cut off.
        for id in 200..<400 { try? hmi.send(.getStatus(HUGetStatus()), requestID: UInt32(id)) }
        let goodbye = try hmi.readGoodbye()
        #expect(goodbye.code == .tooManyRequests)
        // Other peers carry on.
        let other = try daemon.connectUnix()
        try other.handshake(role: .hmi)
        #expect(try other.pingRoundTrip())
    }

    /// PINGs count as requests too.
    @Test func pingFloodIsRateLimited() throws {
        let daemon = try TestDaemon.launch(limits: ["maxRequestsPerSecond": 20])
        defer { _ = try? daemon.terminate() }
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        for _ in 0..<25 { try hmi.sendFrame(.ping, payload: [1]) }
        var pongs = 0, refused = 0
        while pongs + refused < 25 {
            guard let frame = try hmi.readFrame() else { break }
            if frame.kind == FrameKind.pong.rawValue { pongs += 1 }
            if frame.kind == FrameKind.message.rawValue, case .result(let result) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body,
                result.code == .tooManyRequests
            {
                refused += 1
            }
        }
        #expect(pongs == 20)
        #expect(refused == 5)
    }

    /// Strings, images and element counts have limits; over one, the request
    /// is refused whole (MESSAGE_TOO_LARGE naming the limit).
    @Test func stringsImagesAndElementsOverTheirLimitsAreRefused() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)

        var longName = RequestErrorTests.app("com.example.long")
        longName.displayName = String(repeating: "n", count: 1025)
        try phone.send(.announceApps(HUAnnounceApps.with { $0.apps = [longName] }), requestID: 3)
        var (id, result) = try phone.readResult()
        #expect(id == 3)
        #expect(result.code == .messageTooLarge)
        #expect(result.limit == "max_string_bytes")
        #expect(result.limitValue == 1024)

        var bigIcon = RequestErrorTests.app("com.example.icon")
        bigIcon.icon = HUImage.with { $0.png = Data(count: 256 * 1024 + 1) }
        try phone.send(.announceApps(HUAnnounceApps.with { $0.apps = [bigIcon] }), requestID: 4)
        (id, result) = try phone.readResult()
        #expect(result.code == .messageTooLarge)
        #expect(result.limit == "max_image_bytes")

        // 65 apps is over the car's maximum of 64 (a count limit of the car, not of the message).
        let many = (0..<65).map { RequestErrorTests.app("com.example.app\($0)") }
        try phone.send(.announceApps(HUAnnounceApps.with { $0.apps = many }), requestID: 5)
        (id, result) = try phone.readResult()
        #expect(result.code == .limitExceeded)
        #expect(result.limit == "announce.apps")

        // The phone's announcement works within the limits; then a 2,001-element list is refused.
        _ = try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.app")])
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        #expect(try RequestErrorTests.launch(hmi, "com.example.app").1.code == .ok)
        let scene = try SpecDecisionTests.Car.sceneConnected(phone).sceneID
        try phone.send(Self.setRoot(TemplateSessionErrorTests.list("root", items: 2001), scene: scene), requestID: 6)
        (id, result) = try phone.readResult()
        #expect(id == 6)
        #expect(result.code == .messageTooLarge)
        #expect(result.limit == "max_message_elements")
        #expect(result.limitValue == 2000)
        try phone.send(Self.setRoot(TemplateSessionErrorTests.list("root", items: 1999), scene: scene), requestID: 7)
        #expect(try phone.readResult().result.code == .ok)
    }

    /// A Hello whose name is over the string limit is refused at the handshake.
    @Test func helloWithAnOverlongNameIsRefused() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let phone = try RawSocketClient.tcp(port: daemon.tcpPort ?? 0)
        try phone.send(RawSocketClient.hello(role: .phone, name: String(repeating: "a", count: 1_000_000 / 2)))
        let goodbye = try phone.readGoodbye()
        #expect(goodbye.code == .helloTooLarge)
        #expect(phone.waitForClose())
    }

    /// No frame over max_payload_bytes is ever sent: an answer that would be
    /// is replaced by ANSWER_TOO_LARGE (provoked here with a small frame limit).
    @Test func anAnswerOverTheFrameLimitIsRefusedNotSent() throws {
        let daemon = try TestDaemon.launch(limits: ["maxPayloadBytes": 6000])
        defer { _ = try? daemon.terminate() }
        var peers: [RawSocketClient] = []
        for index in 0..<8 {
            let peer = try daemon.connectUnix()
            try peer.handshake(role: .cluster, name: "\(index)" + String(repeating: "c", count: 1000))
            peers.append(peer)
        }
        let asker = peers[0]
        try asker.send(.getStatus(HUGetStatus()), requestID: 9)
        guard let frame = try asker.readFrame() else { Issue.record("closed"); return }
        #expect(frame.payload.count <= 6000)
        let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
        #expect(envelope.requestID == 9)
        #expect(envelope.result.code == .answerTooLarge)
        #expect(try asker.pingRoundTrip())
    }

    // MARK: - Fan-out

    /// Bullet 2: ten pipelined updates of the largest list the limits allow,
    /// three HMIs (one reading all the time, two reading slowly, a frame every
    /// 300 ms): none is cut off, and each ends at the latest screen (coalesced
    /// state, not a queue of every intermediate one).
    @Test func threeHMIsStayConnectedWhileAPhonePipelinesTheLargestUpdates() throws {
        let daemon = try TestDaemon.launch()
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        let hmis = try (0..<3).map { _ in try daemon.connectUnix() }
        for hmi in hmis { try hmi.handshake(role: .hmi) }
        _ = try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.app")])
        try hmis[0].send(Self.parked(), requestID: 90)
        #expect(try hmis[0].readResult().result.code == .ok)
        #expect(try RequestErrorTests.launch(hmis[0], "com.example.app").1.code == .ok)
        let scene = try SpecDecisionTests.Car.sceneConnected(phone).sceneID
        try phone.send(Self.setRoot(Self.largestList("root", generation: 0), scene: scene), requestID: 100)
        #expect(try phone.readResult(timeout: 20).result.code == .ok)

        // The readers drain in the background while the phone pipelines ten updates.
        let reader = ScreenFollower(hmis[0])
        reader.start()
        let slowReaders = hmis[1...].map { ScreenFollower($0, pause: 0.3) }
        for slow in slowReaders { slow.start() }
        let updates = 10
        for generation in 1...updates {
            try phone.send(Self.update(Self.largestList("root", generation: generation), scene: scene), requestID: UInt32(100 + generation))
        }
        var answered = 0
        while answered < updates {
            let (_, result) = try phone.readResult(timeout: 60)
            #expect(result.code == .ok)
            answered += 1
        }
        // None was cut off; each reaches the last generation, the slow ones
        // having skipped intermediate screens.
        for follower in [reader] + slowReaders {
            #expect(follower.waitUntil(title: "generation \(updates)", timeout: 60))
            #expect(!follower.sawGoodbye, "cut off: \(follower.goodbyeReason)")
        }
        #expect(slowReaders.allSatisfy { $0.screensSeen < updates + 1 })
    }

    /// Bullet 5: a peer that stops reading is cut off as a slow consumer and,
    /// when it reads again, finds its Goodbye{SLOW_CONSUMER} after what it had
    /// not read; a reading HMI is unaffected.
    @Test func aSlowConsumerReadsItsGoodbye() throws {
        let daemon = try TestDaemon.launch(limits: ["slowConsumerTimeoutMs": 500])
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        let stalled = try daemon.connectUnix()
        try stalled.handshake(role: .hmi)
        let reading = try daemon.connectUnix()
        try reading.handshake(role: .hmi)
        _ = try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.app")])
        try reading.send(Self.parked(), requestID: 90)
        #expect(try reading.readResult().result.code == .ok)
        #expect(try RequestErrorTests.launch(reading, "com.example.app").1.code == .ok)
        let scene = try SpecDecisionTests.Car.sceneConnected(phone).sceneID
        let follower = ScreenFollower(reading)
        follower.start()
        try phone.send(Self.setRoot(Self.largestList("root", generation: 0), scene: scene), requestID: 100)
        #expect(try phone.readResult(timeout: 20).result.code == .ok)
        try phone.send(Self.update(Self.largestList("root", generation: 1), scene: scene), requestID: 101)
        #expect(try phone.readResult(timeout: 20).result.code == .ok)
        // The stalled HMI has ~1.9 MB waiting: past the 0.5 s timeout it is cut
        // off; within the 5 s it is given, it reads everything.
        Thread.sleep(forTimeInterval: 1.5)
        var last: HUEnvelope?
        while let frame = try stalled.readFrame(timeout: 10) {
            if frame.kind == FrameKind.message.rawValue { last = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)) }
        }
        #expect(last?.goodbye.code == .slowConsumer, "last: \(String(describing: last))\n\(daemon.log.split(separator: "\n").suffix(30).joined(separator: "\n"))")
        #expect(follower.waitUntil(title: "generation 1", timeout: 20))
        #expect(!follower.sawGoodbye, "cut off: \(follower.goodbyeReason)")
    }
}

/// Payloads handed from a reading thread to a decoding one.
final class FrameInbox: @unchecked Sendable {
    // @unchecked: every access to `payloads` and `ended` holds `condition`.
    private let condition = NSCondition()
    private var payloads: [[UInt8]] = []
    private var ended = false

    func put(_ payload: [UInt8]) { condition.withLock { payloads.append(payload); condition.broadcast() } }
    func end() { condition.withLock { ended = true; condition.broadcast() } }

    /// The next payload, waiting for one; nil once the reader ended and all were taken.
    func take() -> [UInt8]? {
        condition.lock()
        defer { condition.unlock() }
        while payloads.isEmpty && !ended { condition.wait() }
        return payloads.isEmpty ? nil : payloads.removeFirst()
    }
}

/// Reads an HMI's frames (on its own thread when started) and remembers the
/// main screen's list title after each ScreenUpdate.
final class ScreenFollower: @unchecked Sendable {
    // @unchecked: `title` and `sawGoodbye` are guarded by `lock`; the client is used by one thread at a time
    // (the reading thread of `start`; the decoding thread never touches it).
    private let client: RawSocketClient
    private let lock = NSCondition()
    private let pause: Double
    private var title = ""
    private var goodbye = false
    private var reason = ""
    private var seen = 0

    init(_ client: RawSocketClient, pause: Double = 0) {
        self.client = client
        self.pause = pause
    }

    var sawGoodbye: Bool { lock.withLock { goodbye } }
    var goodbyeReason: String { lock.withLock { reason } }
    /// Main-screen states seen (fulls and title changes).
    var screensSeen: Int { lock.withLock { seen } }

    func start() {
        guard pause == 0 else {
            Thread.detachNewThread { [self] in
                _ = readUntil(title: "\u{0}never", timeout: 120)
            }
            return
        }
        // A reading HMI takes bytes as soon as they come: decoding a ~1 MB
        // screen in a debug build on a loaded machine can outlast a short
        // slow-consumer timeout, so one thread reads (and answers PINGs) and
        // another decodes.
        let inbox = FrameInbox()
        Thread.detachNewThread { [self] in
            while let payload = nextMessage(timeout: 120) { inbox.put(payload) }
            inbox.end()
        }
        Thread.detachNewThread { [self] in
            while let payload = inbox.take() {
                guard let envelope = try? EnvelopeCodec.decode(ByteBuffer(bytes: payload)) else { continue }
                _ = handle(envelope, wanted: "\u{0}never")
                if sawGoodbye { return }
            }
        }
    }

    /// Reads on the calling thread until the main screen shows `title`.
    func readUntil(title wanted: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let payload = nextMessage(timeout: max(0, deadline.timeIntervalSinceNow)) else { return false }
            guard let envelope = try? EnvelopeCodec.decode(ByteBuffer(bytes: payload)) else { continue }
            if pause > 0 { Thread.sleep(forTimeInterval: pause) }
            if handle(envelope, wanted: wanted) { return true }
            if sawGoodbye { return false }
        }
        return false
    }

    /// The next MESSAGE frame's payload; nil on timeout or EOF. A real HMI
    /// answers the daemon's PINGs, slow or not (a long run under load outlasts
    /// the heartbeat timeout), so the PINGs met on the way are answered.
    private func nextMessage(timeout: Double) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(timeout)
        while let frame = try? client.readFrame(timeout: max(0, deadline.timeIntervalSinceNow)) {
            if frame.kind == FrameKind.ping.rawValue {
                try? client.sendFrame(.pong, payload: frame.payload)
            } else if frame.kind == FrameKind.message.rawValue {
                return frame.payload
            }
        }
        return nil
    }

    /// Notes the main screen's title or a Goodbye; true when the title is `wanted`.
    private func handle(_ envelope: HUEnvelope, wanted: String) -> Bool {
        switch envelope.body {
        case .screenUpdate(let update) where update.screen == .main:
            var seen: String?
            switch update.change {
            case .full(let screen): seen = screen.top.list.title
            case .diff(let diff):
                for change in diff.changes {
                    if case .title(let text) = change.element { seen = text }
                    if case .replaced(let template) = change.element { seen = template.list.title }
                }
            default: break
            }
            if let seen {
                lock.withLock { title = seen; self.seen += 1; lock.broadcast() }
                return seen == wanted
            }
            return false
        case .goodbye(let farewell):
            lock.withLock { goodbye = true; reason = "\(farewell.code): \(farewell.reason)"; lock.broadcast() }
            return false
        default:
            return false
        }
    }

    /// Waits (for a started follower) until the title shows.
    func waitUntil(title wanted: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while title != wanted {
            if !lock.wait(until: deadline) { return title == wanted }
        }
        return true
    }
}
