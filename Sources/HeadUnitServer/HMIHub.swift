import HeadUnitCore
import HeadUnitWire
import NIOCore

/// Delivers the HMIs' state streams (home screen, each screen; PROTOCOL.md
/// sections 10.5 and 12) on the host's event loop. Every frame is encoded
/// once and the same ByteBuffer written to each HMI that takes it: a live
/// update, an image (`ImageData`, section 12.6) and the latest state of a
/// stream for HMIs that were behind or are new. So what the daemon holds per
/// HMI is at most its write buffer's high-water mark plus one frame, however
/// many HMIs fall behind together.
///
/// An HMI that is behind (not writable) skips a stream's updates and has the
/// stream noted as stale; when it takes writes again it is sent, per stale
/// stream in a fixed order, the images of the stream's latest state it was
/// not sent yet, then that state. A new HMI starts with every stream stale.
final class HMIHub {
    private struct Observer {
        /// Streams to send the latest state of, in order, each once.
        var stale: [HMIStream] = []
        /// Images this connection was sent (or was told of by the state it took).
        var images: Set<String> = []

        mutating func markStale(_ stream: HMIStream) {
            if !stale.contains(stream) { stale.append(stream) }
        }
    }

    private struct Latest {
        var frame: ByteBuffer
        var images: [String]
    }

    private var observers: [PeerID: Observer] = [:]
    /// The latest state of each stream, encoded, until the stream changes.
    private var latest: [HMIStream: Latest] = [:]
    /// `ImageData` frames, encoded once for every HMI (dropped with the image).
    private var imageFrames: [String: ByteBuffer] = [:]
    private let allocator = ByteBufferAllocator()
    /// Home first, then the screens in a fixed order, as on joining.
    private static let order: [HMIStream] = [.home, .screen(.main), .screen(.dashboard), .screen(.instrumentCluster)]

    /// A new HMI: the latest state of `streams` (images first) as it takes writes.
    func joined(_ peer: PeerID, streams: [HMIStream], car: inout Car, handler: ConnectionHandler?) {
        var observer = Observer()
        for stream in streams { observer.markStale(stream) }
        observers[peer] = observer
        if let handler { pump(peer, car: &car, handler: handler) }
    }

    func remove(_ peer: PeerID) {
        observers[peer] = nil
    }

    /// A change of `stream`: to every HMI that keeps up and holds its images;
    /// the others get the stream's latest state when they can take it.
    func publish(
        _ stream: HMIStream, _ envelope: HUEnvelope, images: [String], car: inout Car,
        connections: [PeerID: ConnectionHandler], writer: FrameWriter
    ) {
        latest[stream] = nil
        var frame: ByteBuffer?
        for peer in car.hmiPeerIDs {
            // An HMI carried over a restart (section 22) has no record here yet: it starts with none.
            guard let handler = connections[peer] else { continue }
            var observer = observers[peer] ?? Observer()
            if handler.isKeepingUp, !observer.stale.contains(stream), images.allSatisfy(observer.images.contains) {
                if frame == nil { frame = EnvelopeCodec.frame(envelope, allocator: allocator, using: &writer.writer) }
                handler.writeShared(frame!)
                continue
            }
            observer.markStale(stream)
            observers[peer] = observer
            // Images it lacks go out now while it takes them; the state after them.
            if handler.isKeepingUp { pump(peer, car: &car, handler: handler) }
        }
        pruneImages(car: car)
    }

    /// The HMI can take writes again.
    func caughtUp(_ peer: PeerID, car: inout Car, handler: ConnectionHandler) {
        guard observers[peer]?.stale.isEmpty == false else { return }
        pump(peer, car: &car, handler: handler)
    }

    /// Before a handover (section 22): every HMI behind is sent its latest
    /// state now, writable or not, so the next process need not know.
    func catchUpAll(car: inout Car, connections: [PeerID: ConnectionHandler]) {
        for peer in observers.keys.sorted() where observers[peer]?.stale.isEmpty == false {
            if let handler = connections[peer] { pump(peer, car: &car, handler: handler, evenIfBehind: true) }
        }
    }

    /// Sends stale streams' images and latest states while the HMI takes writes.
    private func pump(_ peer: PeerID, car: inout Car, handler: ConnectionHandler, evenIfBehind: Bool = false) {
        guard var observer = observers[peer] else { return }
        defer { observers[peer] = observer }
        while evenIfBehind || handler.isKeepingUp, !observer.stale.isEmpty {
            let stream = Self.order.first(where: observer.stale.contains) ?? observer.stale[0]
            guard let state = latestState(stream, car: &car) else {
                observer.stale.removeAll { $0 == stream }
                continue
            }
            if let missing = state.images.first(where: { !observer.images.contains($0) }) {
                // An image the state shows but the car no longer holds cannot
                // happen (the state is current); were it so, the HMI asks (GetImage).
                if let image = imageFrame(missing, car: car) { handler.writeShared(image) }
                observer.images.insert(missing)
                continue
            }
            handler.writeShared(state.frame)
            observer.stale.removeAll { $0 == stream }
        }
    }

    private func latestState(_ stream: HMIStream, car: inout Car) -> Latest? {
        if let cached = latest[stream] { return cached }
        guard let state = car.catchUp(stream) else { return nil }
        let encoded = Latest(frame: EnvelopeCodec.frame(state.envelope, allocator: allocator), images: state.images)
        latest[stream] = encoded
        return encoded
    }

    private func imageFrame(_ ref: String, car: Car) -> ByteBuffer? {
        if let cached = imageFrames[ref] { return cached }
        guard let data = car.hmiImage(ref) else { return nil }
        var envelope = HUEnvelope()
        envelope.imageData = data
        let frame = EnvelopeCodec.frame(envelope, allocator: allocator)
        imageFrames[ref] = frame
        return frame
    }

    /// Forgets images the state no longer shows (the frames, and which HMI
    /// was sent them), once they are a good part of what is held.
    private func pruneImages(car: Car) {
        let held = car.hmiImages.count
        if imageFrames.count > held + 16 {
            imageFrames = imageFrames.filter { car.hmiImages.png($0.key) != nil }
        }
        for (peer, observer) in observers where observer.images.count > 2 * held + 64 {
            observers[peer]!.images = observer.images.filter { car.hmiImages.png($0) != nil }
        }
    }
}
