import HeadUnitWire
import NIOCore
import NIOPosix

/// An HMI that reads everything the daemon sends it and decodes none of it:
/// frames are split by their 12-byte header, PINGs answered, the rest
/// counted and dropped. The bench measures the daemon, whose cost includes
/// encoding every screen update for the HMI; a real HMI decodes them in its
/// own process on its own core. Decoding them here, in the client's process,
/// cost the client as much CPU as the daemon spent and made the client, not
/// the daemon, the bottleneck on two cores.
final class DrainHMI: Sendable {
    let channel: Channel

    private init(channel: Channel) { self.channel = channel }

    /// `role` .cluster gives an idle peer for connection scaling: a cluster
    /// that never subscribes is sent nothing but PINGs.
    static func connect(unixPath: String, group: EventLoopGroup, role: HURole = .hmi) async throws -> DrainHMI {
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maxPayload: 16 << 20)))
                    try channel.pipeline.syncOperations.addHandler(Drain())
                }
            }
            .connect(unixDomainSocketPath: unixPath).get()
        var hello = HUHello()
        hello.minVersion = ProtocolVersion.minimum
        hello.maxVersion = ProtocolVersion.maximum
        hello.role = role
        hello.name = role == .hmi ? "bench-drain-hmi" : "bench-idle-peer"
        var envelope = HUEnvelope()
        envelope.requestID = 1
        envelope.hello = hello
        try await channel.writeAndFlush(EnvelopeCodec.frame(envelope, allocator: channel.allocator)).get()
        return DrainHMI(channel: channel)
    }

    func close() async {
        try? await channel.close().get()
    }

    final class Drain: ChannelInboundHandler {
        typealias InboundIn = Frame
        typealias OutboundOut = ByteBuffer

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            guard frame.header.kind == .ping else { return }
            var pong = context.channel.allocator.buffer(capacity: FrameHeader.size + frame.payload.readableBytes)
            pong.writeFrame(kind: .pong, payload: frame.payload)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        }
    }
}
