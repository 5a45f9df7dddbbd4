import Crypto

/// Hex as the protocol writes it (lowercase, two digits a byte): device
/// ids, admission tickets, the SDK's key file.
public enum Hex {
    public static func string<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes `text` spells; nil for an odd length or another character.
    /// `uppercase`: whether A-F count too (a file a person may have edited),
    /// or only what the protocol writes (a server name the car compares).
    public static func bytes<S: StringProtocol>(_ text: S, uppercase: Bool) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where uppercase: return digit - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

/// The id a car knows a paired phone by (PROTOCOL.md section 20.3): lowercase
/// hex of the first 16 bytes of SHA-256 of its Ed25519 public key. The phone
/// and the car derive it here, the one place.
public enum DeviceID {
    public static func of(publicKey: [UInt8]) -> String {
        Hex.string(SHA256.hash(data: publicKey).prefix(16))
    }
}
