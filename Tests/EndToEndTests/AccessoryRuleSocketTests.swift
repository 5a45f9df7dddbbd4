import Foundation
import HeadUnitWire
import NIOCore
import Testing

/// Issue 26's accessory points (E1, E5-E15), each as PROTOCOL.md section 18
/// now states it, over real sockets.
@Suite("Accessory session rules (issue 26 E points) over real sockets", .ownThread)
struct AccessoryRuleSocketTests {
    typealias Rig = AccessoryCreditSocketTests.Rig
    static let performance = AccessoryCreditSocketTests.performance
    static let climate = AccessoryCreditSocketTests.climate
    static func app(_ id: String, _ protocols: [String]) -> HUAppInfo { AccessoryCreditSocketTests.automakerApp(id, protocols) }

    /// E5: "each string goes through all three checks before the next string is looked at".
    @Test func serveProtocolsChecksEachStringThroughAllChecksInListOrder() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [])
        let first = try rig.request(rig.accessory, .serveProtocols(HUServeProtocols.with { $0.protocols = ["bad string", "com.undeclared.x"] }))
        #expect(first.code == .invalidArgument)
        let second = try rig.request(rig.accessory, .serveProtocols(HUServeProtocols.with { $0.protocols = ["com.undeclared.x", "bad string"] }))
        #expect(second.code == .unknownProtocol)
    }

    /// E12: "A protocol listed twice (in any case) is served once."
    @Test func aProtocolListedTwiceInServeProtocolsIsServedOnce() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance, Self.performance.uppercased()])
        let hmi = try rig.daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        let status = try rig.request(hmi, .getStatus(HUGetStatus())).status.accessoryProtocols
        #expect(status.filter { $0.protocol == Self.performance }.count == 1)
        #expect(status.first { $0.protocol == Self.performance }?.available == true)
    }

    /// E6: "Only the apps concerned are told ... each event always carries the app's full list."
    @Test func availabilityGoesOnlyToTheAppsConcernedWithTheirFullList() throws {
        var rig = try Rig(apps: [Self.app("both", [Self.performance, Self.climate]), Self.app("laps", [Self.performance])], serve: [])
        _ = try rig.request(rig.accessory, .serveProtocols(HUServeProtocols.with { $0.protocols = [Self.climate] }))
        // Only "both" matched climate: one event, its whole list.
        var events: [HUAccessoryAvailability] = []
        while let frame = try? rig.phone.readFrame(timeout: 0.5), frame.kind == FrameKind.message.rawValue {
            if case .accessoryAvailability(let a) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body { events.append(a) }
        }
        #expect(events.map(\.appID) == ["both"])
        #expect(events.first?.protocols.map(\.protocol) == [Self.performance, Self.climate])
        #expect(events.first?.protocols.map(\.available) == [false, true])
    }

    /// E8: "an accepted grant is never answered, whatever its request_id".
    @Test func anAcceptedSessionCreditIsNeverAnsweredWhateverItsRequestID() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        let channel = try #require(try rig.openAll([("laps", Self.performance)]).keys.first)
        try rig.phone.send(.sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = 8192 }), requestID: 77)
        // The next Result the phone gets answers the request after it, not the grant.
        #expect(try rig.request(rig.phone, .openSession(HUOpenSession.with { $0.appID = "laps"; $0.protocol = "com.undeclared.x" })).code == .unknownProtocol)
        #expect(!rig.phone.sawEOF)
    }

    /// E9: "An empty DATA frame on an open session is accepted whatever the credit
    /// and not passed on"; on a channel with no open session it is NOT_CONNECTED.
    @Test func emptyDataIsAcceptedOnAnOpenSessionAndNotConnectedElsewhere() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        let channel = try #require(try rig.openAll([("laps", Self.performance)]).keys.first)
        // Spend all the credit, then an empty frame: accepted, nothing passed on.
        try rig.phone.sendFrame(.data, channel: channel, payload: [UInt8](repeating: 1, count: 65536))
        try rig.phone.sendFrame(.data, channel: channel, payload: [])
        try rig.phone.sendFrame(.data, channel: 4343, payload: [])
        let refused = try rig.phone.readResult()
        #expect(refused.result.code == .notConnected && refused.result.message.contains("4343"))
        var got = 0
        while got < 65536 {
            let frame = try #require(try rig.accessory.readFrame())
            if frame.kind == FrameKind.data.rawValue {
                #expect(!frame.payload.isEmpty, "an empty DATA frame is not passed on")
                got += frame.payload.count
            }
        }
        #expect(try rig.accessory.pingRoundTrip())
    }

    /// E13: "the refusing accessory gets only its Result{OK}, no SessionClosed".
    @Test func aRefusingAccessoryGetsOnlyItsResult() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        let opened = try rig.request(rig.phone, .openSession(HUOpenSession.with { $0.appID = "laps"; $0.protocol = Self.performance }))
        let channel = opened.accessorySession.channel
        _ = try AccessorySessionSocketTests.Rig.next(rig.accessory) { if case .sessionRequested(let r) = $0 { return r } else { return nil } }
        try rig.accessory.send(.answerSession(HUAnswerSession.with { $0.channel = channel; $0.accept = false; $0.reason = "busy" }), requestID: 5)
        let atPhone = try AccessorySessionSocketTests.Rig.next(rig.phone) { if case .sessionClosed(let c) = $0 { return c } else { return nil } }
        #expect(atPhone.reason == .refused && atPhone.detail == "busy")
        var sawClosed = false
        var sawResult = false
        while let frame = try? rig.accessory.readFrame(timeout: 0.5), frame.kind == FrameKind.message.rawValue {
            let envelope = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload))
            if case .sessionClosed = envelope.body { sawClosed = true }
            if case .result(let r) = envelope.body, envelope.requestID == 5 { sawResult = r.code == .ok }
        }
        #expect(sawResult && !sawClosed)
    }

    /// E15: "Channels count up from 1 ... a channel is not given to a new session
    /// before about four billion others were opened."
    @Test func channelsCountUpAndAClosedChannelIsNotReused() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        var seen: [UInt32] = []
        for _ in 0..<5 {
            let channel = try #require(try rig.openAll([("laps", Self.performance)]).keys.first)
            seen.append(channel)
            #expect(try rig.request(rig.phone, .closeSession(HUCloseSession.with { $0.channel = channel })).code == .ok)
        }
        #expect(seen == seen.sorted() && Set(seen).count == seen.count && seen.allSatisfy { $0 != 0 })
    }

    /// E1: invalid protocol strings of the vehicle profile are dropped from
    /// AppDecision.vehicle_protocols and Status too (Welcome: the caps test).
    @Test func invalidVehicleProtocolsAreDroppedFromAppDecisionsAndStatus() throws {
        let vehicle = "\"vehicle\": {\"manufacturer\": \"Open Motors\", \"mainDisplay\": {\"widthPt\": 800, \"heightPt\": 480, \"scale\": 2}, \"accessoryProtocols\": [\"not a protocol\", \"\(Self.performance)\", \"\(Self.performance.uppercased())\"]}"
        let daemon = try TestDaemon.launch(configJSON: vehicle)
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        let decisions = try RequestErrorTests.announce(phone, [Self.app("laps", [Self.performance])]).1.appDecisions.decisions
        #expect(decisions.first?.vehicleProtocols == [Self.performance])
        let hmi = try daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        try hmi.send(.getStatus(HUGetStatus()), requestID: 9)
        #expect(try hmi.readResult().result.status.accessoryProtocols.map(\.protocol) == [Self.performance])
    }

    /// E7: "the daemon is stopping: both sides of every session are told, before their own Goodbye{SHUTTING_DOWN}".
    @Test func shuttingDownTellsBothSidesBeforeTheirGoodbye() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        let channel = try #require(try rig.openAll([("laps", Self.performance)]).keys.first)
        kill(rig.daemon.process.processIdentifier, SIGTERM)
        for client in [rig.phone, rig.accessory] {
            var order: [String] = []
            while order.last != "goodbye" {
                let body = try client.readEnvelope(timeout: 10).body
                if case .sessionClosed(let c) = body, c.channel == channel { #expect(c.reason == .shuttingDown); order.append("closed") }
                if case .goodbye(let g) = body { #expect(g.code == .shuttingDown); order.append("goodbye") }
            }
            #expect(order == ["closed", "goodbye"])
        }
    }
}
