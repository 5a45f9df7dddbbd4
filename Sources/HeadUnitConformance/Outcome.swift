import HeadUnitWire

/// Thrown by a check that found the endpoint breaking the rule it tests.
public struct CheckFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
    public init(expected: String, got: String) { self.description = "expected \(expected), got \(got)" }
}

/// Thrown by a check that cannot run here (a car role over TCP, a refused entitlement...).
public struct CheckSkipped: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What one check concluded.
public enum CheckOutcome: Sendable, Equatable {
    case passed
    case failed(String)
    case skipped(String)

    public var label: String {
        switch self {
        case .passed: return "PASS"
        case .failed: return "FAIL"
        case .skipped: return "SKIP"
        }
    }
}

// MARK: - Assertions that read like the spec: expected vs got.

func require(_ condition: Bool, _ expected: @autoclosure () -> String, got: @autoclosure () -> String) throws {
    if !condition { throw CheckFailure(expected: expected(), got: got()) }
}

func requireCode(_ result: HUResult, _ code: HUErrorCode, _ what: String) throws {
    if result.code != code {
        throw CheckFailure(expected: "\(what): Result \(name(code))", got: "Result \(describe(result))")
    }
}

func requireCode(_ goodbye: HUGoodbye, _ code: HUErrorCode, _ what: String) throws {
    if goodbye.code != code {
        throw CheckFailure(expected: "\(what): Goodbye \(name(code))", got: "Goodbye \(name(goodbye.code)) \"\(goodbye.reason)\"")
    }
}

/// ERROR_CODE_NOT_FOR_ROLE -> "NOT_FOR_ROLE (13)", as PROTOCOL.md §9 spells it.
func name(_ code: HUErrorCode) -> String {
    switch code {
    case .UNRECOGNIZED(let raw): return "unknown code \(raw)"
    default:
        var out = ""
        for character in String(describing: code) {
            if character.isUppercase { out += "_" }
            out += character.uppercased()
        }
        return "\(out) (\(code.rawValue))"
    }
}

func describe(_ result: HUResult) -> String {
    var text = name(result.code)
    if !result.limit.isEmpty { text += " limit \(result.limit)=\(result.limitValue)" }
    if !result.message.isEmpty { text += " \"\(result.message)\"" }
    return text
}

/// A short name for an envelope's body, for "got ..." texts.
func describe(_ envelope: HUEnvelope) -> String {
    switch envelope.body {
    case .result(let result)?: return "Result \(describe(result)) (request \(envelope.requestID))"
    case .goodbye(let goodbye)?: return "Goodbye \(name(goodbye.code)) \"\(goodbye.reason)\""
    case .welcome(let welcome)?: return "Welcome{version \(welcome.version)} (request \(envelope.requestID))"
    case nil: return "an empty Envelope"
    case let body?:
        let text = String(describing: body)
        return String(text.prefix { $0 != "(" })
    }
}
