import Crypto

/// What both sides derive from the SPAKE2 key (PROTOCOL.md section 20.2,
/// "Key schedule", with test vectors). All of it is HKDF and HMAC with
/// SHA-256 (swift-crypto); nothing here is new cryptography.
///
/// The transcript binds the two SPAKE2 messages and the car's TLS public key
/// *as each side sees it*: the phone takes it from the TLS handshake, the car
/// from its own identity. A man in the middle who terminates the phone's TLS
/// shows it another key, so the two transcripts (and every key after them)
/// differ unless it also guessed the code in a SPAKE2 run of its own.
public enum PairingKeySchedule {
    public static let label = Array("headunitd-pair-v1".utf8)
    public static let confirmationBytes = 32

    /// SHA-256( "headunitd-pair-v1" || u16 len || phone message || u16 len ||
    /// car message || u16 len || car SPKI DER ).
    public static func transcriptHash(phoneMessage: [UInt8], carMessage: [UInt8], carPublicKey: [UInt8]) -> [UInt8] {
        var data = label
        for part in [phoneMessage, carMessage, carPublicKey] {
            data.append(UInt8(truncatingIfNeeded: part.count >> 8))
            data.append(UInt8(truncatingIfNeeded: part.count))
            data += part
        }
        return Array(SHA256.hash(data: data))
    }

    /// HKDF-SHA256(IKM = SPAKE2 key, salt = transcript hash, info = label), 32 bytes.
    static func key(_ spakeKey: [UInt8], transcript: [UInt8], info: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: spakeKey), salt: transcript, info: Array(info.utf8), outputByteCount: 32)
    }

    /// The car's proof that it knows the code (sent first): HMAC-SHA256(K_car, transcript).
    public static func carConfirmation(spakeKey: [UInt8], transcript: [UInt8]) -> [UInt8] {
        let key = key(spakeKey, transcript: transcript, info: "headunitd car confirmation")
        return Array(HMAC<SHA256>.authenticationCode(for: transcript, using: key))
    }

    /// The phone's proof, which also authenticates its long-term key and name:
    /// HMAC-SHA256(K_phone, transcript || public key (32) || device name (UTF-8)).
    public static func phoneConfirmation(spakeKey: [UInt8], transcript: [UInt8], publicKey: [UInt8], deviceName: String) -> [UInt8] {
        let key = key(spakeKey, transcript: transcript, info: "headunitd phone confirmation")
        return Array(HMAC<SHA256>.authenticationCode(for: transcript + publicKey + Array(deviceName.utf8), using: key))
    }

    /// What the phone signs with its Ed25519 key in `Pair` (possession of the
    /// private key, for this one pairing): "headunitd-pair-v1" || transcript.
    public static func signedMessage(transcript: [UInt8]) -> [UInt8] {
        label + transcript
    }

    /// Compares without an early exit.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
