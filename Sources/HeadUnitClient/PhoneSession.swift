import HeadUnitWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// What reaches a phone from the car, besides answers to its requests.
public enum PhoneEvent: Sendable {
    /// An app scene connected: it must set a root template.
    case sceneConnected(InterfaceController)
    case sceneDisconnected(HUSceneDisconnected)
    /// User input or lifecycle for one app (`event.eventID != 0`: complete it).
    case appEvent(HUAppEvent)
    case sessionConfiguration(HUSessionConfiguration)
    /// A non-fatal protocol error the car reported with request_id 0.
    case notice(HUResult)
    /// The car said Goodbye (the connection is closing).
    case goodbye(HUGoodbye)
    case other(HUEnvelope)

    public var appID: String? {
        switch self {
        case .sceneConnected(let controller): return controller.appID
        case .sceneDisconnected(let message): return message.appID
        case .appEvent(let event): return event.appID
        case .sessionConfiguration(let configuration): return configuration.appID
        default: return nil
        }
    }
}

/// The phone: one connection carrying every CarPlay app on the device.
///
///     let phone = try await PhoneSession.connect(to: .default, deviceName: "Alice's iPhone")
///     let decisions = try await phone.announce([musicApp])
///     let controller = try await phone.waitForScene(appID: "com.example.music")
///     try await controller.setRootTemplate(list)
///     for await event in phone.events { ... }
public final class PhoneSession: Sendable {
    public let connection: HeadUnitConnection
    public let deviceName: String
    /// Every event, in order (bounded: the newest 4096 are kept if nobody reads).
    public let events: AsyncStream<PhoneEvent>
    private let eventContinuation: AsyncStream<PhoneEvent>.Continuation
    /// How many events `events` has handed on so far, for
    /// ``InterfaceController/performCountingEvents(_:animated:)``.
    let eventsYielded: NIOLoopBoundBox<UInt64>
    /// The same events for `nextEvent(where:)`; taken out of order on demand.
    let mailbox: Mailbox<PhoneEvent>
    /// External Accessory sessions of this phone's apps.
    let sessionRouter: SessionRouter
    /// Audio streams of this phone's apps (PROTOCOL.md section 24).
    let audioRouter: AudioRouter

    /// On the connection's loop only (the box traps elsewhere); every public method hops there.
    private struct LoopState {
        var apps: [String: CarApp] = [:]
        var token = ""
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    private var apps: [String: CarApp] {
        get { loopState.value.apps }
        _modify { yield &loopState.value.apps }
    }
    private var token: String {
        get { loopState.value.token }
        _modify { yield &loopState.value.token }
    }

    private init(connection: HeadUnitConnection, deviceName: String) {
        self.connection = connection
        self.deviceName = deviceName
        self.mailbox = Mailbox(eventLoop: connection.eventLoop)
        self.sessionRouter = SessionRouter(connection: connection)
        self.audioRouter = AudioRouter(eventLoop: connection.eventLoop)
        self.eventsYielded = .makeBoxSendingValue(0, eventLoop: connection.eventLoop)
        self.loopState = .makeBoxSendingValue(LoopState(), eventLoop: connection.eventLoop)
        (events, eventContinuation) = AsyncStream.makeStream(of: PhoneEvent.self, bufferingPolicy: .bufferingNewest(4096))
    }

    public static func connect(
        to endpoint: HeadUnitEndpoint,
        deviceName: String,
        configure: (inout HeadUnitConnection.Configuration) -> Void = { _ in },
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> PhoneSession {
        var configuration = HeadUnitConnection.Configuration(role: .phone, name: deviceName)
        configure(&configuration)
        // On TCP the car asks for the paired key (PROTOCOL.md section 20): the
        // one `headunitctl pair-phone` stored, unless the caller gave one.
        if case .tcp = endpoint, configuration.identity == nil {
            configuration.useStoredIdentity = true
        }
        let session = MadeOnLoop<PhoneSession>()
        let connection = try await HeadUnitConnection.connect(to: endpoint, configuration: configuration, group: group) { connection in
            let phone = PhoneSession(connection: connection, deviceName: deviceName)
            connection.eventHandler = { [weak phone] envelope in phone?.handle(envelope) }
            connection.closeHandler = { [weak phone] _ in phone?.closed() }
            connection.dataHandler = { [weak phone] channel, payload in phone?.sessionRouter.data(channel: channel, payload) }
            session.value = phone
        }
        _ = connection
        return session.value!
    }

    // MARK: requests

    /// Announces the device's apps; answers the car's decision for each.
    /// Accepted apps become `CarApp`s (see `app(_:)`).
    /// `assistant`: the phone has an assistant the car's voice button reaches
    /// (PROTOCOL.md section 27.1); its events arrive as `.other` carrying
    /// `AssistantEvent`, answered with `updateAssistant`.
    @discardableResult
    public func announce(_ apps: [HUAppInfo], assistant: Bool = false) async throws -> [HUAppDecision] {
        var announce = HUAnnounceApps()
        announce.deviceName = deviceName
        announce.apps = apps
        announce.assistant = assistant
        let result = try await connection.request(.announceApps(announce))
        let list: HUAppDecisions? = if case .appDecisions(let list)? = result.detail { list } else { nil }
        let decisions = list?.decisions ?? []
        let token = list?.resumptionToken ?? ""
        await connection.onLoopAsync {
            self.token = token
            for info in apps {
                let decision = decisions.first { $0.appID == info.appID } ?? HUAppDecision()
                self.apps[info.appID] = CarApp(info: info, decision: decision, session: self)
            }
        }
        return decisions
    }

    /// The token that resumes this phone's session on a new connection if
    /// this one is lost (PROTOCOL.md section 21); empty before `announce`.
    public var resumptionToken: String {
        get async { await connection.onLoopAsync { self.token } }
    }

    /// Continues a lost session on this new connection instead of announcing:
    /// `token` is the lost session's `resumptionToken`, `apps` what it had
    /// announced. The apps and their connected scenes are rebound (no
    /// `sceneConnected` events for them); what the car kept for the phone
    /// meanwhile follows as ordinary events. Throws RESUME_REFUSED when the
    /// session is gone: announce afresh then.
    @discardableResult
    public func resume(token: String, apps: [HUAppInfo]) async throws -> HUResumed {
        var resume = HUResumeSession()
        resume.resumptionToken = token
        // The replay follows the answer on the loop: rebind before handling it.
        let result = try await connection.request(.resumeSession(resume)) { [weak self] result in
            guard let self, case .resumed(let resumed)? = result.detail else { return }
            self.rebind(resumed, apps: apps)
        }
        guard case .resumed(let resumed)? = result.detail else {
            throw HeadUnitError(code: .unknownMessage, message: "ResumeSession was answered without Resumed", origin: .unexpectedAnswer)
        }
        return resumed
    }

    /// On the loop, before anything that followed the answer is handled.
    private func rebind(_ resumed: HUResumed, apps infos: [HUAppInfo]) {
        token = resumed.resumptionToken
        for status in resumed.apps {
            let info = infos.first { $0.appID == status.appID } ?? HUAppInfo.with { $0.appID = status.appID; $0.displayName = status.displayName }
            var decision = HUAppDecision()
            decision.appID = status.appID
            decision.accepted = status.accepted
            decision.category = status.category
            apps[status.appID] = CarApp(info: info, decision: decision, session: self)
        }
        for scene in resumed.scenes {
            apps[scene.appID]?.scenes[scene.sceneID] = InterfaceController(scene: scene, connection: connection, eventsYielded: eventsYielded)
        }
    }

    public func app(_ appID: String) async -> CarApp? {
        await connection.onLoopAsync { self.apps[appID] }
    }

    /// The app's main-scene interface controller, once its scene is connected.
    public func interfaceController(for appID: String) async -> InterfaceController? {
        await connection.onLoopAsync { self.apps[appID]?.mainScene }
    }

    /// Waits for the app's main scene (launched from the car), returning at
    /// once when it is already connected.
    public func waitForScene(appID: String, timeout: TimeAmount = .seconds(5)) async throws -> InterfaceController {
        if let controller = await interfaceController(for: appID) { return controller }
        let event = await mailbox.take(timeout: timeout) {
            if case .sceneConnected(let controller) = $0, controller.appID == appID, controller.kind == .main { return true }
            return false
        }
        if case .sceneConnected(let controller)? = event { return controller }
        if let controller = await interfaceController(for: appID) { return controller }
        throw HeadUnitError(code: .notConnected, message: "no scene connected for \(appID)", origin: .timedOut)
    }

    /// The first event (received already or to come) that matches, taking it
    /// out of the mailbox; nil after `timeout`.
    public func nextEvent(timeout: TimeAmount, where matches: @escaping @Sendable (PhoneEvent) -> Bool) async -> PhoneEvent? {
        await mailbox.take(timeout: timeout, where: matches)
    }

    /// Answers an event that waits for completion (item selection...): the car
    /// stops its spinner.
    public func completeEvent(appID: String, eventID: UInt64, searchResults: [HUListItem] = []) async throws {
        var complete = HUCompleteEvent()
        complete.appID = appID
        complete.eventID = eventID
        complete.searchResults = searchResults
        await connection.onLoopAsync { self.apps[appID]?.pendingEventIDs.removeAll { $0 == eventID } }
        try await connection.request(.completeEvent(complete))
    }

    /// Declares an app's remote commands (PROTOCOL.md section 23): the whole
    /// set, replacing the one declared before. The car then sends
    /// `RemoteCommandEvent`s (as `.other` events); answer each with
    /// `answerRemoteCommand`.
    public func setRemoteCommands(appID: String, _ commands: [HURemoteCommandState]) async throws {
        var message = HURemoteCommands()
        message.appID = appID
        message.commands = commands
        try await connection.request(.remoteCommands(message))
    }

    /// The app's handler status for a `RemoteCommandEvent`: the HMI that asked gets it.
    public func answerRemoteCommand(appID: String, commandID: UInt64, status: HURemoteCommandStatus) async throws {
        var answer = HURemoteCommandAnswer()
        answer.appID = appID
        answer.commandID = commandID
        answer.status = status
        try await connection.request(.remoteCommandAnswer(answer))
    }

    /// Reports a call of a communication app (PROTOCOL.md section 26.3,
    /// `CXProvider`'s reports).
    public func reportCall(appID: String, uuid: String, kind: HUCallReportKind, description: HUCallDescription? = nil, endedReason: HUCallEndedReason = .unspecified) async throws {
        var report = HUCallReport()
        report.appID = appID
        report.callUuid = uuid
        report.kind = kind
        if let description { report.description_p = description }
        report.endedReason = endedReason
        try await connection.request(.callReport(report))
    }

    /// Asks for a call action (section 26.4, `CXCallController.request`):
    /// the action's id once the car accepted it; the car then sends a
    /// `CallActionEvent` (as an `.other` event) to perform and answer with
    /// `answerCallAction`.
    public func requestCallAction(appID: String, _ action: HUCallAction) async throws -> UInt64 {
        var request = HUCallRequest()
        request.appID = appID
        request.action = action
        return try await connection.request(.callRequest(request)).callAction.actionID
    }

    /// Fulfils or fails a `CallActionEvent` (section 26.6).
    public func answerCallAction(appID: String, actionID: UInt64, fulfilled: Bool) async throws {
        var answer = HUCallActionAnswer()
        answer.appID = appID
        answer.actionID = actionID
        answer.fulfilled = fulfilled
        try await connection.request(.callActionAnswer(answer))
    }

    /// The phone's assistant says what it is doing and showing (section 27.3);
    /// `end` ends its session. Listening, the car's microphone streams to it.
    public func updateAssistant(sessionID: UInt64, state: HUAssistantState, text: String = "", end: Bool = false) async throws {
        var update = HUAssistantUpdate()
        update.sessionID = sessionID
        update.state = state
        update.text = text
        update.end = end
        try await connection.request(.assistantUpdate(update))
    }

    /// Posts (or withdraws) a messaging or calling app's notification (section 27.7).
    public func postNotification(_ post: HUPostNotification) async throws {
        try await connection.request(.postNotification(post))
    }

    public func close() async {
        await connection.close()
    }

    /// Sends one frame of a navigation scene's base view on its channel
    /// (`scene.video.channel`, PROTOCOL.md section 25.3). False when the
    /// previous frame of that channel has not left for the socket yet: this
    /// one is skipped (latest frame wins, section 25.5) and the caller makes
    /// its next frame a keyframe. The car's keyframe requests arrive as
    /// `PhoneEvent.other` carrying `RequestKeyframe`.
    public func sendVideoFrame(channel: UInt32, _ header: VideoFrameHeader, accessUnit: ByteBuffer) async -> Bool {
        let connection = self.connection
        return await connection.onLoopAsync { connection.sendVideo(channel: channel, header, accessUnit: accessUnit) }
    }

    /// Opens an app's audio stream to the car's mixer (PROTOCOL.md section
    /// 24.2): `.main` needs the app's now-playing to play, `.alternate` a
    /// prompt of the app (`start_prompt`), `.voice` a call or the app's voice
    /// session; else `NO_AUDIO_FOCUS`. An earlier stream of the app of the
    /// same type is replaced. The car's `AudioStreamClosed` still arrives
    /// as a `.other` event, and ends the stream (`AudioStream.waitUntilClosed`).
    public func openAudioStream(appID: String, type: HUAudioStreamType, format: HUAudioFormat) async throws -> AudioStream {
        var open = HUOpenAudioStream()
        open.appID = appID
        open.type = type
        open.format = format
        let connection = self.connection
        let router = audioRouter
        // Registered on the loop as the answer arrives, before any credit for it.
        let made = MadeOnLoop<AudioStream>()
        let result = try await connection.request(.openAudioStream(open)) { result in
            guard case .audioStream(let info)? = result.detail else { return }
            let stream = AudioStream(appID: appID, info: info, connection: connection)
            router.add(stream)
            made.value = stream
        }
        guard let stream = made.value else {
            throw HeadUnitError(code: .unknownMessage, message: "OpenAudioStream was answered without AudioStreamInfo: \(result)", origin: .unexpectedAnswer)
        }
        return stream
    }

    // MARK: inbound (event loop)

    private func handle(_ envelope: HUEnvelope) {
        if let body = envelope.body, sessionRouter.handle(body) { return }
        if let body = envelope.body, audioRouter.handle(body) { return }
        let event: PhoneEvent
        switch envelope.body {
        case .sceneConnected(let scene):
            let controller = InterfaceController(scene: scene, connection: connection, eventsYielded: eventsYielded)
            if let app = apps[scene.appID] {
                app.scenes[scene.sceneID] = controller
            }
            event = .sceneConnected(controller)
        case .sceneDisconnected(let message):
            apps[message.appID]?.scenes.removeValue(forKey: message.sceneID)
            event = .sceneDisconnected(message)
        case .appEvent(let appEvent):
            if appEvent.eventID != 0 { apps[appEvent.appID]?.pendingEventIDs.append(appEvent.eventID) }
            if case .timedOut(let timedOut)? = appEvent.kind {
                apps[appEvent.appID]?.pendingEventIDs.removeAll { $0 == timedOut.timedOutEventID }
            }
            event = .appEvent(appEvent)
        case .sessionConfiguration(let configuration):
            event = .sessionConfiguration(configuration)
        case .result(let result):
            event = .notice(result)
        case .goodbye(let goodbye):
            event = .goodbye(goodbye)
        default:
            event = .other(envelope)
        }
        mailbox.post(event)
        // A full buffer drops its oldest event for this one: the count the consumer will see is unchanged.
        if case .enqueued = eventContinuation.yield(event) { eventsYielded.value += 1 }
    }

    private func closed() {
        sessionRouter.closeAll(.phoneGone)
        audioRouter.closeAll()
        mailbox.finish()
        eventContinuation.finish()
    }

    func pendingEvents(of appID: String) async -> [UInt64] {
        await connection.onLoopAsync { self.apps[appID]?.pendingEventIDs ?? [] }
    }
}

/// One CarPlay app on the phone, as the car decided it.
public final class CarApp: Sendable {
    public let info: HUAppInfo
    public let decision: HUAppDecision
    public var appID: String { info.appID }
    public var isAccepted: Bool { decision.accepted }
    unowned let session: PhoneSession

    /// On the session's loop only (the box traps elsewhere).
    private struct LoopState {
        var scenes: [UInt32: InterfaceController] = [:]
        /// Events waiting for CompleteEvent, oldest first.
        var pendingEventIDs: [UInt64] = []
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    var scenes: [UInt32: InterfaceController] {
        get { loopState.value.scenes }
        _modify { yield &loopState.value.scenes }
    }
    var pendingEventIDs: [UInt64] {
        get { loopState.value.pendingEventIDs }
        _modify { yield &loopState.value.pendingEventIDs }
    }
    var mainScene: InterfaceController? { scenes.values.first { $0.kind == .main } }

    init(info: HUAppInfo, decision: HUAppDecision, session: PhoneSession) {
        self.info = info
        self.decision = decision
        self.session = session
        loopState = .makeBoxSendingValue(LoopState(), eventLoop: session.connection.eventLoop)
    }

    /// The main scene's interface controller, if connected.
    public func interfaceController() async -> InterfaceController? {
        await session.connection.onLoopAsync { self.mainScene }
    }

    /// Completes the most recent event that waits for completion; returns its id.
    @discardableResult
    public func completeLastEvent(searchResults: [HUListItem] = []) async throws -> UInt64 {
        guard let last = await session.pendingEvents(of: appID).last else {
            throw HeadUnitError(code: .unknownEvent, message: "\(appID) has no event waiting for completion", origin: .usage)
        }
        try await session.completeEvent(appID: appID, eventID: last, searchResults: searchResults)
        return last
    }

    public func completeEvent(_ eventID: UInt64, searchResults: [HUListItem] = []) async throws {
        try await session.completeEvent(appID: appID, eventID: eventID, searchResults: searchResults)
    }

    /// Tells the car the app went away (crashed, quit): its scenes end.
    public func close() async throws {
        var closed = HUAppClosed()
        closed.appID = appID
        try await session.connection.request(.appClosed(closed))
    }
}

/// Drives the template stack of one app scene, like CPInterfaceController.
/// Every call answers the car's TemplateShown, or throws `HeadUnitError` with
/// the typed code (depth exceeded, not allowed for category, limit exceeded...).
public final class InterfaceController: Sendable {
    public let scene: HUSceneConnected
    public let connection: HeadUnitConnection
    public var appID: String { scene.appID }
    public var sceneID: UInt32 { scene.sceneID }
    public var kind: HUSceneKind { scene.kind }

    /// The phone's count of events handed to `PhoneSession.events`.
    let eventsYielded: NIOLoopBoundBox<UInt64>

    init(scene: HUSceneConnected, connection: HeadUnitConnection, eventsYielded: NIOLoopBoundBox<UInt64>) {
        self.scene = scene
        self.connection = connection
        self.eventsYielded = eventsYielded
    }

    @discardableResult
    public func setRootTemplate(_ template: HUTemplate, animated: Bool = false) async throws -> HUTemplateShown {
        try await perform(.setRoot(template), animated: animated)
    }

    @discardableResult
    public func pushTemplate(_ template: HUTemplate, animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.push(template), animated: animated)
    }

    @discardableResult
    public func popTemplate(animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.pop(HUPopTemplate()), animated: animated)
    }

    @discardableResult
    public func popToRootTemplate(animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.popToRoot(HUPopTemplate()), animated: animated)
    }

    @discardableResult
    public func popToTemplate(_ templateID: String, animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.popTo(templateID), animated: animated)
    }

    /// Alert, action sheet or voice control, modally; one at a time.
    @discardableResult
    public func presentTemplate(_ template: HUTemplate, animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.present(template), animated: animated)
    }

    @discardableResult
    public func dismissTemplate(animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.dismiss(HUPopTemplate()), animated: animated)
    }

    /// Replaces a template on screen in place (same id); the car redraws what changed.
    @discardableResult
    public func updateTemplate(_ template: HUTemplate) async throws -> HUTemplateShown {
        try await perform(.update(template), animated: false)
    }

    /// Replaces one list item (matched by id) in place.
    @discardableResult
    public func updateItem(_ item: HUListItem, in templateID: String) async throws -> HUTemplateShown {
        var update = HUItemUpdate()
        update.templateID = templateID
        update.item = item
        return try await perform(.updateItem(update), animated: false)
    }

    /// Updates the app's shared now-playing template.
    @discardableResult
    public func updateNowPlaying(_ nowPlaying: HUNowPlayingTemplate) async throws -> HUTemplateShown {
        try await perform(.updateNowPlaying(nowPlaying), animated: false)
    }

    /// Pushes the shared now-playing template.
    @discardableResult
    public func showNowPlaying(animated: Bool = true) async throws -> HUTemplateShown {
        try await perform(.showNowPlaying(HUShowNowPlaying()), animated: animated)
    }

    /// Any template operation; the others are shorthands.
    @discardableResult
    public func perform(_ op: HUTemplateRequest.OneOf_Op, animated: Bool) async throws -> HUTemplateShown {
        let result = try await connection.request(.templateRequest(request(op, animated: animated)))
        if case .templateShown(let shown)? = result.detail { return shown }
        return HUTemplateShown()
    }

    /// Like ``perform(_:animated:)``, and how many of `events` came before
    /// the answer: the car sends a request's lifecycle events before its
    /// `Result`, so a consumer of `events` that applies the answer once it
    /// has handled that many sees the car's order (CarPlayKit does).
    public func performCountingEvents(_ op: HUTemplateRequest.OneOf_Op, animated: Bool) async throws -> (shown: HUTemplateShown, eventsBefore: UInt64) {
        let position = NIOLockedValueBox<UInt64>(0)
        let result = try await connection.request(.templateRequest(request(op, animated: animated))) { _ in
            position.withLockedValue { $0 = self.eventsYielded.value }  // on the loop, as the answer arrives
        }
        let shown: HUTemplateShown
        if case .templateShown(let value)? = result.detail { shown = value } else { shown = HUTemplateShown() }
        return (shown, position.withLockedValue { $0 })
    }

    /// The Result whatever its code (for tests and scenarios that expect errors).
    public func resultOf(_ op: HUTemplateRequest.OneOf_Op, animated: Bool = false) async throws -> HUResult {
        try await connection.resultOf(.templateRequest(request(op, animated: animated)))
    }

    public func request(_ op: HUTemplateRequest.OneOf_Op, animated: Bool) -> HUTemplateRequest {
        var request = HUTemplateRequest()
        request.appID = scene.appID
        request.sceneID = scene.sceneID
        request.animated = animated
        request.op = op
        return request
    }
}
