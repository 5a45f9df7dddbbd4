import HeadUnitCore
import NIOCore
import NIOSSL
import NIOTLS

/// The front of every accepted TCP connection (PROTOCOL.md section 10.1,
/// "Paired phones first"): before any TLS work, the connection waits among
/// those whose first flight was not read yet (`Admission.firstFlightArriving`,
/// a pool where the oldest makes room and that costs a descriptor each);
/// NIO's `SNIHandler` reads the ClientHello's server name; a verified
/// admission ticket there makes it a paired device's connection, which no
/// stranger evicts. Then the TLS handler and the `ConnectionHandler` are
/// added behind it and admission proper runs (`CarHost.admit`), with the
/// ClientHello replayed into TLS.
final class FirstFlightGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let host: CarHost
    private let tls: NIOSSLContext
    private let maxPayload: UInt32
    private enum State {
        case accepted
        /// Counted among the connections waiting for their first flight.
        case waiting(id: UInt64, deadline: Scheduled<Void>)
        /// Read, timed out or closed: no longer counted.
        case done
    }
    private var state = State.accepted

    init(host: CarHost, tls: NIOSSLContext, maxPayload: UInt32) {
        self.host = host
        self.tls = tls
        self.maxPayload = maxPayload
    }

    /// Puts the gate and the ClientHello reader in front of a new TCP connection.
    static func install(on channel: Channel, host: CarHost, tls: NIOSSLContext, maxPayload: UInt32) throws {
        let gate = FirstFlightGate(host: host, tls: tls, maxPayload: maxPayload)
        let operations = channel.pipeline.syncOperations
        try operations.addHandler(gate)
        try operations.addHandler(
            ByteToMessageHandler(
                SNIHandler { [unowned gate] result in
                    gate.firstFlightRead(result, channel: channel)
                }))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arrived(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arrived(context: context)
        context.fireChannelActive()
    }

    private func arrived(context: ChannelHandlerContext) {
        guard case .accepted = state else { return }
        let id = host.firstFlightArriving(context.channel)
        let timeout = host.configuration.connectionCaps.tcpFirstFlightTimeoutMilliseconds
        // Nothing was said, so nothing is answered: a connection that sends no ClientHello is closed.
        let deadline = context.eventLoop.scheduleTask(in: .milliseconds(Int64(clamping: timeout))) { [channel = context.channel] in
            channel.close(promise: nil)
        }
        state = .waiting(id: id, deadline: deadline)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended()
        context.fireChannelInactive()
    }

    private func ended() {
        if case .waiting(let id, let deadline) = state {
            deadline.cancel()
            host.firstFlightEnded(id)
        }
        state = .done
    }

    /// The ClientHello was read (or what came was no ClientHello: `.fallback`,
    /// and TLS will refuse it): the connection leaves the waiting pool and
    /// meets admission as a paired device's, when its ticket verifies, or as a stranger's.
    private func firstFlightRead(_ result: SNIResult, channel: Channel) -> EventLoopFuture<Void> {
        ended()
        var serverName: String?
        if case .hostname(let name) = result { serverName = name }
        let claim = host.ticketClaim(serverName: serverName)
        return channel.eventLoop.makeCompletedFuture {
            let operations = channel.pipeline.syncOperations
            try operations.addHandler(NIOSSLServerHandler(context: tls))
            try operations.addHandler(ConnectionHandler(host: host, transport: .tcp, maxPayload: maxPayload, claimedDevice: claim))
            operations.removeHandler(self, promise: nil)
        }
    }
}
