import Foundation
import NIOCore
import SwiftProtobuf

/// A message of the protocol with the one codec the daemon uses: the code in
/// `Generated/` (our plugin, `protoc-gen-headunit`) reads the phone's bytes
/// into these plain values and writes the car's frames from them. The same
/// types also conform to swift-protobuf's `Message`, for JSON, text format,
/// the cold paths and as the oracle in tests and fuzzing, never on the
/// daemon's request path.
///
/// Wire behaviour (PROTOCOL.md section 4.4): unknown fields, and known fields
/// sent with another wire type, are skipped and not kept; a singular message
/// field sent twice is merged, a scalar sent twice takes the last value, a
/// oneof takes the last member sent (merged when the same member repeats);
/// unknown enum values are kept as `UNRECOGNIZED(n)`; non-minimal varints
/// are accepted up to ten bytes; repeated scalars are read packed or not and
/// written packed. Encoding is canonical: field-number order, proto3 defaults
/// left out.
public protocol WireMessage: Sendable, Equatable {
    init()
    /// Reads fields from `reader` until its end, merging them into `self`.
    mutating func merge(from reader: inout WireReader) throws(WireDecodingError)
    /// Appends the message's fields (not a length or tag of its own).
    func encode(to writer: inout WireWriter)
    /// The length `encode(to:)` writes, computed without writing.
    var wireSize: Int { get }
    /// Walks the fields that are set, in field-number order (`WireWalker`).
    func walk<W: WireWalker>(_ walker: inout W) throws(W.Failure)
    /// Changes the messages inside this one in place (`WireRewriter`).
    mutating func rewriteMessages<R: WireRewriter>(_ rewriter: inout R)
}

/// Changes messages in place inside a message (the car swaps inline images
/// for refs, an HMI swaps refs back): the generated `rewriteMessages` offers
/// every set message-typed field (singular, repeated, oneof member; not map
/// values) to `wants` first, a read-only look, and writes only those it
/// picks, so what needs no change is neither copied nor re-encoded.
public protocol WireRewriter {
    /// Whether `message` (or something inside it) needs changing.
    func wants<M: WireMessage>(_ message: M) -> Bool
    /// Changes `message`; true to go on into its own fields.
    mutating func rewrite<M: WireMessage>(_ message: inout M) -> Bool
}

extension WireRewriter {
    @inlinable
    public mutating func descend<M: WireMessage>(into message: inout M) {
        if rewrite(&message) { message.rewriteMessages(&self) }
    }
}

/// A generated enum: open (unknown values kept as `UNRECOGNIZED(n)`), and
/// able to say whether it holds one of its declared cases without a dynamic cast.
public protocol WireEnum: SwiftProtobuf.Enum {
    var isRecognized: Bool { get }
}

/// What a walk over a message hears: the limits, the unknown-enum check and
/// the image searches are walkers. Fields at their proto3 default are not
/// walked; numbers are not reported except as repeated counts.
public protocol WireWalker {
    associatedtype Failure: Error
    /// A message (a repeated field's element with its index): return false to not walk into it.
    mutating func enter<M: WireMessage>(_ message: M, field: Int, index: Int?) throws(Failure) -> Bool
    /// Back out of the message last entered.
    mutating func leave()
    mutating func string(_ value: String, field: Int, index: Int?) throws(Failure)
    mutating func bytes(_ value: Data, field: Int, index: Int?) throws(Failure)
    mutating func enumValue<E: WireEnum>(_ value: E, field: Int) throws(Failure)
    /// A repeated or map field that is not empty, before its elements.
    mutating func repeated(count: Int, field: Int) throws(Failure)
}

extension WireWalker {
    @inlinable public mutating func enter<M: WireMessage>(_ message: M, field: Int, index: Int?) throws(Failure) -> Bool { true }
    @inlinable public mutating func leave() {}
    @inlinable public mutating func string(_ value: String, field: Int, index: Int?) throws(Failure) {}
    @inlinable public mutating func bytes(_ value: Data, field: Int, index: Int?) throws(Failure) {}
    @inlinable public mutating func enumValue<E: WireEnum>(_ value: E, field: Int) throws(Failure) {}
    @inlinable public mutating func repeated(count: Int, field: Int) throws(Failure) {}
}

/// A message's canonical encoding, made by this codec and kept beside the
/// value (`HUTemplate.keepWireEncoding()`): a template stored once and sent
/// in many frames is encoded once. A class so copies of the value share it
/// and `==` never sees it; immutable, so it is Sendable.
public final class WireEncoding: Sendable {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// Encoded lengths, for the generated `wireSize`.
public enum WireSize {
    @inlinable
    public static func varint(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    /// A length prefix and `length` bytes.
    @inlinable
    public static func delimited(_ length: Int) -> Int { varint(UInt64(length)) + length }
}

/// Why bytes did not decode. The daemon answers every one the same way (a
/// malformed message, PROTOCOL.md section 4.4); the case says what was wrong.
public enum WireDecodingError: Error, Equatable, Sendable {
    /// A length or value ran past the end of its message.
    case truncated
    /// A tag with field number 0, an invalid wire type, a varint over ten
    /// bytes, a length over 2 GiB, a packed run that does not divide, or an
    /// end-group with no group open.
    case malformed
    case invalidUTF8
    /// Messages nested deeper than `WireReader.maximumDepth`.
    case tooDeep
}

extension WireMessage {
    /// Decodes a whole message from `bytes`.
    @inlinable
    public init(wireBytes bytes: UnsafeRawBufferPointer) throws(WireDecodingError) {
        self.init()
        var reader = WireReader(bytes)
        try merge(from: &reader)
    }

    public init(wireBytes bytes: [UInt8]) throws(WireDecodingError) {
        self = try bytes.withUnsafeBytes(Self.decoded).get()
    }

    public init(wireBytes bytes: Data) throws(WireDecodingError) {
        self = try bytes.withUnsafeBytes(Self.decoded).get()
    }

    /// Decodes a whole message from the readable bytes of `buffer`.
    public init(wire buffer: ByteBuffer) throws(WireDecodingError) {
        self = try buffer.withUnsafeReadableBytes(Self.decoded).get()
    }

    /// The decode as a value, for the `withUnsafe...Bytes` closures above (they do not carry typed throws).
    private static func decoded(_ raw: UnsafeRawBufferPointer) -> Result<Self, WireDecodingError> {
        do throws(WireDecodingError) { return .success(try Self(wireBytes: raw)) } catch { return .failure(error) }
    }

    /// The message's canonical encoding.
    public func wireBytes() -> [UInt8] {
        // Not sized first: that walks the whole message once more, and the
        // writer grows by doubling (nested lengths are patched, not measured).
        var writer = WireWriter()
        encode(to: &writer)
        return writer.bytes
    }

    /// Appends the message's canonical encoding to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        var writer = WireWriter()
        encode(to: &writer)
        writer.withBytes { _ = buffer.writeBytes($0) }
    }
}
