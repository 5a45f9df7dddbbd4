import Foundation
import HeadUnitCore
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 24, deliverable 7: an unknown enum value is INVALID_ARGUMENT
/// (PROTOCOL.md section 9, code 113) in every message family. The list of
/// enum fields is not written here: it is read from Protocol/*.proto, every
/// enum field reachable from a request body a peer may send, so an enum
/// added later is swept too. Each is sent over a real socket, from a role
/// that may send that body, holding a value no enum of the protocol has.
@Suite("Unknown enum values, every field", .ownThread)
struct UnknownEnumSweepTests {
    /// A field of a message: its number, its type's name, and whether it is repeated.
    struct Field {
        var name: String
        var number: Int
        var type: String
    }

    /// Messages and enums of Protocol/*.proto (no nested declarations there; checked).
    struct Schema {
        var messages: [String: [Field]] = [:]
        var enums: Set<String> = []

        init(directory: URL) throws {
            let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".proto") }
            let fieldPattern = try NSRegularExpression(pattern: #"^\s*(?:repeated\s+|optional\s+)?([A-Za-z_][\w.]*)\s+(\w+)\s*=\s*(\d+)\s*[;\[]"#)
            for file in files.sorted() {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                var current: String?
                var depth = 0
                for rawLine in text.components(separatedBy: "\n") {
                    let line = rawLine.components(separatedBy: "//")[0]
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    if depth == 0, trimmed.hasPrefix("message ") {
                        current = String(trimmed.dropFirst(8).prefix { $0.isLetter || $0.isNumber || $0 == "_" })
                        messages[current!] = []
                    } else if depth == 0, trimmed.hasPrefix("enum ") {
                        enums.insert(String(trimmed.dropFirst(5).prefix { $0.isLetter || $0.isNumber || $0 == "_" }))
                    } else if depth >= 1, let message = current, !trimmed.hasPrefix("oneof "), !trimmed.hasPrefix("reserved") {
                        #expect(!trimmed.hasPrefix("message ") && !trimmed.hasPrefix("enum "), "nested declaration in \(file): \(trimmed)")
                        let range = NSRange(line.startIndex..., in: line)
                        if let match = fieldPattern.firstMatch(in: line, range: range) {
                            func group(_ index: Int) -> String { String(line[Range(match.range(at: index), in: line)!]) }
                            let type = group(1).components(separatedBy: ".").last!
                            messages[message]!.append(Field(name: group(2), number: Int(group(3))!, type: type))
                        }
                    }
                    depth += line.filter { $0 == "{" }.count - line.filter { $0 == "}" }.count
                    if depth == 0 { current = nil }
                }
            }
        }

        /// Every path of fields from `message` down to an enum field; a message
        /// type is not entered twice on one path (templates nest in tab bars).
        func enumPaths(from message: String, visiting: [String] = []) -> [[Field]] {
            var paths: [[Field]] = []
            for field in messages[message] ?? [] {
                if enums.contains(field.type) {
                    paths.append([field])
                } else if messages[field.type] != nil, !visiting.contains(field.type), field.type != message {
                    for tail in enumPaths(from: field.type, visiting: visiting + [message]) { paths.append([field] + tail) }
                }
            }
            return paths
        }
    }

    static let unknownValue: UInt64 = 9_999

    /// An Envelope whose body holds `unknownValue` at the end of `path`, as raw protobuf.
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value, out: [UInt8] = []
        repeat {
            var byte = UInt8(value & 0x7f)
            value >>= 7
            if value != 0 { byte |= 0x80 }
            out.append(byte)
        } while value != 0
        return out
    }

    static func envelope(body: Field, path: [Field], requestID: UInt32) -> [UInt8] {
        func delimited(_ number: Int, _ bytes: [UInt8]) -> [UInt8] { varint(UInt64(number) << 3 | 2) + varint(UInt64(bytes.count)) + bytes }
        var inner = varint(UInt64(path.last!.number) << 3) + varint(unknownValue)
        for field in path.dropLast().reversed() { inner = delimited(field.number, inner) }
        return varint(1 << 3) + varint(UInt64(requestID)) + delimited(body.number, inner)
    }

    @Test func everyEnumFieldAPeerMaySendRefusesAnUnknownValue() throws {
        let protocolDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Protocol")
        let schema = try Schema(directory: protocolDirectory)
        let daemon = try TestDaemon.launch(limits: ["announceTimeoutMs": 600_000, "maxRequestsPerSecond": 100_000], tcp: false)
        defer { _ = try? daemon.terminate() }
        var peers: [HURole: RawSocketClient] = [:]
        for role in [HURole.phone, .hmi, .cluster, .accessory] {
            let client = try daemon.connectUnix()
            try client.handshake(role: role, name: "sweep")
            peers[role] = client
        }
        defer { for client in peers.values { client.close() } }
        // A navigation app on screen, so a navigation request that got through
        // would reach the cluster; and a cluster watching the metadata stream.
        let phone = peers[.phone]!, hmi = peers[.hmi]!
        try phone.send(.announceApps(HUAnnounceApps.with {
            $0.apps = [HUAppInfo.with { $0.appID = NavWire.appID; $0.displayName = "Maps"; $0.entitlements = [NavWire.maps] }]
        }), requestID: 2)
        #expect(try phone.readResult(timeout: 10).result.code == .ok)
        try hmi.send(.launchApp(HULaunchApp.with { $0.appID = NavWire.appID }), requestID: 3)
        #expect(try hmi.readResult(timeout: 10).result.code == .ok)
        var connected = try phone.readEnvelope(timeout: 10)
        while connected.sceneConnected.sceneID == 0 { connected = try phone.readEnvelope(timeout: 10) }
        try phone.send(.templateRequest(HUTemplateRequest.with {
            $0.appID = NavWire.appID; $0.sceneID = connected.sceneConnected.sceneID; $0.setRoot = NavWire.mapRoot()
        }), requestID: 4)
        #expect(try phone.readResult(timeout: 10).result.code == .ok)
        let observer = try daemon.connectUnix()
        defer { observer.close() }
        try observer.handshake(role: .cluster, name: "observer")
        try observer.send(.subscribeMetadata(HUSubscribeMetadata()), requestID: 2)
        #expect(try observer.readResult(timeout: 10).result.code == .ok)
        var first = try observer.readEnvelope(timeout: 10)
        while first.metadataUpdate.version == 0 { first = try observer.readEnvelope(timeout: 10) }

        var swept = 0
        var sweptPaths: [String] = []
        var families = Set<String>()
        var requestID: UInt32 = 100
        for body in schema.messages["Envelope"]! where schema.messages[body.type] != nil {
            // Hello and Goodbye belong to the connection layer (section 5: an
            // unknown role is ROLE_NOT_ALLOWED; a Goodbye's code is the peer's own).
            if body.name == "hello" || body.name == "goodbye" { continue }
            // Which role may send this body: the daemon's own table decides.
            let probe = try HUEnvelope(serializedBytes: Self.varint(UInt64(body.number) << 3 | 2) + [0])
            guard let decoded = probe.body,
                let role = [HURole.phone, .hmi, .cluster, .accessory].first(where: { RolePolicy.maySend(decoded, role: $0) })
            else { continue }
            // Pair and Authenticate are answered by the phone's connection before it is
            // established (TCP, section 20); they hold no enum field.
            for path in schema.enumPaths(from: body.type) {
                requestID += 1
                let client = peers[role]!
                try client.sendFrame(.message, payload: Self.envelope(body: body, path: path, requestID: requestID))
                let (answered, result) = try client.readResult(timeout: 10)
                let where_ = ([body.name] + path.map(\.name)).joined(separator: ".")
                #expect(answered == requestID, "\(where_): answer to \(answered)")
                #expect(result.code == .invalidArgument, "\(where_) = \(Self.unknownValue) from \(role): got \(result.code) \(result.message)")
                #expect(result.message.contains("\(Self.unknownValue)"), "\(where_): \(result.message)")
                swept += 1
                families.insert(body.name)
                sweptPaths.append(where_)
            }
        }
        // The issue's two: a pause reason and a maneuver's display style; and enough families to mean it.
        #expect(swept >= 20, "only \(swept) enum fields found")
        #expect(families.isSuperset(of: ["navigation_request", "navigation_input", "cluster_input", "template_request", "set_vehicle_state", "launch_app"]), "\(families)")
        #expect(sweptPaths.contains { $0.hasPrefix("navigation_request.pause.") }, "\(sweptPaths)")
        #expect(sweptPaths.contains { $0.hasSuffix(".display_style") }, "\(sweptPaths)")
        // Everyone is still connected: a request error closes nothing.
        for client in peers.values { #expect(try client.pingRoundTrip()) }
        // Nothing of a refused request reached the cluster: every effect of
        // the sweep was queued before its answer, so everything it could have
        // sent the observer is in front of the PONG.
        func observed() throws -> [HUEnvelope] {
            try observer.sendFrame(.ping, payload: [7])
            var seen: [HUEnvelope] = []
            while let frame = try observer.readFrame(timeout: 10), !(frame.kind == FrameKind.pong.rawValue && frame.payload == [7]) {
                if frame.kind == FrameKind.message.rawValue { seen.append(try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))) }
            }
            return seen
        }
        let leaked = try observed()
        #expect(leaked.isEmpty, "the cluster was sent \(leaked.map { "\($0.body.map { "\($0)".prefix(80) } ?? "nothing")" })")
        // The observer would have seen it: a valid navigation request does reach it.
        try phone.send(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("go") })), requestID: 99_999)
        let started = try phone.readResult(timeout: 10).result
        #expect(started.code == .ok, "\(started.code) \(started.message)")
        #expect(try observed().contains { if case .metadataUpdate = $0.body { return true } else { return false } })
    }
}
