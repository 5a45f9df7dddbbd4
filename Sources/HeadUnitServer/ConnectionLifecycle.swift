import HeadUnitCore
import HeadUnitWire

/// Where one connection is in its life, as one value: admitted or not, TLS
/// up or not, a peer of the Car or not, handed over, closing, closed. Pure:
/// `ConnectionHandler` feeds it the channel's events and performs what it
/// answers (the pattern of nio-http2's connection management state machine).
/// The protocol's own state (handshake, heartbeat, budgets) is
/// `ConnectionStateMachine`'s; this is only what the handler must undo, may
/// send and may read.
struct ConnectionLifecycle: Sendable, Equatable {
    /// What the connection caps and the Car know of the connection: what its end must undo.
    enum Membership: Sendable, Equatable {
        /// Not counted in the caps (turned away, or never active).
        case none
        /// Counted in the caps (released at the end), not a peer of the Car.
        case admitted
        /// Counted, and a peer of the Car (which is told when it leaves).
        case joined
    }

    enum State: Sendable, Equatable {
        /// In the pipeline; the channel is not active yet.
        case idle
        /// Handed over by the previous process (PROTOCOL.md section 22): a peer
        /// of the Car already, its channel not active yet.
        case restored
        /// Active; the host decides on admission (section 10.1).
        case admitting
        /// TCP, admitted: the TLS handshake is under way, nothing can reach the peer.
        case awaitingTLS
        /// Admitted, frames flow both ways; not a peer of the Car yet (Hello, authentication).
        case awaitingHandshake
        /// A peer of the Car.
        case serving
        /// Going to the next process: nothing read or timed here any more, output still written.
        case handingOver(Membership)
        /// Handing over, and everything written so far reached the kernel.
        case drained(Membership)
        /// Closed by either side: the Goodbye (if any) is on its way, nothing more is read or sent.
        case closing(Membership, PeerDeparture)
        /// The channel is inactive.
        case closed
    }

    /// How a close the daemon decided goes out.
    enum Close: Sendable, Equatable {
        /// Already closing or closed, or never active: nothing to do.
        case none
        /// Goodbye(code, reason) behind what the peer was sent, then close.
        case goodbye
        /// Nothing can reach the peer (TCP before its TLS handshake, section
        /// 10.1 "Over TLS"): the close is all it gets.
        case closeOnly
    }

    /// What the handler does once the channel is active.
    enum Activation: Sendable, Equatable {
        case none
        /// Ask the host to count it in (`CarHost.admit`), then `admitted()` or `close(_:)`.
        case admit
        /// Handed over: counted again, never turned away (`CarHost.readmit`); timers start.
        case readmit
    }

    /// What the end of the channel undoes.
    struct Ended: Sendable, Equatable {
        var membership: Membership
        var departure: PeerDeparture
    }

    let transport: Transport
    private(set) var state: State

    init(transport: Transport, restored: Bool = false) {
        self.transport = transport
        self.state = restored ? .restored : .idle
    }

    // MARK: - Queries

    /// Frames are read and served, timers run, the slow-consumer clock watches it.
    var isServing: Bool {
        switch state {
        case .awaitingTLS, .awaitingHandshake, .serving: true
        default: false
        }
    }

    /// Output may be written to it (it is open and not closing).
    var isOpen: Bool {
        switch state {
        case .awaitingTLS, .awaitingHandshake, .serving, .handingOver, .drained: true
        default: false
        }
    }

    var isHandingOver: Bool {
        switch state {
        case .handingOver, .drained: true
        default: false
        }
    }

    /// Everything written before the handover's barrier reached the kernel.
    var isDrained: Bool {
        if case .drained = state { return true }
        return false
    }

    var membership: Membership {
        switch state {
        case .idle, .admitting, .closed: .none
        case .awaitingTLS, .awaitingHandshake: .admitted
        case .restored, .serving: .joined
        case .handingOver(let membership), .drained(let membership), .closing(let membership, _): membership
        }
    }

    // MARK: - Events

    /// The channel became active (or was active when the handler was added).
    mutating func activate() -> Activation {
        switch state {
        case .idle:
            state = .admitting
            return .admit
        case .restored:
            state = .serving
            return .readmit
        default:
            return .none
        }
    }

    /// The host counted the connection in; true when its timers start now.
    mutating func admitted() -> Bool {
        guard case .admitting = state else { return false }
        state = transport == .tcp ? .awaitingTLS : .awaitingHandshake
        return true
    }

    /// TCP: the TLS handshake completed; frames can reach the peer from now.
    mutating func tlsEstablished() {
        if case .awaitingTLS = state { state = .awaitingHandshake }
    }

    /// The peer completed its handshake (and authentication where required);
    /// false when it cannot join (not awaiting its handshake): the Car is not told.
    mutating func joined() -> Bool {
        guard case .awaitingHandshake = state else { return false }
        state = .serving
        return true
    }

    /// The daemon closes the connection with Goodbye(`code`): a refusal at
    /// admission, a protocol error, an eviction, a stop, a slow consumer.
    mutating func close(_ code: HUErrorCode) -> Close {
        let canSend: Bool
        switch state {
        case .admitting: canSend = transport == .unix
        case .awaitingTLS: canSend = false
        case .awaitingHandshake, .serving, .handingOver, .drained: canSend = true
        case .idle, .restored, .closing, .closed: return .none
        }
        state = .closing(membership, .cutOff(code))
        return canSend ? .goodbye : .closeOnly
    }

    /// The peer said Goodbye: it meant to leave (a phone's session is not kept for resumption).
    mutating func peerSaidGoodbye() {
        switch state {
        case .closing, .closed: break
        default: state = .closing(membership, .saidGoodbye)
        }
    }

    /// Closed without a word, by an error or at the end of the grace period;
    /// also the socket a handover gave to the next process (`relinquish`).
    mutating func abort() {
        switch state {
        case .closing, .closed: break
        default: state = .closing(membership, .lost)
        }
    }

    /// The Car forgets the peer now rather than when the socket finally closes
    /// (a slow consumer, a peer a restart cannot carry). True when it was a
    /// peer of the Car, which the handler then tells the host; only while closing.
    mutating func leaveCarNow() -> Bool {
        guard case .closing(.joined, let departure) = state else { return false }
        state = .closing(.admitted, departure)
        return true
    }

    /// First step of a handover (section 22): false when the connection cannot
    /// go (closing, or TCP before TLS, which is told to connect again).
    mutating func beginHandover() -> Bool {
        switch state {
        case .awaitingHandshake, .serving:
            state = .handingOver(membership)
            return true
        default:
            return false
        }
    }

    /// The handover's flush barrier completed.
    mutating func drained() {
        if case .handingOver(let membership) = state { state = .drained(membership) }
    }

    /// The channel went inactive: what to undo, or nil when it already ended.
    mutating func channelInactive() -> Ended? {
        let ended: Ended
        switch state {
        case .closed:
            return nil
        case .closing(let membership, let departure):
            ended = Ended(membership: membership, departure: departure)
        default:
            // Nobody said Goodbye: the link went away (a phone may resume).
            ended = Ended(membership: membership, departure: .lost)
        }
        state = .closed
        return ended
    }
}
