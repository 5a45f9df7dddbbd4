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
    /// Subscribers that are behind (a change deferred while their frame in
    /// flight was still unsent) and will be called when their writes drain
    /// (`ConnectionHandler.whenDrained`). Everyone else's frame in flight is
    /// known written when the next change finds nothing of theirs unsent:
    /// a subscriber that keeps up costs one write and one flush per change.
    private var awaitingDrain: Set<PeerID> = []
    /// Set while `publish` walks the subscriptions by index: a subscriber
    /// closed meanwhile (a write that fails can close its channel at once)
    /// is removed after the walk, which a removal would otherwise invalidate.
    private var publishing = false
    private var removedWhilePublishing: [PeerID] = []
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
            handler.sendShared(snapshot, flushNow: false)
        }
        guard !changed.isEmpty else { return }
        var shared: ByteBuffer?
        // By index: the subscriptions change in place, the dictionary is not copied.
        publishing = true
        defer {
            publishing = false
            for peer in removedWhilePublishing { remove(peer) }
            removedWhilePublishing.removeAll()
        }
        var index = subscriptions.startIndex
        while index != subscriptions.endIndex {
            defer { index = subscriptions.index(after: index) }
            let peer = subscriptions.keys[index]
            guard !snapshots.contains(peer), let handler = connections[peer] else { continue }
            // Its frame in flight reached the kernel since: written.
            if subscriptions.values[index].inFlight, !awaitingDrain.contains(peer), !handler.hasUnsentBytes,
                let catchUp = subscriptions.values[index].written()
            {
                sendCatchUp(catchUp, to: handler, peer: peer, flushNow: false)
            }
            switch subscriptions.values[index].offer(changed) {
            case .sendShared:
                if shared == nil { shared = frame(feed.update(sections: changed), for: handler) }
                if let shared { handler.sendShared(shared, flushNow: false) }
            case .deferred:
                callWhenDrained(peer, handler)
            }
        }
    }

    func remove(_ peer: PeerID) {
        guard !publishing else {
            removedWhilePublishing.append(peer)
            return
        }
        subscriptions[peer] = nil
        awaitingDrain.remove(peer)
    }

    /// Through the one outbound check (section 10.4). The Car keeps the full
    /// metadata state within a frame (`metadata.bytes`); should a frame still
    /// be over, its recipient is told (Goodbye FRAME_TOO_LARGE), not skipped.
    private func frame(_ update: HUMetadataUpdate, for handler: ConnectionHandler) -> ByteBuffer? {
        var envelope = HUEnvelope()
        envelope.metadataUpdate = update
        if let frame = OutboundFrameCheck.frame(envelope, allocator: allocator, maxPayload: maxPayload) { return frame }
        handler.closeOversized(OutboundFrameCheck.goodbyeReason(envelope, bytes: envelope.wireSize, maxPayload: maxPayload))
        return nil
    }

    /// Once: the peer is called when what it was sent has drained.
    private func callWhenDrained(_ peer: PeerID, _ handler: ConnectionHandler) {
        guard awaitingDrain.insert(peer).inserted else { return }
        handler.whenDrained { [weak self, weak handler] in
            guard let self else { return }
            self.awaitingDrain.remove(peer)
            guard let handler else { return }
            self.drained(peer, handler: handler)
        }
    }

    /// A subscriber that was behind took its frame in flight: send what it missed meanwhile, if anything.
    private func drained(_ peer: PeerID, handler: ConnectionHandler) {
        guard let catchUp = subscriptions[peer]?.written() else { return }
        sendCatchUp(catchUp, to: handler, peer: peer, flushNow: true)
    }

    /// The current values of `sections`: one encoding shared by every subscriber behind the same way.
    private func sendCatchUp(_ sections: MetadataSections, to handler: ConnectionHandler, peer: PeerID, flushNow: Bool) {
        let bytes: ByteBuffer
        if let cached = catchUps[sections] {
            bytes = cached
        } else {
            guard let fresh = frame(feed.update(sections: sections), for: handler) else { return }
            bytes = fresh
            catchUps[sections] = bytes
        }
        handler.sendShared(bytes, flushNow: flushNow)
    }
}
