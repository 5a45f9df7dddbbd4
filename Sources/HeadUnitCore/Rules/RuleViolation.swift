import HeadUnitWire

/// A rule of the car that a request broke: the typed error the app receives.
public struct RuleViolation: Error, Equatable, Sendable {
    public var code: HUErrorCode
    public var message: String
    /// The limit that was hit, e.g. "grid.buttons"; empty when no count is involved.
    public var limit: String
    public var limitValue: UInt32

    public init(_ code: HUErrorCode, _ message: String, limit: String = "", limitValue: UInt32 = 0) {
        self.code = code
        self.message = message
        self.limit = limit
        self.limitValue = limitValue
    }

    /// A count limit: `what` has `count` elements but at most `maximum` are allowed.
    public static func limitExceeded(_ limit: String, count: Int, maximum: Int) -> RuleViolation {
        RuleViolation(.limitExceeded, "\(limit): \(count) given, at most \(maximum) allowed", limit: limit, limitValue: UInt32(maximum))
    }

    /// A minimum count: `limit` has `count` elements but at least `minimum` are required.
    /// A missing element makes the template incomplete, hence INVALID_TEMPLATE
    /// (not LIMIT_EXCEEDED); `limit` and `limitValue` still name the rule.
    public static func tooFew(_ limit: String, count: Int, minimum: Int) -> RuleViolation {
        RuleViolation(.invalidTemplate, "\(limit): \(count) given, at least \(minimum) required", limit: limit, limitValue: UInt32(minimum))
    }

    public var result: HUResult {
        var result = HUResult()
        result.code = code
        result.message = message
        result.limit = limit
        result.limitValue = limitValue
        return result
    }
}
