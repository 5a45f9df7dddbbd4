import Crypto

/// A paired phone's claim in its first flight (PROTOCOL.md section 10.1,
/// "Paired phones first"): the TLS ClientHello's server name carries the
/// device id, a counter that only grows, and the device key's Ed25519
/// signature over them and the car's key. The car reads it before any TLS
/// work and admits the connection as that device's: no stranger can evict
/// it, whatever addresses or timing it uses. A ticket that does not verify,
/// or whose counter is not above the last one the car accepted for that
/// device (a replay of a sniffed ClientHello), is ignored: the connection is
/// a stranger, as one without a ticket.
///
/// The server name, lowercase ASCII (DNS-like labels of at most 63 bytes):
///
///     hu1.<device id, 32 hex>.<counter, 16 hex>.<signature hex 0..<43>.<43..<86>.<86..<128>
public struct AdmissionTicket: Sendable, Equatable {
    public static let prefix = "hu1"
    /// Domain separation: a ticket's signature can never be replayed as an `Authenticate` or a pairing proof.
    public static let domain = Array("headunitd-admit-v1".utf8)

    /// The paired device's id (lowercase hex of SHA-256(public key)'s first 16 bytes).
    public var deviceID: String
    /// Larger than in every earlier ticket of this device (a phone uses its clock in microseconds).
    public var counter: UInt64
    /// Ed25519, 64 bytes, over `signedMessage(carKeyDER:deviceID:counter:)`.
    public var signature: [UInt8]

    public init(deviceID: String, counter: UInt64, signature: [UInt8]) {
        self.deviceID = deviceID
        self.counter = counter
        self.signature = signature
    }

    /// Signs a ticket for the car whose TLS key (SPKI DER) is `carKeyDER`.
    public init(signing key: Curve25519.Signing.PrivateKey, deviceID: String, carKeyDER: [UInt8], counter: UInt64) throws {
        let message = Self.signedMessage(carKeyDER: carKeyDER, deviceID: deviceID, counter: counter)
        self.init(deviceID: deviceID, counter: counter, signature: Array(try key.signature(for: message)))
    }

    /// The domain, SHA-256 of the car's key (a ticket for one car is worth nothing at another), the device id and the counter.
    public static func signedMessage(carKeyDER: [UInt8], deviceID: String, counter: UInt64) -> [UInt8] {
        var message = domain
        message += SHA256.hash(data: carKeyDER)
        message += Array(deviceID.utf8)
        withUnsafeBytes(of: counter.bigEndian) { message += $0 }
        return message
    }

    /// Whether `signature` is the device key's over this ticket for this car.
    public func verifies(publicKey: [UInt8], carKeyDER: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: Self.signedMessage(carKeyDER: carKeyDER, deviceID: deviceID, counter: counter))
    }

    /// The TLS server name that carries it.
    public var serverName: String {
        let signatureHex = Hex.string(signature)
        let counterHex = Hex.string(withUnsafeBytes(of: counter.bigEndian) { Array($0) })
        let parts = [
            Self.prefix, deviceID, counterHex,
            String(signatureHex.prefix(43)), String(signatureHex.dropFirst(43).prefix(43)), String(signatureHex.dropFirst(86)),
        ]
        return parts.joined(separator: ".")
    }

    /// Reads a ticket from a TLS server name; nil for any other name (or none).
    public init?(serverName: String) {
        let labels = serverName.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count == 6, labels[0] == Self.prefix, labels[1].utf8.count == 32, Hex.bytes(labels[1], uppercase: false) != nil,
            labels[2].utf8.count == 16, let counter = Hex.bytes(labels[2], uppercase: false),
            let signature = Hex.bytes(labels[3] + labels[4] + labels[5], uppercase: false), signature.count == 64
        else { return nil }
        self.init(
            deviceID: String(labels[1]), counter: counter.reduce(0) { $0 << 8 | UInt64($1) }, signature: signature)
    }
}
