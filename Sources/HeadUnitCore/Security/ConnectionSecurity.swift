import HeadUnitWire

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a Unix peer's kernel credentials say (SO_PEERCRED), read by the server
/// when the connection is accepted.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}

/// Who may take a car role on the Unix socket: a peer is allowed when its uid
/// is in `uids` or its gid in `gids`. Both empty: anyone who can open the
/// socket (its file mode is then the only check).
public struct PeerAccess: Sendable, Equatable {
    public var uids: Set<UInt32>
    public var gids: Set<UInt32>

    public init(uids: Set<UInt32> = [], gids: Set<UInt32> = []) {
        self.uids = uids
        self.gids = gids
    }

    public var isUnrestricted: Bool { uids.isEmpty && gids.isEmpty }

    public func allows(_ credentials: PeerCredentials) -> Bool {
        isUnrestricted || uids.contains(credentials.uid) || gids.contains(credentials.gid)
    }
}

/// The per-role SO_PEERCRED rules on the Unix socket: the car roles (HMI,
/// cluster, accessory) and phones (`phone_access`: a USB bridge, so that not
/// every local user that can open the socket can act as the phone and end a
/// paired phone's waiting session, section 21). On TCP a phone authenticates
/// instead (section 20); these rules never apply there.
public struct PeerAccessPolicy: Sendable, Equatable {
    public var hmi: PeerAccess
    public var cluster: PeerAccess
    public var accessory: PeerAccess
    public var phone: PeerAccess

    public init(hmi: PeerAccess = PeerAccess(), cluster: PeerAccess = PeerAccess(), accessory: PeerAccess = PeerAccess(), phone: PeerAccess = PeerAccess()) {
        self.hmi = hmi
        self.cluster = cluster
        self.accessory = accessory
        self.phone = phone
    }

    public func access(for role: HURole) -> PeerAccess? {
        switch role {
        case .hmi: return hmi
        case .cluster: return cluster
        case .accessory: return accessory
        case .phone: return phone
        case .unspecified, .UNRECOGNIZED: return nil
        }
    }

    /// No rule configured: every local peer is alike (the socket's mode decides).
    public var isUnrestricted: Bool { [hmi, cluster, accessory, phone].allSatisfy(\.isUnrestricted) }

    /// Whether a configured (restricted) rule names these credentials: such a
    /// peer may use the Unix slots kept for the configured users (section 10.1).
    public func names(_ credentials: PeerCredentials) -> Bool {
        [hmi, cluster, accessory, phone].contains { !$0.isUnrestricted && $0.allows(credentials) }
    }

    /// Why a peer with these credentials may not take `role`, or nil when it may.
    /// Credentials that could not be read only pass an unrestricted role.
    public func refusal(role: HURole, credentials: PeerCredentials?) -> String? {
        guard let access = access(for: role), !access.isUnrestricted else { return nil }
        let name = RolePolicy.name(of: role)
        guard let credentials else {
            return "the \(name) role is limited to configured users and groups, and this peer's credentials could not be read"
        }
        guard access.allows(credentials) else {
            let uids = access.uids.sorted().map(String.init).joined(separator: ",")
            let gids = access.gids.sorted().map(String.init).joined(separator: ",")
            return "peer \(credentials) may not take the \(name) role (allowed uids [\(uids)], gids [\(gids)])"
        }
        return nil
    }
}

/// The connection layer's security settings, shared by every connection.
public struct ConnectionSecurity: Sendable, Equatable {
    /// A phone on TCP must Authenticate (or Pair, then Authenticate) after
    /// Welcome before anything else. The daemon turns it on unless
    /// `allow_unpaired_tcp` is set; off here so a bare Core stays a bench.
    public var authenticatePhonesOverTCP: Bool
    public var access: PeerAccessPolicy

    public init(authenticatePhonesOverTCP: Bool = false, access: PeerAccessPolicy = PeerAccessPolicy()) {
        self.authenticatePhonesOverTCP = authenticatePhonesOverTCP
        self.access = access
    }

    public func requiresAuthentication(role: HURole, transport: Transport) -> Bool {
        switch (role, transport) {
        case (.phone, .tcp): return authenticatePhonesOverTCP
        case (.phone, .unix), (.hmi, _), (.cluster, _), (.accessory, _), (.unspecified, _), (.UNRECOGNIZED, _): return false
        }
    }
}

/// The bytes a phone signs to authenticate: a domain-separation tag (so a
/// signature can never be replayed as anything else), the connection's
/// random challenge (so it cannot be replayed on another connection), and
/// the connection id.
public enum AuthenticationChallenge {
    public static let domain = Array("headunitd-auth-v1".utf8)
    public static let challengeBytes = 32

    public static func signedMessage(challenge: [UInt8], connectionID: UInt64) -> [UInt8] {
        var message = domain
        message += challenge
        withUnsafeBytes(of: connectionID.bigEndian) { message += $0 }
        return message
    }
}

/// A phone that proved possession of a paired key.
public struct AuthenticatedDevice: Sendable, Equatable {
    public var deviceID: String
    public var name: String
    /// The device's own entitlement allow-list; nil: the car's global policy.
    public var entitlements: EntitlementPolicy?

    public init(deviceID: String, name: String, entitlements: EntitlementPolicy?) {
        self.deviceID = deviceID
        self.name = name
        self.entitlements = entitlements
    }
}

