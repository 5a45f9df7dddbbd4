import HeadUnitWire

/// Why a request or a connection failed. One type for every failure so a
/// caller catches one thing and switches on `code` (the daemon's typed error,
/// CarPlayErrorDomain-style) or `origin`.
public struct HeadUnitError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Origin: Sendable, Equatable {
        /// The car answered the request with a non-OK Result.
        case result
        /// The car said Goodbye and closed the connection.
        case goodbye
        /// The connection closed (or could not be opened) without a Goodbye.
        case connectionClosed
        /// No answer within the request timeout.
        case timedOut
        /// The car answered with something this client did not expect.
        case unexpectedAnswer
        /// A local mistake: unknown app, no scene yet...
        case usage
    }

    public var code: HUErrorCode
    public var message: String
    /// The limit that was hit (`Result.limit`, e.g. "grid.buttons"), empty otherwise.
    public var limit: String
    public var limitValue: UInt32
    public var origin: Origin

    public init(code: HUErrorCode, message: String, limit: String = "", limitValue: UInt32 = 0, origin: Origin) {
        self.code = code
        self.message = message
        self.limit = limit
        self.limitValue = limitValue
        self.origin = origin
    }

    public init(result: HUResult) {
        self.init(code: result.code, message: result.message, limit: result.limit, limitValue: result.limitValue, origin: .result)
    }

    public init(goodbye: HUGoodbye) {
        self.init(code: goodbye.code, message: goodbye.reason, origin: .goodbye)
    }

    public var description: String {
        var text = "\(ErrorCodeNames.name(code))"
        switch origin {
        case .goodbye: text += " (goodbye)"
        case .connectionClosed: text = message.isEmpty ? "connection closed" : ""
        case .timedOut: text = "timed out"
        case .unexpectedAnswer: text = "unexpected answer"
        case .usage: text = "usage error"
        case .result: break
        }
        if !message.isEmpty { text += text.isEmpty ? message : ": \(message)" }
        if !limit.isEmpty { text += " [limit \(limit) = \(limitValue)]" }
        return text
    }
}

/// Protobuf enum names ("ERROR_CODE_DEPTH_EXCEEDED") for printing and for
/// scenario files, taken from the generated JSON mapping so they never drift.
public enum ErrorCodeNames {
    public static func name(_ code: HUErrorCode) -> String {
        if code == .ok { return "OK" }
        var carrier = HUGoodbye()
        carrier.code = code
        // {"code":"ERROR_CODE_X"}
        guard let json = try? carrier.jsonString(),
            let start = json.firstRange(of: ":\""),
            let end = json[start.upperBound...].firstIndex(of: "\"")
        else { return "ERROR_CODE_\(code.rawValue)" }
        return String(json[start.upperBound..<end])
    }

    /// Accepts "ERROR_CODE_DEPTH_EXCEEDED", "DEPTH_EXCEEDED" or "OK".
    public static func code(named name: String) -> HUErrorCode? {
        let upper = name.uppercased()
        if upper == "OK" { return .ok }
        let full = upper.hasPrefix("ERROR_CODE_") ? upper : "ERROR_CODE_" + upper
        return try? HUGoodbye(jsonString: "{\"code\":\"\(full)\"}").code
    }
}
