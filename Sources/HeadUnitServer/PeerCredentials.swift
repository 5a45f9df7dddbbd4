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
