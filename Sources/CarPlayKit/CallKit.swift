import HeadUnitClient
import HeadUnitWire

// CallKit (`import CallKit` on iOS) for communication apps, over the car's
// call-state exchange (PROTOCOL.md section 26): `CXProvider` reports the
// app's calls to the car, `CXCallController` asks the car for actions, and
// every action, the app's own and the driver's (answer, end, hold, mute,
// keys on the car's screen), reaches the provider's delegate to perform and
// fulfil or fail, as CallKit's system does.
//
// Which connection: as `MPRemoteCommandCenter` reaches the audio app, a
// provider and a call controller reach the communication app
// (`CPApplication` with `.communication`) connected most recently and still
// connected; ours: iOS has one app per process. Before any is connected a
// report or request fails (`CXErrorCodeIncomingCallError.unknown`,
// `CXErrorCodeRequestTransactionError.unknownCallProvider`).

/// Who is at the other end of a call (`CXHandle`).
@MainActor
public final class CXHandle: NSObject {
    /// `CXHandle.HandleType`.
    public enum HandleType: Int, Sendable {
        case generic = 1
        case phoneNumber = 2
        case emailAddress = 3

        var wire: HUCallHandleType {
            switch self {
            case .generic: return .generic
            case .phoneNumber: return .phoneNumber
            case .emailAddress: return .emailAddress
            }
        }

        init(_ wire: HUCallHandleType) {
            switch wire {
            case .phoneNumber: self = .phoneNumber
            case .emailAddress: self = .emailAddress
            case .generic, .unspecified, .UNRECOGNIZED: self = .generic
            }
        }
    }

    public let type: HandleType
    /// At most 256 bytes (PROTOCOL.md 26.3).
    public let value: String

    public init(type: HandleType, value: String) {
        self.type = type
        self.value = value
    }

    convenience init(_ wire: HUCallHandle) { self.init(type: HandleType(wire.type), value: wire.value) }

    var wire: HUCallHandle {
        HUCallHandle.with {
            $0.type = type.wire
            $0.value = value
        }
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CXHandle else { return false }
        return other.type == type && other.value == value
    }
}

/// What the app says about a call (`CXCallUpdate`). A property left unset
/// keeps what the car was told before.
@MainActor
public final class CXCallUpdate: NSObject {
    private var fields = Fields()

    struct Fields {
        var remoteHandle: CXHandle??
        var localizedCallerName: String??
        var supportsHolding: Bool?
        var supportsGrouping: Bool?
        var supportsUngrouping: Bool?
        var supportsDTMF: Bool?
        var hasVideo: Bool?
    }

    public override init() {}

    /// Who the call is with; the car shows its value when there is no name.
    public var remoteHandle: CXHandle? {
        get { fields.remoteHandle ?? nil }
        set { fields.remoteHandle = .some(newValue) }
    }
    /// The name the car shows (at most 128 bytes).
    public var localizedCallerName: String? {
        get { fields.localizedCallerName ?? nil }
        set { fields.localizedCallerName = .some(newValue) }
    }
    /// The car offers hold and resume.
    public var supportsHolding: Bool {
        get { fields.supportsHolding ?? false }
        set { fields.supportsHolding = newValue }
    }
    /// Kept for Apple's shape; the car does not merge calls (no group action reaches the app).
    public var supportsGrouping: Bool {
        get { fields.supportsGrouping ?? false }
        set { fields.supportsGrouping = newValue }
    }
    /// Kept for Apple's shape; see ``supportsGrouping``.
    public var supportsUngrouping: Bool {
        get { fields.supportsUngrouping ?? false }
        set { fields.supportsUngrouping = newValue }
    }
    /// The car offers a keypad (``CXPlayDTMFCallAction``).
    public var supportsDTMF: Bool {
        get { fields.supportsDTMF ?? false }
        set { fields.supportsDTMF = newValue }
    }
    /// Must stay false: the car carries audio calls only (a report with video is refused).
    public var hasVideo: Bool {
        get { fields.hasVideo ?? false }
        set { fields.hasVideo = newValue }
    }

    /// This update's set fields over `base` (the car replaces a call's description whole).
    func merged(into base: HUCallDescription) -> HUCallDescription {
        var out = base
        let fields = self.fields
        if let handle = fields.remoteHandle {
            if let handle { out.remoteHandle = handle.wire } else { out.clearRemoteHandle() }
        }
        if let name = fields.localizedCallerName { out.localizedCallerName = name ?? "" }
        if let value = fields.supportsHolding { out.supportsHolding = value }
        if let value = fields.supportsDTMF { out.supportsDtmf = value }
        if let value = fields.hasVideo { out.hasVideo_p = value }
        return out
    }
}

/// `CXCallEndedReason`.
public enum CXCallEndedReason: Int, Sendable {
    case failed = 1
    case remoteEnded = 2
    case unanswered = 3
    case answeredElsewhere = 4
    case declinedElsewhere = 5

    var wire: HUCallEndedReason {
        switch self {
        case .failed: return .failed
        case .remoteEnded: return .remoteEnded
        case .unanswered: return .unanswered
        case .answeredElsewhere: return .answeredElsewhere
        case .declinedElsewhere: return .declinedElsewhere
        }
    }
}

/// Why `reportNewIncomingCall` failed (`CXErrorCodeIncomingCallError`).
public struct CXErrorCodeIncomingCallError: Error, Sendable, CustomStringConvertible {
    public enum Code: Int, Sendable {
        case unknown = 0
        case unentitled = 1
        case callUUIDAlreadyExists = 2
        case filteredByDoNotDisturb = 3
        case filteredByBlockList = 4
    }
    public let code: Code
    /// The car's words.
    public let message: String
    public var description: String { "CXErrorCodeIncomingCallError(\(code)): \(message)" }
}

/// Why a transaction was refused (`CXErrorCodeRequestTransactionError`).
public struct CXErrorCodeRequestTransactionError: Error, Sendable, CustomStringConvertible {
    public enum Code: Int, Sendable {
        case unknown = 0
        case unentitled = 1
        case unknownCallProvider = 2
        case emptyTransaction = 3
        case unknownCallUUID = 4
        case callUUIDAlreadyExists = 5
        case invalidAction = 6
        case maximumCallGroupsReached = 7
    }
    public let code: Code
    /// The car's words.
    public let message: String
    public var description: String { "CXErrorCodeRequestTransactionError(\(code)): \(message)" }
}

// MARK: - actions

/// An action to perform (`CXAction`): fulfil it when done, fail it when not.
/// The car waits for one or the other (`call_action_timeout_ms`, then it
/// fails the action and the delegate hears `provider(_:timedOutPerforming:)`).
@MainActor
public class CXAction: NSObject {
    public let uuid = UUID()
    var completed = false
    /// The car's id for it, the app that answers it and the provider that
    /// holds it; unset until the car sent it.
    var actionID: UInt64?
    var applicationRef = Weak<CPApplication>(nil)
    var providerRef = Weak<CXProvider>(nil)
    /// When the car fails it unless it was answered.
    public internal(set) var timeoutDate = Date.distantFuture

    /// Whether it was fulfilled or failed.
    public var isComplete: Bool { completed }

    override init() {}

    /// Done: the car updates the call.
    public func fulfill() { answer(true) }
    /// Not done: the call stays as it was (a failed start ends the call).
    public func fail() { answer(false) }

    func answer(_ fulfilled: Bool) {
        guard !completed else { return }
        completed = true
        guard let id = actionID, let application = applicationRef.object else { return }
        providerRef.object?.answered(actionID: id)
        application.answerCallAction(actionID: id, fulfilled: fulfilled)
        providerRef.object?.settled(self, fulfilled: fulfilled, application: application)
    }

    /// The message the car performs (only the fields of the kind are read).
    var wire: HUCallAction { HUCallAction() }
}

/// An action on one call (`CXCallAction`).
@MainActor
public class CXCallAction: CXAction {
    public let callUUID: UUID

    public init(call callUUID: UUID) {
        self.callUUID = callUUID
    }

    override var wire: HUCallAction {
        HUCallAction.with { $0.callUuid = callUUID.uuidString }
    }
}

/// Place a call (`CXStartCallAction`): the app's own, through ``CXCallController``.
@MainActor
public final class CXStartCallAction: CXCallAction {
    public var handle: CXHandle
    public var contactIdentifier: String?
    /// Must stay false (audio calls only).
    public var isVideo = false

    public init(call callUUID: UUID, handle: CXHandle) {
        self.handle = handle
        super.init(call: callUUID)
    }

    /// Fulfils it (the date is the app's; the car keeps no clock of calls).
    public func fulfill(withDateStarted dateStarted: Date) { fulfill() }

    override var wire: HUCallAction {
        var action = super.wire
        action.kind = .start
        action.handle = handle.wire
        return action
    }
}

/// Answer a ringing call (`CXAnswerCallAction`).
@MainActor
public final class CXAnswerCallAction: CXCallAction {
    /// Fulfils it.
    public func fulfill(withDateConnected dateConnected: Date) { fulfill() }

    override var wire: HUCallAction {
        var action = super.wire
        action.kind = .answer
        return action
    }
}

/// End a call, or decline a ringing one (`CXEndCallAction`).
@MainActor
public final class CXEndCallAction: CXCallAction {
    /// Fulfils it.
    public func fulfill(withDateEnded dateEnded: Date) { fulfill() }

    override var wire: HUCallAction {
        var action = super.wire
        action.kind = .end
        return action
    }
}

/// Hold or resume a call (`CXSetHeldCallAction`).
@MainActor
public final class CXSetHeldCallAction: CXCallAction {
    public var isOnHold: Bool

    public init(call callUUID: UUID, onHold: Bool) {
        self.isOnHold = onHold
        super.init(call: callUUID)
    }

    override var wire: HUCallAction {
        var action = super.wire
        action.kind = .setHeld
        action.onHold = isOnHold
        return action
    }
}

/// Mute or unmute a call's microphone (`CXSetMutedCallAction`); the app mutes its own capture.
@MainActor
public final class CXSetMutedCallAction: CXCallAction {
    public var isMuted: Bool

    public init(call callUUID: UUID, muted: Bool) {
        self.isMuted = muted
        super.init(call: callUUID)
    }

    override var wire: HUCallAction {
        var action = super.wire
        action.kind = .setMuted
        action.muted = isMuted
        return action
    }
}

/// Send keys (`CXPlayDTMFCallAction`): 1 to 32 of 0-9 * # , (a comma pauses).
@MainActor
public final class CXPlayDTMFCallAction: CXCallAction {
    /// `CXPlayDTMFCallAction.ActionType`; the car sends `.singleTone`.
    public enum ActionType: Int, Sendable {
        case singleTone = 1
        case softPause = 2
        case hardPause = 3
    }
    public var digits: String
    public var type: ActionType

    public init(call callUUID: UUID, digits: String, type: ActionType) {
        self.digits = digits
        self.type = type
        super.init(call: callUUID)
    }

    override var wire: HUCallAction {
        var action = super.wire
        action.kind = .playDtmf
        action.digits = digits
        return action
    }
}

/// Actions asked for together (`CXTransaction`).
@MainActor
public final class CXTransaction: NSObject {
    public let uuid = UUID()
    public private(set) var actions: [CXAction]

    public init(actions: [CXAction]) { self.actions = actions }
    public convenience init(action: CXAction) { self.init(actions: [action]) }

    /// Whether every action was fulfilled or failed.
    public var isComplete: Bool { actions.allSatisfy(\.isComplete) }

    public func addAction(_ action: CXAction) { actions.append(action) }
}

// MARK: - the provider

/// The app's provider settings (`CXProviderConfiguration`). The car reads
/// none of them: it shows the app's display name and icon, allows
/// `max_calls` calls (3; one app at most `max_calls - 1`, one ringing) and
/// audio only.
@MainActor
public final class CXProviderConfiguration: NSObject {
    public var localizedName: String?
    public var ringtoneSound: String?
    public var iconTemplateImageData: Data?
    public var maximumCallGroups = 2
    public var maximumCallsPerCallGroup = 5
    public var supportsVideo = false
    public var includesCallsInRecents = true
    public var supportedHandleTypes: Set<CXHandle.HandleType> = [.phoneNumber]

    public override init() {}

    /// The iOS 10-13 initializer.
    public convenience init(localizedName: String) {
        self.init()
        self.localizedName = localizedName
    }
}

/// Hears the actions to perform (`CXProviderDelegate`). Every call runs on
/// the main actor. An action the delegate does not implement is failed, so
/// the car never waits for it.
@MainActor
public protocol CXProviderDelegate: AnyObject {
    /// The calls are gone (the car lost the app's connection for good): forget them.
    func providerDidReset(_ provider: CXProvider)
    /// The provider is ready (the app's connection to the car is up).
    func providerDidBegin(_ provider: CXProvider)
    /// The app may handle the transaction itself (answer true, then fulfil
    /// or fail its actions); false: each action reaches `provider(_:perform:)`.
    func provider(_ provider: CXProvider, execute transaction: CXTransaction) -> Bool
    func provider(_ provider: CXProvider, perform action: CXStartCallAction)
    func provider(_ provider: CXProvider, perform action: CXAnswerCallAction)
    func provider(_ provider: CXProvider, perform action: CXEndCallAction)
    func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction)
    func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction)
    func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction)
    /// The car stopped waiting for the action and failed it.
    func provider(_ provider: CXProvider, timedOutPerforming action: CXAction)
    /// The app's first call connected (a start or an answer fulfilled, or an
    /// outgoing call reported connected): start the call's audio (ours: the
    /// app's audio session; its voice goes to the car as a `VOICE` stream).
    func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession)
    /// The app's last connected call ended: stop the call's audio.
    func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession)
}

extension CXProviderDelegate {
    public func providerDidBegin(_ provider: CXProvider) {}
    public func provider(_ provider: CXProvider, execute transaction: CXTransaction) -> Bool { false }
    public func provider(_ provider: CXProvider, perform action: CXStartCallAction) { action.fail() }
    public func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) { action.fail() }
    public func provider(_ provider: CXProvider, perform action: CXEndCallAction) { action.fail() }
    public func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction) { action.fail() }
    public func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction) { action.fail() }
    public func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction) { action.fail() }
    public func provider(_ provider: CXProvider, timedOutPerforming action: CXAction) {}
    public func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {}
    public func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {}
}

/// Reports the app's calls to the car and performs the actions the car
/// sends (`CXProvider`).
///
///     let provider = CXProvider(configuration: CXProviderConfiguration())
///     provider.setDelegate(self, queue: nil)
///     provider.reportNewIncomingCall(with: uuid, update: update) { error in ... }
@MainActor
public final class CXProvider: NSObject {
    public let configuration: CXProviderConfiguration
    private var delegateRef = Weak<AnyObject>(nil)
    private var invalidated = false
    /// What the car was told of each call, so an update sends its set fields over it.
    private var descriptions: [UUID: HUCallDescription] = [:]
    /// Actions the car sent, until answered or timed out.
    private var inFlight: [UInt64: CXAction] = [:]
    /// The app's calls that connected and have not ended: the audio session is active while there are any.
    private var connected: Set<UUID> = []

    public init(configuration: CXProviderConfiguration) {
        self.configuration = configuration
        super.init()
        CallKitHub.shared.add(self)
    }

    /// Sets the delegate (held weakly). `queue` is not used: the delegate runs on the main actor, as all of CarPlayKit.
    public func setDelegate(_ delegate: (any CXProviderDelegate)?, queue: DispatchQueue?) {
        delegateRef = Weak(delegate)
    }

    var delegate: (any CXProviderDelegate)? { delegateRef.object as? any CXProviderDelegate }

    /// Stops reporting; the car's actions no longer reach this provider.
    public func invalidate() {
        invalidated = true
        CallKitHub.shared.remove(self)
    }

    /// The actions sent and not yet answered.
    public var pendingTransactions: [CXTransaction] {
        inFlight.values.map { CXTransaction(action: $0) }
    }

    /// A new incoming call rings on the car. `completion` (main actor) gets
    /// nil, or a ``CXErrorCodeIncomingCallError``.
    public func reportNewIncomingCall(with UUID: UUID, update: CXCallUpdate, completion: @escaping @MainActor ((any Error)?) -> Void) {
        let description = update.merged(into: HUCallDescription())
        descriptions[UUID] = description
        send(UUID, .newIncoming, description: description) { error in
            completion(error.map(Self.incomingError))
        }
    }

    /// A new incoming call rings on the car; throws a ``CXErrorCodeIncomingCallError``.
    public func reportNewIncomingCall(with UUID: UUID, update: CXCallUpdate) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            reportNewIncomingCall(with: UUID, update: update) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// The outgoing call started connecting.
    public func reportOutgoingCall(with UUID: UUID, startedConnectingAt dateStartedConnecting: Date?) {
        send(UUID, .outgoingConnecting)
    }

    /// The outgoing call connected.
    public func reportOutgoingCall(with UUID: UUID, connectedAt dateConnected: Date?) {
        send(UUID, .outgoingConnected)
        callConnected(UUID, application: CallKitHub.shared.application)
    }

    /// The call's details changed (the set fields of `update`).
    public func reportCall(with UUID: UUID, updated update: CXCallUpdate) {
        let description = update.merged(into: descriptions[UUID] ?? HUCallDescription())
        descriptions[UUID] = description
        send(UUID, .updated, description: description)
    }

    /// The call ended without an action of the app (the other end hung up...).
    public func reportCall(with UUID: UUID, endedAt dateEnded: Date?, reason endedReason: CXCallEndedReason) {
        descriptions[UUID] = nil
        send(UUID, .ended, reason: endedReason.wire)
        callEnded(UUID, application: CallKitHub.shared.application)
    }

    // MARK: the call's audio session (didActivate / didDeactivate)

    /// An action the app answered: a fulfilled start or answer connects its
    /// call, a fulfilled end or a failed start ends it.
    func settled(_ action: CXAction, fulfilled: Bool, application: CPApplication) {
        switch action {
        case let start as CXStartCallAction:
            if fulfilled { callConnected(start.callUUID, application: application) } else { callEnded(start.callUUID, application: application) }
        case let answer as CXAnswerCallAction where fulfilled:
            callConnected(answer.callUUID, application: application)
        case let end as CXEndCallAction where fulfilled:
            callEnded(end.callUUID, application: application)
        default:
            break
        }
    }

    private func callConnected(_ uuid: UUID, application: CPApplication?) {
        let first = connected.insert(uuid).inserted && connected.count == 1
        guard first, let application else { return }
        // After the delegate call that fulfilled the action (CallKit activates the session once the call is under way).
        Task { @MainActor in self.delegate?.provider(self, didActivate: application.audioSession) }
    }

    private func callEnded(_ uuid: UUID, application: CPApplication?) {
        let last = connected.remove(uuid) != nil && connected.isEmpty
        guard last, let application else { return }
        Task { @MainActor in self.delegate?.provider(self, didDeactivate: application.audioSession) }
    }

    private func send(
        _ uuid: UUID, _ kind: HUCallReportKind, description: HUCallDescription? = nil, reason: HUCallEndedReason = .unspecified,
        completion: (@MainActor (HeadUnitError?) -> Void)? = nil
    ) {
        guard !invalidated, let application = CallKitHub.shared.application, let phone = application.phone else {
            let error = HeadUnitError(code: .notConnected, message: "no communication app is connected to the car", origin: .usage)
            if let completion { Task { @MainActor in completion(error) } }
            return
        }
        let appID = application.bundleIdentifier
        application.queue.post {
            do {
                try await phone.reportCall(appID: appID, uuid: uuid.uuidString, kind: kind, description: description, endedReason: reason)
                completion?(nil)
            } catch let error as HeadUnitError {
                if let completion {
                    completion(error)
                    return  // told: not an error for waitForPendingUpdates
                }
                throw error
            }
        }
    }

    static func incomingError(_ error: HeadUnitError) -> CXErrorCodeIncomingCallError {
        let code: CXErrorCodeIncomingCallError.Code
        switch error.code {
        case .notAllowedForCategory, .entitlementRefused: code = .unentitled
        case .duplicateCall: code = .callUUIDAlreadyExists
        default: code = .unknown
        }
        return CXErrorCodeIncomingCallError(code: code, message: error.message)
    }

    // MARK: the car's actions (main actor, the app's event order)

    func perform(_ event: HUCallActionEvent, application: CPApplication, timeoutMilliseconds: UInt64) -> Bool {
        guard !invalidated, let delegate, let uuid = UUID(uuidString: event.action.callUuid) else { return false }
        let action: CXAction
        switch event.action.kind {
        case .start: action = CXStartCallAction(call: uuid, handle: CXHandle(event.action.handle))
        case .answer: action = CXAnswerCallAction(call: uuid)
        case .end: action = CXEndCallAction(call: uuid)
        case .setHeld: action = CXSetHeldCallAction(call: uuid, onHold: event.action.onHold)
        case .setMuted: action = CXSetMutedCallAction(call: uuid, muted: event.action.muted)
        case .playDtmf: action = CXPlayDTMFCallAction(call: uuid, digits: event.action.digits, type: .singleTone)
        case .unspecified, .UNRECOGNIZED: return false
        }
        action.actionID = event.actionID
        action.applicationRef = Weak(application)
        action.providerRef = Weak(self)
        action.timeoutDate = Date().addingTimeInterval(Double(timeoutMilliseconds) / 1000)
        inFlight[event.actionID] = action
        // The car sends one action per transaction.
        if delegate.provider(self, execute: CXTransaction(action: action)) { return true }
        switch action {
        case let action as CXStartCallAction: delegate.provider(self, perform: action)
        case let action as CXAnswerCallAction: delegate.provider(self, perform: action)
        case let action as CXEndCallAction: delegate.provider(self, perform: action)
        case let action as CXSetHeldCallAction: delegate.provider(self, perform: action)
        case let action as CXSetMutedCallAction: delegate.provider(self, perform: action)
        case let action as CXPlayDTMFCallAction: delegate.provider(self, perform: action)
        default: action.fail()
        }
        return true
    }

    func answered(actionID: UInt64) { inFlight[actionID] = nil }

    func timedOut(actionID: UInt64) {
        guard let action = inFlight.removeValue(forKey: actionID) else { return }
        action.completed = true
        delegate?.provider(self, timedOutPerforming: action)
    }

    func reset() {
        inFlight = [:]
        descriptions = [:]
        connected = []
        delegate?.providerDidReset(self)
    }

    func began() { delegate?.providerDidBegin(self) }
}

// MARK: - the call controller

/// Asks the car for call actions (`CXCallController`): a start, an end, a
/// hold, a mute. The car checks each and sends it back to the provider's
/// delegate to perform, as CallKit's system does.
@MainActor
public final class CXCallController: NSObject {
    public override init() {}
    /// `queue` is not used: completions run on the main actor.
    public init(queue: DispatchQueue) {}

    /// Asks for the transaction's actions, in order; `completion` (main
    /// actor) gets nil once the car accepted them all, or the first
    /// ``CXErrorCodeRequestTransactionError`` (the actions after it are not sent).
    public func request(_ transaction: CXTransaction, completion: @escaping @MainActor ((any Error)?) -> Void) {
        let actions = transaction.actions
        guard !actions.isEmpty else {
            Task { @MainActor in completion(CXErrorCodeRequestTransactionError(code: .emptyTransaction, message: "the transaction has no action")) }
            return
        }
        guard let application = CallKitHub.shared.application, let phone = application.phone else {
            Task { @MainActor in
                completion(CXErrorCodeRequestTransactionError(code: .unknownCallProvider, message: "no communication app is connected to the car"))
            }
            return
        }
        let appID = application.bundleIdentifier
        let wires = actions.map(\.wire)
        application.queue.post {
            for wire in wires {
                do {
                    _ = try await phone.requestCallAction(appID: appID, wire)
                } catch let error as HeadUnitError {
                    completion(Self.transactionError(error))
                    return
                }
            }
            completion(nil)
        }
    }

    /// Asks for one action.
    public func requestTransaction(with action: CXAction, completion: @escaping @MainActor ((any Error)?) -> Void) {
        request(CXTransaction(action: action), completion: completion)
    }

    /// Asks for several actions.
    public func requestTransaction(with actions: [CXAction], completion: @escaping @MainActor ((any Error)?) -> Void) {
        request(CXTransaction(actions: actions), completion: completion)
    }

    /// Asks for the transaction's actions; throws a ``CXErrorCodeRequestTransactionError``.
    public func request(_ transaction: CXTransaction) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            request(transaction) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    static func transactionError(_ error: HeadUnitError) -> CXErrorCodeRequestTransactionError {
        let code: CXErrorCodeRequestTransactionError.Code
        switch error.code {
        case .notAllowedForCategory, .entitlementRefused: code = .unentitled
        case .unknownCall: code = .unknownCallUUID
        case .duplicateCall: code = .callUUIDAlreadyExists
        case .tooManyCalls: code = .maximumCallGroupsReached
        case .wrongCallState, .commandNotSupported, .invalidArgument, .limitExceeded: code = .invalidAction
        case .noPhone, .unknownApp, .notConnected: code = .unknownCallProvider
        default: code = .unknown
        }
        return CXErrorCodeRequestTransactionError(code: code, message: error.message)
    }
}

// MARK: - the hub

/// The providers and the communication apps they reach (see the top of this file).
@MainActor
final class CallKitHub {
    static let shared = CallKitHub()
    private var apps: [Weak<CPApplication>] = []
    private var providers: [Weak<CXProvider>] = []

    /// The communication app connected most recently, still connected.
    var application: CPApplication? {
        apps.compactMap(\.object).last(where: { $0.phone != nil })
    }

    /// The provider the car's actions reach: the newest one not invalidated.
    var provider: CXProvider? {
        providers.compactMap(\.object).last
    }

    func add(_ provider: CXProvider) {
        providers = providers.filter { $0.object != nil } + [Weak(provider)]
    }

    func remove(_ provider: CXProvider) {
        providers.removeAll { $0.object == nil || $0.object === provider }
    }

    /// A communication app was accepted: its provider begins.
    func attach(_ application: CPApplication) {
        apps = apps.filter { $0.object != nil && $0.object !== application } + [Weak(application)]
        provider?.began()
    }

    /// Its connection ended: its calls are gone (the car ended them, or will when the grace runs out).
    func detach(_ application: CPApplication) {
        let current = apps.compactMap(\.object).last
        apps.removeAll { $0.object == nil || $0.object === application }
        if current === application { provider?.reset() }
    }
}
