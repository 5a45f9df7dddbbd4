import HeadUnitCore
import HeadUnitWire
import NIOCore

/// The one size check of everything the daemon writes (PROTOCOL.md section
/// 10.4). `ConnectionHandler` writes frames in these ways only, and each
/// passes here before it reaches a socket:
///
/// - envelopes (answers, events, the Goodbye excepted): `write`, `frame`;
/// - frames encoded once for several peers (screens, home screens, images,
///   metadata, their catch-up frames): `frame` when encoded, `payloadFits`
///   again when written;
/// - DATA, VIDEO, MEDIA, PING and PONG, whose payload is written as it is:
///   `payloadFits`;
/// - Goodbye: `goodbye`, which cuts its reason (the daemon's own text) so the
///   frame always fits.
///
/// No frame over `max_payload_bytes` is ever written, and none is dropped
/// without a word:
///
/// - an answer that would be over is replaced by `Result{ANSWER_TOO_LARGE}`;
/// - state (home screen, screens, metadata) is kept within a frame by the
///   Car's composed bounds (`ComposedLimits`): the request that would make it
///   larger is refused, so this check never meets it;
/// - any other frame over the maximum (an event, DATA, VIDEO, MEDIA, a PONG,
///   a shared frame) is not sent, is logged, and its recipient is told with
///   `Goodbye{FRAME_TOO_LARGE}` and closed, so the peer reconnects instead of
///   silently missing a message.
enum OutboundFrameCheck {
    enum Outcome: Equatable {
        /// The frame was appended.
        case fits
        /// An answer over the maximum: `Result{ANSWER_TOO_LARGE}` was appended instead.
        case answerRefused(bytes: Int)
        /// Nothing was appended: the recipient must be closed (`goodbyeReason`).
        case oversized(bytes: Int)
    }

    /// Frames `envelope` onto `buffer`, or appends nothing when it does not
    /// fit. `writer`: where it is encoded first (the host's `FrameWriter`).
    static func write(_ envelope: HUEnvelope, into buffer: inout ByteBuffer, maxPayload: Int, writer: inout WireWriter) -> Outcome {
        let start = buffer.writerIndex
        EnvelopeCodec.writeFrame(envelope, into: &buffer, using: &writer)
        let size = buffer.writerIndex - start - FrameHeader.size
        guard size > maxPayload else { return .fits }
        buffer.moveWriterIndex(to: start)
        guard case .result = envelope.body else { return .oversized(bytes: size) }
        let refusal = ConnectionStateMachine.result(
            .answerTooLarge, "the answer would be \(size) bytes, over max_payload_bytes (\(maxPayload))", requestID: envelope.requestID)
        EnvelopeCodec.writeFrame(refusal, into: &buffer, using: &writer)
        return .answerRefused(bytes: size)
    }

    /// A frame for one or many peers, or nil when it would be over the maximum.
    static func frame(_ envelope: HUEnvelope, allocator: ByteBufferAllocator, maxPayload: Int) -> ByteBuffer? {
        var buffer = allocator.buffer(capacity: 128)
        var writer = WireWriter()
        switch write(envelope, into: &buffer, maxPayload: maxPayload, writer: &writer) {
        case .fits, .answerRefused: return buffer
        case .oversized: return nil
        }
    }

    /// A payload written as it is (DATA, VIDEO, MEDIA, PING, PONG, a shared
    /// frame's payload): over the maximum it is not written, and the caller
    /// closes the recipient (`goodbyeReason`, Goodbye FRAME_TOO_LARGE).
    static func payloadFits(_ payloadBytes: Int, maxPayload: Int) -> Bool {
        payloadBytes <= maxPayload
    }

    /// A frame of `Goodbye{code, reason}` within the maximum: the reason is
    /// cut (at a character boundary) until it fits. A Goodbye with an empty
    /// reason is at most 5 bytes (its field tag and length, the code's tag
    /// and varint), under any maximum a Welcome fits in.
    static func goodbye(_ code: HUErrorCode, _ reason: String, allocator: ByteBufferAllocator, maxPayload: Int) -> ByteBuffer {
        var text = reason
        var envelope = ConnectionStateMachine.goodbye(code, text)
        var size = envelope.wireSize
        while size > maxPayload, !text.isEmpty {
            let budget = text.utf8.count - (size - maxPayload)
            var kept = 0
            text = String(text.unicodeScalars.prefix { scalar in
                kept += scalar.utf8.count
                return kept <= budget
            })
            envelope = ConnectionStateMachine.goodbye(code, text)
            size = envelope.wireSize
        }
        return EnvelopeCodec.frame(envelope, allocator: allocator)
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

/// The memory the host's frames are encoded in before they are copied into
/// their `ByteBuffer`: one writer kept for every frame, so framing an answer,
/// an event or an HMI's screen allocates nothing but its buffer (a
/// `WireWriter` of its own each time was a `malloc` and a `free` per frame,
/// and a screen's grew a doubling at a time). Emptied before each frame.
// A class so the host's `Batch` can hold the noncopyable writer; used on the
// host's loop only, one frame at a time (nothing runs while a frame encodes).
final class FrameWriter {
    var writer = WireWriter()
}
