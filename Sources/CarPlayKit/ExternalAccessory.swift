import HeadUnitClient
import HeadUnitWire
import NIOConcurrencyHelpers
import NIOCore

// External Accessory (`import ExternalAccessory` on iOS) for automaker apps:
// the vehicle's protocols as accessories, backed by the car's
// `AccessoryAvailability` (PROTOCOL.md 18.2), and sessions as a stream pair
// over the car's accessory sessions (18.3-18.6).

extension Notification.Name {
    /// An accessory became available (`EAAccessoryDidConnectNotification`); `userInfo[EAAccessoryKey]` is the ``EAAccessory``.
    public static let EAAccessoryDidConnect = Notification.Name("EAAccessoryDidConnectNotification")
    /// An accessory went away (`EAAccessoryDidDisconnectNotification`); `userInfo[EAAccessoryKey]` is the ``EAAccessory``.
    public static let EAAccessoryDidDisconnect = Notification.Name("EAAccessoryDidDisconnectNotification")
}

/// The `userInfo` key of the accessory in the connect and disconnect notifications (`EAAccessoryKey`).
public let EAAccessoryKey = "EAAccessoryKey"

/// Hears its accessory go away (`EAAccessoryDelegate`).
public protocol EAAccessoryDelegate: AnyObject {
    /// The accessory is no longer available.
    func accessoryDidDisconnect(_ accessory: EAAccessory)
}

extension EAAccessoryDelegate {
    /// Does nothing (optional in External Accessory).
    public func accessoryDidDisconnect(_ accessory: EAAccessory) {}
}

/// One vehicle protocol that a car peer serves now (`EAAccessory`).
///
/// Ours: the car tells an app which of its matched protocols are served, not
/// which physical accessory serves them, so each served protocol is one
/// accessory with that one protocol string; `name` is the protocol string.
// @unchecked: ExternalAccessory is not main-actor bound on iOS; the mutable state is behind locks, `application` a weak load.
public final class EAAccessory: NSObject, @unchecked Sendable {
    /// Unique while the accessory is connected; a protocol served again is a new accessory.
    public let connectionID: Int
    /// The protocols the accessory speaks (one: ours, see the type's description).
    public let protocolStrings: [String]
    /// The protocol string (ours: the car does not name the peer to apps).
    public let name: String
    /// Empty (the car does not tell apps).
    public let manufacturer = ""
    /// Empty (the car does not tell apps).
    public let modelNumber = ""
    /// Empty (the car does not tell apps).
    public let serialNumber = ""
    /// Empty (the car does not tell apps).
    public let firmwareRevision = ""
    /// Empty (the car does not tell apps).
    public let hardwareRevision = ""
    /// Whether the car still serves the protocol.
    public var isConnected: Bool { connectedState.withLockedValue { $0 } }
    /// Hears the accessory go away (held weakly).
    public weak var delegate: (any EAAccessoryDelegate)? {
        get { delegateRef.withLockedValue { $0.object as? any EAAccessoryDelegate } }
        set { delegateRef.withLockedValue { $0 = Weak(newValue) } }
    }

    private let connectedState = NIOLockedValueBox(true)
    private let delegateRef = NIOLockedValueBox(Weak<AnyObject>(nil))
    weak var application: CPApplication?

    init(connectionID: Int, protocolString: String, application: CPApplication) {
        self.connectionID = connectionID
        self.protocolStrings = [protocolString]
        self.name = protocolString
        self.application = application
    }

    func disconnected() { connectedState.withLockedValue { $0 = false } }
}

/// The accessories an automaker app can open sessions to (`EAAccessoryManager`).
///
/// Each ``CPApplication`` has one (``CPApplication/accessoryManager``);
/// ``shared()`` is that of the last app with the `.protocols` entitlement
/// that connected (ours: iOS has one app per process).
public final class EAAccessoryManager: Sendable {
    private static let current = NIOLockedValueBox<EAAccessoryManager?>(nil)
    private static let unattached = EAAccessoryManager()

    /// The process's accessory manager (`EAAccessoryManager.shared()`).
    public static func shared() -> EAAccessoryManager { current.withLockedValue { $0 } ?? unattached }

    static func makeShared(_ manager: EAAccessoryManager) { current.withLockedValue { $0 = manager } }

    private struct State {
        var accessories: [EAAccessory] = []
        var nextConnectionID = 1
    }
    private let state = NIOLockedValueBox(State())
    /// Registration is the process's, as on iOS: an app registers on `shared()` before it connects.
    private static let notifying = NIOLockedValueBox(false)

    init() {}

    /// The accessories available now, in the car's order.
    public var connectedAccessories: [EAAccessory] { state.withLockedValue { $0.accessories } }

    /// Posts `EAAccessoryDidConnect` and
    /// `EAAccessoryDidDisconnect` to
    /// `NotificationCenter.default` from now on (on the main actor, as iOS posts them on the main thread).
    public func registerForLocalNotifications() { Self.notifying.withLockedValue { $0 = true } }

    /// Stops the notifications.
    public func unregisterForLocalNotifications() { Self.notifying.withLockedValue { $0 = false } }

    /// The car's availability for this app: accessories appear and go away.
    @MainActor func update(_ availability: HUAccessoryAvailability, application: CPApplication) {
        let served = availability.protocols.filter(\.available).map(\.protocol)
        let (gone, added) = state.withLockedValue { state -> ([EAAccessory], [EAAccessory]) in
            let gone = state.accessories.filter { !served.contains($0.name) }
            let kept = state.accessories.filter { served.contains($0.name) }
            var added: [EAAccessory] = []
            for name in served where !kept.contains(where: { $0.name == name }) {
                added.append(EAAccessory(connectionID: state.nextConnectionID, protocolString: name, application: application))
                state.nextConnectionID += 1
            }
            state.accessories = kept + added
            return (gone, added)
        }
        announce(gone: gone, added: added)
    }

    /// The connection to the car ended: every accessory goes away.
    @MainActor func removeAll() {
        let gone = state.withLockedValue { state -> [EAAccessory] in
            defer { state.accessories = [] }
            return state.accessories
        }
        announce(gone: gone, added: [])
    }

    @MainActor private func announce(gone: [EAAccessory], added: [EAAccessory]) {
        let notifying = Self.notifying.withLockedValue { $0 }
        for accessory in gone {
            accessory.disconnected()
            accessory.delegate?.accessoryDidDisconnect(accessory)
            if notifying {
                NotificationCenter.default.post(name: .EAAccessoryDidDisconnect, object: self, userInfo: [EAAccessoryKey: accessory])
            }
        }
        guard notifying else { return }
        for accessory in added {
            NotificationCenter.default.post(name: .EAAccessoryDidConnect, object: self, userInfo: [EAAccessoryKey: accessory])
        }
    }
}

/// A session to an accessory on one protocol, as a pair of streams (`EASession`).
///
/// As on iOS the session opens when it is made; open the streams, give them
/// a `StreamDelegate` and read on `.hasBytesAvailable`, write on
/// `.hasSpaceAvailable`. Events reach the delegate on the main actor
/// (`schedule(in:forMode:)` is accepted and changes nothing: ours has no run
/// loops to choose). Each direction buffers at most ``bufferLimit`` bytes:
/// a write returns how many bytes it took (0 when full, until the next
/// `.hasSpaceAvailable`), and the car's flow control (PROTOCOL.md 18.5)
/// stops the accessory while the app does not read. Closing the output
/// stream alone says "done writing" (a half-close, PROTOCOL.md 18.6): what
/// was written is sent, the accessory sees the end and may still answer,
/// and the input stream ends once it finishes. Closing both streams closes
/// the car's session after what was written is sent.
// @unchecked: open (apps may subclass, as on iOS); its own stored properties are constants, its streams lock their shared pipe.
open class EASession: NSObject, @unchecked Sendable {
    /// The most bytes buffered in each direction.
    public static let bufferLimit = 64 << 10
    /// The accessory the session is to.
    public let accessory: EAAccessory?
    /// The protocol the session speaks.
    public let protocolString: String?
    /// Bytes from the accessory.
    public let inputStream: InputStream?
    /// Bytes to the accessory.
    public let outputStream: OutputStream?

    /// Opens a session; nil when the accessory is gone, does not speak
    /// `protocolString`, or its app is not connected to the car. A refusal
    /// by the car or the accessory arrives later as `.errorOccurred` on both
    /// streams, with the reason in `streamError`.
    public init?(accessory: EAAccessory, forProtocol protocolString: String) {
        guard accessory.isConnected, accessory.protocolStrings.contains(protocolString),
              let application = accessory.application, let phone = application.phone else { return nil }
        let pipe = EASessionPipe()
        self.accessory = accessory
        self.protocolString = protocolString
        self.inputStream = EAInputStream(pipe: pipe)
        self.outputStream = EAOutputStream(pipe: pipe)
        super.init()
        pipe.input = inputStream as? EAInputStream
        pipe.output = outputStream as? EAOutputStream
        let appID = application.bundleIdentifier
        Task {
            do {
                pipe.opened(try await phone.openAccessorySession(appID: appID, protocol: protocolString))
            } catch {
                pipe.failed(CPError(error))
            }
        }
    }
}

/// The state both streams of one ``EASession`` share, under one lock.
// @unchecked: `state` is behind its lock; `input` and `output` are set once, before the session's tasks start.
final class EASessionPipe: @unchecked Sendable {
    enum Phase { case opening, open, ended, failed }
    struct State {
        var phase = Phase.opening
        var error: (any Error)?
        var inbox: [UInt8] = []
        var outbox: [UInt8] = []
        var inputOpen = false, outputOpen = false
        var inputClosed = false, outputClosed = false
        var stream: AccessoryStream?
    }
    let state = NIOLockedValueBox(State())
    weak var input: EAInputStream?
    weak var output: EAOutputStream?
    private let readerWake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    private let writerWake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    func opened(_ stream: AccessoryStream) {
        let (inputOpen, outputOpen, closed) = state.withLockedValue { state -> (Bool, Bool, Bool) in
            state.phase = .open
            state.stream = stream
            return (state.inputOpen, state.outputOpen, state.inputClosed && state.outputClosed)
        }
        Task { await self.read(stream) }
        Task { await self.write(stream) }
        if closed { writerWake.continuation.yield() }
        if inputOpen { deliver(.openCompleted, toInput: true) }
        if outputOpen { deliver(.openCompleted, toInput: false); deliver(.hasSpaceAvailable, toInput: false) }
    }

    func failed(_ error: any Error) {
        state.withLockedValue { $0.phase = .failed; $0.error = error }
        deliver(.errorOccurred, toInput: true)
        deliver(.errorOccurred, toInput: false)
    }

    /// Bytes from the car into the inbox, paused while it is over the limit.
    private func read(_ stream: AccessoryStream) async {
        var wake = readerWake.stream.makeAsyncIterator()
        while true {
            while state.withLockedValue({ $0.inbox.count >= EASession.bufferLimit && !$0.inputClosed }) {
                _ = await wake.next()
            }
            do {
                guard let buffer = try await stream.read() else {
                    state.withLockedValue { if $0.phase == .open { $0.phase = .ended } }
                    deliver(.endEncountered, toInput: true)
                    return
                }
                // Once the app closed its input, bytes are dropped (the credit they free keeps the accessory going).
                let kept = state.withLockedValue { state -> Bool in
                    guard !state.inputClosed else { return false }
                    state.inbox += Array(buffer.readableBytesView)
                    return true
                }
                if kept { deliver(.hasBytesAvailable, toInput: true) }
            } catch {
                state.withLockedValue { $0.phase = .failed; $0.error = CPError(error) }
                deliver(.errorOccurred, toInput: true)
                deliver(.errorOccurred, toInput: false)
                return
            }
        }
    }

    /// The outbox to the car; then a half-close once the output stream is
    /// closed, and the session's close once both streams are.
    private func write(_ stream: AccessoryStream) async {
        var wake = writerWake.stream.makeAsyncIterator()
        var finished = false
        while true {
            let (chunk, outputDone, closing) = state.withLockedValue { state -> ([UInt8], Bool, Bool) in
                let chunk = Array(state.outbox.prefix(16 << 10))
                state.outbox.removeFirst(chunk.count)
                return (chunk, state.outputClosed, state.inputClosed && state.outputClosed)
            }
            if chunk.isEmpty {
                if closing {
                    try? await stream.close()
                    return
                }
                if outputDone && !finished {
                    finished = true
                    try? await stream.finish()
                    continue
                }
                if state.withLockedValue({ $0.phase != .open }) { return }
                _ = await wake.next()
                continue
            }
            do {
                try await stream.write(chunk)
                deliver(.hasSpaceAvailable, toInput: false)
            } catch {
                state.withLockedValue { $0.phase = .failed; $0.error = CPError(error) }
                deliver(.errorOccurred, toInput: false)
                return
            }
        }
    }

    func take(_ buffer: UnsafeMutablePointer<UInt8>, _ length: Int) -> Int {
        let count = state.withLockedValue { state -> Int in
            let count = min(length, state.inbox.count)
            for index in 0..<count { buffer[index] = state.inbox[index] }
            state.inbox.removeFirst(count)
            return count
        }
        if count > 0 { readerWake.continuation.yield() }
        return count
    }

    func put(_ buffer: UnsafePointer<UInt8>, _ length: Int) -> Int {
        let taken = state.withLockedValue { state -> Int in
            guard state.phase == .open || state.phase == .opening, !state.outputClosed else { return -1 }
            let count = min(length, EASession.bufferLimit - state.outbox.count)
            state.outbox += UnsafeBufferPointer(start: buffer, count: count)
            return count
        }
        if taken > 0 { writerWake.continuation.yield() }
        return taken
    }

    func close(input: Bool) {
        state.withLockedValue { state in
            if input { state.inputClosed = true } else { state.outputClosed = true }
        }
        readerWake.continuation.yield()
        writerWake.continuation.yield()
    }

    /// Tells a stream's delegate on the main actor (iOS: on the run loop it is scheduled in, usually the main one).
    func deliver(_ event: Stream.Event, toInput: Bool) {
        Task { @MainActor [weak self] in
            guard let self else { return }
            if toInput {
                guard let stream = self.input, self.state.withLockedValue({ $0.inputOpen && !$0.inputClosed }) else { return }
                if event == .hasBytesAvailable, !stream.hasBytesAvailable { return }  // already read
                stream.delegate?.stream(stream, handle: event)
            } else {
                guard let stream = self.output, self.state.withLockedValue({ $0.outputOpen && !$0.outputClosed }) else { return }
                if event == .hasSpaceAvailable, !stream.hasSpaceAvailable { return }
                stream.delegate?.stream(stream, handle: event)
            }
        }
    }
}

/// The accessory's bytes, read on `.hasBytesAvailable` (an ``EASession``'s `inputStream`).
final class EAInputStream: InputStream {
    let pipe: EASessionPipe
    private let delegateRef = NIOLockedValueBox(Weak<AnyObject>(nil))

    init(pipe: EASessionPipe) {
        self.pipe = pipe
        super.init(data: Data())
    }

    override var delegate: (any StreamDelegate)? {
        get { delegateRef.withLockedValue { $0.object as? any StreamDelegate } }
        set { delegateRef.withLockedValue { $0 = Weak(newValue) } }
    }
    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    override func open() {
        let phase = pipe.state.withLockedValue { state -> EASessionPipe.Phase in
            state.inputOpen = true
            return state.phase
        }
        switch phase {
        case .open, .ended:
            pipe.deliver(.openCompleted, toInput: true)
            pipe.deliver(phase == .open ? .hasBytesAvailable : .endEncountered, toInput: true)
        case .failed:
            pipe.deliver(.errorOccurred, toInput: true)
        case .opening:
            break  // .openCompleted when the car opened the session
        }
    }
    override func close() { pipe.close(input: true) }
    override var hasBytesAvailable: Bool { pipe.state.withLockedValue { !$0.inbox.isEmpty } }
    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let (phase, closed) = pipe.state.withLockedValue { ($0.phase, $0.inputClosed) }
        if phase == .failed || closed { return -1 }
        return pipe.take(buffer, len)
    }
    override func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>) -> Bool { false }
    override var streamStatus: Stream.Status { EAOutputStream.status(pipe, closed: \.inputClosed, opened: \.inputOpen, atEnd: true) }
    override var streamError: (any Error)? { pipe.state.withLockedValue { $0.error } }
}

/// Bytes to the accessory, written on `.hasSpaceAvailable` (an ``EASession``'s `outputStream`).
final class EAOutputStream: OutputStream {
    let pipe: EASessionPipe
    private let delegateRef = NIOLockedValueBox(Weak<AnyObject>(nil))

    init(pipe: EASessionPipe) {
        self.pipe = pipe
        super.init(toMemory: ())
    }

    /// A stream on no session: every write fails (only `EASession` makes usable ones).
    required convenience init(toMemory: ()) {
        let pipe = EASessionPipe()
        pipe.failed(CPError.usage(.invalidArgument, "an EASession output stream is made by EASession(accessory:forProtocol:)"))
        self.init(pipe: pipe)
    }

    override var delegate: (any StreamDelegate)? {
        get { delegateRef.withLockedValue { $0.object as? any StreamDelegate } }
        set { delegateRef.withLockedValue { $0 = Weak(newValue) } }
    }
    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    override func open() {
        let phase = pipe.state.withLockedValue { state -> EASessionPipe.Phase in
            state.outputOpen = true
            return state.phase
        }
        switch phase {
        case .open:
            pipe.deliver(.openCompleted, toInput: false)
            pipe.deliver(.hasSpaceAvailable, toInput: false)
        case .failed, .ended:
            pipe.deliver(.errorOccurred, toInput: false)
        case .opening:
            break
        }
    }
    override func close() { pipe.close(input: false) }
    override var hasSpaceAvailable: Bool {
        pipe.state.withLockedValue { $0.phase == .open && !$0.outputClosed && $0.outbox.count < EASession.bufferLimit }
    }
    override func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int { pipe.put(buffer, len) }
    override var streamStatus: Stream.Status { Self.status(pipe, closed: \.outputClosed, opened: \.outputOpen, atEnd: false) }
    override var streamError: (any Error)? { pipe.state.withLockedValue { $0.error } }

    static func status(_ pipe: EASessionPipe, closed: KeyPath<EASessionPipe.State, Bool>, opened: KeyPath<EASessionPipe.State, Bool>,
                       atEnd: Bool) -> Stream.Status {
        pipe.state.withLockedValue { state in
            if state[keyPath: closed] { return .closed }
            if !state[keyPath: opened] { return .notOpen }
            switch state.phase {
            case .opening: return .opening
            case .open: return .open
            case .ended: return atEnd && !state.inbox.isEmpty ? .open : .atEnd
            case .failed: return .error
            }
        }
    }
}
