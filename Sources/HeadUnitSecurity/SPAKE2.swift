import CNIOBoringSSL

/// One side of a SPAKE2 exchange, as BoringSSL implements it (over
/// edwards25519; `CNIOBoringSSL_curve25519.h`, after
/// draft-irtf-cfrg-spake2-02): each execution lets an active attacker test
/// one guess of the password, and a passive one none. The phone is Alice,
/// the car Bob; both bind the names below (PROTOCOL.md section 20.2).
///
/// Used once: `message` is this side's message; `finish(peerMessage:)`
/// gives the 64-byte shared key. A final class because it owns the C context.
// @unchecked: the context is touched only through this object, which is used
// by one connection on one thread at a time.
public final class SPAKE2Exchange: @unchecked Sendable {
    public enum Role: Sendable { case phone, car }
    public static let phoneName = Array("headunitd phone".utf8)
    public static let carName = Array("headunitd car".utf8)
    public static let messageBytes = 32
    public static let keyBytes = 64

    private let context: OpaquePointer
    public let message: [UInt8]
    private var finished = false

    public init(role: Role, password: [UInt8]) throws {
        let mine = role == .phone ? Self.phoneName : Self.carName
        let theirs = role == .phone ? Self.carName : Self.phoneName
        let made: OpaquePointer? = mine.withUnsafeBufferPointer { me in
            theirs.withUnsafeBufferPointer { them in
                SPAKE2_CTX_new(role == .phone ? spake2_role_alice : spake2_role_bob, me.baseAddress, me.count, them.baseAddress, them.count)
            }
        }
        guard let made else { throw SecurityError("SPAKE2_CTX_new failed") }
        context = made
        var out = [UInt8](repeating: 0, count: Self.messageBytes)
        var length = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer in
            password.withUnsafeBufferPointer { pw in
                SPAKE2_generate_msg(made, buffer.baseAddress, &length, buffer.count, pw.baseAddress, pw.count)
            }
        }
        guard ok == 1, length == Self.messageBytes else {
            SPAKE2_CTX_free(made)
            throw SecurityError("SPAKE2_generate_msg failed")
        }
        message = out
    }

    deinit { SPAKE2_CTX_free(context) }

    /// The shared key (64 bytes) from the peer's message; throws when the
    /// message is not a valid point (or this exchange was finished already).
    public func finish(peerMessage: [UInt8]) throws -> [UInt8] {
        guard !finished else { throw SecurityError("a SPAKE2 exchange is used once") }
        finished = true
        guard peerMessage.count == Self.messageBytes else {
            throw SecurityError("a SPAKE2 message is \(Self.messageBytes) bytes, got \(peerMessage.count)")
        }
        var key = [UInt8](repeating: 0, count: Self.keyBytes)
        var length = 0
        let ok = key.withUnsafeMutableBufferPointer { out in
            peerMessage.withUnsafeBufferPointer { peer in
                SPAKE2_process_msg(context, out.baseAddress, &length, out.count, peer.baseAddress, peer.count)
            }
        }
        guard ok == 1, length == Self.keyBytes else { throw SecurityError("the peer's SPAKE2 message is not valid") }
        return key
    }
}

public struct SecurityError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
