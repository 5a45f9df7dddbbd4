import Foundation
import HeadUnitWire
import NIOCore
import TestSupport
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

    /// E2, section 18.6: "One order for every request that ends sessions ... `AppClosed` gives
    /// `SessionClosed{APP_CLOSED}` (and the scenes' ends), then the `Result`"; the accessory is told too.
    @Test func appClosedSendsSessionClosedAndTheScenesEndsBeforeItsResult() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        let channel = try #require(try rig.openAll([("laps", Self.performance)]).keys.first)
        let hmi = try rig.daemon.connectUnix()
        try hmi.handshake(role: .hmi)
        #expect(try RequestErrorTests.launch(hmi, "laps").1.code == .ok)
        _ = try AccessorySessionSocketTests.Rig.next(rig.phone) { if case .sceneConnected(let c) = $0 { return c } else { return nil } }
        try rig.phone.send(.appClosed(HUAppClosed.with { $0.appID = "laps" }), requestID: 61)
        var order: [String] = []
        while order.last != "result" {
            let envelope = try rig.phone.readEnvelope()
            switch envelope.body {
            case .sessionClosed(let c): #expect(c.channel == channel && c.reason == .appClosed); order.append("session closed")
            case .sceneDisconnected(let d): #expect(d.reason == .appClosed); order.append("scene disconnected")
            case .result(let r) where envelope.requestID == 61: #expect(r.code == .ok); order.append("result")
            default: break
            }
        }
        #expect(order.count == 3 && order.last == "result" && Set(order.dropLast()) == ["session closed", "scene disconnected"], "\(order)")
        let atAccessory = try AccessorySessionSocketTests.Rig.next(rig.accessory) { if case .sessionClosed(let c) = $0 { return c } else { return nil } }
        #expect(atAccessory.channel == channel && atAccessory.reason == .appClosed)
    }

    /// E10, section 18.5: a grant that "would make the direction's **outstanding** credit, that is the credit
    /// not yet spent as the receiver sees it (what the sender holds plus what the daemon holds back, not counting
    /// bytes in flight), more than the **window cap**" is `INVALID_ARGUMENT` with `limit "session.credit_bytes"`;
    /// "`limit_value` names the cap" (524288 by default).
    @Test func aGrantOverTheWindowCapIsInvalidArgumentWithTheCapAsLimitValue() throws {
        var rig = try Rig(apps: [Self.app("laps", [Self.performance])], serve: [Self.performance])
        let (channel, opened) = try #require(try rig.openAll([("laps", Self.performance)]).first)
        let cap: UInt32 = 524_288
        let phone = rig.phone
        let grant = { (bytes: UInt32, id: UInt32) in
            try phone.send(.sessionCredit(HUSessionCredit.with { $0.channel = channel; $0.bytes = bytes }), requestID: id)
        }
        // The accessory holds the window towards the phone: the phone widens it to the cap exactly (accepted, not answered).
        try grant(cap - opened.window, 31)
        try grant(1, 32)
        let refused = try rig.phone.readResult()
        #expect(refused.requestID == 32, "the grant to the cap is not answered; the one past it is")
        #expect(refused.result.code == .invalidArgument && refused.result.limit == "session.credit_bytes" && refused.result.limitValue == cap, "\(refused.result)")
        // Bytes in flight do not count: once the accessory sent 4096, the phone may grant 4096 more, and no more.
        var credit: UInt32 = 0
        while credit < cap {
            if case .sessionCredit(let c) = try rig.accessory.readEnvelope().body, c.channel == channel { credit += c.bytes }
            if credit + opened.window >= cap { break }
        }
        try rig.accessory.sendFrame(.data, channel: channel, payload: [UInt8](repeating: 7, count: 4096))
        var received = 0
        while received < 4096 {
            let frame = try #require(try rig.phone.readFrame())
            if frame.kind == FrameKind.data.rawValue { received += frame.payload.count }
        }
        try grant(4096, 33)
        try grant(1, 34)
        let again = try rig.phone.readResult()
        #expect(again.requestID == 34 && again.result.code == .invalidArgument && again.result.limitValue == cap, "\(again.requestID) \(again.result)")
    }

    /// E14, section 10.5: a peer "whose unsent output still passes `max_outbound_bytes` by more than one
    /// frame (`max_payload_bytes` + 12), is cut off ... `Goodbye{SLOW_CONSUMER}` is queued behind what it had
    /// not read yet: everything queued before the cut-off, which is at most `max_outbound_bytes` plus one
    /// frame when the size bound cut it". A phone that reads nothing while an HMI's selections send it
    /// 1 KB events: what it finds before its Goodbye is that, plus what the kernel had already taken.
    @Test func aStalledPeerCutOffByTheSizeBoundReceivesAtMostMaxOutboundBytesAndAFrame() throws {
        let maxOutbound = 65536, maxPayload = 65536
        let daemon = try TestDaemon.launch(limits: [
            "maxOutboundBytes": UInt64(maxOutbound), "maxPayloadBytes": UInt64(maxPayload),
            "slowConsumerTimeoutMs": 120_000, "heartbeatTimeoutMs": 120_000, "maxRequestsPerSecond": 1_000_000,
        ])
        defer { _ = try? daemon.terminate() }
        let phone = try daemon.connectUnix()
        try phone.handshake(role: .phone)
        let hmi = RecordingPeer(try daemon.connectUnix())
        try hmi.client.handshake(role: .hmi)
        #expect(try RequestErrorTests.announce(phone, [RequestErrorTests.app("com.example.app")]).1.code == .ok)
        #expect(try hmi.request(.launchApp(HULaunchApp.with { $0.appID = "com.example.app" })).code == .ok)
        let scene = try AccessorySessionSocketTests.Rig.next(phone) { if case .sceneConnected(let c) = $0 { return c.sceneID } else { return nil } }
        let itemID = String(repeating: "i", count: 1000)
        let list = HUTemplate.with { template in
            template.id = "root"
            template.list = HUListTemplate.with {
                $0.sections = [HUListSection.with { $0.id = "s"; $0.items = [HUListItem.with { $0.id = itemID; $0.general = HUGeneralItem.with { $0.text = "Song" } }] }]
            }
        }
        try phone.send(.templateRequest(HUTemplateRequest.with { $0.appID = "com.example.app"; $0.sceneID = scene; $0.setRoot = list }), requestID: 40)
        while true {
            let (id, result) = try phone.readResult()
            if id == 40 { #expect(result.code == .ok, "\(result.message)"); break }
        }
        // From here the phone reads nothing. Each selection sends it an AppEvent of about 1.1 KB.
        let select = HUEnvelope.OneOf_Body.hmiInput(HUHmiInput.with { $0.templateID = "root"; $0.selectItem = HUItemSelected.with { $0.itemID = itemID } })
        var cut = false
        for _ in 0..<250 where !cut {
            for _ in 0..<19 { try hmi.post(select) }
            _ = try hmi.request(select)
            hmi.drain(for: 0)
            cut = daemon.log.contains("cutting off slow consumer")
        }
        #expect(cut, "the phone was cut off")
        #expect(daemon.log.contains("bytes waiting for the peer"), "by the size bound, not the time-out")
        var before = 0
        var goodbye: HUGoodbye?
        while goodbye == nil, let frame = try phone.readFrame(timeout: 10) {
            if frame.kind == FrameKind.message.rawValue, case .goodbye(let g) = try EnvelopeCodec.decode(ByteBuffer(bytes: frame.payload)).body {
                goodbye = g
            } else {
                before += FrameHeader.size + frame.payload.count
            }
        }
        #expect(goodbye?.code == .slowConsumer, "\(String(describing: goodbye))")
        // The daemon's own queue at the cut-off: past the bound, and at most the bound plus the frame that
        // passed it. The kernel's socket buffers had taken some before (at most about twice its default send buffer).
        let bound = maxOutbound + maxPayload + FrameHeader.size
        let kernel = 2 * (Int((try? String(contentsOfFile: "/proc/sys/net/core/wmem_default", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 212_992)
        #expect(before > bound, "it was cut off by the bound: \(before) bytes")
        #expect(before <= bound + 2048 + kernel, "\(before) bytes before the Goodbye (bound \(bound), kernel \(kernel))")
        #expect(phone.waitForClose(timeout: 10))
    }
}
