import HeadUnitCore
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// SO_PEERCRED on an accepted Unix connection: the connecting process's pid,
/// uid and gid as the kernel recorded them at connect() (they cannot be forged
/// by the peer). nil when the channel is not a socket or the call fails.
enum PeerCredentialsReader {
    static func read(_ channel: Channel) -> PeerCredentials? {
        #if os(Linux)
        guard let provider = channel as? SocketOptionProvider else { return nil }
        // On the channel's own loop the future is already complete.
        let future: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        var credentials: PeerCredentials?
        // Called on the channel's loop (channelActive): the callback runs at once, here.
        future.assumeIsolated().whenSuccess { value in
            credentials = PeerCredentials(pid: value.pid, uid: value.uid, gid: value.gid)
        }
        return credentials
        #else
        return nil
        #endif
    }

    /// Linux's `struct ucred` (Glibc hides it without _GNU_SOURCE): same layout.
    private struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }
}

/// The address a TCP peer is counted under for admission's per-address
/// limits (PROTOCOL.md section 10.1): an IPv4 address as it is; an IPv6
/// address by its /64 prefix, since one host on a network is handed a whole
/// /64 and could otherwise be a new "address" for every connection.
enum AdmissionSource {
    static func key(_ address: SocketAddress?) -> String {
        guard let address else { return "" }
        switch address {
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // ::ffff:a.b.c.d is an IPv4 peer on a dual-stack socket: its own address.
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            return stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                .joined(separator: ":") + "::/64"
        case .v4, .unixDomainSocket:
            return address.ipAddress ?? ""
        }
    }
}
