import Crypto
import HeadUnitSecurity
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
/// first time a phone needs it (StartPairing from the HMI endpoint, then
/// PairStart and Pair by SPAKE2 on that phone's connection) and removed again when the run ends, so the
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
            let paired = try pair(connection, code: code)
            try requireCode(paired, .ok, "Pair with the open window's code (SPAKE2, §20.2)")
            try require(paired.pairing.deviceID == deviceID, "Pair answering the device id of §20.3 (\(deviceID))", got: "\"\(paired.pairing.deviceID)\"")
            pairedDeviceID = deviceID
        }
        var authenticate = HUAuthenticate()
        authenticate.deviceID = deviceID
        authenticate.signature = .init(try signature(challenge: Array(welcome.authChallenge), connectionID: welcome.connectionID))
        let result = try connection.request(.authenticate(authenticate), "the answer to Authenticate (§20.3)")
        try requireCode(result, .ok, "Authenticate with a paired key over this connection's challenge")
    }

    /// §20.2 step by step: PairStart with the phone's SPAKE2 message; the
    /// car's confirmation checked against the TLS key this connection saw;
    /// then Pair with the phone's confirmation, key and signature. Returns
    /// the first refusal, or Pair's answer.
    private func pair(_ connection: WireConnection, code: String) throws -> HUResult {
        let exchange = try SPAKE2Exchange(role: .phone, password: Array(code.utf8))
        var start = HUPairStart()
        start.spake2Message = .init(exchange.message)
        let started = try connection.request(.pairStart(start), "the answer to PairStart (§20.2)")
        guard started.code == .ok else { return started }
        let seenKey = connection.carPublicKey
        try require(
            !seenKey.isEmpty && PairingKeySchedule.constantTimeEqual(Array(started.pairing.carPublicKey), seenKey),
            "PairStart answering the car key of this TLS session (§20.2)", got: "another key")
        let carMessage = Array(started.pairing.spake2Message)
        let key = try exchange.finish(peerMessage: carMessage)
        let transcript = PairingKeySchedule.transcriptHash(phoneMessage: exchange.message, carMessage: carMessage, carPublicKey: seenKey)
        try require(
            PairingKeySchedule.constantTimeEqual(
                PairingKeySchedule.carConfirmation(spakeKey: key, transcript: transcript), Array(started.pairing.carConfirmation)),
            "the car's key confirmation verifying with the code (§20.2)", got: "a confirmation that does not verify")
        let name = "conformance kit"
        var pair = HUPair()
        pair.publicKey = .init(publicKey)
        pair.deviceName = name
        pair.confirmation = .init(PairingKeySchedule.phoneConfirmation(spakeKey: key, transcript: transcript, publicKey: publicKey, deviceName: name))
        pair.signature = .init(try self.key.signature(for: PairingKeySchedule.signedMessage(transcript: transcript)))
        return try connection.request(.pair(pair), "the answer to Pair (§20.2)")
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
