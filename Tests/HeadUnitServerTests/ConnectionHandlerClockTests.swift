import HeadUnitCore
import HeadUnitWire
import NIOCore
import NIOEmbedded
import NIOTLS
import Testing

@testable import HeadUnitServer

/// The connection handler reads time only from its event loop: on an
/// `EmbeddedEventLoop` the protocol's timers (handshake, heartbeat) fire when
/// the test moves the clock, to the millisecond, and never otherwise
/// (PROTOCOL.md sections 4 and 6; the lifecycle's close on TCP, section 10.1).
@Suite struct ConnectionHandlerClockTests {
    static let limits = ConnectionLimits()

    static func goodbyes(_ peer: InMemoryPeer) throws -> [HUGoodbye] {
        try peer.envelopes().compactMap { envelope -> HUGoodbye? in
            if case .goodbye(let goodbye) = envelope.body { return goodbye }
            return nil
        }
    }

    @Test func theHandshakeTimeoutFiresOnTheLoopsClock() throws {
        let server = InMemoryServer()
        let silent = try server.connectUnix()
        server.loop.advanceTime(by: .milliseconds(Int64(Self.limits.handshakeTimeoutMilliseconds) - 1))
        #expect(try silent.frames().isEmpty)
        #expect(silent.isOpen)

        server.loop.advanceTime(by: .milliseconds(1))
        let goodbye = try #require(try Self.goodbyes(silent).first)
        #expect(goodbye.code == .handshakeTimeout)
        #expect(!silent.isOpen)
        #expect(server.host.connectionCount == 0)
    }

    @Test func theHeartbeatPingsWithTheLoopsTimeThenCutsOffASilentPeer() throws {
        let server = InMemoryServer()
        let hmi = try server.connectUnix()
        try hmi.handshake(role: .hmi)
        _ = try hmi.frames()
        let interval = Int64(Self.limits.heartbeatIntervalMilliseconds)

        server.loop.advanceTime(by: .milliseconds(interval))
        let pings = try hmi.frames().filter { $0.kind == .ping }
        #expect(pings.count == 1)
        // PROTOCOL.md section 6: the PING carries the daemon's clock, here the test's.
        #expect(pings.first?.payload.getInteger(at: pings.first?.payload.readerIndex ?? 0, as: UInt64.self) == UInt64(interval))

        // Nothing heard since the Hello at 0: cut off at the timeout, not a millisecond before.
        let timeout = Int64(Self.limits.heartbeatTimeoutMilliseconds)
        server.loop.advanceTime(to: .uptimeNanoseconds(UInt64(timeout - 1) * 1_000_000))
        #expect(try Self.goodbyes(hmi).isEmpty)
        #expect(hmi.isOpen)
        server.loop.advanceTime(by: .milliseconds(1))
        let goodbye = try #require(try Self.goodbyes(hmi).first)
        #expect(goodbye.code == .heartbeatTimeout)
        #expect(!hmi.isOpen)
    }

    /// TCP before its TLS handshake (ConnectionLifecycle's awaitingTLS):
    /// nothing can reach the peer in clear, so the timeout's close is all it
    /// gets, and its place in the caps is given back.
    @Test func aTCPConnectionWhoseTLSNeverCompletesIsClosedWithoutAFrame() throws {
        let server = InMemoryServer()
        let channel = EmbeddedChannel(loop: server.loop)
        let handler = ConnectionHandler(host: server.host, transport: .tcp, maxPayload: server.pipeline.maxPayload)
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.9", port: 40_999)).wait()
        #expect(handler.lifecycle.state == .awaitingTLS)

        server.loop.advanceTime(by: .seconds(60))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(!channel.isActive)
        #expect(handler.lifecycle.state == .closed)
        #expect(server.host.connectionCount == 0)
    }

    /// The same connection once TLS is up: the timeout says why.
    @Test func aTCPConnectionPastTLSIsToldWhyItIsClosed() throws {
        let server = InMemoryServer()
        let peer = try server.connectTCPAfterTLS()
        server.loop.advanceTime(by: .seconds(60))
        let goodbye = try #require(try Self.goodbyes(peer).first)
        #expect([.handshakeTimeout, .authRequired].contains(goodbye.code))
        #expect(!peer.isOpen)
    }
}
