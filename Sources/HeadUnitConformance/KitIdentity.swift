import Crypto
import HeadUnitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The kit's phone identity for endpoints that require TCP phones to pair and
/// authenticate (PROTOCOL.md §20). One Ed25519 key per run; it is paired the
/// first time a phone needs it (StartPairing from the HMI endpoint, then Pair
/// on that phone's connection) and removed again when the run ends, so the
/// endpoint keeps no trace of the kit. Everything here follows §20.1-20.3
/// from the wire; nothing is shared with the daemon's code.
final class KitIdentity {
    let key = Curve25519.Signing.PrivateKey()
    /// Set once the endpoint answered Pair with this key's device id.
    private(set) var pairedDeviceID: String?

    var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    /// §20.3: the lowercase hex of the first 16 bytes of SHA-256 of the raw public key.
    var deviceID: String {
        SHA256.hash(data: publicKey).prefix(16).map { byte in
            let digits = Array("0123456789abcdef")
            return String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0x0F)])
        }.joined()
    }

    /// §20.3: the signature covers "headunitd-auth-v1", the challenge and the connection id (u64 BE).
    func signature(challenge: [UInt8], connectionID: UInt64) throws -> [UInt8] {
        var message = Array("headunitd-auth-v1".utf8) + challenge
        for shift in stride(from: 56, through: 0, by: -8) { message.append(UInt8(truncatingIfNeeded: connectionID >> UInt64(shift))) }
        return Array(try key.signature(for: message))
    }

    /// Takes a phone that got `Welcome{auth_required}` into the car: Pair (the
    /// first time, with a code the HMI endpoint opens), then Authenticate.
    func authenticate(_ connection: WireConnection, welcome: HUWelcome, context: CheckContext) throws {
        if pairedDeviceID == nil {
            let code = try context.openPairingWindow()
            var pair = HUPair()
            pair.code = code
            pair.publicKey = .init(publicKey)
            pair.deviceName = "conformance kit"
            let paired = try connection.request(.pair(pair), "the answer to Pair with the code StartPairing gave (§20.2)")
            try requireCode(paired, .ok, "Pair with the open window's code")
            try require(paired.pairing.deviceID == deviceID, "Pair answering the device id of §20.3 (\(deviceID))", got: "\"\(paired.pairing.deviceID)\"")
            pairedDeviceID = deviceID
        }
        var authenticate = HUAuthenticate()
        authenticate.deviceID = deviceID
        authenticate.signature = .init(try signature(challenge: Array(welcome.authChallenge), connectionID: welcome.connectionID))
        let result = try connection.request(.authenticate(authenticate), "the answer to Authenticate (§20.3)")
        try requireCode(result, .ok, "Authenticate with a paired key over this connection's challenge")
    }

    /// Forgets the kit's device on the endpoint (RemovePairedDevice from an HMI).
    func unpair(options: ConformanceOptions) {
        guard let deviceID = pairedDeviceID else { return }
        let context = CheckContext(options: options, reference: nil, identity: self)
        defer { _ = context.finish() }
        guard let hmi = try? context.hmi("hmi-unpair") else { return }
        var remove = HURemovePairedDevice()
        remove.deviceID = deviceID
        if (try? hmi.request(.removePairedDevice(remove), "RemovePairedDevice"))?.code == .ok { pairedDeviceID = nil }
    }
}

extension CheckContext {
    /// StartPairing from an HMI (§20.2): the code a phone pairs with.
    func openPairingWindow() throws -> String {
        let hmi = try self.hmi("hmi-pairing")
        let result = try hmi.request(.startPairing(HUStartPairing()), "the answer to StartPairing (§20.2)")
        try requireCode(result, .ok, "StartPairing from the HMI")
        try require(result.pairing.code.count == 6, "a six-digit pairing code", got: "\"\(result.pairing.code)\"")
        return result.pairing.code
    }
}
