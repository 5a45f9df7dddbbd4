import HeadUnitWire

/// Where an image is used; each use has a maximum size in points (Protocol/TEMPLATES.md section 6).
public enum ImageUse: String, CaseIterable, Sendable {
    // The guide's table.
    case appIcon, contactAction, gridButton, nowPlayingButton, tab
    // The guide's maneuver table (navigation).
    case maneuverSymbol, maneuverSymbolTwoLines, secondManeuverSymbol, laneGuidance, junctionImage
    // Not in the guide (the API only exposes runtime values): our documented choices.
    case listItem, listItemAccessory, imageRow, messageItem, barButton, mapButton
    case pointOfInterestPin, pointOfInterestSelectedPin, nowPlayingArtwork, contact, voiceControlState

    /// Maximum width and height in points; pixels = points x display scale.
    public var maximumPoints: (width: UInt32, height: UInt32) {
        switch self {
        case .appIcon: return (60, 60)
        case .contactAction: return (50, 50)
        case .gridButton: return (40, 40)
        case .nowPlayingButton: return (20, 20)
        case .tab: return (24, 24)
        case .maneuverSymbol: return (50, 50)
        case .maneuverSymbolTwoLines: return (120, 50)
        case .secondManeuverSymbol: return (18, 18)
        case .laneGuidance: return (120, 18)
        case .junctionImage: return (140, 100)
        case .listItem, .listItemAccessory, .imageRow, .messageItem: return (64, 64)
        case .barButton: return (32, 32)
        case .mapButton: return (44, 44)
        case .pointOfInterestPin: return (40, 40)
        case .pointOfInterestSelectedPin: return (80, 80)
        case .nowPlayingArtwork: return (512, 512)
        case .contact: return (128, 128)
        case .voiceControlState: return (128, 128)
        }
    }

    /// The limit name reported in RuleViolation.limit, e.g. "image.gridButton".
    public var limitName: String { "image.\(rawValue)" }
}

public enum ImageRules {
    /// The first rule `image` breaks when used as `use` on a display of `scale`, or nil.
    ///
    /// An image needs a source (asset or PNG). Assets must declare their pixel
    /// size; inline PNGs are measured from their IHDR chunk (a declared size,
    /// if any, must agree). `what` names the element in messages, e.g. "grid button g1".
    /// `what` is only evaluated when a rule is broken (keeps the valid path cheap).
    public static func check(_ image: HUImage, use: ImageUse, scale: UInt32, what: @autoclosure () -> String) -> RuleViolation? {
        let size: (width: UInt32, height: UInt32)
        switch image.source {
        case nil:
            return RuleViolation(.invalidArgument, "\(what()): image has neither asset nor png")
        case .asset(let name):
            if name.isEmpty {
                return RuleViolation(.invalidArgument, "\(what()): image asset name is empty")
            }
            if image.widthPx == 0 || image.heightPx == 0 {
                return RuleViolation(.invalidArgument, "\(what()): asset \(name) must declare width_px and height_px")
            }
            size = (image.widthPx, image.heightPx)
        case .png(let bytes):
            guard let measured = pngSize(bytes) else {
                return RuleViolation(.invalidArgument, "\(what()): png is not a valid PNG (signature or IHDR chunk)")
            }
            if (image.widthPx != 0 && image.widthPx != measured.width) || (image.heightPx != 0 && image.heightPx != measured.height) {
                return RuleViolation(.invalidArgument, "\(what()): declared \(image.widthPx)x\(image.heightPx) px but the PNG is \(measured.width)x\(measured.height) px")
            }
            size = measured
        case .ref:
            // Refs are the car's own, in what it sends an HMI (section 12.6).
            return RuleViolation(.invalidArgument, "\(what()): image refs are sent by the car only; send the PNG or an asset")
        }
        let points = use.maximumPoints
        // The guide's profiles are 2x or 3x; 0 (not configured) counts as 1x, the strictest.
        // 64-bit so a nonsense scale cannot overflow.
        let factor = UInt64(max(scale, 1))
        let maxWidth = UInt64(points.width) * factor
        let maxHeight = UInt64(points.height) * factor
        if UInt64(size.width) > maxWidth || UInt64(size.height) > maxHeight {
            return RuleViolation(
                .imageTooLarge,
                "\(what()): \(use.rawValue) image is \(size.width)x\(size.height) px, at most \(maxWidth)x\(maxHeight) px (\(points.width)x\(points.height) pt at \(factor)x)",
                limit: use.limitName, limitValue: UInt32(clamping: maxWidth))
        }
        return nil
    }

    /// Checks an optional image: absent (`present` false) is always fine.
    /// `image` is read only when present: reading an absent one builds a default image.
    static func check(_ image: @autoclosure () -> HUImage, present: Bool, use: ImageUse, scale: UInt32, what: @autoclosure () -> String) -> RuleViolation? {
        present ? check(image(), use: use, scale: scale, what: what()) : nil
    }

    /// Width and height from a PNG's IHDR chunk, or nil when the bytes are not a PNG.
    ///
    /// Layout: 8-byte signature, then the first chunk must be IHDR: length (4,
    /// big endian, 13), type "IHDR", width (4), height (4), 5 more bytes, CRC-32
    /// (4) over type and data. Width and height must be 1...2^31-1 (PNG spec).
    /// Only the header is read; the image data is the HMI's business.
    public static func pngSize<Bytes: Collection>(_ bytes: Bytes) -> (width: UInt32, height: UInt32)? where Bytes.Element == UInt8 {
        let header = Array(bytes.prefix(33))
        guard header.count == 33 else { return nil }
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard Array(header[0..<8]) == signature else { return nil }
        guard bigEndian(header, at: 8) == 13 else { return nil }
        guard Array(header[12..<16]) == Array("IHDR".utf8) else { return nil }
        guard crc32(header[12..<29]) == bigEndian(header, at: 29) else { return nil }
        let width = bigEndian(header, at: 16)
        let height = bigEndian(header, at: 20)
        guard (1...0x7FFF_FFFF).contains(width), (1...0x7FFF_FFFF).contains(height) else { return nil }
        return (width, height)
    }

    /// CRC-32 (ISO 3309, as PNG uses it), bitwise: 17 bytes do not need a table.
    public static func crc32<Bytes: Sequence>(_ bytes: Bytes) -> UInt32 where Bytes.Element == UInt8 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 {
                crc = (crc & 1) != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
            }
        }
        return crc ^ 0xFFFF_FFFF
    }

    private static func bigEndian(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }
}
