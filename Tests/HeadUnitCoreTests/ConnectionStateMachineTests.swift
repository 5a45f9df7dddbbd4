import HeadUnitCore
import HeadUnitWire
import NIOCore
import Testing

/// The connection rules without a socket: frames and milliseconds in, one action out.
@Suite struct ConnectionStateMachineTests {
    static let limits = ConnectionLimits(
        maxPayloadBytes: 4096, heartbeatIntervalMilliseconds: 5_000, heartbeatTimeoutMilliseconds: 15_000,
        handshakeTimeoutMilliseconds: 5_000, maxErrorsPerSecond: 10)

    static func machine(_ transport: Transport = .unix, now: UInt64 = 1_000) -> ConnectionStateMachine {
        ConnectionStateMachine(connectionID: 7, transport: transport, configuration: ConnectionConfiguration(limits: limits), now: now)
    }

    static func message(_ body: HUEnvelope.OneOf_Body?, requestID: UInt32 = 0) -> Frame {
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = body
        let bytes: [UInt8] = try! envelope.serializedBytes()
        return Frame(kind: .message, payload: ByteBuffer(bytes: bytes))
    }

    static func hello(_ role: HURole, min: UInt32 = 1, max: UInt32 = 1, name: String = "test") -> Frame {
        var hello = HUHello()
        hello.role = role
        hello.minVersion = min
        hello.maxVersion = max
        hello.name = name
        return message(.hello(hello), requestID: 1)
    }

    static func raw(kind: UInt8, flags: UInt8 = 0, channel: UInt32 = 0, _ payload: [UInt8] = []) -> Frame {
        Frame(header: FrameHeader(kindByte: kind, flags: flags, channel: channel, length: UInt32(payload.count)), payload: ByteBuffer(bytes: payload))
    }

    static func established(_ role: HURole = .phone, _ transport: Transport = .unix, now: UInt64 = 1_000) -> ConnectionStateMachine {
        var machine = machine(transport, now: now)
        guard case .join = machine.receive(hello(role), now: now) else { fatalError("handshake failed") }
        return machine
    }

    static func resultCode(_ action: ConnectionAction) -> HUErrorCode? {
        if case .reply(let envelope) = action, case .result(let result) = envelope.body { return result.code }
        return nil
    }

    static func closeCode(_ action: ConnectionAction) -> HUErrorCode? {
        if case .close(let code, _) = action { return code }
        return nil
    }

    /// PROTOCOL.md 10.2 and 18.5: a SessionCredit of 4096 bytes or more takes no
    /// token from the request rate (credit bounds it); a smaller one, and a
    /// frame that only looked like a grant, take one.
    @Test func grantsOfAUsefulSizeTakeNoRequestToken() {
        var limits = Self.limits
        limits.maxRequestsPerSecond = 3
        var machine = ConnectionStateMachine(connectionID: 7, transport: .unix, configuration: ConnectionConfiguration(limits: limits), now: 1_000)
        guard case .join = machine.receive(Self.hello(.phone), now: 1_000) else { Issue.record("handshake failed"); return }
        let big = Self.message(.sessionCredit(HUSessionCredit.with { $0.channel = 1; $0.bytes = 16384 }))
        for _ in 0..<100 {
            guard case .deliver = machine.receive(big, now: 1_000) else { Issue.record("a 16 KiB grant was not delivered"); return }
        }
        let small = Self.message(.sessionCredit(HUSessionCredit.with { $0.channel = 1; $0.bytes = 100 }), requestID: 9)
        for _ in 0..<3 {
            guard case .deliver = machine.receive(small, now: 1_000) else { Issue.record("a small grant within the rate was not delivered"); return }
        }
        #expect(Self.resultCode(machine.receive(small, now: 1_000)) == .tooManyRequests)
        #expect(Self.resultCode(machine.receive(Self.message(.getStatus(HUGetStatus()), requestID: 10), now: 1_000)) == .tooManyRequests)
        // Big grants still pass while the bucket is empty.
        guard case .deliver = machine.receive(big, now: 1_000) else { Issue.record("a 16 KiB grant was refused by the rate"); return }
    }

    // MARK: - Handshake

    @Test func helloJoinsWithWelcomeEchoingRequestID() {
        var machine = Self.machine()
        let action = machine.receive(Self.hello(.phone, max: 3, name: "Alice's phone"), now: 1_010)
        guard case .join(let info, let welcome) = action, case .welcome(let body) = welcome.body else {
            Issue.record("expected join, got \(action)")
            return
        }
        #expect(info == PeerInfo(role: .phone, name: "Alice's phone", transport: .unix))
        #expect(welcome.requestID == 1)
        #expect(body.version == ProtocolVersion.maximum)
        #expect(body.daemonMinVersion == ProtocolVersion.minimum)
        #expect(body.limits.maxPayloadBytes == 4096)
        #expect(body.limits.heartbeatTimeoutMs == 15_000)
        #expect(body.connectionID == 7)
        #expect(body.vehicle == .standard)
        #expect(machine.state == .established(info, version: 1))
    }

    @Test func anythingButHelloBeforeHandshakeIsFatal() {
        for frame in [
            Self.message(.getStatus(HUGetStatus())),
            Self.message(nil),
            Self.raw(kind: FrameKind.ping.rawValue, [1]),
            Self.raw(kind: 0x7F),
            Self.raw(kind: FrameKind.message.rawValue, [0xFF, 0xFF]),
        ] {
            var machine = Self.machine()
            #expect(Self.closeCode(machine.receive(frame, now: 1_001)) == .handshakeRequired)
            #expect(machine.state == .closing)
        }
    }

    @Test func noCommonVersionSaysTheDaemonsRange() {
        var machine = Self.machine()
        let action = machine.receive(Self.hello(.phone, min: 2, max: 4), now: 1_001)
        guard case .close(.noCommonVersion, let reason) = action else {
            Issue.record("got \(action)")
            return
        }
        #expect(reason.contains("1...1"))
        #expect(reason.contains("2...4"))
    }

    @Test func carRolesOnlyOverUnix() {
        for role in [HURole.hmi, .cluster, .accessory] {
            var tcp = Self.machine(.tcp)
            #expect(Self.closeCode(tcp.receive(Self.hello(role), now: 1_001)) == .roleNotAllowed)
            var unix = Self.machine(.unix)
            if case .join = unix.receive(Self.hello(role), now: 1_001) {} else { Issue.record("\(role) over unix refused") }
        }
        var phone = Self.machine(.tcp)
        if case .join = phone.receive(Self.hello(.phone), now: 1_001) {} else { Issue.record("phone over tcp refused") }
    }

    @Test func unspecifiedOrUnknownRoleIsNotAllowed() {
        for role in [HURole.unspecified, .UNRECOGNIZED(42)] {
            var machine = Self.machine()
            #expect(Self.closeCode(machine.receive(Self.hello(role), now: 1_001)) == .roleNotAllowed)
        }
    }

    @Test func secondHelloIsNonFatal() {
        var machine = Self.established()
        let action = machine.receive(Self.hello(.phone), now: 1_100)
        #expect(Self.resultCode(action) == .alreadyHandshaken)
        if case .reply(let envelope) = action { #expect(envelope.requestID == 1) }
        #expect(machine.peer != nil)
    }

    @Test func handshakeTimeout() {
        var machine = Self.machine(now: 1_000)
        #expect(machine.nextDeadline == 6_000)
        #expect(machine.tick(now: 5_999) == .none)
        #expect(Self.closeCode(machine.tick(now: 6_000)) == .handshakeTimeout)
        #expect(machine.nextDeadline == nil)
    }

    // MARK: - Frames after the handshake

    @Test func unknownFrameKindIsSkipped() {
        var machine = Self.established()
        #expect(Self.resultCode(machine.receive(Self.raw(kind: 0x09, [1, 2]), now: 1_100)) == .unknownFrameKind)
        #expect(machine.peer != nil)
    }

    @Test func nonZeroFlagsOrChannelAreReserved() {
        var machine = Self.established()
        #expect(Self.resultCode(machine.receive(Self.raw(kind: FrameKind.ping.rawValue, flags: 0x80), now: 1_100)) == .reservedFlags)
        #expect(Self.resultCode(machine.receive(Self.raw(kind: FrameKind.message.rawValue, channel: 3), now: 1_101)) == .reservedFlags)
        #expect(Self.resultCode(machine.receive(Self.raw(kind: FrameKind.pong.rawValue, channel: 1), now: 1_102)) == .reservedFlags)
    }

    @Test func pingIsEchoedUpTo64Bytes() {
        var machine = Self.established()
        let payload = [UInt8](repeating: 9, count: 64)
        #expect(machine.receive(Self.raw(kind: FrameKind.ping.rawValue, payload), now: 1_100) == .pong(ByteBuffer(bytes: payload)))
        #expect(Self.resultCode(machine.receive(Self.raw(kind: FrameKind.ping.rawValue, payload + [1]), now: 1_101)) == .malformedPayload)
    }

    @Test func undecodablePayloadIsMalformed() {
        var machine = Self.established()
        #expect(Self.resultCode(machine.receive(Self.raw(kind: FrameKind.message.rawValue, [0xFF, 0xFF, 0xFF]), now: 1_100)) == .malformedPayload)
    }

    @Test func emptyOrNewerBodyIsUnknownMessage() {
        var machine = Self.established()
        let action = machine.receive(Self.message(nil, requestID: 4), now: 1_100)
        #expect(Self.resultCode(action) == .unknownMessage)
        if case .reply(let envelope) = action { #expect(envelope.requestID == 4) }
        // request_id 9 and an unknown field 99: a body from a newer version.
        let newer = Self.raw(kind: FrameKind.message.rawValue, [0x08, 0x09, 0x9A, 0x06, 0x02, 0x01, 0x02])
        #expect(Self.resultCode(machine.receive(newer, now: 1_101)) == .unknownMessage)
    }

    @Test func dataFramesGoToTheCarFromPhonesAndAccessoriesOnly() {
        var phone = Self.established(.phone)
        #expect(phone.receive(Self.raw(kind: FrameKind.data.rawValue, channel: 2, [1]), now: 1_100) == .deliverData(channel: 2, ByteBuffer(bytes: [1])))
        var accessory = Self.established(.accessory)
        #expect(accessory.receive(Self.raw(kind: FrameKind.data.rawValue, channel: 7, [1, 2]), now: 1_100) == .deliverData(channel: 7, ByteBuffer(bytes: [1, 2])))
        var hmi = Self.established(.hmi)
        #expect(Self.resultCode(hmi.receive(Self.raw(kind: FrameKind.data.rawValue, channel: 2, [1]), now: 1_100)) == .notForRole)
        // The Car's refusal counts against the same error budget.
        #expect(Self.resultCode(phone.refuse(.notConnected, "no session on channel 2", now: 1_100)) == .notConnected)
    }

    @Test func allowedMessagesAreDelivered() {
        var phone = Self.established(.phone)
        let announce = Self.message(.announceApps(HUAnnounceApps()), requestID: 2)
        guard case .deliver(let envelope, _) = phone.receive(announce, now: 1_100) else {
            Issue.record("not delivered")
            return
        }
        #expect(envelope.requestID == 2)
        var hmi = Self.established(.hmi)
        if case .deliver = hmi.receive(Self.message(.launchApp(HULaunchApp())), now: 1_100) {} else { Issue.record("launch not delivered") }
    }

    /// A list push is delivered when it fits the limits, with what the limits'
    /// walk found of unknown enums; refused naming the field when it does not.
    @Test func listPushesAreDeliveredOrRefusedAsTheLimitsWalkSays() throws {
        func push(text: String, accessory: HUAccessoryType = .none, role: HURole = .phone) -> (ConnectionAction, HUTemplate) {
            var item = HUListItem()
            item.id = "i"
            item.general.text = text
            item.general.accessory = accessory
            var section = HUListSection()
            section.items = [item]
            var template = HUTemplate()
            template.id = "t"
            template.list.sections = [section]
            var request = HUTemplateRequest()
            request.push = template
            var machine = Self.established(role)
            return (machine.receive(Self.message(.templateRequest(request), requestID: 5), now: 1_100), template)
        }
        let within = String(repeating: "x", count: 1024)  // max_string_bytes by default
        let (delivered, template) = push(text: within)
        guard case .deliver(let envelope, let unknownEnum) = delivered else {
            Issue.record("not delivered: \(delivered)")
            return
        }
        #expect(envelope.requestID == 5 && envelope.templateRequest.push == template)
        #expect(unknownEnum == .found(nil))

        let (over, _) = push(text: within + "x")
        guard case .reply(let refusal) = over, case .result(let result) = refusal.body else {
            Issue.record("not refused: \(over)")
            return
        }
        #expect(result.code == .messageTooLarge && result.limit == "max_string_bytes" && refusal.requestID == 5)
        #expect(result.message.contains("11.11.10.2[0].3[0].10.1"), "\(result.message)")

        let (unknown, _) = push(text: "x", accessory: .UNRECOGNIZED(9))
        guard case .deliver(_, .found(let found?)) = unknown else {
            Issue.record("unknown enum not found: \(unknown)")
            return
        }
        #expect(found.fieldPath == "11.11.10.2.3.10.4" && found.value == 9)

        let (hmi, _) = push(text: "x", role: .hmi)
        #expect(Self.resultCode(hmi) == .notForRole)
    }

    @Test func messagesOutsideTheRoleAreNotForRole() {
        var phone = Self.established(.phone)
        #expect(Self.resultCode(phone.receive(Self.message(.launchApp(HULaunchApp())), now: 1_100)) == .notForRole)
        #expect(Self.resultCode(phone.receive(Self.message(.welcome(HUWelcome())), now: 1_101)) == .notForRole)
        #expect(Self.resultCode(phone.receive(Self.message(.screenUpdate(HUScreenUpdate())), now: 1_102)) == .notForRole)
        var hmi = Self.established(.hmi)
        #expect(Self.resultCode(hmi.receive(Self.message(.announceApps(HUAnnounceApps())), now: 1_100)) == .notForRole)
        #expect(Self.resultCode(hmi.receive(Self.message(.templateRequest(HUTemplateRequest())), now: 1_101)) == .notForRole)
    }

    @Test func goodbyeFromThePeerClosesQuietly() {
        var machine = Self.established()
        var goodbye = HUGoodbye()
        goodbye.reason = "bye"
        #expect(machine.receive(Self.message(.goodbye(goodbye)), now: 1_100) == .peerLeaving(goodbye))
        #expect(machine.state == .closing)
        #expect(machine.receive(Self.message(.getStatus(HUGetStatus())), now: 1_101) == .none)
    }

    // MARK: - Heartbeat

    @Test func heartbeatPingsThenCutsASilentPeer() {
        var machine = Self.established(now: 1_000)
        #expect(machine.nextDeadline == 6_000)
        guard case .ping = machine.tick(now: 6_000) else {
            Issue.record("expected a ping")
            return
        }
        #expect(machine.nextDeadline == 11_000)
        if case .ping = machine.tick(now: 11_000) {} else { Issue.record("expected a second ping") }
        #expect(machine.nextDeadline == 16_000)
        #expect(Self.closeCode(machine.tick(now: 16_000)) == .heartbeatTimeout)
    }

    @Test func anyFrameCountsAsLife() {
        var machine = Self.established(now: 1_000)
        _ = machine.tick(now: 6_000)
        // Even a bad frame proves the peer is there.
        _ = machine.receive(Self.raw(kind: 0x7E), now: 14_000)
        _ = machine.tick(now: 16_000)
        let beforeTimeout = machine.tick(now: 28_999)
        #expect(Self.closeCode(beforeTimeout) == nil)
        #expect(machine.peer != nil)
        #expect(Self.closeCode(machine.tick(now: 29_000)) == .heartbeatTimeout)
    }

    // MARK: - Error budget

    @Test func moreThanTheBudgetPerSecondIsTooManyErrors() {
        var machine = Self.established()
        let bad = Self.raw(kind: FrameKind.message.rawValue, [0xFF])
        for i in 0..<10 {
            #expect(Self.resultCode(machine.receive(bad, now: 2_000 + UInt64(i))) == .malformedPayload)
        }
        #expect(Self.closeCode(machine.receive(bad, now: 2_500)) == .tooManyErrors)
        #expect(machine.state == .closing)
    }

    @Test func errorsSpreadOverTimeAreTolerated() {
        var machine = Self.established()
        let bad = Self.raw(kind: FrameKind.message.rawValue, [0xFF])
        // 10 per second, for five seconds: never more than 10 in any one second.
        for i in 0..<50 {
            #expect(Self.resultCode(machine.receive(bad, now: 2_000 + UInt64(i) * 100)) == .malformedPayload)
        }
    }

    // MARK: - Oversized frames refused alone (sections 2, 10, 25.4)

    /// What the assembler hands over for a frame over the maximum: its header and first bytes.
    static func oversized(_ kind: FrameKind, channel: UInt32 = 0, length: UInt32 = 5000, prefix: [UInt8] = []) -> Frame {
        Frame(header: FrameHeader(kind: kind, channel: channel, length: length), payload: ByteBuffer(bytes: prefix), isOversized: true)
    }

    @Test func anOversizedFrameIsRefusedAloneByItsKind() throws {
        var machine = Self.established(.phone)
        // MESSAGE: MESSAGE_TOO_LARGE on the request id the envelope starts with, naming the limit.
        let answer = machine.receive(Self.oversized(.message, prefix: [0x08, 0x96, 0x01, 0x5A]), now: 1_000)
        guard case .reply(let envelope) = answer, case .result(let result) = envelope.body else {
            Issue.record("not a Result: \(answer)")
            return
        }
        #expect(envelope.requestID == 150 && result.code == .messageTooLarge)
        #expect(result.limit == "max_payload_bytes" && result.limitValue == 4096)
        // VIDEO: the video refusal, request id 0, naming max_frame_bytes.
        let video = machine.receive(Self.oversized(.video, channel: 3), now: 1_000)
        guard case .reply(let refusal) = video, case .result(let videoResult) = refusal.body else {
            Issue.record("not a Result: \(video)")
            return
        }
        #expect(refusal.requestID == 0 && videoResult.code == .badVideoFrame && videoResult.limit == "max_frame_bytes")
        #expect(Self.resultCode(machine.receive(Self.oversized(.media, channel: 2), now: 1_000)) == .badMediaFrame)
        #expect(Self.resultCode(machine.receive(Self.oversized(.ping), now: 1_000)) == .malformedPayload)
        // The connection goes on: the next frame is served.
        #expect(Self.resultCode(machine.receive(Self.oversized(.message), now: 1_000)) == .messageTooLarge)
        guard case .pong = machine.receive(Self.raw(kind: FrameKind.ping.rawValue, [1]), now: 1_000) else {
            Issue.record("the next PING was not answered")
            return
        }
        // DATA: a session's byte stream cannot skip bytes: fatal.
        #expect(Self.closeCode(machine.receive(Self.oversized(.data, channel: 4), now: 1_000)) == .frameTooLarge)
    }

    /// The role comes first for VIDEO (25.4), and every oversized frame counts
    /// towards the error budget: the 11th in a second is TOO_MANY_ERRORS.
    @Test func oversizedFramesAreCheckedForTheRoleAndCountTowardsTheBudget() {
        var hmi = Self.established(.hmi)
        #expect(Self.resultCode(hmi.receive(Self.oversized(.video, channel: 3), now: 1_000)) == .notForRole)
        var phone = Self.established(.phone)
        for _ in 0..<10 { #expect(Self.resultCode(phone.receive(Self.oversized(.video, channel: 3), now: 2_000)) == .badVideoFrame) }
        #expect(Self.closeCode(phone.receive(Self.oversized(.video, channel: 3), now: 2_000)) == .tooManyErrors)
    }

    /// Before the handshake an oversized header is fatal as it always was (vector `handshake-length-over-max`).
    @Test func anOversizedFrameBeforeTheHandshakeIsFatal() {
        var machine = Self.machine()
        #expect(Self.closeCode(machine.receive(Self.oversized(.message), now: 1_000)) == .frameTooLarge)
    }

    @Test func framingErrorsCloseWithTheirCode() {
        var machine = Self.established()
        #expect(machine.framingFailed(.badMagic(0x4745)) == .close(.badMagic, FramingError.badMagic(0x4745).reason))
        var other = Self.machine()
        #expect(Self.closeCode(other.framingFailed(.frameTooLarge(length: 9999, maximum: 4096))) == .frameTooLarge)
    }

    @Test func shutdownSaysShuttingDownOnce() {
        var machine = Self.established()
        #expect(Self.closeCode(machine.shutdown(reason: "stop")) == .shuttingDown)
        #expect(machine.shutdown(reason: "stop") == .none)
    }
}

@Suite struct ConnectionErrorBudgetTests {
    @Test func windowIsOneSlidingSecond() {
        var budget = ErrorBudget(maxPerSecond: 3)
        let verdicts = [0, 10, 999, 999].map { budget.record(now: $0) }
        #expect(verdicts == [true, true, true, false])
        var later = ErrorBudget(maxPerSecond: 3)
        _ = later.record(now: 0)
        _ = later.record(now: 10)
        _ = later.record(now: 999)
        // The error at 0 is exactly one second old at 1000: out of the window.
        let atOneSecond = later.record(now: 1_000)
        #expect(atOneSecond)
        #expect(later.errorsInWindow == 3)
    }

    @Test func stateStaysBounded() {
        var budget = ErrorBudget(maxPerSecond: 2)
        for _ in 0..<100 { _ = budget.record(now: 5) }
        #expect(budget.errorsInWindow <= 3)
    }
}

@Suite struct ConnectionRolePolicyTests {
    @Test func carToPeerMessagesAreNeverAcceptedFromAPeer() {
        let carOnly: [HUEnvelope.OneOf_Body] = [
            .welcome(HUWelcome()), .result(HUResult()), .sceneConnected(HUSceneConnected()),
            .sceneDisconnected(HUSceneDisconnected()), .appEvent(HUAppEvent()),
            .sessionConfiguration(HUSessionConfiguration()), .homeScreen(HUHomeScreen()), .screenUpdate(HUScreenUpdate()),
        ]
        for body in carOnly {
            for role in [HURole.phone, .hmi, .cluster, .accessory] {
                #expect(!RolePolicy.maySend(body, role: role), "\(RolePolicy.name(of: body)) from \(role)")
            }
        }
    }

    @Test func phoneAndHMIMessagesStayWithTheirRole() {
        let phoneOnly: [HUEnvelope.OneOf_Body] = [
            .announceApps(HUAnnounceApps()), .templateRequest(HUTemplateRequest()), .completeEvent(HUCompleteEvent()), .appClosed(HUAppClosed()),
        ]
        let hmiOnly: [HUEnvelope.OneOf_Body] = [
            .launchApp(HULaunchApp()), .hmiInput(HUHmiInput()), .setVehicleState(HUSetVehicleState()), .closeApp(HUCloseApp()),
        ]
        for body in phoneOnly {
            #expect(RolePolicy.maySend(body, role: .phone))
            for role in [HURole.hmi, .cluster, .accessory] { #expect(!RolePolicy.maySend(body, role: role)) }
        }
        for body in hmiOnly {
            #expect(RolePolicy.maySend(body, role: .hmi))
            for role in [HURole.phone, .cluster, .accessory] { #expect(!RolePolicy.maySend(body, role: role)) }
        }
        #expect(!RolePolicy.maySend(.getStatus(HUGetStatus()), role: .phone))
        #expect(RolePolicy.maySend(.getStatus(HUGetStatus()), role: .hmi))
    }
}
