import HeadUnitWire
import NIOCore

/// A connection's inbound side, as a value: frames cut from what is read
/// (PROTOCOL.md "Framing"; no decoder in front, one handler less on every
/// read), frames held back while the peer's answers wait (section 10.2) or
/// while an answer of the host is still to come (section 4: answers in
/// request order), and reads that arrive while one is served, queued rather
/// than re-entered.
struct InboundFrames {
    /// What a handover takes of a partial frame (section 22) comes from here.
    private var assembler: FrameAssembler
    /// Frames read while the peer's answers wait above the high-water mark,
    /// or while an answer is owed, served once they drain or it is sent.
    /// Bounded by what one read batch held, since nothing more is read meanwhile.
    private var held = CircularBuffer<Frame>()
    /// An answer the host gives later (a `Pair` waiting for the disk): the
    /// requests after it wait for it, in order.
    private(set) var isAwaitingAnswer = false
    private var reads = Reads.idle

    private enum Reads {
        case idle
        /// A read's frames are being served; reads delivered meanwhile (TLS
        /// can hand one over from inside a write) wait here, in order.
        case serving(waiting: CircularBuffer<ByteBuffer>)
    }

    init(maxPayload: UInt32) {
        // Until the peer joins, an oversized header is fatal (section 2): `refuseOversizedAlone` then.
        assembler = FrameAssembler(maxPayload: maxPayload)
    }

    /// The peer joined: from now a frame over the maximum is refused alone,
    /// its bytes skipped, up to 4 x `max_payload_bytes` (section 2, step 3).
    /// Past that the header says nothing trustworthy (a stream out of step,
    /// garbage after a valid magic): FRAME_TOO_LARGE, fatal.
    mutating func refuseOversizedAlone() {
        assembler.skipOversizedUpTo = UInt32(clamping: 4 * UInt64(assembler.maxPayload))
    }

    // MARK: Reads

    /// `bytes` when no read is being served: serve it now, then every read
    /// `nextRead` gives. Nil when a read is being served: `bytes` waits its turn.
    mutating func beginRead(_ bytes: ByteBuffer) -> ByteBuffer? {
        switch reads {
        case .idle:
            reads = .serving(waiting: CircularBuffer())
            return bytes
        case .serving(var waiting):
            reads = .idle  // so `waiting` is not shared while it grows
            waiting.append(bytes)
            reads = .serving(waiting: waiting)
            return nil
        }
    }

    /// The next read that waited; nil when none did, and the serving ends.
    mutating func nextRead() -> ByteBuffer? {
        guard case .serving(var waiting) = reads else { return nil }
        reads = .idle
        guard let next = waiting.popFirst() else { return nil }
        reads = .serving(waiting: waiting)
        return next
    }

    /// The next whole frame of `bytes`; nil once used up (the start of a frame cut short is kept for the next read).
    mutating func nextFrame(from bytes: inout ByteBuffer, allocator: ByteBufferAllocator) throws(FramingError) -> Frame? {
        try assembler.next(from: &bytes, allocator: allocator)
    }

    /// The bytes of a frame not complete yet, taken (a handover, a peer that closed mid-frame).
    mutating func takePartial() -> ByteBuffer? {
        assembler.takePartial()
    }

    /// Amid an oversized frame's payload, dropped as it arrives.
    var isSkippingOversized: Bool { assembler.skipping > 0 }

    // MARK: Held frames

    /// Whether a frame read now must wait: earlier ones wait, or an answer is owed.
    var isHolding: Bool { !held.isEmpty || isAwaitingAnswer }

    /// From now frames wait until `answerSent`.
    mutating func awaitAnswer() {
        isAwaitingAnswer = true
    }

    mutating func answerSent() {
        isAwaitingAnswer = false
    }

    mutating func hold(_ frame: Frame) {
        held.append(frame)
    }

    /// The oldest held frame, unless an answer is still owed.
    mutating func nextHeld() -> Frame? {
        isAwaitingAnswer ? nil : held.popFirst()
    }

    mutating func dropHeld() {
        isAwaitingAnswer = false
        held.removeAll(keepingCapacity: false)
    }
}
