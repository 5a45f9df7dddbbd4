import HeadUnitCore
import HeadUnitSecurity
import HeadUnitWire
import NIOCore
import NIOSSL

/// The one place a connection's pipeline is built, for accepted connections
/// and handed-over ones alike (ARCHITECTURE.md, "TLS on TCP"):
/// TCP: FirstFlightGate + SNIHandler (the ClientHello's admission ticket,
/// section 10.1), which then add NIOSSLServerHandler -> ConnectionHandler;
/// Unix: ConnectionHandler alone, which cuts frames itself
/// (`FrameAssembler`). No frame crosses TCP in clear.
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

    /// TCP reads are bounded work (issue 47, item 9): every byte read on TCP
    /// is decrypted on the serving loop, so one read is at most 64 KiB (four
    /// TLS records) and a readable connection gets one read per turn of the
    /// loop. A phone pushing video as fast as its link allows then delays an
    /// HMI's request by one such read (~0.1 ms of AES-GCM and framing), not
    /// by the 4 MiB four full-size reads used to decrypt at once.
    static let tcpReceiveAllocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 64 << 10)
    static let tcpReadsPerTurn: UInt = 1
    /// NIO's default for the Unix socket's local peers.
    static let unixReadsPerTurn: UInt = 4

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
            if restoring == nil {
                // The first flight is read before TLS and admission (FirstFlightGate), which add the rest.
                try FirstFlightGate.install(on: channel, host: host, tls: tls, maxPayload: maxPayload)
                return
            }
            try operations.addHandler(NIOSSLServerHandler(context: tls))
        }
        try operations.addHandler(ConnectionHandler(host: host, transport: transport, maxPayload: maxPayload, restoring: restoring))
    }

    struct TLSUnavailable: Error, CustomStringConvertible {
        var description: String { "TCP is served over TLS only, and the daemon has no TLS identity" }
    }
}
