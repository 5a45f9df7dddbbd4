#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HeadUnitWire
import NIOCore
import NIOPosix

/// What reaches the HMI: the home screen and screen updates, each with the
/// screen as it now looks (diffs already applied).
public enum HMIUpdate: Sendable {
    case homeScreen(HUHomeScreen)
    case screen(HUScreenUpdate, HURenderedScreen)
    /// An image's bytes (PROTOCOL.md section 12.6); the session already put
    /// them in place of the ref in `homeScreen` and `screen`.
    case image(HUImageData)
    /// A non-fatal protocol error the car reported with request_id 0.
    case notice(HUResult)
    case goodbye(HUGoodbye)
    case other(HUEnvelope)
}

/// The car's own screen renderer and input devices (Unix socket only). Keeps
/// the latest rendered state of every screen, applying diffs as they come.
public final class HMISession: Sendable {
    public let connection: HeadUnitConnection
    /// Every update in order (bounded: the newest 4096 kept if nobody reads).
    public let updates: AsyncStream<HMIUpdate>
    private let updateContinuation: AsyncStream<HMIUpdate>.Continuation

    /// On the connection's loop only (the box traps elsewhere); every public method hops there.
    private struct LoopState {
        var screens: [HUScreen: HURenderedScreen] = [:]
        var sequences: [HUScreen: UInt64] = [:]
        var home: HUHomeScreen?
        /// Images the car sent (`ImageData`, PROTOCOL.md section 12.6), by ref;
        /// the newest `maxImages` kept (one dropped is asked for again).
        var images: [String: Data] = [:]
        var imageOrder: [String] = []
        /// Refs asked for with GetImage and not answered yet.
        var requestedImages: Set<String> = []
        /// Updates that arrived out of sequence (a gap means the state may be stale until the next `full`).
        var sequenceGaps = 0
        var stateWaiters: [StateWaiter] = []
        var nextWaiterID = 0
        var finished = false
    }
    private let loopState: NIOLoopBoundBox<LoopState>
    private static let maxImages = 1024
    private var screens: [HUScreen: HURenderedScreen] {
        get { loopState.value.screens }
        _modify { yield &loopState.value.screens }
    }
    private var sequences: [HUScreen: UInt64] {
        get { loopState.value.sequences }
        _modify { yield &loopState.value.sequences }
    }
    private var home: HUHomeScreen? {
        get { loopState.value.home }
        _modify { yield &loopState.value.home }
    }
    private var images: [String: Data] {
        get { loopState.value.images }
        _modify { yield &loopState.value.images }
    }
    private var imageOrder: [String] {
        get { loopState.value.imageOrder }
        _modify { yield &loopState.value.imageOrder }
    }
    private var requestedImages: Set<String> {
        get { loopState.value.requestedImages }
        _modify { yield &loopState.value.requestedImages }
    }
    private var sequenceGaps: Int {
        get { loopState.value.sequenceGaps }
        _modify { yield &loopState.value.sequenceGaps }
    }
    private var stateWaiters: [StateWaiter] {
        get { loopState.value.stateWaiters }
        _modify { yield &loopState.value.stateWaiters }
    }
    private var nextWaiterID: Int {
        get { loopState.value.nextWaiterID }
        _modify { yield &loopState.value.nextWaiterID }
    }
    private var finished: Bool {
        get { loopState.value.finished }
        _modify { yield &loopState.value.finished }
    }

    /// Updates that arrived out of sequence (a gap means the state may be stale until the next `full`).
    public var sequenceGapCount: Int {
        get async { await connection.onLoopAsync { self.sequenceGaps } }
    }

    private struct StateWaiter {
        var id: Int
        var check: () -> Bool
        var continuation: CheckedContinuation<Bool, Never>
        var timer: Scheduled<Void>
    }

    private init(connection: HeadUnitConnection) {
        self.connection = connection
        loopState = .makeBoxSendingValue(LoopState(), eventLoop: connection.eventLoop)
        (updates, updateContinuation) = AsyncStream.makeStream(of: HMIUpdate.self, bufferingPolicy: .bufferingNewest(4096))
    }

    public static func connect(
        to endpoint: HeadUnitEndpoint,
        name: String = "headunit-hmi",
        configure: (inout HeadUnitConnection.Configuration) -> Void = { _ in },
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> HMISession {
        var configuration = HeadUnitConnection.Configuration(role: .hmi, name: name)
        configure(&configuration)
        let session = MadeOnLoop<HMISession>()
        _ = try await HeadUnitConnection.connect(to: endpoint, configuration: configuration, group: group) { connection in
            let hmi = HMISession(connection: connection)
            connection.eventHandler = { [weak hmi] envelope in hmi?.handle(envelope) }
            connection.closeHandler = { [weak hmi] _ in hmi?.closed() }
            session.value = hmi
        }
        return session.value!
    }

    // MARK: requests

    /// Launches an app from the home screen: its scene connects on the phone.
    public func launch(_ appID: String, kind: HUSceneKind = .main) async throws {
        var launch = HULaunchApp()
        launch.appID = appID
        launch.kind = kind
        try await connection.request(.launchApp(launch))
    }

    public func input(_ input: HUHmiInput) async throws {
        try await connection.request(.hmiInput(input))
    }

    /// Touches a list item; the app gets item_selected and the car shows a spinner until it completes.
    public func selectItem(_ itemID: String, on templateID: String) async throws {
        var input = HUHmiInput()
        input.templateID = templateID
        var selected = HUItemSelected()
        selected.itemID = itemID
        input.kind = .selectItem(selected)
        try await self.input(input)
    }

    /// Presses a bar, grid, alert, action-sheet, information, contact, POI or map button.
    public func pressButton(_ buttonID: String, on templateID: String) async throws {
        var input = HUHmiInput()
        input.templateID = templateID
        var pressed = HUButtonPressed()
        pressed.buttonID = buttonID
        input.kind = .pressButton(pressed)
        try await self.input(input)
    }

    /// The car's back button, on the template shown on top (or presented).
    public func goBack(on templateID: String) async throws {
        var input = HUHmiInput()
        input.templateID = templateID
        input.kind = .goBack(HUGoBack())
        try await self.input(input)
    }

    /// A touch on the Now Playing screen's transport controls (PROTOCOL.md
    /// section 23): answered with the app's status once the app handled it.
    /// `appID` empty: the app that owns the main audio.
    public func sendRemoteCommand(_ call: HURemoteCommandCall, to appID: String = "") async throws -> HURemoteCommandOutcome {
        var send = HUSendRemoteCommand()
        send.appID = appID
        send.call = call
        return try await connection.request(.sendRemoteCommand(send)).remoteCommand
    }

    /// A steering-wheel or media key: the car routes it to the app that owns
    /// the main audio, as the command that app enables (section 23.4).
    public func pressCarButton(_ button: HUCarButton) async throws -> HURemoteCommandOutcome {
        var press = HUCarButtonPressed()
        press.button = button
        return try await connection.request(.carButton(press)).remoteCommand
    }

    /// The driver pressed answer, end, hold, mute or a key on a call
    /// (PROTOCOL.md section 26.5): answered once the app fulfilled or failed
    /// it; an end at once (the car ends the call itself). The calls are in
    /// `homeScreen()?.calls`.
    public func callAction(_ action: HUCallAction) async throws -> HUCallActionOutcome {
        var input = HUCallInput()
        input.action = action
        return try await connection.request(.callInput(input)).callAction
    }

    /// The steering wheel's voice button (PROTOCOL.md section 27.2): opens
    /// the phone's assistant, or ends its open session (`ended`). The
    /// session is in `homeScreen()?.assistant`.
    @discardableResult
    public func pressVoiceButton() async throws -> HUAssistantOutcome {
        var press = HUCarButtonPressed()
        press.button = .voice
        return try await connection.request(.carButton(press)).assistant
    }

    /// The driver's side of the assistant (section 27.2): open it (for one
    /// app), say something as text (opens a session when none is), or end it.
    @discardableResult
    public func assistant(_ action: HUAssistantInput.OneOf_Action) async throws -> HUAssistantOutcome {
        var input = HUAssistantInput()
        input.action = action
        return try await connection.request(.assistantInput(input)).assistant
    }

    /// The notification list (section 27.7): select (the assistant reads it:
    /// `Result.assistant`), dismiss, or turn an app's notifications on or off.
    @discardableResult
    public func notification(_ action: HUNotificationInput.OneOf_Action) async throws -> HUAssistantOutcome {
        var input = HUNotificationInput()
        input.action = action
        return try await connection.request(.notificationInput(input)).assistant
    }

    /// `assistant(.say(text))`: what the driver said, typed.
    @discardableResult
    public func say(_ text: String) async throws -> HUAssistantOutcome {
        try await assistant(.say(HUAssistantSay.with { $0.text = text }))
    }

    /// Waits until the home screen satisfies `condition` (its calls, say);
    /// nil after `timeout`.
    public func waitForHomeScreen(
        timeout: TimeAmount = .seconds(30), where condition: @escaping @Sendable (HUHomeScreen) -> Bool
    ) async -> HUHomeScreen? {
        let satisfied = await waitUntil(timeout: timeout) { self.home.map(condition) ?? false }
        return satisfied ? await homeScreen() : nil
    }

    public func setVehicleState(_ state: HUVehicleState) async throws {
        var message = HUSetVehicleState()
        message.state = state
        try await connection.request(.setVehicleState(message))
    }

    public func closeApp(_ appID: String) async throws {
        var close = HUCloseApp()
        close.appID = appID
        try await connection.request(.closeApp(close))
    }

    /// Opens a pairing window; show `code` to the driver (PROTOCOL.md section 20).
    /// `allowedEntitlements`: what the apps of the phone that pairs may claim
    /// (empty: the car's global policy).
    public func startPairing(allowedEntitlements: [String] = []) async throws -> HUPairingInfo {
        var start = HUStartPairing()
        start.allowedEntitlements = allowedEntitlements
        return try await connection.request(.startPairing(start)).pairing
    }

    public func pairedDevices() async throws -> [HUPairedDevice] {
        try await connection.request(.listPairedDevices(HUListPairedDevices())).pairing.devices
    }

    public func removePairedDevice(_ deviceID: String) async throws {
        var remove = HURemovePairedDevice()
        remove.deviceID = deviceID
        try await connection.request(.removePairedDevice(remove))
    }

    public func status() async throws -> HUStatus {
        let result = try await connection.request(.getStatus(HUGetStatus()))
        if case .status(let status)? = result.detail { return status }
        throw HeadUnitError(code: .unknownMessage, message: "GetStatus answered without a status", origin: .unexpectedAnswer)
    }

    public func close() async {
        await connection.close()
    }

    // MARK: state

    /// The screen as last rendered, nil before the car sent it.
    public func screen(_ screen: HUScreen = .main) async -> HURenderedScreen? {
        await connection.onLoopAsync { self.screens[screen] }
    }

    public func homeScreen() async -> HUHomeScreen? {
        await connection.onLoopAsync { self.home }
    }

    /// Waits until the screen satisfies `condition` (checked now and after
    /// every update); returns the screen, or nil after `timeout` (a safety
    /// net: it returns as soon as the condition holds, so it is generous).
    public func waitForScreen(
        _ screen: HUScreen = .main,
        timeout: TimeAmount = .seconds(30),
        where condition: @escaping @Sendable (HURenderedScreen) -> Bool
    ) async -> HURenderedScreen? {
        let satisfied = await waitUntil(timeout: timeout) { self.screens[screen].map(condition) ?? false }
        return satisfied ? await self.screen(screen) : nil
    }

    public func waitForHomeScreen(timeout: TimeAmount = .seconds(30)) async -> HUHomeScreen? {
        let satisfied = await waitUntil(timeout: timeout) { self.home != nil }
        return satisfied ? await homeScreen() : nil
    }

    private func waitUntil(timeout: TimeAmount, _ check: @escaping @Sendable () -> Bool) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            connection.onLoop {
                if check() { return continuation.resume(returning: true) }
                if self.finished { return continuation.resume(returning: false) }
                let id = self.nextWaiterID
                self.nextWaiterID += 1
                let timer = self.connection.eventLoop.scheduleTask(in: timeout) {
                    if let index = self.stateWaiters.firstIndex(where: { $0.id == id }) {
                        self.stateWaiters.remove(at: index).continuation.resume(returning: false)
                    }
                }
                self.stateWaiters.append(StateWaiter(id: id, check: check, continuation: continuation, timer: timer))
            }
        }
    }

    // MARK: inbound (event loop)

    private func handle(_ envelope: HUEnvelope) {
        let update: HMIUpdate
        switch envelope.body {
        case .homeScreen(var homeScreen):
            resolveImages(&homeScreen)
            home = homeScreen
            update = .homeScreen(homeScreen)
        case .imageData(let data):
            keepImage(data)
            update = .image(data)
        case .screenUpdate(let screenUpdate):
            if let last = sequences[screenUpdate.screen], screenUpdate.sequence != last + 1, screenUpdate.sequence != 0 {
                if case .full? = screenUpdate.change {} else { sequenceGaps += 1 }
            }
            sequences[screenUpdate.screen] = screenUpdate.sequence
            var rendered = screens[screenUpdate.screen] ?? HURenderedScreen()
            ScreenModel.apply(screenUpdate, to: &rendered)
            resolveImages(&rendered)
            screens[screenUpdate.screen] = rendered
            update = .screen(screenUpdate, rendered)
        case .result(let result):
            update = .notice(result)
        case .goodbye(let goodbye):
            update = .goodbye(goodbye)
        default:
            update = .other(envelope)
        }
        updateContinuation.yield(update)
        checkWaiters()
    }

    // MARK: images (section 12.6)

    private func keepImage(_ data: HUImageData) {
        requestedImages.remove(data.ref)
        if images.updateValue(data.png, forKey: data.ref) == nil {
            imageOrder.append(data.ref)
            if imageOrder.count > Self.maxImages { images[imageOrder.removeFirst()] = nil }
        }
    }

    /// Swaps each ref for the PNG the car sent; asks for any it lacks and
    /// fills it in when the answer comes.
    private func resolveImages(_ home: inout HUHomeScreen) {
        var missing: [String] = []
        ImageWalk.rewrite(&home, where: ImageWalk.isRef) { resolve(&$0, missing: &missing) }
        request(missing)
    }

    private func resolveImages(_ screen: inout HURenderedScreen) {
        var missing: [String] = []
        ImageWalk.rewrite(&screen, where: ImageWalk.isRef) { resolve(&$0, missing: &missing) }
        request(missing)
    }

    private func resolve(_ image: inout HUImage, missing: inout [String]) {
        guard case .ref(let ref) = image.source else { return }
        if let png = images[ref] { image.source = .png(png) } else { missing.append(ref) }
    }

    private func request(_ missing: [String]) {
        for ref in missing where requestedImages.insert(ref).inserted {
            let connection = self.connection
            Task { [weak self] in
                var get = HUGetImage()
                get.ref = ref
                let result = try? await connection.request(.getImage(get))
                connection.onLoop { [weak self] in
                    guard let self else { return }
                    self.requestedImages.remove(ref)
                    guard let result, case .imageData? = result.detail else { return }
                    self.keepImage(result.imageData)
                    if var home = self.home { self.resolveImages(&home); self.home = home }
                    for (screen, var rendered) in self.screens {
                        self.resolveImages(&rendered)
                        self.screens[screen] = rendered
                    }
                    self.checkWaiters()
                }
            }
        }
    }

    private func checkWaiters() {
        guard !stateWaiters.isEmpty else { return }
        var remaining: [StateWaiter] = []
        for waiter in stateWaiters {
            if waiter.check() {
                waiter.timer.cancel()
                waiter.continuation.resume(returning: true)
            } else {
                remaining.append(waiter)
            }
        }
        stateWaiters = remaining
    }

    private func closed() {
        finished = true
        updateContinuation.finish()
        let all = stateWaiters
        stateWaiters.removeAll()
        for waiter in all {
            waiter.timer.cancel()
            waiter.continuation.resume(returning: false)
        }
    }
}
