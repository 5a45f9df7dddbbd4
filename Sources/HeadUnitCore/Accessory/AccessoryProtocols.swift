/// External Accessory protocol strings (PROTOCOL.md section 18.1):
/// what is a valid one, and when two strings name the same protocol.
public enum AccessoryProtocols {
    /// Reverse DNS: at most 255 characters, two or more dot-separated labels of
    /// 1...63 ASCII letters, digits and hyphens, no label starting or ending with a hyphen.
    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        let labels = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return false }
        for label in labels {
            guard (1...63).contains(label.count), label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-") else { return false }
            for byte in label where !(isASCIILetterOrDigit(byte) || byte == UInt8(ascii: "-")) { return false }
        }
        return true
    }

    /// DNS names are case-insensitive, so protocol strings are compared ignoring ASCII case.
    public static func key(_ name: String) -> String {
        String(decoding: name.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }

    /// A vehicle profile's list as the daemon declares it: reverse-DNS strings
    /// only, each protocol once (the first spelling), in the profile's order.
    public static func declared(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return names.filter { isValid($0) && seen.insert(key($0)).inserted }
    }

    /// The vehicle's protocols an app may use: those it declares too (valid strings
    /// only, case ignored), in the vehicle's order and spelling.
    public static func match(app: [String], vehicle: [String]) -> [String] {
        let wanted = Set(app.filter(isValid).map(key))
        return vehicle.filter { wanted.contains(key($0)) }
    }

    private static func isASCIILetterOrDigit(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
    }
}
