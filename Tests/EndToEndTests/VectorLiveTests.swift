import Foundation
import HeadUnitWire
import NIOCore
import SwiftProtobuf
import TestSupport
import Testing

/// Every `from: client` vector of Protocol/vectors/vectors.json played against
/// the real daemon, as Protocol/vectors/README.md ("Playing a vector live")
/// describes: a fresh daemon, the preconditions (`given`) made by the roles
/// that make them, the vector's bytes written as they are (only the ids the
/// daemon chooses substituted, `ids`), and the outcome (`expect`) checked on
/// the wire. HeadUnitWireTests checks the same file offline.
@Suite("Vectors played live", .serialized, .ownThread)
struct VectorLiveTests {
    struct File: Decodable { var vectors: [LiveVector] }

    struct LiveVector: Decodable, CustomTestStringConvertible {
        struct Given: Decodable { var by: String; var envelope: String }
        struct Expectation: Decodable { var code: String; var fatal: Bool; var reply: String; var request_id: UInt32? }
        var name: String
        var from: String
        var state: String
        var transport: String
        var max_payload_bytes: UInt32
        var hex: String
        var incomplete: Bool
        var role: String?
        var given: [Given]?
        var ids: [String: UInt64]?
        var expect: Expectation
        var testDescription: String { name }
    }

    static let vectors: [LiveVector] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/vectors.json")
        do { return try JSONDecoder().decode(File.self, from: Data(contentsOf: url)).vectors } catch { fatalError("vectors.json: \(error)") }
    }()

    static func role(_ name: String) -> HURole {
        switch name {
        case "hmi": return .hmi
        case "cluster": return .cluster
        case "accessory": return .accessory
        default: return .phone
        }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.unicodeScalars.filter { $0 != " " && $0 != "|" }.map { UInt8(ascii: $0) })
        func value(_ c: UInt8) -> UInt8 { c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : (c | 0x20) - UInt8(ascii: "a") + 10 }
        return stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }

    /// One connection per role, each with what it received and did not consume.
    final class Party {
        let daemon: TestDaemon
        var peers: [String: RawSocketClient] = [:]
        var logs: [String: [HUEnvelope]] = [:]
        /// The daemon's ids, learned from what it sent: the latest scene, event and channel.
        var learned: [String: UInt64] = [:]

        init(daemon: TestDaemon) { self.daemon = daemon }

        func peer(_ role: String) throws -> RawSocketClient {
            if let peer = peers[role] { return peer }
            let peer = try daemon.connectUnix()
            _ = try peer.handshake(role: VectorLiveTests.role(role), name: "vector \(role)")
            peers[role] = peer
            logs[role] = []
            return peer
        }

        func note(_ envelope: HUEnvelope, _ role: String) {
            switch envelope.body {
            case .sceneConnected(let scene): learned["scene_id"] = UInt64(scene.sceneID)
            case .appEvent(let event) where event.eventID != 0: learned["event_id"] = event.eventID
            case .result(let result) where result.accessorySession.channel != 0: learned["channel"] = UInt64(result.accessorySession.channel)
            case .sessionRequested(let requested): learned["channel"] = UInt64(requested.channel)
            default: break
            }
            logs[role, default: []].append(envelope)
        }

        /// Reads what every connection has for a moment, noting ids.
        func settle() {
            for (role, peer) in peers {
                while let envelope = try? peer.readEnvelope(timeout: 0.05) { note(envelope, role) }
            }
        }

        /// The daemon's value for `name`, waiting briefly for the event that carries it.
        func id(_ name: String) -> UInt64? {
            if learned[name] == nil { settle() }
            return learned[name]
        }

        /// Replaces each id the vector names (`ids`) by the daemon's.
        func substitute(_ envelope: inout HUEnvelope, _ ids: [String: UInt64]) {
            func swap<T: FixedWidthInteger>(_ field: inout T, _ name: String) {
                if let stated = ids[name], UInt64(field) == stated, let real = id(name) { field = T(truncatingIfNeeded: real) }
            }
            switch envelope.body {
            case .templateRequest(var request): swap(&request.sceneID, "scene_id"); envelope.body = .templateRequest(request)
            case .completeEvent(var complete): swap(&complete.eventID, "event_id"); envelope.body = .completeEvent(complete)
            case .answerSession(var answer): swap(&answer.channel, "channel"); envelope.body = .answerSession(answer)
            case .closeSession(var close): swap(&close.channel, "channel"); envelope.body = .closeSession(close)
            case .sessionCredit(var credit): swap(&credit.channel, "channel"); envelope.body = .sessionCredit(credit)
            default: break
            }
        }

        func close() { for peer in peers.values { peer.close() } }
    }

    @Test(arguments: vectors.filter { $0.from == "client" })
    func vectorPlaysLive(_ vector: LiveVector) throws {
        var limits: [String: UInt64] = [:]
        if vector.max_payload_bytes != 1_048_576 { limits["maxPayloadBytes"] = UInt64(vector.max_payload_bytes) }
        let daemon = try TestDaemon.launch(limits: limits)
        defer { _ = try? daemon.terminate() }
        let party = Party(daemon: daemon)
        defer { party.close() }
        let ids = vector.ids ?? [:]

        // The preconditions, in order, each answered OK.
        for (index, step) in (vector.given ?? []).enumerated() {
            let peer = try party.peer(step.by)
            var envelope = try HUEnvelope(textFormatString: step.envelope)
            envelope.requestID = 1000 + UInt32(index)
            party.substitute(&envelope, ids)
            try peer.send(envelope)
            while true {
                let answer = try peer.readEnvelope()
                if answer.requestID == envelope.requestID, case .result(let result) = answer.body {
                    try #require(result.code == .ok, "given step \(index) (\(step.by): \(step.envelope)): \(result.code) \(result.message)")
                    party.note(answer, step.by)
                    break
                }
                party.note(answer, step.by)
            }
        }

        // The sender: a fresh connection for handshake vectors, else the role's connection.
        let sender: RawSocketClient
        if vector.state == "handshake" {
            sender = vector.transport == "tcp" ? try RawSocketClient.tcp(port: try #require(daemon.tcpPort)) : try daemon.connectUnix()
            party.peers["handshake"] = sender
        } else {
            sender = try party.peer(vector.role ?? "phone")
        }
        var bytes = Self.bytes(vector.hex)
        if !ids.isEmpty {
            // Only whole, decodable MESSAGE frames can carry ids.
            var buffer = ByteBuffer(bytes: bytes)
            var rebuilt: [UInt8] = []
            while let frame = try? FrameParser.parse(&buffer, maxPayload: vector.max_payload_bytes) {
                if frame.header.kind == .message, var envelope = try? EnvelopeCodec.decode(frame.payload) {
                    party.substitute(&envelope, ids)
                    rebuilt += RawSocketClient.envelopeBytes(envelope)
                } else {
                    var out = ByteBuffer()
                    out.writeFrameHeader(frame.header)
                    out.writeImmutableBuffer(frame.payload)
                    rebuilt += Array(out.readableBytesView)
                }
            }
            bytes = rebuilt + Array(buffer.readableBytesView)
        }
        party.settle()
        try sender.send(bytes)
        if vector.incomplete { shutdown(sender.fd, Int32(SHUT_WR)) }
        try Self.check(vector, sender)
    }

    /// Issue 26, N18: "`metadata-update-full` has every section" (PROTOCOL.md 19.5: `full` carries every section).
    @Test func theFullMetadataVectorCarriesEverySection() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/vectors.json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let vectors = try #require(json["vectors"] as? [[String: Any]])
        let full = try #require(vectors.first { $0["name"] as? String == "metadata-update-full" })
        let frames = try #require(full["frames"] as? [[String: Any]])
        let text = try #require(frames.first?["envelope"] as? String)
        let state = try HUEnvelope(textFormatString: text).metadataUpdate.state
        #expect(state.hasGuidance && state.hasManeuvers && state.hasTripEstimates && state.hasAlert && state.hasNowPlaying
                && state.hasDisplay && state.hasPreviews && state.hasCluster && state.hasAudio && state.hasPhone)
    }

    /// The outcome on the wire: README's `expect`.
    static func check(_ vector: LiveVector, _ sender: RawSocketClient) throws {
        let expect = vector.expect
        switch expect.reply {
        case "Welcome", "Goodbye", "Result":
            while true {
                guard let frame = try sender.readFrame() else {
                    Issue.record("\(vector.name): closed before the \(expect.reply)")
                    return
                }
                guard frame.kind == FrameKind.message.rawValue else { continue }
                let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                switch (expect.reply, envelope.body) {
                case ("Welcome", .welcome):
                    return
                case ("Goodbye", .goodbye(let bye)):
                    #expect(name(bye.code) == expect.code, "\(vector.name): \(bye)")
                    #expect(sender.waitForClose(), "\(vector.name): closed after the Goodbye")
                    return
                case ("Result", .result(let result)):
                    #expect(name(result.code) == expect.code, "\(vector.name): \(result)")
                    if let id = expect.request_id { #expect(envelope.requestID == id, "\(vector.name)") }
                    return
                case (_, .sceneConnected), (_, .homeScreen), (_, .screenUpdate), (_, .appEvent), (_, .navigationEvent),
                    (_, .metadataUpdate), (_, .sessionConfiguration), (_, .accessoryAvailability), (_, .sessionRequested),
                    (_, .sessionOpened), (_, .sessionClosed), (_, .sceneDisconnected):
                    continue  // events the request caused may come first (section 4)
                default:
                    Issue.record("\(vector.name): expected \(expect.reply) \(expect.code), got \(envelope)")
                    return
                }
            }
        case "PONG":
            while true {
                guard let frame = try sender.readFrame() else {
                    Issue.record("\(vector.name): closed before the PONG")
                    return
                }
                if frame.kind == FrameKind.pong.rawValue { return }
                if frame.kind == FrameKind.message.rawValue,
                    case .result(let result) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body, result.code != .ok
                {
                    Issue.record("\(vector.name): expected a PONG, got \(result)")
                    return
                }
            }
        case "nothing":
            // No Result or Goodbye for it; after the incomplete frame of a truncated stream, a silent close.
            let deadline = RawSocketClient.now() + 0.4
            while RawSocketClient.now() < deadline {
                guard let frame = try? sender.readFrame(timeout: max(0.01, deadline - RawSocketClient.now())) else { break }
                guard frame.kind == FrameKind.message.rawValue else { continue }
                let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
                switch envelope.body {
                case .result, .goodbye: Issue.record("\(vector.name): expected no answer, got \(envelope)")
                default: continue
                }
            }
        default:
            Issue.record("\(vector.name): unknown reply \(expect.reply)")
        }
    }

    static func name(_ code: HUErrorCode) -> String {
        var result = HUResult()
        result.code = code
        let text = result.textFormatString().trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "ERROR_CODE_OK" : String(text.dropFirst("code: ".count))
    }
}
