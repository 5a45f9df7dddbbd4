import HeadUnitWire
import NIOCore
import NIOPosix

/// One External Accessory session, as `EASession` is on iOS: bytes in (an
/// `AsyncSequence` of buffers) and bytes out (`write`, which waits for the
/// other side's credit: backpressure). PROTOCOL.md section 18.
///
///     let stream = try await phone.openAccessorySession(appID: "com.acme.laps", protocol: "com.acme.performance")
///     try await stream.write(ByteBuffer(string: "hello"))
///     for try await bytes in stream { ... }
///
/// Reading grants credit back as buffers are taken, so a reader that stops
/// stops the writer at the other end; nothing queues without bound.
public final class AccessoryStream: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    public let channel: UInt32
    public let appID: String
    /// The protocol in the vehicle's spelling.
    public let protocolName: String
    let connection: HeadUnitConnection
    private var loop: EventLoop { connection.eventLoop }

    /// On the connection's loop only (the box traps elsewhere); every public method hops there.
    private struct LoopState {
        var inbox: [ByteBuffer] = []
        var reader: CheckedContinuation<ByteBuffer?, Error>?
        var sendCredit: Int
        var writers: [CheckedContinuation<Void, Error>] = []
        var consumedSinceGrant = 0
        var grantStep: Int
        /// Why the session ended (nil while open).
        var ended: HUSessionClosed?
        /// The other side sent its last byte (SessionFinished): reading ends once the inbox is empty.
        var otherFinished = false
        /// This side sent its last byte (`finish`).
        var finishedHere = false
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    private var inbox: [ByteBuffer] {
        get { loopState.value.inbox }
        _modify { yield &loopState.value.inbox }
    }
    private var reader: CheckedContinuation<ByteBuffer?, Error>? {
        get { loopState.value.reader }
        _modify { yield &loopState.value.reader }
    }
    private var sendCredit: Int {
        get { loopState.value.sendCredit }
        _modify { yield &loopState.value.sendCredit }
    }
    private var writers: [CheckedContinuation<Void, Error>] {
        get { loopState.value.writers }
        _modify { yield &loopState.value.writers }
    }
    private var consumedSinceGrant: Int {
        get { loopState.value.consumedSinceGrant }
        _modify { yield &loopState.value.consumedSinceGrant }
    }
    private var grantStep: Int {
        get { loopState.value.grantStep }
        _modify { yield &loopState.value.grantStep }
    }
    private var ended: HUSessionClosed? {
        get { loopState.value.ended }
        _modify { yield &loopState.value.ended }
    }
    private var otherFinished: Bool {
        get { loopState.value.otherFinished }
        _modify { yield &loopState.value.otherFinished }
    }
    private var finishedHere: Bool {
        get { loopState.value.finishedHere }
        _modify { yield &loopState.value.finishedHere }
    }
    private let window: Int
    /// The receive window this side asks for: the most a side may have
    /// outstanding (18.5). The daemon's per-peer budget keeps many such
    /// sessions from adding up to more than this peer can hold.
    static let widenedWindow = 256 << 10
    /// How this side's own `close` is recorded: by the app (phone side) or the accessory.
    private let closedHere: HUSessionCloseReason

    init(
        channel: UInt32, appID: String, protocolName: String, initialCredit: UInt32, window: UInt32, connection: HeadUnitConnection,
        closedHere: HUSessionCloseReason
    ) {
        self.channel = channel
        self.appID = appID
        self.protocolName = protocolName
        // The window starts at what the daemon gave (a daemon before `window`
        // existed gave both directions `initial_credit`); `start` widens it.
        self.window = Int(window == 0 ? initialCredit : window)
        // Grant what was read once a quarter of the widened window is consumed,
        // and at least every 64 KiB: few messages, and no stall when the
        // peer's budget is shared by many sessions (PROTOCOL.md 18.5).
        let grantStep = Swift.max(1, Swift.min(1 << 16, Swift.max(self.window, Self.widenedWindow) / 4))
        self.loopState = .makeBoxSendingValue(LoopState(sendCredit: Int(initialCredit), grantStep: grantStep), eventLoop: connection.eventLoop)
        self.connection = connection
        self.closedHere = closedHere
    }

    /// Grants credit back every `bytes` read instead of every quarter of the
    /// window (at least 1; PROTOCOL.md 18.5: grants under 4096 bytes count
    /// against the request rate).
    public func grant(every bytes: Int) async {
        await connection.onLoopAsync { self.grantStep = Swift.max(1, bytes) }
    }

    /// Why the session ended, once it has.
    public func closeReason() async -> HUSessionClosed? {
        await connection.onLoopAsync { self.ended }
    }

    // MARK: reading

    /// The next bytes the other side sent, or nil when the session ended.
    /// Throws `HeadUnitError` when it ended abnormally (not closed by either side).
    public func read() async throws -> ByteBuffer? {
        try await withCheckedThrowingContinuation { continuation in
            connection.onLoop {
                if !self.inbox.isEmpty {
                    continuation.resume(returning: self.take())
                } else if let ended = self.ended {
                    Self.finish(continuation, ended)
                } else if self.otherFinished {
                    continuation.resume(returning: nil)
                } else {
                    self.reader = continuation
                }
            }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: AccessoryStream
        public mutating func next() async throws -> ByteBuffer? { try await stream.read() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    private func take() -> ByteBuffer {
        let buffer = inbox.removeFirst()
        consumedSinceGrant += buffer.readableBytes
        if consumedSinceGrant >= grantStep && !otherFinished || otherFinished && inbox.isEmpty {
            grantConsumed()
        }
        return buffer
    }

    /// Grants back what was read since the last grant. Once the other side
    /// finished, the rest goes back when the last byte is read: the daemon
    /// drops the grant but frees the bytes from this peer's budget, which its
    /// other sessions share (PROTOCOL.md 18.5).
    private func grantConsumed() {
        guard consumedSinceGrant > 0, ended == nil else { return }
        connection.sendOneWay(.sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(consumedSinceGrant) }))
        consumedSinceGrant = 0
    }

    private static func finish(_ continuation: CheckedContinuation<ByteBuffer?, Error>, _ ended: HUSessionClosed) {
        switch ended.reason {
        case .closedByApp, .closedByAccessory, .appClosed, .finished:
            continuation.resume(returning: nil)
        default:
            continuation.resume(throwing: HeadUnitError(code: .notConnected, message: "accessory session ended: \(ended.reason) \(ended.detail)", origin: .connectionClosed))
        }
    }

    // MARK: writing

    /// Sends all of `bytes`, in DATA frames within the credit the other side
    /// granted, waiting for more credit when it runs out.
    public func write(_ bytes: ByteBuffer) async throws {
        var rest = bytes
        let maxFrame = Int(Swift.max(1024, connection.welcome.limits.maxPayloadBytes))
        while rest.readableBytes > 0 {
            let credit = try await waitForCredit()
            let count = Swift.min(credit, maxFrame, rest.readableBytes)
            let slice = rest.readSlice(length: count)!
            try await connection.onLoopAsyncThrowing {
                if let ended = self.ended {
                    throw HeadUnitError(code: .notConnected, message: "accessory session ended: \(ended.reason)", origin: .connectionClosed)
                }
                if self.finishedHere {
                    throw HeadUnitError(code: .notConnected, message: "this side finished writing", origin: .connectionClosed)
                }
                self.sendCredit -= count
                self.connection.sendData(channel: self.channel, slice)
            }
        }
    }

    public func write(_ bytes: [UInt8]) async throws {
        try await write(ByteBuffer(bytes: bytes))
    }

    private func waitForCredit() async throws -> Int {
        while true {
            let credit = try await connection.onLoopAsyncThrowing { () -> Int in
                if let ended = self.ended {
                    throw HeadUnitError(code: .notConnected, message: "accessory session ended: \(ended.reason)", origin: .connectionClosed)
                }
                return self.sendCredit
            }
            if credit > 0 { return credit }
            // Out of credit: wait until a grant (or the end) arrives, then look again.
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                connection.onLoop {
                    if self.ended != nil || self.sendCredit > 0 {
                        continuation.resume()
                    } else {
                        self.writers.append(continuation)
                    }
                }
            }
        }
    }

    /// Half-close, like TCP's FIN or closing an EASession's output stream:
    /// this side sends no more bytes (everything written so far arrives
    /// first), and goes on reading until the other side finishes or closes.
    /// Once both sides finished, the session ends (SessionClosed{FINISHED}).
    public func finish(detail: String = "") async throws {
        let already = await connection.onLoopAsync { () -> Bool in
            defer { self.finishedHere = true }
            return self.finishedHere || self.ended != nil
        }
        guard !already else { return }
        try await connection.request(.closeSession(HUCloseSession.with { $0.channel = channel; $0.detail = detail; $0.half = true }))
    }

    /// Whether the session ended in both directions (closed, or both sides finished).
    public var isEnded: Bool {
        get async { await connection.onLoopAsync { self.ended != nil } }
    }

    /// Ends the session; the other side gets SessionClosed.
    public func close(detail: String = "") async throws {
        try await connection.request(.closeSession(HUCloseSession.with { $0.channel = channel; $0.detail = detail }))
        await connection.onLoopAsync {
            self.end(HUSessionClosed.with { $0.channel = self.channel; $0.appID = self.appID; $0.protocol = self.protocolName; $0.reason = self.closedHere })
        }
    }

    // MARK: from the router (event loop)

    func received(_ payload: ByteBuffer) {
        if let reader {
            self.reader = nil
            inbox.append(payload)
            reader.resume(returning: take())
        } else {
            inbox.append(payload)
        }
    }

    /// On the loop, once routed: widens the receive window to `widenedWindow`
    /// with one grant, so a stream is not held to the daemon's small default.
    func start() {
        guard window < Self.widenedWindow, ended == nil else { return }
        connection.sendOneWay(.sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = UInt32(Self.widenedWindow - window) }))
    }

    /// The other side sent its last byte.
    func otherSideFinished() {
        otherFinished = true
        if inbox.isEmpty { grantConsumed() }
        if let reader, inbox.isEmpty {
            self.reader = nil
            reader.resume(returning: nil)
        }
    }

    func granted(_ bytes: UInt32) {
        sendCredit += Int(bytes)
        let waiting = writers
        writers.removeAll()
        for writer in waiting { writer.resume(returning: ()) }
    }

    func end(_ closed: HUSessionClosed) {
        guard ended == nil else { return }
        ended = closed
        if let reader, inbox.isEmpty {
            self.reader = nil
            Self.finish(reader, closed)
        }
        let waiting = writers
        writers.removeAll()
        let error = HeadUnitError(code: .notConnected, message: "accessory session ended: \(closed.reason)", origin: .connectionClosed)
        for writer in waiting { writer.resume(throwing: error) }
    }
}

/// Routes one connection's session traffic (DATA frames, credits, endings)
/// to its `AccessoryStream`s. Owned by the phone or accessory session; its
/// state lives in a `NIOLoopBoundBox`, touched on the connection's loop only.
final class SessionRouter: Sendable {
    let connection: HeadUnitConnection
    private struct State {
        var streams: [UInt32: AccessoryStream] = [:]
        /// Openings the daemon answered but nobody claimed yet, by channel.
        var outcomes: [UInt32: HUEnvelope.OneOf_Body] = [:]
        var claims: [UInt32: CheckedContinuation<HUEnvelope.OneOf_Body, Never>] = [:]
    }
    private let state: NIOLoopBoundBox<State>
    private var streams: [UInt32: AccessoryStream] {
        get { state.value.streams }
        _modify { yield &state.value.streams }
    }
    private var outcomes: [UInt32: HUEnvelope.OneOf_Body] {
        get { state.value.outcomes }
        _modify { yield &state.value.outcomes }
    }
    private var claims: [UInt32: CheckedContinuation<HUEnvelope.OneOf_Body, Never>] {
        get { state.value.claims }
        _modify { yield &state.value.claims }
    }

    init(connection: HeadUnitConnection) {
        self.connection = connection
        state = .makeBoxSendingValue(State(), eventLoop: connection.eventLoop)
    }

    func add(_ stream: AccessoryStream) {
        streams[stream.channel] = stream
    }

    func data(channel: UInt32, _ payload: ByteBuffer) {
        streams[channel]?.received(payload)
    }

    /// True when the envelope was session traffic.
    func handle(_ body: HUEnvelope.OneOf_Body) -> Bool {
        switch body {
        case .sessionCredit(let credit):
            streams[credit.channel]?.granted(credit.bytes)
        case .sessionFinished(let finished):
            streams[finished.channel]?.otherSideFinished()
        case .sessionClosed(let closed):
            if let stream = streams.removeValue(forKey: closed.channel) {
                stream.end(closed)
            } else {
                settle(closed.channel, body)
            }
        case .sessionOpened(let opened):
            settle(opened.channel, body)
        default:
            return false
        }
        return true
    }

    private func settle(_ channel: UInt32, _ body: HUEnvelope.OneOf_Body) {
        if let claim = claims.removeValue(forKey: channel) {
            claim.resume(returning: body)
        } else {
            outcomes[channel] = body
        }
    }

    /// Waits for the daemon's SessionOpened or SessionClosed on `channel`.
    func outcome(of channel: UInt32) async -> HUEnvelope.OneOf_Body {
        await withCheckedContinuation { continuation in
            connection.onLoop {
                if let body = self.outcomes.removeValue(forKey: channel) {
                    continuation.resume(returning: body)
                } else {
                    self.claims[channel] = continuation
                }
            }
        }
    }

    func closeAll(_ reason: HUSessionCloseReason) {
        for stream in streams.values {
            stream.end(HUSessionClosed.with { $0.channel = stream.channel; $0.appID = stream.appID; $0.reason = reason })
        }
        streams.removeAll()
        for claim in claims.values {
            claim.resume(returning: .sessionClosed(HUSessionClosed.with { $0.reason = reason; $0.detail = "connection closed" }))
        }
        claims.removeAll()
    }
}

extension HeadUnitConnection {
    func onLoopAsyncThrowing<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        if eventLoop.inEventLoop { return try body() }
        return try await eventLoop.submit(body).get()
    }
}

// MARK: - The phone side

extension PhoneSession {
    /// Opens a session for an automaker app on one of its matched protocols
    /// (`EASession(accessory:forProtocol:)`); returns once the accessory accepted.
    /// Throws `HeadUnitError` with the car's code, or `.notConnected` when the
    /// accessory refused (its reason in the message).
    public func openAccessorySession(appID: String, protocol name: String) async throws -> AccessoryStream {
        let result = try await connection.request(.openSession(HUOpenSession.with { $0.appID = appID; $0.protocol = name }))
        let session = result.accessorySession
        switch await sessionRouter.outcome(of: session.channel) {
        case .sessionOpened(let opened):
            let stream = AccessoryStream(
                channel: opened.channel, appID: appID, protocolName: opened.protocol, initialCredit: opened.initialCredit, window: opened.window,
                connection: connection,
                closedHere: .closedByApp)
            await connection.onLoopAsync {
                self.sessionRouter.add(stream)
                stream.start()
            }
            return stream
        case .sessionClosed(let closed):
            throw HeadUnitError(code: .notConnected, message: "accessory session refused: \(closed.reason) \(closed.detail)", origin: .result)
        default:
            throw HeadUnitError(code: .unknownMessage, message: "unexpected answer to OpenSession", origin: .unexpectedAnswer)
        }
    }
}

// MARK: - The accessory side

/// A car accessory feature (role ACCESSORY, Unix socket only): serves protocol
/// strings and accepts sessions from automaker apps.
///
///     let climate = try await AccessoryPeer.connect(to: .default, name: "climate ECU")
///     try await climate.serve(["com.acme.climate"])
///     for await stream in climate.sessions { Task { for try await bytes in stream { try await stream.write(bytes) } } }
public final class AccessoryPeer: Sendable {
    public let connection: HeadUnitConnection
    /// Sessions accepted, in order.
    public let sessions: AsyncStream<AccessoryStream>
    private let sessionContinuation: AsyncStream<AccessoryStream>.Continuation
    let router: SessionRouter
    /// Decides on each request (on the event loop); accepting by default.
    private let shouldAccept: @Sendable (HUSessionRequested) -> String?

    private init(connection: HeadUnitConnection, shouldAccept: @escaping @Sendable (HUSessionRequested) -> String?) {
        self.connection = connection
        self.router = SessionRouter(connection: connection)
        self.shouldAccept = shouldAccept
        (sessions, sessionContinuation) = AsyncStream.makeStream(of: AccessoryStream.self)
    }

    /// `refusal` returns nil to accept a requested session, or the reason to refuse it.
    public static func connect(
        to endpoint: HeadUnitEndpoint, name: String,
        refusal: @escaping @Sendable (HUSessionRequested) -> String? = { _ in nil },
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> AccessoryPeer {
        let peer = MadeOnLoop<AccessoryPeer>()
        _ = try await HeadUnitConnection.connect(
            to: endpoint, configuration: HeadUnitConnection.Configuration(role: .accessory, name: name), group: group
        ) { connection in
            let accessory = AccessoryPeer(connection: connection, shouldAccept: refusal)
            connection.eventHandler = { [weak accessory] envelope in accessory?.handle(envelope) }
            connection.dataHandler = { [weak accessory] channel, payload in accessory?.router.data(channel: channel, payload) }
            connection.closeHandler = { [weak accessory] _ in
                accessory?.router.closeAll(.shuttingDown)
                accessory?.sessionContinuation.finish()
            }
            peer.value = accessory
        }
        return peer.value!
    }

    /// Serves exactly these protocols from now on.
    public func serve(_ protocols: [String]) async throws {
        try await connection.request(.serveProtocols(HUServeProtocols.with { $0.protocols = protocols }))
    }

    public func close() async {
        await connection.close()
    }

    private func handle(_ envelope: HUEnvelope) {
        guard let body = envelope.body else { return }
        if router.handle(body) { return }
        guard case .sessionRequested(let requested) = body else { return }
        let refusal = shouldAccept(requested)
        // Queued now, before the stream is handed out, so DATA written to it
        // reaches the daemon after the answer and finds the session open. The
        // daemon's Result (request_id 0) arrives as a notice nobody needs.
        connection.sendOneWay(.answerSession(HUAnswerSession.with {
            $0.channel = requested.channel
            $0.accept = refusal == nil
            $0.reason = refusal ?? ""
        }))
        guard refusal == nil else { return }
        let stream = AccessoryStream(
            channel: requested.channel, appID: requested.appID, protocolName: requested.protocol,
            initialCredit: requested.initialCredit, window: requested.window, connection: connection, closedHere: .closedByAccessory)
        router.add(stream)
        stream.start()
        sessionContinuation.yield(stream)
    }
}
