import HeadUnitCore
import HeadUnitWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOTLS

@testable import HeadUnitServer

/// The server's host and the pipelines it installs, on `EmbeddedChannel`s
/// that share one `EmbeddedEventLoop`: no socket, no thread, no daemon.
/// Everything runs when the test writes; time moves only when it says
/// (`loop.advanceTime`).
final class InMemoryServer {
    let loop = EmbeddedEventLoop()
    let host: CarHost
    let pipeline: ConnectionPipeline
    private var nextPort = 40_000

    init(configuration: ServerConfiguration = ServerConfiguration(listeners: []), disk: (any PairedDeviceDisk)? = nil) {
        var logger = Logger(label: "HeadUnitServerTests")
        logger.logLevel = .critical
        host = CarHost(eventLoop: loop, configuration: configuration, logger: logger, disk: disk)
        pipeline = ConnectionPipeline(host: host, maxPayload: configuration.connection.limits.maxPayloadBytes)
    }

    /// A connection on the Unix socket: the pipeline `ConnectionPipeline.configure` builds for one.
    func connectUnix() throws -> InMemoryPeer {
        let channel = EmbeddedChannel(loop: loop)
        try pipeline.configure(channel, transport: .unix, restoring: nil)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/run/headunitd/headunitd.sock")).wait()
        return InMemoryPeer(channel)
    }

    /// A TCP connection past its TLS handshake: the `ConnectionHandler` that
    /// `FirstFlightGate` puts behind NIOSSL, as a stranger (no admission
    /// ticket), with the TLS layer itself left out (its bytes are NIOSSL's
    /// business, its end is the handshake event).
    func connectTCPAfterTLS() throws -> InMemoryPeer {
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandler(
            ConnectionHandler(host: host, transport: .tcp, maxPayload: pipeline.maxPayload, claimedDevice: nil))
        nextPort += 1
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: nextPort)).wait()
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: nil))
        return InMemoryPeer(channel)
    }
}

/// One frame the server wrote.
struct WrittenFrame {
    var kind: FrameKind?
    var channel: UInt32
    var payload: ByteBuffer
}

enum InMemoryError: Error, CustomStringConvertible {
    case badFrame(String)
    case missing(String)

    var description: String {
        switch self {
        case .badFrame(let what): return "the server wrote a bad frame: \(what)"
        case .missing(let what): return "the server wrote no \(what)"
        }
    }
}

/// The far end of one in-memory connection: writes frames in, reads frames out.
final class InMemoryPeer {
    let channel: EmbeddedChannel
    /// What the server wrote and the test has not taken yet, as bytes.
    private var written: ByteBuffer
    private var nextRequestID: UInt32 = 1

    init(_ channel: EmbeddedChannel) {
        self.channel = channel
        self.written = channel.allocator.buffer(capacity: 0)
    }

    var isOpen: Bool { channel.isActive }

    // MARK: Writing in

    func send(_ bytes: [UInt8]) throws {
        try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
    }

    func send(_ envelope: HUEnvelope) throws {
        try channel.writeInbound(EnvelopeCodec.frame(envelope, allocator: channel.allocator))
    }

    /// Sends `body` as a request; returns its request id.
    @discardableResult
    func request(_ body: HUEnvelope.OneOf_Body) throws -> UInt32 {
        let id = nextRequestID
        nextRequestID += 1
        var envelope = HUEnvelope()
        envelope.requestID = id
        envelope.body = body
        try send(envelope)
        return id
    }

    func ping(_ payload: [UInt8]) throws {
        var frame = channel.allocator.buffer(capacity: FrameHeader.size + payload.count)
        frame.writeFrameHeader(FrameHeader(kind: .ping, length: UInt32(payload.count)))
        frame.writeBytes(payload)
        try channel.writeInbound(frame)
    }

    /// Hello as `role`; returns the Welcome.
    @discardableResult
    func handshake(role: HURole, name: String = "in-memory") throws -> HUWelcome {
        var hello = HUHello()
        hello.role = role
        hello.name = name
        hello.minVersion = 1
        hello.maxVersion = 1
        try request(.hello(hello))
        for envelope in try envelopes() {
            if case .welcome(let welcome) = envelope.body { return welcome }
        }
        throw InMemoryError.missing("Welcome")
    }

    // MARK: Reading out

    /// Every whole frame the server wrote since the last call.
    func frames() throws -> [WrittenFrame] {
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            var buffer = buffer
            written.writeBuffer(&buffer)
        }
        var frames: [WrittenFrame] = []
        while written.readableBytes >= FrameHeader.size {
            let start = written.readerIndex
            guard let magic = written.getInteger(at: start, as: UInt16.self), magic == FrameHeader.magic,
                let kind = written.getInteger(at: start + 2, as: UInt8.self),
                let channel = written.getInteger(at: start + 4, as: UInt32.self),
                let length = written.getInteger(at: start + 8, as: UInt32.self)
            else { throw InMemoryError.badFrame("no magic at \(start)") }
            guard written.readableBytes >= FrameHeader.size + Int(length) else { break }
            written.moveReaderIndex(forwardBy: FrameHeader.size)
            let payload = written.readSlice(length: Int(length))!
            frames.append(WrittenFrame(kind: FrameKind(rawValue: kind), channel: channel, payload: payload))
        }
        written.discardReadBytes()
        return frames
    }

    /// The envelopes among `frames()` (PINGs and PONGs left out).
    func envelopes() throws -> [HUEnvelope] {
        try frames().filter { $0.kind == .message }.map { try EnvelopeCodec.decode($0.payload) }
    }

    /// The Result answering `requestID` among what was written since the last read, if there is one.
    func result(for requestID: UInt32) throws -> HUResult? {
        for envelope in try envelopes() where envelope.requestID == requestID {
            if case .result(let result) = envelope.body { return result }
        }
        return nil
    }
}

/// A disk whose writes wait until the test ends them: a slow (or failing)
/// disk, with the test holding the clock.
final class HeldDisk: PairedDeviceDisk {
    struct Write: Sendable {
        var devices: [PairedDeviceRecord]
        var promise: EventLoopPromise<Void>
    }
    private let pending = NIOLockedValueBox<[Write]>([])
    private let done = NIOLockedValueBox<[[PairedDeviceRecord]]>([])

    func write(_ devices: [PairedDeviceRecord], completingOn eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        pending.withLockedValue { $0.append(Write(devices: devices, promise: promise)) }
        return promise.futureResult
    }

    /// Writes started and not ended yet.
    var waiting: [[PairedDeviceRecord]] { pending.withLockedValue { $0.map(\.devices) } }
    /// Lists written, in order.
    var written: [[PairedDeviceRecord]] { done.withLockedValue { $0 } }

    /// Ends the oldest write: on disk, or failed with `error`.
    func finishOldest(failing error: Error? = nil) {
        let write = pending.withLockedValue { $0.removeFirst() }
        if let error {
            write.promise.fail(error)
        } else {
            done.withLockedValue { $0.append(write.devices) }
            write.promise.succeed(())
        }
    }
}

struct DiskFull: Error, CustomStringConvertible {
    var description: String { "No space left on device" }
}
