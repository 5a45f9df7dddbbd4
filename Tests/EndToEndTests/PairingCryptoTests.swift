import Foundation
import HeadUnitSecurity
import Testing

/// The pairing key schedule's test vectors (PROTOCOL.md section 20.2, "Test
/// vectors"): computed independently (Python's hashlib/hmac, RFC 5869 HKDF)
/// and checked here against the implementation the daemon and SDK use.
@Suite struct PairingCryptoTests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

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
