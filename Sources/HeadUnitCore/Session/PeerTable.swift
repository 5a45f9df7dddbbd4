/// The peers that completed the handshake, and the HMIs among them in the
/// order they joined (the order the server fans screens out in).
struct PeerTable: Sendable {
    /// Every peer by its id.
    var all: [PeerID: PeerInfo] = [:]
    /// HMI peers in join order.
    var hmis: [PeerID] = []

    subscript(peer: PeerID) -> PeerInfo? { all[peer] }

    var count: Int { all.count }

    /// Peer ids in ascending order (status, shutdown: a stable order).
    var ids: [PeerID] { all.keys.sorted() }

    mutating func join(_ peer: PeerID, _ info: PeerInfo) {
        all[peer] = info
        if info.role == .hmi { hmis.append(peer) }
    }

    /// The peer's info, when it had joined.
    mutating func leave(_ peer: PeerID) -> PeerInfo? {
        guard let info = all.removeValue(forKey: peer) else { return nil }
        hmis.removeAll { $0 == peer }
        return info
    }
}
