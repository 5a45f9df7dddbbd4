import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
import Testing

/// Issue 47 item 4 over real sockets: an accessory that flaps its protocols
/// (an ECU restarting in a loop) costs the phone neither its connection nor
/// its session, because availability is state owed to each app, sent as the
/// phone takes writes, never a log (PROTOCOL.md 18.2, 21).
@Suite("A flapping accessory over real sockets", .ownThread)
struct AccessoryFlapSocketTests {
    static let performance = AccessoryCreditSocketTests.performance
    static let climate = AccessoryCreditSocketTests.climate

    static func apps(_ count: Int) -> [HUAppInfo] {
        (0..<count).map { AccessoryCreditSocketTests.automakerApp("app\($0)", [performance, climate]) }
    }

    /// `flips` ServeProtocols, alternating serving the performance protocol
    /// and withdrawing it (the first serves), sent 100 at a time and each answered OK.
    static func flap(_ accessory: RawSocketClient, _ flips: Int) throws {
        var id: UInt32 = 1_000
        var sent = 0
        while sent < flips {
            let batch = min(100, flips - sent)
            for index in 0..<batch {
                let served = (sent + index) % 2 == 0 ? [performance] : []
                try accessory.send(.serveProtocols(HUServeProtocols.with { $0.protocols = served }), requestID: id + UInt32(index))
            }
            for _ in 0..<batch {
                let (_, result) = try accessory.readResult()
                #expect(result.code == .ok, "\(result.message)")
            }
            id += UInt32(batch)
            sent += batch
        }
    }

    /// Reads up to the PONG of a PING sent now, keeping each app's last availability; bytes counted.
    static func readThroughPing(
        _ phone: RawSocketClient, _ payload: [UInt8], last: inout [String: [Bool]], bytes: inout Int, goodbye: inout HUGoodbye?
    ) throws {
        try phone.sendFrame(.ping, payload: payload)
        while let frame = try phone.readFrame(timeout: 30) {
            if frame.kind == FrameKind.pong.rawValue, frame.payload == payload { return }
            guard frame.kind == FrameKind.message.rawValue else { continue }
            bytes += FrameHeader.size + frame.payload.count
            switch try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body {
            case .accessoryAvailability(let a): last[a.appID] = a.protocols.map(\.available)
            case .goodbye(let g): goodbye = g
            default: break
            }
        }
    }

    /// 64 automaker apps, a phone that reads nothing while an accessory flips
    /// 2,001 times (each flip concerns all 64 apps). Before, each flip queued
    /// 64 events (about 5 KB) for the phone, and the phone was cut off as a
    /// slow consumer once 128 KB waited; now the daemon holds at most its
    /// high-water mark and one event per app, and the phone reads the final state.
    @Test func aFlappingAccessoryNeverCutsOffAPhoneThatIsBehind() throws {
        let maxOutbound = 65536
        let daemon = try TestDaemon.launch(limits: [
            "maxOutboundBytes": UInt64(maxOutbound), "maxPayloadBytes": 65536,
            "slowConsumerTimeoutMs": 120_000, "heartbeatTimeoutMs": 120_000, "maxRequestsPerSecond": 1_000_000,
        ])
        defer { _ = try? daemon.terminate() }
        let accessory = try daemon.connectUnix()
        try accessory.handshake(role: .accessory, name: "ECU")
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        #expect(try RequestErrorTests.announce(phone, Self.apps(64)).1.code == .ok)
        // From here the phone reads nothing until the accessory is done.
        try Self.flap(accessory, 2_001)
        #expect(!daemon.log.contains("cutting off slow consumer"), "the phone was cut off")
        var last: [String: [Bool]] = [:]
        var bytes = 0
        var goodbye: HUGoodbye?
        try Self.readThroughPing(phone, [1], last: &last, bytes: &bytes, goodbye: &goodbye)
        try Self.readThroughPing(phone, [2], last: &last, bytes: &bytes, goodbye: &goodbye)
        #expect(goodbye == nil, "\(String(describing: goodbye))")
        #expect(last.count == 64 && last.values.allSatisfy { $0 == [true, false] }, "each app ends on the final state: \(last)")
        // What reached the phone: the daemon's queue up to its bound, the
        // kernel's socket buffers, and one event per app; never 2,001 x 64 events (10 MB).
        let kernel = 2 * (Int((try? String(contentsOfFile: "/proc/sys/net/core/wmem_default", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 212_992)
        #expect(bytes <= maxOutbound + kernel + 64 * 128, "\(bytes) bytes of events (kernel \(kernel))")
        // The phone's session carries on: a request is answered.
        try phone.send(.openSession(HUOpenSession.with { $0.appID = "app7"; $0.protocol = Self.performance }), requestID: 50)
        var answer = try phone.readResult()
        while answer.requestID != 50 { answer = try phone.readResult() }
        #expect(answer.result.code == .ok, "\(answer.result.message)")
    }

    /// 2 apps, a phone whose link drops while the accessory flips 1,001
    /// times. Before, each flip put 2 events in the phone's 256-message
    /// backlog, which overflowed: ResumeSession was refused and every app,
    /// scene and stack lost. Now the backlog holds none of them: the phone
    /// resumes and, after its Result, is told each app's availability as it is.
    @Test func aPhoneAwayWhileTheAccessoryFlapsResumesAndSeesTheFinalAvailability() throws {
        let daemon = try TestDaemon.launch(limits: ["maxRequestsPerSecond": 1_000_000])
        defer { _ = try? daemon.terminate() }
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        let accessory = try daemon.connectUnix()
        try accessory.handshake(role: .accessory, name: "ECU")
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        let announced = try RequestErrorTests.announce(phone, Self.apps(2)).1
        #expect(announced.code == .ok)
        let token = announced.appDecisions.resumptionToken
        #expect(!token.isEmpty)
        // The link drops: no Goodbye.
        phone.close()
        let deadline = RawSocketClient.now() + 30
        var link = HUPhoneLink.connected
        while link != .reconnecting, RawSocketClient.now() < deadline {
            link = try ResumptionTests.status(hmi).phoneLink
            if link != .reconnecting { Thread.sleep(forTimeInterval: 0.05) }
        }
        #expect(link == .reconnecting)
        try Self.flap(accessory, 1_001)
        #expect(try ResumptionTests.status(hmi).phoneLink == .reconnecting, "the session was given up")

        let back = try daemon.connectUnix()
        try back.handshake(role: .phone)
        try back.send(.resumeSession(HUResumeSession.with { $0.resumptionToken = token }), requestID: 5)
        let first = try back.readEnvelope()
        #expect(first.requestID == 5 && first.result.code == .ok, "\(first.result.message)")
        #expect(first.result.resumed.apps.map(\.appID) == ["app0", "app1"])
        var told: [HUAccessoryAvailability] = []
        while told.count < 2 {
            if case .accessoryAvailability(let a) = try back.readEnvelope().body { told.append(a) }
        }
        #expect(told.map(\.appID) == ["app0", "app1"])
        #expect(told.allSatisfy { $0.protocols.map(\.available) == [true, false] })
        #expect(try ResumptionTests.status(hmi).phoneLink == .connected)
    }
}
