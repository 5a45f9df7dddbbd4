import HeadUnitCore
import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitServer

/// `ConnectionLifecycle` alone, as a value: every event in every state the
/// handler can reach, the legal transitions and the events a state ignores
/// (no channel, no loop; the handler only performs what it answers).
@Suite("Connection lifecycle")
struct ConnectionLifecycleTests {
    typealias Lifecycle = ConnectionLifecycle
    typealias State = ConnectionLifecycle.State

    /// Every event the handler feeds, each with a fixed argument.
    enum Event: CaseIterable {
        case activate, admitted, tlsEstablished, joined, close, peerSaidGoodbye, abort, leaveCarNow, beginHandover, drained, channelInactive
    }

    /// What an event answered.
    enum Answer: Equatable {
        case activation(Lifecycle.Activation)
        case yes
        case no
        case close(Lifecycle.Close)
        case ended(Lifecycle.Ended?)
        /// The event answers nothing (a transition or nothing at all).
        case done
    }

    static let code = HUErrorCode.heartbeatTimeout

    static func apply(_ event: Event, to lifecycle: inout Lifecycle) -> Answer {
        switch event {
        case .activate: return .activation(lifecycle.activate())
        case .admitted: return lifecycle.admitted() ? .yes : .no
        case .tlsEstablished:
            lifecycle.tlsEstablished()
            return .done
        case .joined: return lifecycle.joined() ? .yes : .no
        case .close: return .close(lifecycle.close(code))
        case .peerSaidGoodbye:
            lifecycle.peerSaidGoodbye()
            return .done
        case .abort:
            lifecycle.abort()
            return .done
        case .leaveCarNow: return lifecycle.leaveCarNow() ? .yes : .no
        case .beginHandover: return lifecycle.beginHandover() ? .yes : .no
        case .drained:
            lifecycle.drained()
            return .done
        case .channelInactive: return .ended(lifecycle.channelInactive())
        }
    }

    /// Each state the handler can reach, by the events that reach it.
    static func reach(_ name: String) -> Lifecycle {
        let (transport, restored, path): (Transport, Bool, [Event]) =
            switch name {
            case "idle": (.unix, false, [])
            case "restored": (.unix, true, [])
            case "admitting": (.unix, false, [.activate])
            case "admitting tcp": (.tcp, false, [.activate])
            case "awaitingTLS": (.tcp, false, [.activate, .admitted])
            case "awaitingHandshake": (.unix, false, [.activate, .admitted])
            case "serving": (.unix, false, [.activate, .admitted, .joined])
            case "handingOver": (.unix, false, [.activate, .admitted, .joined, .beginHandover])
            case "drained": (.unix, false, [.activate, .admitted, .joined, .beginHandover, .drained])
            case "closing": (.unix, false, [.activate, .admitted, .joined, .close])
            case "closed": (.unix, false, [.activate, .admitted, .joined, .channelInactive])
            default: fatalError("no state \(name)")
            }
        var lifecycle = Lifecycle(transport: transport, restored: restored)
        for event in path { _ = apply(event, to: &lifecycle) }
        return lifecycle
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var from: String
        var event: Event
        var answer: Answer
        var to: State
        var testDescription: String { "\(from) + \(event)" }
    }

    static let cutOff = PeerDeparture.cutOff(code)
    static func ended(_ membership: Lifecycle.Membership, _ departure: PeerDeparture) -> Answer {
        .ended(Lifecycle.Ended(membership: membership, departure: departure))
    }

    /// The whole table: for every reachable state, every event. A row whose
    /// `to` is the state it started in is an event that state ignores.
    static let table: [Row] = [
        // Not active yet: only activation, an abort or the end mean something.
        Row(from: "idle", event: .activate, answer: .activation(.admit), to: .admitting),
        Row(from: "idle", event: .admitted, answer: .no, to: .idle),
        Row(from: "idle", event: .tlsEstablished, answer: .done, to: .idle),
        Row(from: "idle", event: .joined, answer: .no, to: .idle),
        Row(from: "idle", event: .close, answer: .close(.none), to: .idle),
        Row(from: "idle", event: .peerSaidGoodbye, answer: .done, to: .closing(.none, .saidGoodbye)),
        Row(from: "idle", event: .abort, answer: .done, to: .closing(.none, .lost)),
        Row(from: "idle", event: .leaveCarNow, answer: .no, to: .idle),
        Row(from: "idle", event: .beginHandover, answer: .no, to: .idle),
        Row(from: "idle", event: .drained, answer: .done, to: .idle),
        Row(from: "idle", event: .channelInactive, answer: ended(.none, .lost), to: .closed),

        // Handed over by the previous process: a peer of the Car already, readmitted, never refused.
        Row(from: "restored", event: .activate, answer: .activation(.readmit), to: .serving),
        Row(from: "restored", event: .admitted, answer: .no, to: .restored),
        Row(from: "restored", event: .tlsEstablished, answer: .done, to: .restored),
        Row(from: "restored", event: .joined, answer: .no, to: .restored),
        Row(from: "restored", event: .close, answer: .close(.none), to: .restored),
        Row(from: "restored", event: .peerSaidGoodbye, answer: .done, to: .closing(.joined, .saidGoodbye)),
        Row(from: "restored", event: .abort, answer: .done, to: .closing(.joined, .lost)),
        Row(from: "restored", event: .leaveCarNow, answer: .no, to: .restored),
        Row(from: "restored", event: .beginHandover, answer: .no, to: .restored),
        Row(from: "restored", event: .drained, answer: .done, to: .restored),
        Row(from: "restored", event: .channelInactive, answer: ended(.joined, .lost), to: .closed),

        // Admission under way: a refusal is a Goodbye on Unix, a bare close on TCP (no TLS yet).
        Row(from: "admitting", event: .activate, answer: .activation(.none), to: .admitting),
        Row(from: "admitting", event: .admitted, answer: .yes, to: .awaitingHandshake),
        Row(from: "admitting", event: .tlsEstablished, answer: .done, to: .admitting),
        Row(from: "admitting", event: .joined, answer: .no, to: .admitting),
        Row(from: "admitting", event: .close, answer: .close(.goodbye), to: .closing(.none, cutOff)),
        Row(from: "admitting", event: .peerSaidGoodbye, answer: .done, to: .closing(.none, .saidGoodbye)),
        Row(from: "admitting", event: .abort, answer: .done, to: .closing(.none, .lost)),
        Row(from: "admitting", event: .leaveCarNow, answer: .no, to: .admitting),
        Row(from: "admitting", event: .beginHandover, answer: .no, to: .admitting),
        Row(from: "admitting", event: .drained, answer: .done, to: .admitting),
        Row(from: "admitting", event: .channelInactive, answer: ended(.none, .lost), to: .closed),
        Row(from: "admitting tcp", event: .admitted, answer: .yes, to: .awaitingTLS),
        Row(from: "admitting tcp", event: .close, answer: .close(.closeOnly), to: .closing(.none, cutOff)),

        // TCP before its TLS handshake: nothing can reach the peer, it cannot join or be handed over.
        Row(from: "awaitingTLS", event: .activate, answer: .activation(.none), to: .awaitingTLS),
        Row(from: "awaitingTLS", event: .admitted, answer: .no, to: .awaitingTLS),
        Row(from: "awaitingTLS", event: .tlsEstablished, answer: .done, to: .awaitingHandshake),
        Row(from: "awaitingTLS", event: .joined, answer: .no, to: .awaitingTLS),
        Row(from: "awaitingTLS", event: .close, answer: .close(.closeOnly), to: .closing(.admitted, cutOff)),
        Row(from: "awaitingTLS", event: .peerSaidGoodbye, answer: .done, to: .closing(.admitted, .saidGoodbye)),
        Row(from: "awaitingTLS", event: .abort, answer: .done, to: .closing(.admitted, .lost)),
        Row(from: "awaitingTLS", event: .leaveCarNow, answer: .no, to: .awaitingTLS),
        Row(from: "awaitingTLS", event: .beginHandover, answer: .no, to: .awaitingTLS),
        Row(from: "awaitingTLS", event: .drained, answer: .done, to: .awaitingTLS),
        Row(from: "awaitingTLS", event: .channelInactive, answer: ended(.admitted, .lost), to: .closed),

        // Admitted, before Hello (or authentication): counted in the caps, not in the Car.
        Row(from: "awaitingHandshake", event: .activate, answer: .activation(.none), to: .awaitingHandshake),
        Row(from: "awaitingHandshake", event: .admitted, answer: .no, to: .awaitingHandshake),
        Row(from: "awaitingHandshake", event: .tlsEstablished, answer: .done, to: .awaitingHandshake),
        Row(from: "awaitingHandshake", event: .joined, answer: .yes, to: .serving),
        Row(from: "awaitingHandshake", event: .close, answer: .close(.goodbye), to: .closing(.admitted, cutOff)),
        Row(from: "awaitingHandshake", event: .peerSaidGoodbye, answer: .done, to: .closing(.admitted, .saidGoodbye)),
        Row(from: "awaitingHandshake", event: .abort, answer: .done, to: .closing(.admitted, .lost)),
        Row(from: "awaitingHandshake", event: .leaveCarNow, answer: .no, to: .awaitingHandshake),
        Row(from: "awaitingHandshake", event: .beginHandover, answer: .yes, to: .handingOver(.admitted)),
        Row(from: "awaitingHandshake", event: .drained, answer: .done, to: .awaitingHandshake),
        Row(from: "awaitingHandshake", event: .channelInactive, answer: ended(.admitted, .lost), to: .closed),

        // A peer of the Car.
        Row(from: "serving", event: .activate, answer: .activation(.none), to: .serving),
        Row(from: "serving", event: .admitted, answer: .no, to: .serving),
        Row(from: "serving", event: .tlsEstablished, answer: .done, to: .serving),
        Row(from: "serving", event: .joined, answer: .no, to: .serving),
        Row(from: "serving", event: .close, answer: .close(.goodbye), to: .closing(.joined, cutOff)),
        Row(from: "serving", event: .peerSaidGoodbye, answer: .done, to: .closing(.joined, .saidGoodbye)),
        Row(from: "serving", event: .abort, answer: .done, to: .closing(.joined, .lost)),
        Row(from: "serving", event: .leaveCarNow, answer: .no, to: .serving),
        Row(from: "serving", event: .beginHandover, answer: .yes, to: .handingOver(.joined)),
        Row(from: "serving", event: .drained, answer: .done, to: .serving),
        Row(from: "serving", event: .channelInactive, answer: ended(.joined, .lost), to: .closed),

        // Handing over: only the barrier, a close or the end move it.
        Row(from: "handingOver", event: .activate, answer: .activation(.none), to: .handingOver(.joined)),
        Row(from: "handingOver", event: .admitted, answer: .no, to: .handingOver(.joined)),
        Row(from: "handingOver", event: .tlsEstablished, answer: .done, to: .handingOver(.joined)),
        Row(from: "handingOver", event: .joined, answer: .no, to: .handingOver(.joined)),
        Row(from: "handingOver", event: .close, answer: .close(.goodbye), to: .closing(.joined, cutOff)),
        Row(from: "handingOver", event: .peerSaidGoodbye, answer: .done, to: .closing(.joined, .saidGoodbye)),
        Row(from: "handingOver", event: .abort, answer: .done, to: .closing(.joined, .lost)),
        Row(from: "handingOver", event: .leaveCarNow, answer: .no, to: .handingOver(.joined)),
        Row(from: "handingOver", event: .beginHandover, answer: .no, to: .handingOver(.joined)),
        Row(from: "handingOver", event: .drained, answer: .done, to: .drained(.joined)),
        Row(from: "handingOver", event: .channelInactive, answer: ended(.joined, .lost), to: .closed),

        Row(from: "drained", event: .activate, answer: .activation(.none), to: .drained(.joined)),
        Row(from: "drained", event: .admitted, answer: .no, to: .drained(.joined)),
        Row(from: "drained", event: .tlsEstablished, answer: .done, to: .drained(.joined)),
        Row(from: "drained", event: .joined, answer: .no, to: .drained(.joined)),
        Row(from: "drained", event: .close, answer: .close(.goodbye), to: .closing(.joined, cutOff)),
        Row(from: "drained", event: .peerSaidGoodbye, answer: .done, to: .closing(.joined, .saidGoodbye)),
        Row(from: "drained", event: .abort, answer: .done, to: .closing(.joined, .lost)),
        Row(from: "drained", event: .leaveCarNow, answer: .no, to: .drained(.joined)),
        Row(from: "drained", event: .beginHandover, answer: .no, to: .drained(.joined)),
        Row(from: "drained", event: .drained, answer: .done, to: .drained(.joined)),
        Row(from: "drained", event: .channelInactive, answer: ended(.joined, .lost), to: .closed),

        // Closing: the first reason stands; only the Car's early goodbye and the end move it.
        Row(from: "closing", event: .activate, answer: .activation(.none), to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .admitted, answer: .no, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .tlsEstablished, answer: .done, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .joined, answer: .no, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .close, answer: .close(.none), to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .peerSaidGoodbye, answer: .done, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .abort, answer: .done, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .leaveCarNow, answer: .yes, to: .closing(.admitted, cutOff)),
        Row(from: "closing", event: .beginHandover, answer: .no, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .drained, answer: .done, to: .closing(.joined, cutOff)),
        Row(from: "closing", event: .channelInactive, answer: ended(.joined, cutOff), to: .closed),

        // Closed: nothing moves it, and its end is not undone twice.
        Row(from: "closed", event: .activate, answer: .activation(.none), to: .closed),
        Row(from: "closed", event: .admitted, answer: .no, to: .closed),
        Row(from: "closed", event: .tlsEstablished, answer: .done, to: .closed),
        Row(from: "closed", event: .joined, answer: .no, to: .closed),
        Row(from: "closed", event: .close, answer: .close(.none), to: .closed),
        Row(from: "closed", event: .peerSaidGoodbye, answer: .done, to: .closed),
        Row(from: "closed", event: .abort, answer: .done, to: .closed),
        Row(from: "closed", event: .leaveCarNow, answer: .no, to: .closed),
        Row(from: "closed", event: .beginHandover, answer: .no, to: .closed),
        Row(from: "closed", event: .drained, answer: .done, to: .closed),
        Row(from: "closed", event: .channelInactive, answer: .ended(nil), to: .closed),
    ]

    @Test("every event in every state", arguments: table)
    func everyEventInEveryState(_ row: Row) {
        var lifecycle = Self.reach(row.from)
        let answer = Self.apply(row.event, to: &lifecycle)
        #expect(answer == row.answer)
        #expect(lifecycle.state == row.to)
    }

    @Test func theTableCoversEveryEventInEveryState() {
        let states = ["idle", "restored", "admitting", "awaitingTLS", "awaitingHandshake", "serving", "handingOver", "drained", "closing", "closed"]
        for state in states {
            let events = Self.table.filter { $0.from == state }.map(\.event)
            #expect(events == Event.allCases, "state \(state)")
        }
    }

    /// What the handler asks of each state: read frames (and run timers), write output, hand over.
    @Test func whatEachStateAllows() {
        struct Allowed: Equatable {
            var serving: Bool
            var open: Bool
            var handingOver: Bool
            var drained: Bool
            var membership: Lifecycle.Membership
        }
        func allowed(_ name: String) -> Allowed {
            let lifecycle = Self.reach(name)
            return Allowed(
                serving: lifecycle.isServing, open: lifecycle.isOpen, handingOver: lifecycle.isHandingOver,
                drained: lifecycle.isDrained, membership: lifecycle.membership)
        }
        #expect(allowed("idle") == Allowed(serving: false, open: false, handingOver: false, drained: false, membership: .none))
        #expect(allowed("restored") == Allowed(serving: false, open: false, handingOver: false, drained: false, membership: .joined))
        #expect(allowed("admitting") == Allowed(serving: false, open: false, handingOver: false, drained: false, membership: .none))
        #expect(allowed("awaitingTLS") == Allowed(serving: true, open: true, handingOver: false, drained: false, membership: .admitted))
        #expect(allowed("awaitingHandshake") == Allowed(serving: true, open: true, handingOver: false, drained: false, membership: .admitted))
        #expect(allowed("serving") == Allowed(serving: true, open: true, handingOver: false, drained: false, membership: .joined))
        #expect(allowed("handingOver") == Allowed(serving: false, open: true, handingOver: true, drained: false, membership: .joined))
        #expect(allowed("drained") == Allowed(serving: false, open: true, handingOver: true, drained: true, membership: .joined))
        #expect(allowed("closing") == Allowed(serving: false, open: false, handingOver: false, drained: false, membership: .joined))
        #expect(allowed("closed") == Allowed(serving: false, open: false, handingOver: false, drained: false, membership: .none))
    }

    /// A TCP phone's whole life: admitted before TLS, joined after it, lost
    /// without a Goodbye (so it may resume): the end releases its cap and tells the Car.
    @Test func aTCPPhoneFromAdmissionToALostLink() {
        var lifecycle = Lifecycle(transport: .tcp)
        let activation = lifecycle.activate()
        #expect(activation == .admit)
        let admitted = lifecycle.admitted()
        #expect(admitted)
        let joinedBeforeTLS = lifecycle.joined()
        #expect(!joinedBeforeTLS, "no peer joins before its TLS handshake")
        lifecycle.tlsEstablished()
        let joined = lifecycle.joined()
        #expect(joined)
        let ended = lifecycle.channelInactive()
        #expect(ended == Lifecycle.Ended(membership: .joined, departure: .lost))
        let endedAgain = lifecycle.channelInactive()
        #expect(endedAgain == nil)
    }

    /// A slow consumer (or a peer a restart cannot carry): the Car forgets it
    /// at once, the caps when the socket finally closes, with the first reason.
    @Test func theCarForgetsACutOffPeerOnceAndTheCapsAtTheEnd() {
        var lifecycle = Self.reach("serving")
        let close = lifecycle.close(.slowConsumer)
        #expect(close == .goodbye)
        let left = lifecycle.leaveCarNow()
        #expect(left)
        let leftAgain = lifecycle.leaveCarNow()
        #expect(!leftAgain)
        lifecycle.peerSaidGoodbye()
        let ended = lifecycle.channelInactive()
        #expect(ended == Lifecycle.Ended(membership: .admitted, departure: .cutOff(.slowConsumer)))
    }

    /// Handed over: the socket goes to the next process, this one forgets it
    /// without a word; the end later undoes what it counted.
    @Test func aRelinquishedConnectionEndsWithoutAGoodbye() {
        var lifecycle = Self.reach("drained")
        lifecycle.abort()
        let close = lifecycle.close(.shuttingDown)
        #expect(close == .none)
        #expect(!lifecycle.isOpen)
        let ended = lifecycle.channelInactive()
        #expect(ended == Lifecycle.Ended(membership: .joined, departure: .lost))
    }
}

/// The handler's inbound buffer alone: a read that arrives while another is
/// served (NIOSSL can deliver one from inside a write) waits its turn, in
/// order, instead of re-entering the frames being served.
@Suite("Inbound frames")
struct InboundFramesTests {
    static func bytes(_ value: UInt8) -> ByteBuffer { ByteBuffer(bytes: [value]) }

    @Test func aReadDuringAReadIsQueuedAndServedAfterItInOrder() {
        var inbound = InboundFrames(maxPayload: 1024)
        var served: [ByteBuffer?] = []
        served.append(inbound.beginRead(Self.bytes(1)))
        // While 1 is served, 2 and 3 arrive: queued, not handed out.
        served.append(inbound.beginRead(Self.bytes(2)))
        served.append(inbound.beginRead(Self.bytes(3)))
        served.append(inbound.nextRead())
        // 4 arrives while 2 is served: behind 3.
        served.append(inbound.beginRead(Self.bytes(4)))
        served.append(inbound.nextRead())
        served.append(inbound.nextRead())
        served.append(inbound.nextRead())
        // The pass ended: the next read is served at once.
        served.append(inbound.beginRead(Self.bytes(5)))
        served.append(inbound.nextRead())
        served.append(inbound.nextRead())
        #expect(served == [Self.bytes(1), nil, nil, Self.bytes(2), nil, Self.bytes(3), Self.bytes(4), nil, Self.bytes(5), nil, nil])
    }

    @Test func framesHeldBackComeOutInOrderAndAreDroppedAtTheEnd() throws {
        var inbound = InboundFrames(maxPayload: 1024)
        var read = ByteBuffer()
        for value: UInt8 in 1...3 { read.writeFrame(kind: .ping, payload: ByteBuffer(bytes: [value])) }
        var frames: [Frame] = []
        while let frame = try inbound.nextFrame(from: &read, allocator: ByteBufferAllocator()) { frames.append(frame) }
        #expect(frames.count == 3)
        for frame in frames { inbound.hold(frame) }
        #expect(inbound.isHolding)
        let first = inbound.nextHeld()
        #expect(first?.payload == ByteBuffer(bytes: [1]))
        inbound.dropHeld()
        #expect(!inbound.isHolding)
        let afterDrop = inbound.nextHeld()
        #expect(afterDrop == nil)
    }

    /// While an answer is owed (a `Pair` waiting for the disk) every frame
    /// waits, none comes out; once it is sent they come out in order.
    @Test func framesWaitForAnOwedAnswerThenComeOutInOrder() throws {
        var inbound = InboundFrames(maxPayload: 1024)
        #expect(!inbound.isHolding)
        inbound.awaitAnswer()
        #expect(inbound.isHolding, "a frame read now must wait, even with none held yet")
        var read = ByteBuffer()
        for value: UInt8 in 1...2 { read.writeFrame(kind: .ping, payload: ByteBuffer(bytes: [value])) }
        while let frame = try inbound.nextFrame(from: &read, allocator: ByteBufferAllocator()) { inbound.hold(frame) }
        let whileOwed = inbound.nextHeld()
        #expect(whileOwed == nil)
        inbound.answerSent()
        #expect(inbound.isHolding)
        #expect(inbound.nextHeld()?.payload == ByteBuffer(bytes: [1]))
        #expect(inbound.nextHeld()?.payload == ByteBuffer(bytes: [2]))
        #expect(!inbound.isHolding)
        // The connection's end drops the frames and the owed answer with them.
        inbound.awaitAnswer()
        inbound.dropHeld()
        #expect(!inbound.isHolding)
    }
}
