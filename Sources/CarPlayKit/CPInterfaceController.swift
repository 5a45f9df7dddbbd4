import HeadUnitClient
import HeadUnitWire

/// Hears templates appear and disappear (`CPInterfaceControllerDelegate`).
@MainActor
public protocol CPInterfaceControllerDelegate: AnyObject {
    /// `aTemplate` is about to appear.
    func templateWillAppear(_ aTemplate: CPTemplate, animated: Bool)
    /// `aTemplate` appeared.
    func templateDidAppear(_ aTemplate: CPTemplate, animated: Bool)
    /// `aTemplate` is about to disappear.
    func templateWillDisappear(_ aTemplate: CPTemplate, animated: Bool)
    /// `aTemplate` disappeared.
    func templateDidDisappear(_ aTemplate: CPTemplate, animated: Bool)
}

extension CPInterfaceControllerDelegate {
    /// Does nothing (optional in CarPlay).
    public func templateWillAppear(_ aTemplate: CPTemplate, animated: Bool) {}
    /// Does nothing (optional in CarPlay).
    public func templateDidAppear(_ aTemplate: CPTemplate, animated: Bool) {}
    /// Does nothing (optional in CarPlay).
    public func templateWillDisappear(_ aTemplate: CPTemplate, animated: Bool) {}
    /// Does nothing (optional in CarPlay).
    public func templateDidDisappear(_ aTemplate: CPTemplate, animated: Bool) {}
}

/// The car's traits for this scene (`UITraitCollection` as `carTraitCollection`).
public struct CPTraitCollection: Sendable, Equatable {
    /// Light or dark content.
    public var userInterfaceStyle: CPContentStyle
    /// Pixels per point.
    public var displayScale: UInt32
}

/// Manages the template stack of an app's scene on the car (`CPInterfaceController`).
///
/// Every operation comes in two forms, as in CarPlay: `async throws`
/// (answering `true`) and with a completion handler `(Bool, Error?)`. A
/// refusal throws (or hands over) a ``CPError`` with the car's code.
///
/// Operations and in-place updates (a mutated template or item) reach the
/// car one after another in the order you made them.
@MainActor
public final class CPInterfaceController {
    /// The scene the controller belongs to.
    public let sceneID: UInt32
    /// The most templates on the stack, root included, for this app's category (ours).
    public let maximumStackDepth: Int
    let client: InterfaceController
    unowned let application: CPApplication
    private var delegateRef = Weak<AnyObject>(nil)
    // ---- the stack as the car has it (mirrored from answers and lifecycle events)
    private var stack: [CPTemplate] = []
    private var presented: CPTemplate?
    /// Every template the car may name in an event, by id.
    private var known: [String: Weak<CPTemplate>] = [:]
    var style: CPContentStyle
    public var prefersDarkUserInterfaceStyle = false

    init(client: InterfaceController, application: CPApplication) {
        self.client = client
        self.application = application
        sceneID = client.sceneID
        maximumStackDepth = Int(client.scene.maxStackDepth)
        style = CPContentStyle(client.scene.contentStyle)
    }

    /// Hears templates appear and disappear (held weakly).
    public var delegate: (any CPInterfaceControllerDelegate)? {
        get { delegateRef.object as? any CPInterfaceControllerDelegate }
        set { delegateRef = Weak(newValue) }
    }

    /// The car's traits: content style and scale.
    public var carTraitCollection: CPTraitCollection {
        CPTraitCollection(userInterfaceStyle: style, displayScale: client.scene.window.scale)
    }

    /// The template at the bottom of the stack.
    public var rootTemplate: CPTemplate? { stack.first }
    /// The template on top of the stack.
    public var topTemplate: CPTemplate? { stack.last }
    /// The stack, root first.
    public var templates: [CPTemplate] { stack }
    /// The modal template shown over the stack, if any.
    public var presentedTemplate: CPTemplate? { presented }

    // MARK: stack operations (async)

    /// Replaces the whole stack with `rootTemplate`.
    @discardableResult
    public func setRootTemplate(_ rootTemplate: CPTemplate, animated: Bool) async throws -> Bool {
        try await setRootOperation(rootTemplate, animated: animated).value
    }

    /// Pushes `templateToPush` on the stack.
    @discardableResult
    public func pushTemplate(_ templateToPush: CPTemplate, animated: Bool) async throws -> Bool {
        try await pushOperation(templateToPush, animated: animated).value
    }

    /// Pops the top template.
    @discardableResult
    public func popTemplate(animated: Bool) async throws -> Bool {
        try await popOperation(animated: animated).value
    }

    /// Pops to the root template.
    @discardableResult
    public func popToRootTemplate(animated: Bool) async throws -> Bool {
        try await popToRootOperation(animated: animated).value
    }

    /// Pops the templates above `targetTemplate`.
    @discardableResult
    public func pop(to targetTemplate: CPTemplate, animated: Bool) async throws -> Bool {
        try await popToOperation(to: targetTemplate, animated: animated).value
    }

    /// Presents an alert, action sheet or voice-control template over the stack.
    @discardableResult
    public func presentTemplate(_ templateToPresent: CPTemplate, animated: Bool) async throws -> Bool {
        try await presentOperation(templateToPresent, animated: animated).value
    }

    /// Dismisses the presented template.
    @discardableResult
    public func dismissTemplate(animated: Bool) async throws -> Bool {
        try await dismissOperation(animated: animated).value
    }

    // MARK: stack operations without completion (iOS 12-13 shapes, still compiling on iOS)

    /// Replaces the stack; a refusal surfaces from ``waitForPendingUpdates()``.
    public func setRootTemplate(_ rootTemplate: CPTemplate, animated: Bool) {
        post(setRootOperation(rootTemplate, animated: animated))
    }

    /// Pushes a template; a refusal surfaces from ``waitForPendingUpdates()``.
    public func pushTemplate(_ templateToPush: CPTemplate, animated: Bool) {
        post(pushOperation(templateToPush, animated: animated))
    }

    /// Pops the top template; a refusal surfaces from ``waitForPendingUpdates()``.
    public func popTemplate(animated: Bool) {
        post(popOperation(animated: animated))
    }

    /// Pops to the root; a refusal surfaces from ``waitForPendingUpdates()``.
    public func popToRootTemplate(animated: Bool) {
        post(popToRootOperation(animated: animated))
    }

    /// Pops to `targetTemplate`; a refusal surfaces from ``waitForPendingUpdates()``.
    public func pop(to targetTemplate: CPTemplate, animated: Bool) {
        post(popToOperation(to: targetTemplate, animated: animated))
    }

    /// Presents a modal template; a refusal surfaces from ``waitForPendingUpdates()``.
    public func presentTemplate(_ templateToPresent: CPTemplate, animated: Bool) {
        post(presentOperation(templateToPresent, animated: animated))
    }

    /// Dismisses the modal template; a refusal surfaces from ``waitForPendingUpdates()``.
    public func dismissTemplate(animated: Bool) {
        post(dismissOperation(animated: animated))
    }

    // MARK: the operations, queued when called (so calls reach the car in call order)

    private func setRootOperation(_ rootTemplate: CPTemplate, animated: Bool) -> Task<Bool, any Error> {
        enqueue(animated: animated, registering: rootTemplate) { .setRoot($0!.wire) } apply: { _ in
            self.detachAll()
            self.stack = [rootTemplate]
            self.presented = nil
            self.attach(rootTemplate)
        }
    }

    private func pushOperation(_ templateToPush: CPTemplate, animated: Bool) -> Task<Bool, any Error> {
        if templateToPush === CPNowPlayingTemplate.shared {
            // The shared instance is shown with its own request, its content sent first.
            return enqueue(animated: animated, registering: templateToPush) { _ in .showNowPlaying(HUShowNowPlaying()) } apply: { _ in
                self.stack.append(templateToPush)
            }
        }
        return enqueue(animated: animated, registering: templateToPush) { .push($0!.wire) } apply: { _ in
            self.stack.append(templateToPush)
            self.attach(templateToPush)
        }
    }

    private func popOperation(animated: Bool) -> Task<Bool, any Error> {
        enqueue(animated: animated, registering: nil) { _ in .pop(HUPopTemplate()) } apply: { shown in self.truncate(to: shown.templateID) }
    }

    private func popToRootOperation(animated: Bool) -> Task<Bool, any Error> {
        enqueue(animated: animated, registering: nil) { _ in .popToRoot(HUPopTemplate()) } apply: { shown in self.truncate(to: shown.templateID) }
    }

    private func popToOperation(to targetTemplate: CPTemplate, animated: Bool) -> Task<Bool, any Error> {
        enqueue(animated: animated, registering: nil) { _ in .popTo(targetTemplate.identifier) } apply: { _ in
            self.truncate(to: targetTemplate.identifier)
        }
    }

    private func presentOperation(_ templateToPresent: CPTemplate, animated: Bool) -> Task<Bool, any Error> {
        enqueue(animated: animated, registering: templateToPresent) { .present($0!.wire) } apply: { _ in
            self.presented = templateToPresent
            self.attach(templateToPresent)
        }
    }

    private func dismissOperation(animated: Bool) -> Task<Bool, any Error> {
        enqueue(animated: animated, registering: nil) { _ in .dismiss(HUPopTemplate()) } apply: { _ in
            self.presented?.controllerRef = Weak(nil)
            self.presented = nil
        }
    }

    /// A completion-less call: a refusal is kept for ``waitForPendingUpdates()``.
    private func post(_ operation: Task<Bool, any Error>) {
        application.queue.post { _ = try await operation.value }
    }

    // MARK: stack operations (completion handlers)

    /// Replaces the stack; `completion` gets `(true, nil)` or `(false, error)`.
    public func setRootTemplate(_ rootTemplate: CPTemplate, animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, setRootOperation(rootTemplate, animated: animated))
    }

    /// Pushes a template; `completion` gets `(true, nil)` or `(false, error)`.
    public func pushTemplate(_ templateToPush: CPTemplate, animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, pushOperation(templateToPush, animated: animated))
    }

    /// Pops the top template; `completion` gets `(true, nil)` or `(false, error)`.
    public func popTemplate(animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, popOperation(animated: animated))
    }

    /// Pops to the root; `completion` gets `(true, nil)` or `(false, error)`.
    public func popToRootTemplate(animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, popToRootOperation(animated: animated))
    }

    /// Pops to `targetTemplate`; `completion` gets `(true, nil)` or `(false, error)`.
    public func pop(to targetTemplate: CPTemplate, animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, popToOperation(to: targetTemplate, animated: animated))
    }

    /// Presents a modal template; `completion` gets `(true, nil)` or `(false, error)`.
    public func presentTemplate(_ templateToPresent: CPTemplate, animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, presentOperation(templateToPresent, animated: animated))
    }

    /// Dismisses the modal template; `completion` gets `(true, nil)` or `(false, error)`.
    public func dismissTemplate(animated: Bool, completion: (@MainActor (Bool, (any Error)?) -> Void)?) {
        complete(completion, dismissOperation(animated: animated))
    }

    /// Waits until every operation and in-place update made so far reached
    /// the car; throws the first update the car refused since the last call
    /// (ours: in CarPlay, property changes cannot fail).
    public func waitForPendingUpdates() async throws {
        try await application.queue.drain()
    }

    // MARK: internals

    /// Hands the answer of an already queued operation to `completion`, on the main actor (as CarPlay calls it on the main thread).
    private func complete(_ completion: (@MainActor (Bool, (any Error)?) -> Void)?, _ operation: Task<Bool, any Error>) {
        guard let completion else { return }
        Task { @MainActor in
            switch await operation.result {
            case .success(let done): completion(done, nil)
            case .failure(let error): completion(false, error)
            }
        }
    }

    private func enqueue(
        animated: Bool, registering template: CPTemplate?,
        _ op: @escaping @MainActor @Sendable (CPTemplate?) -> HUTemplateRequest.OneOf_Op,
        apply: @escaping @MainActor @Sendable (HUTemplateShown) -> Void
    ) -> Task<Bool, any Error> {
        application.queue.schedule {
            // Known and attached before the request: the car sends the template's
            // lifecycle events before its answer, and a change the app makes in
            // them must be queued (it reaches the car after the answer), not dropped.
            if let template { self.beginPending(template) }
            defer { if let template { self.endPending(template) } }
            do {
                let (shown, eventsBefore) = try await self.client.performCountingEvents(op(template), animated: animated)
                await self.answerWillApply?()
                await self.application.eventOrder.apply(after: eventsBefore) { apply(shown) }
                return true
            } catch {
                throw CPError(error)
            }
        }
    }

    /// Test hook: runs between the car's answer and its effect on the mirrored
    /// stack, so a test can make the app change a template in that window.
    var answerWillApply: (@MainActor @Sendable () async -> Void)?

    /// Templates whose request is on its way: changes to them are queued behind it.
    private var pending: [ObjectIdentifier: Int] = [:]

    private func beginPending(_ template: CPTemplate) {
        register(template)
        var pending = self.pending
        pending[ObjectIdentifier(template), default: 0] += 1
        self.pending = pending
        if template !== CPNowPlayingTemplate.shared, template.controllerRef.object == nil { attach(template) }
    }

    private func endPending(_ template: CPTemplate) {
        var pending = self.pending
        let id = ObjectIdentifier(template)
        pending[id, default: 1] -= 1
        if pending[id] == 0 { pending[id] = nil }
        self.pending = pending
        // Refused: the car does not have it, so its changes stop here.
        if pending[id] == nil, template !== CPNowPlayingTemplate.shared, !isShown(template), template.controllerRef.object === self {
            template.controllerRef = Weak(nil)
        }
    }

    private func isPending(_ template: CPTemplate) -> Bool { pending[ObjectIdentifier(template)] != nil }

    private func register(_ template: CPTemplate) {
        var known = self.known
        known[template.identifier] = Weak(template)
        for child in template.children { known[child.identifier] = Weak(child) }
        self.known = known
    }

    private func attach(_ template: CPTemplate) {
        template.controllerRef = Weak(self)
    }

    private func detachAll() {
        for template in stack where template !== CPNowPlayingTemplate.shared { template.controllerRef = Weak(nil) }
        presented?.controllerRef = Weak(nil)
    }

    /// The car popped to `templateID` (an answer, or its back button): drop what is above it.
    private func truncate(to templateID: String) {
        var stack = self.stack
        guard let index = stack.firstIndex(where: { $0.identifier == templateID }) else { return }
        for template in stack[(index + 1)...] where template !== CPNowPlayingTemplate.shared { template.controllerRef = Weak(nil) }
        stack.removeSubrange((index + 1)...)
        self.stack = stack
    }

    /// Whether the car has this top-level template (on the stack or presented).
    private func isShown(_ template: CPTemplate) -> Bool {
        stack.contains { $0 === template } || presented === template
    }

    func template(withID id: String) -> CPTemplate? {
        if id == CPNowPlayingTemplate.shared.identifier { return CPNowPlayingTemplate.shared }
        return known[id]?.object
    }

    /// Queues the whole template (shown, or its request on its way). Whether
    /// the car has it is checked when the update's turn comes, after every
    /// earlier request's answer: a change made before the answer to
    /// set_root/push/present is sent right after it, never dropped.
    func postUpdate(of template: CPTemplate) {
        let top = template.topLevel
        guard isShown(top) || isPending(top) else { return }
        register(top)
        application.queue.post { [weak self, client] in
            guard let self, self.isShown(top) else { return }
            _ = try await client.updateTemplate(top.wire)  // the content as of its turn: the latest
        }
    }

    func postItemUpdate(_ item: HUListItem, in list: CPListTemplate) {
        let top = list.topLevel
        guard isShown(top) || isPending(top) else { return }
        let listID = list.identifier
        application.queue.post { [weak self, client] in
            guard let self, self.isShown(top) else { return }
            _ = try await client.updateItem(item, in: listID)
        }
    }

    func postNowPlaying(_ content: HUNowPlayingTemplate) {
        application.queue.post { [client] in
            _ = try await client.updateNowPlaying(content)
        }
    }

    // MARK: events

    func handleLifecycle(_ event: HUAppEvent, _ lifecycle: HUTemplateLifecycle) {
        guard let template = template(withID: event.templateID) else { return }
        // The car's back button pops without a request: follow it when the template under the top reappears.
        if lifecycle.phase == .willAppear, presented == nil, stack.last !== template, stack.contains(where: { $0 === template }) {
            truncate(to: template.identifier)
        }
        if lifecycle.phase == .didDisappear, presented === template {
            // Dismissed by the car (a new root over it): forget it.
            presented = nil
        }
        guard let delegate else { return }
        switch lifecycle.phase {
        case .willAppear: delegate.templateWillAppear(template, animated: lifecycle.animated)
        case .didAppear: delegate.templateDidAppear(template, animated: lifecycle.animated)
        case .willDisappear: delegate.templateWillDisappear(template, animated: lifecycle.animated)
        case .didDisappear: delegate.templateDidDisappear(template, animated: lifecycle.animated)
        default: break
        }
    }

    func handle(_ event: HUAppEvent) {
        let context = EventContext(eventID: event.eventID, application: application, interfaceController: self)
        if case .lifecycle(let lifecycle) = event.kind { return handleLifecycle(event, lifecycle) }
        if case .timedOut = event.kind { return }  // the car stopped waiting; a late completion is dropped by the car
        let handled = template(withID: event.templateID)?.handle(event, context) ?? false
        // The car waits for events with an id: never leave its spinner running.
        if !handled, event.eventID != 0 { context.completion()() }
    }
}
