import HeadUnitCore
import HeadUnitWire
import NIOCore

/// The one size check of everything the daemon writes (PROTOCOL.md section
/// 10.4): answers, events, screens, home screens, metadata, catch-up frames,
/// Goodbyes and DATA all pass here before they reach a socket. No frame over
/// `max_payload_bytes` is ever written, and none is dropped without a word:
///
/// - an answer that would be over is replaced by `Result{ANSWER_TOO_LARGE}`;
/// - state (home screen, screens, metadata) is kept within a frame by the
///   Car's composed bounds (`ComposedLimits`): the request that would make it
///   larger is refused, so this check never meets it;
/// - any other frame over the maximum would be a daemon bug: it is logged and
///   its recipient is told with `Goodbye{FRAME_TOO_LARGE}` and closed, so the
///   peer reconnects instead of silently missing a message.
enum OutboundFrameCheck {
    enum Outcome: Equatable {
        /// The frame was appended.
        case fits
        /// An answer over the maximum: `Result{ANSWER_TOO_LARGE}` was appended instead.
        case answerRefused(bytes: Int)
        /// Nothing was appended: the recipient must be closed (`goodbyeReason`).
        case oversized(bytes: Int)
    }

    /// Frames `envelope` onto `buffer`, or appends nothing when it does not fit.
    static func write(_ envelope: HUEnvelope, into buffer: inout ByteBuffer, maxPayload: Int) -> Outcome {
        let start = buffer.writerIndex
        EnvelopeCodec.writeFrame(envelope, into: &buffer)
        let size = buffer.writerIndex - start - FrameHeader.size
        guard size > maxPayload else { return .fits }
        buffer.moveWriterIndex(to: start)
        guard case .result = envelope.body else { return .oversized(bytes: size) }
        let refusal = ConnectionStateMachine.result(
            .answerTooLarge, "the answer would be \(size) bytes, over max_payload_bytes (\(maxPayload))", requestID: envelope.requestID)
        EnvelopeCodec.writeFrame(refusal, into: &buffer)
        return .answerRefused(bytes: size)
    }

    /// A frame for one or many peers, or nil when it would be over the maximum.
    static func frame(_ envelope: HUEnvelope, allocator: ByteBufferAllocator, maxPayload: Int) -> ByteBuffer? {
        var buffer = allocator.buffer(capacity: 128)
        switch write(envelope, into: &buffer, maxPayload: maxPayload) {
        case .fits, .answerRefused: return buffer
        case .oversized: return nil
        }
    }

    /// DATA is forwarded as it came: a payload the daemon would not have taken is not sent either.
    static func dataFits(_ payloadBytes: Int, maxPayload: Int) -> Bool {
        payloadBytes <= maxPayload
    }

    /// What the recipient of an oversized frame is told.
    static func goodbyeReason(_ envelope: HUEnvelope, bytes: Int, maxPayload: Int) -> String {
        "the daemon cannot send you a \(bodyName(envelope)) of \(bytes) bytes (over max_payload_bytes \(maxPayload)); reconnect"
    }

    static func bodyName(_ envelope: HUEnvelope) -> String {
        guard let body = envelope.body else { return "message" }
        let text = "\(body)"
        return String(text.prefix { $0 != "(" })
    }
}
