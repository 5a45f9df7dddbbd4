import Foundation
import HeadUnitClient
import HeadUnitSecurity
import HeadUnitWire
import TestSupport
import Testing

/// The pairing key schedule's test vectors (PROTOCOL.md section 20.2, "Test
/// vectors"): computed independently (Python's hashlib/hmac, RFC 5869 HKDF)
/// and checked here against the implementation the daemon and SDK use.
@Suite(.ownThread) struct PairingCryptoTests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    /// Tests/Security/spake2_reference.py: SPAKE2 and the key schedule
    /// written from PROTOCOL.md 20.2 alone, in Python with its own
    /// edwards25519 arithmetic (no BoringSSL).
    static let reference = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Security/spake2_reference.py").path

    /// Runs the reference; its JSON answer.
    static func runReference(_ arguments: [String]) throws -> [String: String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", reference] + arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 || process.terminationStatus == 1,
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { throw SecurityError("spake2_reference.py failed (\(process.terminationStatus)): \(String(decoding: data, as: UTF8.self))") }
        return object.compactMapValues { $0 as? String }
    }

    /// The reference's fixed scalars (the vectors' 64 random bytes).
    static let phoneRandom = hex((0..<64).map { UInt8($0) })
    static let carRandom = hex((64..<128).map { UInt8($0) })

    /// PROTOCOL.md 20.2's SPAKE2 documentation is enough to interoperate:
    /// the reference, with a fixed scalar, and BoringSSL (HeadUnitSecurity,
    /// what the daemon and the SDK run) agree on the 64-byte key in both
    /// roles when the code is the same, and not when it differs.
    @Test func theReferenceFromTheSpecAgreesWithBoringSSLsSPAKE2() throws {
        // Reference phone (Alice), BoringSSL car (Bob).
        let phoneMessage = Self.bytes(try Self.runReference(["run", "--role", "phone", "--password", "042917", "--scalar", Self.phoneRandom])["message"]!)
        let car = try SPAKE2Exchange(role: .car, password: Array("042917".utf8))
        let carKey = try car.finish(peerMessage: phoneMessage)
        let phoneSide = try Self.runReference(
            ["run", "--role", "phone", "--password", "042917", "--scalar", Self.phoneRandom, "--peer", Self.hex(car.message)])
        #expect(phoneSide["key"] == Self.hex(carKey))
        // BoringSSL phone, reference car.
        let carMessage = Self.bytes(try Self.runReference(["run", "--role", "car", "--password", "042917", "--scalar", Self.carRandom])["message"]!)
        let phone = try SPAKE2Exchange(role: .phone, password: Array("042917".utf8))
        let phoneKey = try phone.finish(peerMessage: carMessage)
        let carSide = try Self.runReference(["run", "--role", "car", "--password", "042917", "--scalar", Self.carRandom, "--peer", Self.hex(phone.message)])
        #expect(carSide["key"] == Self.hex(phoneKey))
        // A wrong code: unrelated keys.
        let guesser = try SPAKE2Exchange(role: .phone, password: Array("000000".utf8))
        let wrong = try Self.runReference(["run", "--role", "car", "--password", "042917", "--scalar", Self.carRandom, "--peer", Self.hex(guesser.message)])
        let guessedKey = Self.hex(try guesser.finish(peerMessage: carMessage))
        #expect(wrong["key"] != nil && wrong["key"] != guessedKey)
    }

    /// The vectors file (PROTOCOL.md 20.2's fixed-scalar vectors) is what the
    /// reference computes, M and N are BoringSSL's, and the key schedule of
    /// its key matches this implementation's.
    @Test func theFixedScalarVectorsHold() throws {
        #expect(try Self.runReference(["selftest"])["selftest"] == "ok")
        // Protocol/vectors/spake2_vectors.json: with the protocol's other vectors.
        let url = URL(fileURLWithPath: Self.reference).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/spake2_vectors.json")
        let vectors = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: String] ?? [:]
        let transcript = PairingKeySchedule.transcriptHash(
            phoneMessage: Self.bytes(vectors["phone_message"]!), carMessage: Self.bytes(vectors["car_message"]!),
            carPublicKey: Self.bytes(vectors["car_key_der"]!))
        #expect(Self.hex(transcript) == vectors["transcript"])
        let key = Self.bytes(vectors["key"]!)
        #expect(Self.hex(PairingKeySchedule.carConfirmation(spakeKey: key, transcript: transcript)) == vectors["car_confirmation"])
        #expect(
            Self.hex(PairingKeySchedule.phoneConfirmation(
                spakeKey: key, transcript: transcript, publicKey: Self.bytes(vectors["public_key"]!), deviceName: vectors["device_name"]!))
                == vectors["confirmation"])
    }

    /// The reference pairs with the real daemon over TLS: its SPAKE2 message
    /// (fixed scalar) in PairStart, the car's confirmation checked by it, its
    /// confirmation in Pair (the signature over its transcript made here with
    /// the phone's Ed25519 key). The right code pairs and authenticates; a
    /// wrong one is refused BAD_PAIRING_CODE and its car confirmation does not verify.
    @Test func theReferencePairsWithTheDaemon() throws {
        let daemon = try TestDaemon.launch(pairing: true)
        defer { _ = try? daemon.terminate() }
        let code = try AuthenticationTests.startPairing(daemon)
        func attempt(code: String, from source: String, identity: PhoneIdentity) throws -> (HUResult, Bool, RawSocketClient, HUWelcome) {
            let phone = try daemon.connectTCP(from: source)
            let welcome = try phone.handshake(role: .phone)
            let mine = try Self.runReference(["run", "--role", "phone", "--password", code, "--scalar", Self.phoneRandom])
            var start = HUPairStart()
            start.spake2Message = Data(Self.bytes(mine["message"]!))
            try phone.send(.pairStart(start), requestID: 2)
            let started = try AuthenticationTests.readResult(phone, requestID: 2)
            #expect(started.code == .ok)
            #expect(Array(started.pairing.carPublicKey) == phone.carPublicKey)
            let name = "Reference phone"
            let side = try Self.runReference([
                "run", "--role", "phone", "--password", code, "--scalar", Self.phoneRandom, "--peer", Self.hex(Array(started.pairing.spake2Message)),
                "--car-key", Self.hex(phone.carPublicKey), "--public-key", Self.hex(identity.publicKey), "--name", name,
            ])
            let carVerified = side["car_confirmation"] == Self.hex(Array(started.pairing.carConfirmation))
            var pair = HUPair()
            pair.publicKey = Data(identity.publicKey)
            pair.deviceName = name
            pair.confirmation = Data(Self.bytes(side["confirmation"]!))
            pair.signature = Data(try identity.privateKey.signature(for: Self.bytes(side["signed_bytes"]!)))
            try phone.send(.pair(pair), requestID: 3)
            return (try AuthenticationTests.readResult(phone, requestID: 3), carVerified, phone, welcome)
        }
        let wrong = code == "000000" ? "000001" : "000000"
        let (refused, wrongVerified, _, _) = try attempt(code: wrong, from: "127.0.0.5", identity: PhoneIdentity())
        #expect(refused.code == .badPairingCode)
        #expect(!wrongVerified)
        let identity = PhoneIdentity()
        let (paired, verified, phone, welcome) = try attempt(code: code, from: "127.0.0.1", identity: identity)
        #expect(verified)
        #expect(paired.code == .ok)
        #expect(paired.pairing.deviceID == identity.deviceID)
        try AuthenticationTests.authenticate(phone, welcome: welcome, identity: identity, requestID: 4)
        #expect(try AuthenticationTests.readResult(phone, requestID: 4).code == .ok)
    }

    static let spakeKey = (0..<64).map { UInt8($0) }
    static let phoneMessage = [UInt8](repeating: 0xa1, count: 32)
    static let carMessage = [UInt8](repeating: 0xb2, count: 32)
    static let carKey = [UInt8](repeating: 0xc3, count: 91)
    static let phoneKey = [UInt8](repeating: 0xd4, count: 32)

    @Test func theKeyScheduleMatchesTheVectors() {
        let transcript = PairingKeySchedule.transcriptHash(phoneMessage: Self.phoneMessage, carMessage: Self.carMessage, carPublicKey: Self.carKey)
        #expect(Self.hex(transcript) == "13fbbfa45e983a845da88ae5b78528e38236db47ff0aaf19f3cfae701be51edb")
        #expect(
            Self.hex(PairingKeySchedule.carConfirmation(spakeKey: Self.spakeKey, transcript: transcript))
                == "fce792993018c46e8b829d96888606c2e106857cc494b113875058c6ff4bd246")
        #expect(
            Self.hex(PairingKeySchedule.phoneConfirmation(spakeKey: Self.spakeKey, transcript: transcript, publicKey: Self.phoneKey, deviceName: "Alice's phone"))
                == "ee98ae3e9419853b203dfd5a647ee9d476dfbad303a8a18ca46275e362bdc840")
        #expect(
            Self.hex(PairingKeySchedule.signedMessage(transcript: transcript))
                == "68656164756e6974642d706169722d763113fbbfa45e983a845da88ae5b78528e38236db47ff0aaf19f3cfae701be51edb")
    }

    /// BoringSSL's SPAKE2: the same code gives both sides the same key; a
    /// different code (one online guess) gives unrelated keys.
    @Test func spake2AgreesOnlyOnTheSameCode() throws {
        let phone = try SPAKE2Exchange(role: .phone, password: Array("042917".utf8))
        let car = try SPAKE2Exchange(role: .car, password: Array("042917".utf8))
        let phoneKey = try phone.finish(peerMessage: car.message)
        let carKey = try car.finish(peerMessage: phone.message)
        #expect(phoneKey == carKey && phoneKey.count == 64)
        let guesser = try SPAKE2Exchange(role: .phone, password: Array("000000".utf8))
        let car2 = try SPAKE2Exchange(role: .car, password: Array("042917".utf8))
        #expect(try guesser.finish(peerMessage: car2.message) != (try car2.finish(peerMessage: guesser.message)))
        // Used once; a message that is not 32 bytes is refused.
        #expect(throws: SecurityError.self) { _ = try phone.finish(peerMessage: car.message) }
        let fresh = try SPAKE2Exchange(role: .car, password: [1])
        #expect(throws: SecurityError.self) { _ = try fresh.finish(peerMessage: [1, 2, 3]) }
    }
}
