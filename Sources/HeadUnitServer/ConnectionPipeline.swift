import HeadUnitCore
import HeadUnitSecurity
import HeadUnitWire
import NIOCore
import NIOSSL

/// The one place a connection's pipeline is built, for accepted connections
/// and handed-over ones alike (DESIGN.md, "TLS on TCP"):
/// TCP: NIOSSLServerHandler -> ConnectionHandler; Unix: ConnectionHandler
/// alone, which cuts frames itself (`FrameAssembler`). No frame crosses TCP
/// in clear.
// @unchecked: `tls` is set once in `start()`, before any listener accepts.
final class ConnectionPipeline: @unchecked Sendable {
    let host: CarHost
    let maxPayload: UInt32
    private(set) var tls: NIOSSLContext?

    /// Reads of up to 1 MiB (NIO's default stops at 64 KiB): a peer streaming
    /// session bytes (section 18.4) is read in a few large reads per batch,
    /// most of its DATA frames whole in one read (relayed as slices, not
    /// copied; FrameAssembler). A read's size adapts to what the last ones
    /// took: a peer sending little gets small buffers.
    static let receiveAllocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 1 << 20)

    init(host: CarHost, maxPayload: UInt32) {
        self.host = host
        self.maxPayload = maxPayload
    }

    func useTLS(identity: CarIdentity) throws {
        tls = try TLSSetup.serverContext(identity: identity)
    }

    func configure(_ channel: Channel, transport: Transport, restoring: RestoredConnection?) throws {
        let operations = channel.pipeline.syncOperations
        if transport == .tcp {
            // Never plaintext on TCP: without an identity the connection is refused.
            guard let tls else { throw TLSUnavailable() }
            try operations.addHandler(NIOSSLServerHandler(context: tls))
        }
        try operations.addHandler(ConnectionHandler(host: host, transport: transport, maxPayload: maxPayload, restoring: restoring))
    }

    struct TLSUnavailable: Error, CustomStringConvertible {
        var description: String { "TCP is served over TLS only, and the daemon has no TLS identity" }
    }
}
