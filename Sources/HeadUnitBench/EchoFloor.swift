import Crypto
import HeadUnitClient
import HeadUnitSecurity
import HeadUnitWire
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#endif

/// The floor the daemon is measured against (issue 11): a bare SwiftNIO
/// server that echoes every byte it reads, in a process of its own. Only the
/// handshake is understood (a Hello gets a Welcome, so the same client
/// machinery, `HeadUnitConnection`, drives it); after that nothing is
/// decoded: each request frame comes back as it went out, and the client
/// matches it by its request id as it would the daemon's answer.
enum EchoFloor {
    /// Runs the echo server on a Unix socket until killed.
    static func serve(unixPath: String) throws -> Never {
        unlink(unixPath)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
            }
            .bind(unixDomainSocketPath: unixPath).wait()
        try channel.closeFuture.wait()
        exit(0)
    }

    /// The same on 127.0.0.1:port (SwiftNIO sets TCP_NODELAY on accepted channels, as the daemon does),
    /// over TLS 1.3 as the daemon's TCP is (a throwaway P-256 identity), so
    /// the floor pays for TLS too.
    static func serve(tcpPort: Int) throws -> Never {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let tls = try TLSSetup.serverContext(identity: CarIdentity(privateKey: P256.Signing.PrivateKey()))
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    try channel.pipeline.syncOperations.addHandler(EchoHandler())
                }
            }
            .bind(host: "127.0.0.1", port: tcpPort).wait()
        try channel.closeFuture.wait()
        exit(0)
    }

    /// Welcome first, then every byte back as it came.
    final class EchoHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        /// Bytes of the Hello frame so far; nil once it was answered.
        private var handshake: ByteBuffer? = ByteBuffer()

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            guard var pending = handshake else {
                context.write(wrapOutboundOut(bytes), promise: nil)
                return
            }
            // The handshake: the one frame that is parsed.
            pending.writeBuffer(&bytes)
            guard let frame = try? FrameParser.parse(&pending, maxPayload: 1 << 20) else {
                handshake = pending
                return
            }
            handshake = nil
            let request = (try? EnvelopeCodec.decode(frame.payload))?.requestID ?? 0
            context.write(wrapOutboundOut(Self.welcome(requestID: request, allocator: context.channel.allocator)), promise: nil)
            if pending.readableBytes > 0 { context.write(wrapOutboundOut(pending), promise: nil) }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            context.flush()
        }

        static func welcome(requestID: UInt32, allocator: ByteBufferAllocator) -> ByteBuffer {
            var welcome = HUWelcome()
            welcome.version = 1
            welcome.daemonMinVersion = 1
            welcome.daemonMaxVersion = 1
            welcome.daemonName = "echo-floor"
            var envelope = HUEnvelope()
            envelope.requestID = requestID
            envelope.body = .welcome(welcome)
            return EnvelopeCodec.frame(envelope, allocator: allocator)
        }
    }
}
