import HeadUnitWire

/// An image for the car, standing in for `UIImage`.
///
/// The car draws images itself, so an image is either the name of an asset
/// the car's HMI knows (with its size in pixels, which the car checks against
/// the maximum for the image's use) or a small PNG the app sends inline.
///
///     let icon = CPImage(named: "radio", pixelWidth: 128, pixelHeight: 128)
///     let cover = CPImage(pngData: bytes)   // the car reads the size from the PNG header
public struct CPImage: Sendable, Equatable {
    /// The message sent to the car.
    public var wire: HUImage

    /// An asset the car knows by name, `pixelWidth` x `pixelHeight` pixels;
    /// `darkName` is the variant for the dark content style.
    public init(named name: String, pixelWidth: UInt32, pixelHeight: UInt32, darkName: String? = nil) {
        var image = HUImage()
        image.asset = name
        image.widthPx = pixelWidth
        image.heightPx = pixelHeight
        image.darkAsset = darkName ?? ""
        wire = image
    }

    /// An inline PNG; its size comes from its header.
    public init(pngData: [UInt8]) {
        var image = HUImage()
        image.png = .init(pngData)
        wire = image
    }

    /// Wraps an image message.
    public init(wire: HUImage) { self.wire = wire }
}

extension Optional where Wrapped == CPImage {
    /// The message, or an unset field.
    var wire: HUImage? { self?.wire }
}

/// The light or dark appearance the car asks for, standing in for `UIUserInterfaceStyle`.
public enum CPContentStyle: Sendable, Equatable {
    /// The car did not say.
    case unspecified
    /// Light content.
    case light
    /// Dark content.
    case dark

    init(_ style: HUContentStyle) {
        switch style {
        case .light: self = .light
        case .dark: self = .dark
        default: self = .unspecified
        }
    }
}
