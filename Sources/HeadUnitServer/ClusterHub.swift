import HeadUnitCore
import HeadUnitWire
import NIOCore

/// Delivers the metadata stream (PROTOCOL.md section 19) to its subscribers
/// on the host's event loop. Each change is encoded once and the same
/// ByteBuffer is written to every subscriber that is caught up; a subscriber
/// with a frame still in flight only has the changed sections noted
/// (`ClusterSubscription`) and gets one catch-up frame with the newest values
/// when its frame has gone out. So the daemon holds at most one metadata frame
/// per subscriber, however fast the app updates and however slowly a peer reads.
final class ClusterHub {
    private var subscriptions: [PeerID: ClusterSubscription] = [:]
    /// The latest feed (a copy-on-write value), for catch-up frames.
    private var feed = ClusterFeed()
    /// Catch-up frames of the current version by the sections they carry: many
    /// subscribers that fell behind the same way share one encoding too.
    private var catchUps: [MetadataSections: ByteBuffer] = [:]
    private let allocator = ByteBufferAllocator()
    private let maxPayload: Int

    init(maxPayload: Int) {
        self.maxPayload = maxPayload
    }

    var subscriberCount: Int { subscriptions.count }

    /// After each input: snapshots for new subscribers, the change for everyone else.
    func publish(snapshots: [PeerID], changed: MetadataSections, feed: ClusterFeed, connections: [PeerID: ConnectionHandler]) {
        if feed.version != self.feed.version { catchUps.removeAll(keepingCapacity: true) }
        self.feed = feed
        for peer in snapshots {
            guard let handler = connections[peer] else { continue }
            var subscription = ClusterSubscription()
            _ = subscription.offer(.all)
            subscriptions[peer] = subscription
            guard let snapshot = frame(feed.snapshot, for: handler) else { continue }
            write(snapshot, to: handler, peer: peer, flushNow: false)
        }
        guard !changed.isEmpty else { return }
        var shared: ByteBuffer?
        for (peer, var subscription) in subscriptions where !snapshots.contains(peer) {
            guard let handler = connections[peer] else { continue }
            let delivery = subscription.offer(changed)
            subscriptions[peer] = subscription
            if delivery == .sendShared {
                if shared == nil { shared = frame(feed.update(sections: changed), for: handler) }
                if let shared { write(shared, to: handler, peer: peer, flushNow: false) }
            }
        }
    }

    func remove(_ peer: PeerID) {
        subscriptions[peer] = nil
    }

    /// Through the one outbound check (section 10.4). The Car keeps the full
    /// metadata state within a frame (`metadata.bytes`); should a frame still
    /// be over, its recipient is told (Goodbye FRAME_TOO_LARGE), not skipped.
    private func frame(_ update: HUMetadataUpdate, for handler: ConnectionHandler) -> ByteBuffer? {
        var envelope = HUEnvelope()
        envelope.metadataUpdate = update
        if let frame = OutboundFrameCheck.frame(envelope, allocator: allocator, maxPayload: maxPayload) { return frame }
        handler.closeOversized(OutboundFrameCheck.goodbyeReason(envelope, bytes: LinearEncoder.size(of: envelope), maxPayload: maxPayload))
        return nil
    }

    private func write(_ frame: ByteBuffer, to handler: ConnectionHandler, peer: PeerID, flushNow: Bool) {
        handler.sendShared(frame, flushNow: flushNow) { [weak self, weak handler] in
            guard let self, let handler else { return }
            self.written(peer, handler: handler)
        }
    }

    /// The subscriber's frame went out: send what it missed meanwhile, if anything.
    private func written(_ peer: PeerID, handler: ConnectionHandler) {
        guard var subscription = subscriptions[peer] else { return }
        let catchUp = subscription.written()
        subscriptions[peer] = subscription
        guard let catchUp else { return }
        let bytes: ByteBuffer
        if let cached = catchUps[catchUp] {
            bytes = cached
        } else {
            guard let fresh = frame(feed.update(sections: catchUp), for: handler) else { return }
            bytes = fresh
            catchUps[catchUp] = bytes
        }
        write(bytes, to: handler, peer: peer, flushNow: true)
    }
}
