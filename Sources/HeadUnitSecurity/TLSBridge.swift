import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// For clients that speak the protocol over a plain file descriptor (the
/// conformance kit's blocking sockets, raw test clients): a TLS 1.3
/// connection to the car made with NIOSSL, handed over as one end of a local
/// socketpair. Bytes written to the descriptor go out encrypted; what the car
/// sends comes back decrypted; either side closing closes the other.
public enum TLSBridge {
    public struct Connection: Sendable {
        /// The local end to read and write plaintext frames on (the caller closes it).
        public var fd: CInt
        /// The key (SPKI DER) the car presented in the TLS handshake.
        public var carPublicKey: [UInt8]
    }

    /// Connects, completes the TLS handshake (pinning `pinnedCarKey` when
    /// given; `serverName` as the ClientHello's SNI, a paired phone's
    /// admission ticket) within `timeoutMs`, and returns the plaintext end.
    public static func connect(
        host: String, port: Int, pinnedCarKey: [UInt8]? = nil, serverName: String? = nil, from source: String? = nil, timeoutMs: Int = 5_000
    ) throws -> Connection {
        let group = MultiThreadedEventLoopGroup.singleton
        let context = try TLSSetup.clientContext()
        let seenKey = NIOLockedValueBox<[UInt8]>([])
        let ready = group.next().makePromise(of: Void.self)
        var bootstrap = ClientBootstrap(group: group)
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        let tls = try bootstrap
            .connectTimeout(.milliseconds(Int64(timeoutMs)))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try TLSSetup.clientHandler(context: context, pinnedCarKey: pinnedCarKey, serverName: serverName) { key in
                        seenKey.withLockedValue { $0 = key }
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                    try channel.pipeline.syncOperations.addHandler(HandshakeWaiter(promise: ready))
                }
            }
            .connect(host: host, port: port).wait()
        let timeout = tls.eventLoop.scheduleTask(in: .milliseconds(Int64(timeoutMs))) {
            ready.fail(SecurityError("the TLS handshake did not complete within \(timeoutMs) ms"))
        }
        do {
            try ready.futureResult.wait()
            timeout.cancel()
        } catch {
            timeout.cancel()
            tls.close(promise: nil)
            throw error
        }
        var fds: [CInt] = [-1, -1]
        #if canImport(Glibc)
        let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
        #else
        let made = socketpair(AF_UNIX, SOCK_STREAM, 0, &fds)
        #endif
        guard made == 0 else {
            tls.close(promise: nil)
            throw SecurityError("socketpair: \(String(cString: strerror(errno)))")
        }
        let local: Channel
        do {
            local = try ClientBootstrap(group: tls.eventLoop)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .withConnectedSocket(fds[1]).wait()
        } catch {
            // fds[1] is NIO's once handed to it: closing it here could close a reused descriptor.
            tls.close(promise: nil)
            _ = close(fds[0])
            throw error
        }
        do {
            try tls.eventLoop.submit {
                let (a, b) = GlueHandler.pair()
                try tls.pipeline.syncOperations.addHandler(a)
                try local.pipeline.syncOperations.addHandler(b)
            }.wait()
        } catch {
            // The car may close a connection right after its handshake (an
            // unauthenticated one evicted, section 10.1): say so, leak nothing.
            tls.close(promise: nil)
            local.close(promise: nil)
            _ = close(fds[0])
            throw SecurityError("the connection closed right after the TLS handshake (\(error))")
        }
        return Connection(fd: fds[0], carPublicKey: seenKey.withLockedValue { $0 })
    }
}

/// Succeeds its promise when the TLS handshake completes; fails it when the
/// connection ends or errs first.
final class HandshakeWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    let promise: EventLoopPromise<Void>
    init(promise: EventLoopPromise<Void>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            promise.succeed(())
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(SecurityError("the connection closed during the TLS handshake"))
        context.fireChannelInactive()
    }
}

/// Joins two channels of one event loop: what one reads the other writes
/// (as NIO's own examples glue a proxy), and a close or half-close passes
/// over. Backpressure passes over too: a side whose partner cannot take
/// more stops reading, so a client that does not read slows the car's
/// writes exactly as a direct socket would (slow-consumer rules apply).
final class GlueHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    static func pair() -> (GlueHandler, GlueHandler) {
        let a = GlueHandler(), b = GlueHandler()
        a.partner = b
        b.partner = a
        return (a, b)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    private func write(_ buffer: ByteBuffer) { context?.write(wrapOutboundOut(buffer), promise: nil) }
    private var isWritable: Bool { context?.channel.isWritable ?? false }
    private func partnerWritabilityChanged(_ writable: Bool) {
        if writable, pendingRead {
            pendingRead = false
            context?.read()
        }
    }

    func read(context: ChannelHandlerContext) {
        if partner?.isWritable ?? true {
            context.read()
        } else {
            pendingRead = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        partner?.partnerWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }
    private func flush() { context?.flush() }
    private func closeFully() { context?.close(promise: nil) }
    private func closeOutput() {
        context?.close(mode: .output).whenFailure { [weak self] _ in self?.closeFully() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner?.write(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) { partner?.flush() }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.flush()
        partner?.closeFully()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            partner?.flush()
            partner?.closeOutput()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
