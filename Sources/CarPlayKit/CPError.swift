import HeadUnitClient
import HeadUnitWire

/// An error from the car, in the style of CarPlay's `CPError`: a code in the
/// ``CPError/errorDomain`` domain, carrying the car's own error code
/// (`errors.proto`) so you can switch on exactly what the car refused.
///
///     do {
///         try await interfaceController.pushTemplate(grid, animated: true)
///     } catch let error as CPError where error.code == .depthExceeded {
///         // the category's stack depth is reached
///     }
public struct CPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error domain, as `CPErrorDomain` is in CarPlay.
    public static let errorDomain = "CarPlayKit.CPErrorDomain"

    /// A code of the car (`ErrorCode` in `errors.proto`); `rawValue` is the wire value.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The wire value of the car's `ErrorCode`.
        public var rawValue: Int
        /// Wraps a wire value.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// The code's name in `errors.proto` ("ERROR_CODE_DEPTH_EXCEEDED").
        public var description: String { ErrorCodeNames.name(HUErrorCode(rawValue: rawValue) ?? .ok) }

        /// No car code: the connection closed, a request timed out or the app misused the API.
        public static let unknown = Code(rawValue: -1)
        /// The template (or message item) is not allowed for the app's category.
        public static let notAllowedForCategory = Code(rawValue: 100)
        /// The category's stack depth is reached.
        public static let depthExceeded = Code(rawValue: 101)
        /// Too many elements; ``CPError/limit`` names the rule.
        public static let limitExceeded = Code(rawValue: 102)
        /// A stack operation before `setRootTemplate`.
        public static let noRootTemplate = Code(rawValue: 103)
        /// No template with that id where the car looked.
        public static let unknownTemplate = Code(rawValue: 104)
        /// A modal template is already presented.
        public static let alreadyPresented = Code(rawValue: 105)
        /// The scene or app is not connected.
        public static let notConnected = Code(rawValue: 106)
        /// The car does not know the app.
        public static let unknownApp = Code(rawValue: 107)
        /// The scene belongs to another app.
        public static let notYourScene = Code(rawValue: 108)
        /// The app's entitlements were refused.
        public static let entitlementRefused = Code(rawValue: 109)
        /// Missing or contradictory fields, duplicate ids, too few elements.
        public static let invalidTemplate = Code(rawValue: 110)
        /// No item, button or tab with that id.
        public static let unknownItem = Code(rawValue: 111)
        /// `dismissTemplate` with nothing presented.
        public static let nothingPresented = Code(rawValue: 112)
        /// A field out of range or a broken image.
        public static let invalidArgument = Code(rawValue: 113)
        /// The template was refreshed faster than the category allows.
        public static let rateLimited = Code(rawValue: 114)
        /// An image bigger than the car allows for its use.
        public static let imageTooLarge = Code(rawValue: 115)
        /// The template may not go where it was put (an alert pushed, a tab bar not at the root...).
        public static let invalidPosition = Code(rawValue: 116)
        /// A completion came after the car stopped waiting.
        public static let completionTimeout = Code(rawValue: 117)
        /// A completion for an event that is not pending.
        public static let unknownEvent = Code(rawValue: 118)
        /// The app has no navigation session.
        public static let navigationNotActive = Code(rawValue: 130)
        /// The car ended the app's guidance.
        public static let navigationCancelledByCar = Code(rawValue: 131)
        /// A navigation session is already running.
        public static let navigationAlreadyActive = Code(rawValue: 132)
        /// The app's root template is not a map template.
        public static let noMapTemplate = Code(rawValue: 133)
        /// The car's own navigation is guiding.
        public static let nativeNavigationActive = Code(rawValue: 134)
        /// The accessory protocol is not one the vehicle declares for the app.
        public static let unknownProtocol = Code(rawValue: 150)
        /// No accessory serves the protocol now.
        public static let protocolUnavailable = Code(rawValue: 151)
    }

    /// What went wrong.
    public var code: Code
    /// The car's explanation, naming the template and element.
    public var message: String
    /// For count and image rules: the rule's name (`"grid.buttons"`), else empty.
    public var limit: String
    /// For count and image rules: the limit's value.
    public var limitValue: UInt32
    /// The SDK's error underneath, with where it came from.
    public var underlying: HeadUnitError

    /// Wraps an error of the lower-level client.
    public init(_ error: HeadUnitError) {
        underlying = error
        code = error.origin == .result || error.origin == .goodbye ? Code(rawValue: error.code.rawValue) : .unknown
        if error.origin == .usage, error.code != .ok { code = Code(rawValue: error.code.rawValue) }
        message = error.description
        limit = error.limit
        limitValue = error.limitValue
    }

    /// Any error as a `CPError` (a `CPError` stays as it is).
    public init(_ error: any Error) {
        if let error = error as? CPError {
            self = error
        } else if let error = error as? HeadUnitError {
            self.init(error)
        } else {
            self.init(HeadUnitError(code: .ok, message: "\(error)", origin: .connectionClosed))
        }
    }

    /// A mistake of the app, found before anything was sent.
    static func usage(_ code: Code, _ message: String) -> CPError {
        CPError(HeadUnitError(code: HUErrorCode(rawValue: code.rawValue) ?? .ok, message: message, origin: .usage))
    }

    /// The domain, the code and the car's message.
    public var description: String { "\(Self.errorDomain) \(code.rawValue): \(message)" }
}
