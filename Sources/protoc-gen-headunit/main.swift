// protoc-gen-headunit: the protocol's Swift model and its one codec, from the .proto files.
//
// For every message it writes a plain struct (no class-backed storage: short
// strings stay inline, repeated fields are contiguous arrays) with the same
// API as swift-protobuf's generated code (properties, has/clear, oneof enums,
// open enums with UNRECOGNIZED), and two codings of it:
//   - `WireMessage`: `merge(from:)` and `encode(to:)`, straight between bytes
//     and the struct. This is the only coding the daemon's request path uses.
//   - swift-protobuf's `Message`: `decodeMessage`/`traverse`, for JSON, text
//     format and the cold paths, and as the independent oracle in tests and
//     fuzzing (its BinaryDecoder reads the same bytes into the same struct).
// Unknown fields are not kept by either (PROTOCOL.md section 4.4).
//
//   protoc --plugin=protoc-gen-headunit=PATH --headunit_out=DIR -I Protocol Protocol/*.proto
import Foundation
import SwiftProtobuf
import SwiftProtobufPluginLibrary

typealias FieldType = Google_Protobuf_FieldDescriptorProto.TypeEnum

/// How one scalar proto type maps to Swift, the wire, and swift-protobuf's Decoder/Visitor names.
struct Scalar {
    let swiftType: String
    /// swift-protobuf's name in `decodeSingular<Name>Field`.
    let protobufName: String
    let wireType: UInt32
    /// The WireReader/WireWriter method suffix (`readUInt32`, `writeUInt32`).
    let codecName: String
    let defaultValue: String
    let packable: Bool

    /// A Swift condition true when `value` is not the proto3 default (floats by bit pattern, as swift-protobuf).
    func isSet(_ value: String) -> String {
        switch swiftType {
        case "Double", "Float": return "\(value).bitPattern != 0"
        case "Bool": return value
        case "String", "Data": return "!\(value).isEmpty"
        default: return "\(value) != 0"
        }
    }

    static func of(_ type: FieldType) -> Scalar? {
        switch type {
        case .double: return Scalar(swiftType: "Double", protobufName: "Double", wireType: 1, codecName: "Double", defaultValue: "0", packable: true)
        case .float: return Scalar(swiftType: "Float", protobufName: "Float", wireType: 5, codecName: "Float", defaultValue: "0", packable: true)
        case .int64: return Scalar(swiftType: "Int64", protobufName: "Int64", wireType: 0, codecName: "Int64", defaultValue: "0", packable: true)
        case .uint64: return Scalar(swiftType: "UInt64", protobufName: "UInt64", wireType: 0, codecName: "UInt64", defaultValue: "0", packable: true)
        case .int32: return Scalar(swiftType: "Int32", protobufName: "Int32", wireType: 0, codecName: "Int32", defaultValue: "0", packable: true)
        case .fixed64: return Scalar(swiftType: "UInt64", protobufName: "Fixed64", wireType: 1, codecName: "Fixed64", defaultValue: "0", packable: true)
        case .fixed32: return Scalar(swiftType: "UInt32", protobufName: "Fixed32", wireType: 5, codecName: "Fixed32", defaultValue: "0", packable: true)
        case .bool: return Scalar(swiftType: "Bool", protobufName: "Bool", wireType: 0, codecName: "Bool", defaultValue: "false", packable: true)
        case .string: return Scalar(swiftType: "String", protobufName: "String", wireType: 2, codecName: "String", defaultValue: "String()", packable: false)
        case .bytes: return Scalar(swiftType: "Data", protobufName: "Bytes", wireType: 2, codecName: "Bytes", defaultValue: "Data()", packable: false)
        case .uint32: return Scalar(swiftType: "UInt32", protobufName: "UInt32", wireType: 0, codecName: "UInt32", defaultValue: "0", packable: true)
        case .sfixed32: return Scalar(swiftType: "Int32", protobufName: "SFixed32", wireType: 5, codecName: "SFixed32", defaultValue: "0", packable: true)
        case .sfixed64: return Scalar(swiftType: "Int64", protobufName: "SFixed64", wireType: 1, codecName: "SFixed64", defaultValue: "0", packable: true)
        case .sint32: return Scalar(swiftType: "Int32", protobufName: "SInt32", wireType: 0, codecName: "SInt32", defaultValue: "0", packable: true)
        case .sint64: return Scalar(swiftType: "Int64", protobufName: "SInt64", wireType: 0, codecName: "SInt64", defaultValue: "0", packable: true)
        default: return nil
        }
    }
}

enum GeneratorError: Error, CustomStringConvertible {
    case unsupported(String)
    var description: String {
        switch self { case .unsupported(let what): return "protoc-gen-headunit: unsupported: \(what)" }
    }
}

/// One field as the generator sees it.
struct Field {
    let descriptor: FieldDescriptor
    let namer: SwiftProtobufNamer
    var number: Int { Int(descriptor.number) }
    var names: SwiftProtobufNamer.MessageFieldNames { namer.messagePropertyNames(field: descriptor, prefixed: "_", includeHasAndClear: true) }
    var name: String { names.name }
    /// The stored name for a field with presence (`_name`).
    var storage: String { names.prefixed }
    var scalar: Scalar? { Scalar.of(descriptor.type) }
    var isEnum: Bool { descriptor.type == .enum }
    var isMessage: Bool { descriptor.type == .message }
    var isRepeated: Bool { descriptor.isRepeated }
    var oneof: OneofDescriptor? { descriptor.realContainingOneof }
    /// A `map<K, V>`: its entry's key and value fields.
    var map: (key: Field, value: Field)? {
        guard descriptor.isMap, let entry = descriptor.messageType.mapKeyAndValue else { return nil }
        return (Field(descriptor: entry.key, namer: namer), Field(descriptor: entry.value, namer: namer))
    }
    /// swift-protobuf's map type for `decodeMapField(fieldType:)`.
    var protobufMapType: String {
        guard let (key, value) = map else { return "" }
        let keyType = "SwiftProtobuf.Protobuf\(key.protobufName)"
        if value.isMessage { return "SwiftProtobuf._ProtobufMessageMap<\(keyType), \(value.swiftType)>" }
        if value.isEnum { return "SwiftProtobuf._ProtobufEnumMap<\(keyType), \(value.swiftType)>" }
        return "SwiftProtobuf._ProtobufMap<\(keyType), SwiftProtobuf.Protobuf\(value.protobufName)>"
    }
    /// A proto3 `optional` scalar or a singular message: stored as an Optional.
    var hasStoredPresence: Bool { !isRepeated && oneof == nil && descriptor.hasPresence }

    var swiftType: String {
        if let (key, value) = map { return "[\(key.swiftType): \(value.swiftType)]" }
        if let scalar { return scalar.swiftType }
        if isEnum { return namer.fullName(enum: descriptor.enumType) }
        return namer.fullName(message: descriptor.messageType)
    }

    var defaultValue: String {
        if let scalar { return scalar.defaultValue }
        return "\(swiftType)()"
    }

    var wireType: UInt32 {
        if let scalar { return scalar.wireType }
        return isEnum ? 0 : 2
    }

    var packed: Bool { isRepeated && (scalar?.packable ?? isEnum) && descriptor.isPacked }
    var packable: Bool { isRepeated && (scalar?.packable ?? isEnum) }

    func tag(wireType: UInt32) -> UInt32 { UInt32(number) << 3 | wireType }

    /// The tag's varint bytes as a `writeRaw` call.
    func writeTag(wireType: UInt32) -> String {
        var value = tag(wireType: wireType)
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
        if bytes.count <= 2 {
            return "writer.writeRaw(\(bytes.map { String(format: "0x%02X", $0) }.joined(separator: ", ")))"
        }
        return "writer.writeVarint(\(tag(wireType: wireType)))"
    }

    /// `reader.readX()` producing one value of the field's element type.
    var readValue: String {
        if let scalar { return "try reader.read\(scalar.codecName)()" }
        if isEnum { return "\(swiftType)(rawValue: try reader.readEnumValue()) ?? \(swiftType)()" }
        return "try reader.readMessage(\(swiftType).self)"
    }

    func writeValue(_ value: String, writer: String = "writer") -> String {
        if let scalar { return "\(writer).write\(scalar.codecName)(\(value))" }
        if isEnum { return "\(writer).writeEnumValue(\(value).rawValue)" }
        return "\(writer).writeMessage(\(value))"
    }

    /// The tag's encoded length.
    var tagSize: Int {
        var value = tag(wireType: wireType) >> 7
        var size = 1
        while value > 0 { size += 1; value >>= 7 }
        return size
    }

    /// The encoded length of one value (its length prefix included for strings, bytes and messages).
    func valueSize(_ value: String) -> String {
        switch descriptor.type {
        case .double, .fixed64, .sfixed64: return "8"
        case .float, .fixed32, .sfixed32: return "4"
        case .bool: return "1"
        case .string: return "WireSize.delimited(\(value).utf8.count)"
        case .bytes: return "WireSize.delimited(\(value).count)"
        case .uint32: return "WireSize.varint(UInt64(\(value)))"
        case .uint64: return "WireSize.varint(\(value))"
        case .int32: return "WireSize.varint(UInt64(bitPattern: Int64(\(value))))"
        case .int64: return "WireSize.varint(UInt64(bitPattern: \(value)))"
        case .sint32: return "WireSize.varint(UInt64(UInt32(bitPattern: (\(value) << 1) ^ (\(value) >> 31))))"
        case .sint64: return "WireSize.varint(UInt64(bitPattern: (\(value) << 1) ^ (\(value) >> 63)))"
        case .enum: return "WireSize.varint(UInt64(bitPattern: Int64(\(value).rawValue)))"
        default: return "WireSize.delimited(\(value).wireSize)"
        }
    }

    /// swift-protobuf's Decoder/Visitor method name part (`String`, `Enum`, `Message`).
    var protobufName: String {
        if let scalar { return scalar.protobufName }
        return isEnum ? "Enum" : "Message"
    }
}

final class FileWriter {
    var text = ""
    var indentLevel = 0

    func line(_ s: String = "") {
        if s.isEmpty {
            text += "\n"
        } else {
            text += String(repeating: "  ", count: indentLevel) + s + "\n"
        }
    }

    func block(_ opening: String, _ body: () throws -> Void) rethrows {
        line(opening + " {")
        indentLevel += 1
        try body()
        indentLevel -= 1
        line("}")
    }
}

/// swift-protobuf's name-map bytecode (SwiftProtobuf/NameMap.swift, `init(bytecode:)`):
/// integers six bits a byte with 0x40 for "more", strings NUL-terminated.
struct NameMapBytecode {
    var bytes: [UInt8] = [0]  // program format 0
    var previousNumber = 0

    mutating func integer(_ value: UInt64) {
        var value = value
        while value >= 0x40 {
            bytes.append(UInt8(value & 0x3F) | 0x40)
            value >>= 6
        }
        bytes.append(UInt8(value))
    }

    mutating func string(_ s: String) {
        bytes.append(contentsOf: Array(s.utf8))
        bytes.append(0)
    }

    /// `next` opcode when the number follows the previous one, else `next + 1` with the delta.
    mutating func numbered(_ number: Int, nextOpcode: UInt64) {
        if number == previousNumber + 1 {
            integer(nextOpcode)
        } else {
            integer(nextOpcode + 1)
            integer(UInt64(UInt32(bitPattern: Int32(number - previousNumber))))
        }
        previousNumber = number
    }

    mutating func field(number: Int, protoName: String, jsonName: String) {
        if protoName == jsonName {
            numbered(number, nextOpcode: 1)
            string(protoName)
        } else if jsonName == Self.standardJSONName(protoName) {
            numbered(number, nextOpcode: 3)
            string(protoName)
        } else {
            numbered(number, nextOpcode: 5)
            string(protoName)
            string(jsonName)
        }
    }

    mutating func enumValue(number: Int, name: String) {
        numbered(number, nextOpcode: 1)
        string(name)
    }

    mutating func reserved(name: String) {
        integer(11)
        string(name)
    }

    mutating func reserved(range: Range<Int32>) {
        integer(12)
        integer(UInt64(UInt32(bitPattern: range.lowerBound)))
        integer(UInt64(UInt32(bitPattern: range.upperBound - range.lowerBound)))
    }

    /// protoc's default JSON name: underscores dropped, the letter after one upper-cased.
    static func standardJSONName(_ protoName: String) -> String {
        var result = ""
        var upperNext = false
        for character in protoName {
            if character == "_" {
                upperNext = true
            } else if upperNext {
                result += character.uppercased()
                upperNext = false
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// The bytes as a Swift string literal.
    var literal: String {
        var out = "\""
        for byte in bytes {
            switch byte {
            case 0: out += "\\0"
            case UInt8(ascii: "\""): out += "\\\""
            case UInt8(ascii: "\\"): out += "\\\\"
            case 0x20..<0x7F: out += String(UnicodeScalar(byte))
            default: out += "\\u{\(String(byte, radix: 16))}"
            }
        }
        return out + "\""
    }
}

struct SwiftGenerator {
    let file: FileDescriptor
    let namer: SwiftProtobufNamer
    let out = FileWriter()

    init(file: FileDescriptor) {
        self.file = file
        self.namer = SwiftProtobufNamer(currentFile: file, protoFileToModuleMappings: ProtoFileToModuleMappings())
    }

    func generate() throws -> String {
        out.line("// Generated by protoc-gen-headunit from \(file.name). Do not edit: change the .proto and run")
        out.line("// scripts/generate-protos.sh.")
        out.line()
        out.line("import Foundation")
        out.line("import SwiftProtobuf")
        for e in file.enums {
            out.line()
            generateEnum(e)
        }
        for m in file.messages {
            out.line()
            try generateStruct(m)
        }
        for e in allEnums() {
            out.line()
            generateEnumNameMap(e)
        }
        for m in allMessages() {
            out.line()
            try generateProtobufConformance(m)
            out.line()
            try generateWireConformance(m)
        }
        return out.text
    }

    func allMessages() -> [Descriptor] {
        var result: [Descriptor] = []
        func visit(_ m: Descriptor) {
            guard !m.options.mapEntry else { return }
            result.append(m)
            m.messages.forEach(visit)
        }
        file.messages.forEach(visit)
        return result
    }

    func allEnums() -> [EnumDescriptor] {
        file.enums + allMessages().flatMap(\.enums)
    }

    func fields(of message: Descriptor) throws -> [Field] {
        try message.fields.map { field in
            if field.type == .group { throw GeneratorError.unsupported("group \(field.fullName)") }
            if field.isExtension { throw GeneratorError.unsupported("extension \(field.fullName)") }
            return Field(descriptor: field, namer: namer)
        }
    }

    // MARK: - enums

    func generateEnum(_ e: EnumDescriptor) {
        let name = namer.relativeName(enum: e)
        let values = e.values.filter { $0.aliasOf == nil }
        out.block("public enum \(name): WireEnum, Swift.CaseIterable") {
            out.line("public typealias RawValue = Int")
            for value in values {
                out.line("case \(namer.relativeName(enumValue: value)) // = \(value.number)")
            }
            out.line("case UNRECOGNIZED(Int)")
            out.line()
            out.line("public init() { self = \(namer.dottedRelativeName(enumValue: values[0])) }")
            out.line()
            out.block("public init?(rawValue: Int)") {
                out.block("switch rawValue") {
                    for value in values {
                        out.line("case \(value.number): self = \(namer.dottedRelativeName(enumValue: value))")
                    }
                    out.line("default: self = .UNRECOGNIZED(rawValue)")
                }
            }
            out.line()
            out.block("public var rawValue: Int") {
                out.block("switch self") {
                    for value in values {
                        out.line("case \(namer.dottedRelativeName(enumValue: value)): return \(value.number)")
                    }
                    out.line("case .UNRECOGNIZED(let i): return i")
                }
            }
            out.line()
            out.line("public var isRecognized: Bool {")
            out.line("  if case .UNRECOGNIZED = self { return false }")
            out.line("  return true")
            out.line("}")
            out.line()
            out.line("public static let allCases: [\(namer.fullName(enum: e))] = [\(values.map { namer.dottedRelativeName(enumValue: $0) }.joined(separator: ", "))]")
        }
    }

    func generateEnumNameMap(_ e: EnumDescriptor) {
        var bytecode = NameMapBytecode()
        for value in e.values.filter({ $0.aliasOf == nil }).sorted(by: { $0.number < $1.number }) {
            bytecode.enumValue(number: Int(value.number), name: value.name)
        }
        out.block("extension \(namer.fullName(enum: e)): SwiftProtobuf._ProtoNameProviding") {
            out.line("public static let _protobuf_nameMap = SwiftProtobuf._NameMap(bytecode: \(bytecode.literal))")
        }
    }

    // MARK: - structs

    /// Messages that can keep their own encoding beside their value
    /// (`keepWireEncoding()`): a template is stored once and sent in many
    /// frames, so its bytes are spliced after that: the bytes it was read
    /// from when it was read whole and nothing in it was skipped, else its
    /// encoding, made once. Every stored property drops both when it changes.
    static let keepsEncoding: Set<String> = ["headunit.v1.Template"]

    /// A message kept inline in a oneof instead of boxed: at most two
    /// fields, each a single number, bool or enum.
    static func fitsInline(_ message: Descriptor) -> Bool {
        message.fields.count <= 2 && message.realOneofs.isEmpty && message.fields.allSatisfy { field in
            guard !field.isRepeated, !field.isMap else { return false }
            switch field.type {
            case .string, .bytes, .message, .group: return false
            default: return true
            }
        }
    }

    func generateStruct(_ message: Descriptor) throws {
        let name = namer.relativeName(message: message)
        let fields = try fields(of: message)
        let keeps = Self.keepsEncoding.contains(message.fullName)
        let observer = keeps ? " { didSet { wireEncoding = nil; receivedEncoding = nil } }" : ""
        try out.block("public struct \(name): Sendable") {
            for field in fields where field.oneof == nil {
                if field.map != nil {
                    out.line("public var \(field.name): \(field.swiftType) = [:]\(observer)")
                } else if field.isRepeated {
                    out.line("public var \(field.name): [\(field.swiftType)] = []\(observer)")
                } else if field.hasStoredPresence {
                    out.line("public var \(field.name): \(field.swiftType) {")
                    out.line("  get { \(field.storage) ?? \(field.defaultValue) }")
                    out.line("  set { \(field.storage) = newValue }")
                    out.line("}")
                    out.line("public var \(field.names.has): Bool { \(field.storage) != nil }")
                    out.line("public mutating func \(field.names.clear)() { \(field.storage) = nil }")
                } else {
                    out.line("public var \(field.name): \(field.swiftType) = \(field.defaultValue)\(observer)")
                }
                out.line()
            }
            for oneof in message.realOneofs {
                let oneofName = namer.messagePropertyName(oneof: oneof)
                let typeName = namer.relativeName(oneof: oneof)
                out.line("public var \(oneofName.name): \(typeName)? = nil\(observer)")
                out.line()
                for fieldDescriptor in oneof.fields {
                    let field = Field(descriptor: fieldDescriptor, namer: namer)
                    let caseName = field.name
                    out.line("public var \(field.name): \(field.swiftType) {")
                    out.line("  get { if case .\(NamingUtilsLite.trimBackticks(caseName))(let v)? = \(oneofName.name) { return v }; return \(field.defaultValue) }")
                    out.line("  set { \(oneofName.name) = .\(NamingUtilsLite.trimBackticks(caseName))(newValue) }")
                    out.line("}")
                    out.line()
                }
            }
            if keeps {
                out.line("/// The bytes this value is written as, kept by `keepWireEncoding()` and")
                out.line("/// dropped by any change: `encode(to:)` and `wireSize` use them. Not part")
                out.line("/// of the value (`==` ignores them).")
                out.line("public private(set) var wireEncoding: WireEncoding? = nil")
                out.line()
                out.line("/// The bytes `merge(from:)` read this value from, when it was read whole")
                out.line("/// (not merged into another value) and no field in it was skipped: they")
                out.line("/// decode to exactly this value (PROTOCOL.md section 4.4). Dropped by any")
                out.line("/// change; `encode(to:)` does not use them until `keepWireEncoding()`.")
                out.line("public private(set) var receivedEncoding: WireEncoding? = nil")
                out.line()
                out.line("/// Keeps the bytes every later `encode(to:)` writes: those the value was")
                out.line("/// read from (`receivedEncoding`), else its encoding, made once now.")
                out.block("public mutating func keepWireEncoding()") {
                    out.block("if let receivedEncoding") {
                        out.line("wireEncoding = receivedEncoding")
                        out.line("return")
                    }
                    out.line("wireEncoding = nil")
                    out.line("var writer = WireWriter()")
                    out.line("encode(to: &writer)")
                    out.line("wireEncoding = WireEncoding(writer.bytes)")
                }
                out.line()
            }
            out.line("/// Not kept: unknown fields are dropped by both codings (PROTOCOL.md section 4.4).")
            out.line("public var unknownFields: SwiftProtobuf.UnknownStorage {")
            out.line("  get { SwiftProtobuf.UnknownStorage() }")
            out.line("  set {}")
            out.line("}")
            for oneof in message.realOneofs {
                out.line()
                try out.block("public enum \(namer.relativeName(oneof: oneof)): Equatable, Sendable") {
                    for fieldDescriptor in oneof.fields {
                        let field = Field(descriptor: fieldDescriptor, namer: namer)
                        // A message member is boxed: the oneof (and every message
                        // holding it) stays a few words, so copying an envelope, a
                        // template or a list item retains a box instead of moving
                        // and retaining the largest member's whole payload. A
                        // message of at most two numbers, bools or enums is two
                        // or three words and holds nothing to retain: it is kept
                        // inline, not allocated (a lifecycle event's phase, a
                        // pop's `animated`).
                        let indirect = field.isMessage && !Self.fitsInline(fieldDescriptor.messageType) ? "indirect " : ""
                        out.line("\(indirect)case \(field.name)(\(field.swiftType))")
                    }
                }
            }
            for e in message.enums {
                out.line()
                generateEnum(e)
            }
            for nested in message.messages where !nested.options.mapEntry {
                out.line()
                try generateStruct(nested)
            }
            out.line()
            out.line("public init() {}")
            let stored = fields.filter(\.hasStoredPresence)
            if !stored.isEmpty { out.line() }
            for field in stored {
                if try needsIndirection(field, in: message) {
                    throw GeneratorError.unsupported("singular field \(field.descriptor.fullName) that contains its own message")
                }
                out.line("@usableFromInline var \(field.storage): \(field.swiftType)? = nil\(observer)")
            }
        }
    }

    /// Whether a singular message field's type reaches back to `message`
    /// through singular fields only (a struct cannot contain itself).
    func needsIndirection(_ field: Field, in message: Descriptor) throws -> Bool {
        guard field.isMessage, !field.isRepeated else { return false }
        var seen: Set<String> = []
        func reaches(_ m: Descriptor) -> Bool {
            if m.fullName == message.fullName { return true }
            guard seen.insert(m.fullName).inserted else { return false }
            return m.fields.contains { $0.type == .message && !$0.isRepeated && reaches($0.messageType) }
        }
        return reaches(field.descriptor.messageType)
    }

    // MARK: - swift-protobuf's Message

    func generateProtobufConformance(_ message: Descriptor) throws {
        let name = namer.fullName(message: message)
        let fields = try fields(of: message).sorted { $0.number < $1.number }
        var bytecode = NameMapBytecode()
        for field in fields {
            bytecode.field(number: field.number, protoName: field.descriptor.name, jsonName: field.descriptor.jsonName ?? NameMapBytecode.standardJSONName(field.descriptor.name))
        }
        for reserved in message.reservedNames { bytecode.reserved(name: reserved) }
        for range in message.reservedRanges { bytecode.reserved(range: range) }
        try out.block("extension \(name): SwiftProtobuf.Message, SwiftProtobuf._MessageImplementationBase, SwiftProtobuf._ProtoNameProviding") {
            out.line("public static let protoMessageName: String = \"\(message.fullName)\"")
            out.line("public static let _protobuf_nameMap = SwiftProtobuf._NameMap(bytecode: \(bytecode.literal))")
            out.line()
            try out.block("public mutating func decodeMessage<D: SwiftProtobuf.Decoder>(decoder: inout D) throws") {
                out.line("ProtobufRuntimeUse.note()")
                out.block("while let fieldNumber = try decoder.nextFieldNumber()") {
                    out.line("// Closures keep a debug build's stack small (swift-protobuf issue 1034).")
                    out.block("switch fieldNumber") {
                        for field in fields {
                            out.line("case \(field.number): try {")
                            out.indentLevel += 1
                            protobufDecode(field)
                            out.indentLevel -= 1
                            out.line("}()")
                        }
                        out.line("default: break")
                    }
                }
            }
            out.line()
            out.block("public func traverse<V: SwiftProtobuf.Visitor>(visitor: inout V) throws") {
                out.line("ProtobufRuntimeUse.note()")
                for field in fields {
                    protobufVisit(field)
                }
            }
            out.line()
            // Written out: `_MessageImplementationBase`'s default `==` would call itself.
            out.block("public static func == (lhs: \(name), rhs: \(name)) -> Bool") {
                var stored: [String] = []
                for field in fields where field.oneof == nil {
                    stored.append(field.hasStoredPresence ? field.storage : field.name)
                }
                stored += message.realOneofs.map { namer.messagePropertyName(oneof: $0).name }
                for property in stored {
                    out.line("if lhs.\(property) != rhs.\(property) { return false }")
                }
                out.line("return true")
            }
        }
    }

    func protobufDecode(_ field: Field) {
        let kind = field.protobufName
        if field.map != nil {
            out.line("try decoder.decodeMapField(fieldType: \(field.protobufMapType).self, value: &self.\(field.name))")
        } else if field.isRepeated {
            out.line("try decoder.decodeRepeated\(kind)Field(value: &self.\(field.name))")
        } else if let oneof = field.oneof {
            let property = namer.messagePropertyName(oneof: oneof).name
            let caseName = NamingUtilsLite.trimBackticks(field.name)
            out.line("var v: \(field.swiftType)?")
            if field.isMessage {
                out.line("var hadOneofValue = false")
                out.line("if let current = self.\(property) {")
                out.line("  hadOneofValue = true")
                out.line("  if case .\(caseName)(let m) = current { v = m }")
                out.line("}")
                out.line("try decoder.decodeSingularMessageField(value: &v)")
                out.line("if let v {")
                out.line("  if hadOneofValue { try decoder.handleConflictingOneOf() }")
                out.line("  self.\(property) = .\(caseName)(v)")
                out.line("}")
            } else {
                out.line("try decoder.decodeSingular\(kind)Field(value: &v)")
                out.line("if let v {")
                out.line("  if self.\(property) != nil { try decoder.handleConflictingOneOf() }")
                out.line("  self.\(property) = .\(caseName)(v)")
                out.line("}")
            }
        } else if field.hasStoredPresence {
            out.line("try decoder.decodeSingular\(kind)Field(value: &self.\(field.storage))")
        } else {
            out.line("try decoder.decodeSingular\(kind)Field(value: &self.\(field.name))")
        }
    }

    func protobufVisit(_ field: Field) {
        let kind = field.protobufName
        let number = field.number
        if field.map != nil {
            out.line("if !self.\(field.name).isEmpty { try visitor.visitMapField(fieldType: \(field.protobufMapType).self, value: self.\(field.name), fieldNumber: \(number)) }")
        } else if field.isRepeated {
            let verb = field.packed ? "Packed" : "Repeated"
            out.line("if !self.\(field.name).isEmpty { try visitor.visit\(verb)\(kind)Field(value: self.\(field.name), fieldNumber: \(number)) }")
        } else if let oneof = field.oneof {
            let property = namer.messagePropertyName(oneof: oneof).name
            out.line("if case .\(NamingUtilsLite.trimBackticks(field.name))(let v)? = self.\(property) { try visitor.visitSingular\(kind)Field(value: v, fieldNumber: \(number)) }")
        } else if field.hasStoredPresence {
            out.line("if let v = self.\(field.storage) { try visitor.visitSingular\(kind)Field(value: v, fieldNumber: \(number)) }")
        } else {
            let condition = field.scalar?.isSet("self.\(field.name)") ?? "self.\(field.name).rawValue != 0"
            out.line("if \(condition) { try visitor.visitSingular\(kind)Field(value: self.\(field.name), fieldNumber: \(number)) }")
        }
    }

    // MARK: - the wire codec

    func generateWireConformance(_ message: Descriptor) throws {
        let name = namer.fullName(message: message)
        let fields = try fields(of: message).sorted { $0.number < $1.number }
        try out.block("extension \(name): WireMessage") {
            try out.block("public mutating func merge(from reader: inout WireReader) throws(WireDecodingError)") {
                if fields.isEmpty {
                    out.block("while let tag = try reader.nextTag()") {
                        out.line("try reader.skip(tag: tag)")
                    }
                    return
                }
                let keeps = Self.keepsEncoding.contains(message.fullName)
                if keeps {
                    out.line("// Read whole (not merged into a value): the bytes may be kept.")
                    out.line("let whole = wireEncoding == nil && self == Self()")
                    out.line("let start = reader.mark")
                }
                out.block("while let tag = try reader.nextTag()") {
                    out.block("switch tag") {
                        for field in fields {
                            wireDecode(field)
                        }
                        out.line("default: try reader.skip(tag: tag)")
                    }
                }
                if keeps {
                    out.block("if whole, let bytes = reader.receivedBytes(since: start)") {
                        out.line("receivedEncoding = WireEncoding(bytes)")
                    }
                }
            }
            out.line()
            let keeps = Self.keepsEncoding.contains(message.fullName)
            out.block("public func encode(to writer: inout WireWriter)") {
                if keeps { out.line("if let wireEncoding { writer.writeEncoded(wireEncoding); return }") }
                for run in runs(fields) {
                    switch run {
                    case .field(let field): wireEncode(field)
                    case .oneof(let property, let members):
                        oneofSwitch(property, members) { field in "\(field.writeTag(wireType: field.wireType)); \(field.writeValue("v"))" }
                    }
                }
            }
            out.line()
            out.block("public var wireSize: Int") {
                if keeps { out.line("if let wireEncoding { return wireEncoding.bytes.count }") }
                out.line(fields.isEmpty ? "return 0" : "var size = 0")
                for run in runs(fields) {
                    switch run {
                    case .field(let field): wireSize(field)
                    case .oneof(let property, let members):
                        oneofSwitch(property, members) { field in "size += \(field.tagSize) + \(field.valueSize("v"))" }
                    }
                }
                if !fields.isEmpty { out.line("return size") }
            }
            out.line()
            // Inlinable so a walker in another module (Core's limits and
            // enum checks) is specialized into it: unspecialized, every
            // element and oneof payload was copied out to be passed generically.
            out.line("@inlinable")
            out.block("public func walk<W: WireWalker>(_ walker: inout W) throws(W.Failure)") {
                for run in runs(fields) {
                    switch run {
                    case .field(let field): walk(field)
                    case .oneof(let property, let members):
                        let walked = members.filter { !walkValue($0, "v", index: "nil").isEmpty }
                        if !walked.isEmpty {
                            oneofSwitch(property, walked) { field in walkValue(field, "v", index: "nil") }
                        }
                    }
                }
            }
            out.line()
            out.line("@inlinable")
            out.block("public mutating func rewriteMessages<R: WireRewriter>(_ rewriter: inout R)") {
                for run in runs(fields) {
                    switch run {
                    case .field(let field):
                        guard field.isMessage, field.map == nil else { continue }
                        if field.isRepeated {
                            out.line("for index in self.\(field.name).indices where rewriter.wants(self.\(field.name)[index]) { rewriter.descend(into: &self.\(field.name)[index]) }")
                        } else if field.hasStoredPresence {
                            out.line("if let v = self.\(field.storage), rewriter.wants(v) { rewriter.descend(into: &self.\(field.storage)!) }")
                        }
                    case .oneof(let property, let members):
                        let messages = members.filter(\.isMessage)
                        guard !messages.isEmpty else { continue }
                        out.line("switch self.\(property) {")
                        for field in messages {
                            let member = NamingUtilsLite.trimBackticks(field.name)
                            // Out of the box first, so the payload is changed in place, not copied.
                            out.line("case .\(member)(var v)? where rewriter.wants(v): self.\(property) = nil; rewriter.descend(into: &v); self.\(property) = .\(member)(v)")
                        }
                        out.line("default: break")
                        out.line("}")
                    }
                }
            }
        }
    }

    /// Fields in number order, a oneof's consecutive members as one run:
    /// one `switch` reads the oneof once (a chain of `if case` copied the
    /// whole oneof out for each member).
    enum Run {
        case field(Field)
        case oneof(property: String, members: [Field])
    }

    func runs(_ fields: [Field]) -> [Run] {
        var result: [Run] = []
        for field in fields {
            guard let oneof = field.oneof else {
                result.append(.field(field))
                continue
            }
            let property = namer.messagePropertyName(oneof: oneof).name
            if case .oneof(let last, let members)? = result.last, last == property {
                result[result.count - 1] = .oneof(property: property, members: members + [field])
            } else {
                result.append(.oneof(property: property, members: [field]))
            }
        }
        return result
    }

    /// `switch self.<property> { case .member(let v)?: <statement> ... default: break }`.
    func oneofSwitch(_ property: String, _ members: [Field], _ statement: (Field) -> String) {
        out.line("switch self.\(property) {")
        for field in members {
            let body = statement(field)
            let binding = usesValue(body) ? "(let v)" : ""
            out.line("case .\(NamingUtilsLite.trimBackticks(field.name))\(binding)?: \(body)")
        }
        out.line("default: break")
        out.line("}")
    }

    /// What the walker hears of one value of `field` (empty: nothing, a number).
    func walkValue(_ field: Field, _ value: String, index: String) -> String {
        let number = field.number
        if field.isMessage {
            return "if try walker.enter(\(value), field: \(number), index: \(index)) { try \(value).walk(&walker); walker.leave() }"
        }
        switch field.descriptor.type {
        case .string: return "try walker.string(\(value), field: \(number), index: \(index))"
        case .bytes: return "try walker.bytes(\(value), field: \(number), index: \(index))"
        case .enum: return "try walker.enumValue(\(value), field: \(number))"
        default: return ""
        }
    }

    func wireSize(_ field: Field) {
        let tagSize = field.tagSize
        if let (key, value) = field.map {
            out.line("for (key, value) in self.\(field.name) { size += \(tagSize) + WireSize.delimited(\(key.tagSize) + \(key.valueSize("key")) + \(value.tagSize) + \(value.valueSize("value"))) }")
        } else if field.isRepeated {
            if field.packed {
                let value = field.valueSize("v")
                out.line("if !self.\(field.name).isEmpty {")
                if usesValue(value) {
                    out.line("  var payload = 0")
                    out.line("  for v in self.\(field.name) { payload += \(value) }")
                } else {
                    out.line("  let payload = self.\(field.name).count * \(value)")
                }
                out.line("  size += \(tagSize) + WireSize.delimited(payload)")
                out.line("}")
            } else {
                out.line("for v in self.\(field.name) { size += \(tagSize) + \(field.valueSize("v")) }")
            }
        } else if let oneof = field.oneof {
            let property = namer.messagePropertyName(oneof: oneof).name
            out.line("if case .\(NamingUtilsLite.trimBackticks(field.name))(let v)? = self.\(property) { size += \(tagSize) + \(field.valueSize("v")) }")
        } else if field.hasStoredPresence {
            let value = field.valueSize("v")
            if usesValue(value) {
                out.line("if let v = self.\(field.storage) { size += \(tagSize) + \(value) }")
            } else {
                out.line("if self.\(field.storage) != nil { size += \(tagSize) + \(value) }")
            }
        } else {
            let condition = field.scalar?.isSet("self.\(field.name)") ?? "self.\(field.name).rawValue != 0"
            out.line("if \(condition) { size += \(tagSize) + \(field.valueSize("self.\(field.name)")) }")
        }
    }

    /// The walker hears what a limit or a search needs: strings, bytes,
    /// enums, repeated counts and messages (entered, then left).
    func walk(_ field: Field) {
        let number = field.number
        func one(_ value: String, index: String) -> String { walkValue(field, value, index: index) }
        if field.map != nil {
            out.line("if !self.\(field.name).isEmpty { try walker.repeated(count: self.\(field.name).count, field: \(number)) }")
        } else if field.isRepeated {
            let body = one("v", index: "index")
            out.line("if !self.\(field.name).isEmpty {")
            out.line("  try walker.repeated(count: self.\(field.name).count, field: \(number))")
            if !body.isEmpty {
                if body.range(of: #"\bindex\b"#, options: .regularExpression) != nil {
                    out.line("  for (index, v) in self.\(field.name).enumerated() { \(body) }")
                } else {
                    out.line("  for v in self.\(field.name) { \(body) }")
                }
            }
            out.line("}")
        } else {
            let body = one("v", index: "nil")
            guard !body.isEmpty else { return }
            if let oneof = field.oneof {
                let property = namer.messagePropertyName(oneof: oneof).name
                out.line("if case .\(NamingUtilsLite.trimBackticks(field.name))(let v)? = self.\(property) { \(body) }")
            } else if field.hasStoredPresence {
                out.line("if let v = self.\(field.storage) { \(body) }")
            } else {
                let condition = field.scalar?.isSet("self.\(field.name)") ?? "self.\(field.name).rawValue != 0"
                out.line("if \(condition) { let v = self.\(field.name); \(body) }")
            }
        }
    }

    func wireDecode(_ field: Field) {
        let tag = field.tag(wireType: field.wireType)
        if let (key, value) = field.map {
            out.line("case \(tag):")
            out.line("  var key = \(key.defaultValue)")
            out.line("  var value = \(value.defaultValue)")
            out.line("  try reader.readDelimited { (reader: inout WireReader) throws(WireDecodingError) in")
            out.line("    while let tag = try reader.nextTag() {")
            out.line("      switch tag {")
            out.line("      case \(key.tag(wireType: key.wireType)): key = \(key.readValue)")
            if value.isMessage {
                out.line("      case \(value.tag(wireType: 2)): try reader.mergeMessage(&value)")
            } else {
                out.line("      case \(value.tag(wireType: value.wireType)): value = \(value.readValue)")
            }
            out.line("      default: try reader.skip(tag: tag)")
            out.line("      }")
            out.line("    }")
            out.line("  }")
            out.line("  self.\(field.name)[key] = value")
        } else if field.isRepeated {
            out.line("case \(tag): self.\(field.name).append(\(field.readValue))")
            if field.packable {
                let packedTag = field.tag(wireType: 2)
                out.line("case \(packedTag):")
                out.line("  try reader.readPacked { (reader: inout WireReader) throws(WireDecodingError) in self.\(field.name).append(\(field.readValue)) }")
            }
        } else if let oneof = field.oneof {
            let property = namer.messagePropertyName(oneof: oneof).name
            let caseName = NamingUtilsLite.trimBackticks(field.name)
            if field.isMessage {
                // Read straight into the oneof; a repeated member is merged into what it holds.
                out.line("case \(tag):")
                out.line("  if case .\(caseName)(var v)? = self.\(property) {")
                out.line("    self.\(property) = nil")
                out.line("    try reader.mergeMessage(&v)")
                out.line("    self.\(property) = .\(caseName)(v)")
                out.line("  } else {")
                out.line("    self.\(property) = .\(caseName)(try reader.readMessage(\(field.swiftType).self))")
                out.line("  }")
            } else {
                out.line("case \(tag): self.\(property) = .\(caseName)(\(field.readValue))")
            }
        } else if field.isMessage {
            out.line("case \(tag): try reader.mergeMessage(&self.\(field.storage))")
        } else if field.hasStoredPresence {
            out.line("case \(tag): self.\(field.storage) = \(field.readValue)")
        } else {
            out.line("case \(tag): self.\(field.name) = \(field.readValue)")
        }
    }

    func wireEncode(_ field: Field) {
        if let (key, value) = field.map {
            out.line("for (key, value) in self.\(field.name).sorted(by: { $0.key < $1.key }) {")
            out.line("  \(field.writeTag(wireType: 2))")
            out.line("  writer.writeDelimited { writer in \(key.writeTag(wireType: key.wireType)); \(key.writeValue("key")); \(value.writeTag(wireType: value.wireType)); \(value.writeValue("value")) }")
            out.line("}")
        } else if field.isRepeated {
            if field.packed {
                out.line("if !self.\(field.name).isEmpty {")
                out.line("  \(field.writeTag(wireType: 2))")
                out.line("  writer.writeDelimited { writer in for v in self.\(field.name) { \(field.writeValue("v")) } }")
                out.line("}")
            } else {
                out.line("for v in self.\(field.name) { \(field.writeTag(wireType: field.wireType)); \(field.writeValue("v")) }")
            }
        } else if let oneof = field.oneof {
            let property = namer.messagePropertyName(oneof: oneof).name
            out.line("if case .\(NamingUtilsLite.trimBackticks(field.name))(let v)? = self.\(property) { \(field.writeTag(wireType: field.wireType)); \(field.writeValue("v")) }")
        } else if field.hasStoredPresence {
            out.line("if let v = self.\(field.storage) { \(field.writeTag(wireType: field.wireType)); \(field.writeValue("v")) }")
        } else {
            let condition = field.scalar?.isSet("self.\(field.name)") ?? "self.\(field.name).rawValue != 0"
            out.line("if \(condition) { \(field.writeTag(wireType: field.wireType)); \(field.writeValue("self.\(field.name)")) }")
        }
    }
}

/// Whether generated code names the bound value `v` (else it binds nothing: no unused-value warning).
func usesValue(_ code: String) -> Bool {
    code.range(of: #"\bv\b"#, options: .regularExpression) != nil
}

/// The one naming helper the library keeps package-internal.
enum NamingUtilsLite {
    static func trimBackticks(_ s: String) -> String {
        s.hasPrefix("`") && s.hasSuffix("`") ? String(s.dropFirst().dropLast()) : s
    }
}

struct HeadUnitCodeGenerator: CodeGenerator {
    func generate(
        files: [FileDescriptor],
        parameter: any CodeGeneratorParameter,
        protoCompilerContext: any ProtoCompilerContext,
        generatorOutputs: any GeneratorOutputs
    ) throws {
        for file in files {
            let contents = try SwiftGenerator(file: file).generate()
            let base = file.name.hasSuffix(".proto") ? String(file.name.dropLast(6)) : file.name
            try generatorOutputs.add(fileName: base + ".pb.swift", contents: contents)
        }
    }

    var supportedFeatures: [Google_Protobuf_Compiler_CodeGeneratorResponse.Feature] { [.proto3Optional] }
    var version: String? { "1.0" }
    var projectURL: String? { "headunitd" }
    var copyrightLine: String? { nil }
}

HeadUnitCodeGenerator().main(nil)
