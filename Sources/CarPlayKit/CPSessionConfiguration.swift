import HeadUnitWire
import NIOConcurrencyHelpers

/// The parts of the interface the car limits while driving (`CPLimitableUserInterface`).
public struct CPLimitableUserInterface: OptionSet, Sendable, Hashable {
    /// The bit mask.
    public let rawValue: UInt
    /// Wraps a bit mask.
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// The keyboard is unavailable.
    public static let keyboard = CPLimitableUserInterface(rawValue: 1 << 0)
    /// Lists are shortened to ``CPListTemplate/maximumItemCount`` items.
    public static let lists = CPLimitableUserInterface(rawValue: 1 << 1)
}

/// Hears the car's configuration change (`CPSessionConfigurationDelegate`).
@MainActor
public protocol CPSessionConfigurationDelegate: AnyObject {
    /// The car limits (or stops limiting) the keyboard or lists.
    func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration, limitedUserInterfacesChanged limitedUserInterfaces: CPLimitableUserInterface)
    /// The car switched between light and dark content.
    func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration, contentStyleChanged contentStyle: CPContentStyle)
}

extension CPSessionConfigurationDelegate {
    /// Does nothing (optional in CarPlay).
    public func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration, limitedUserInterfacesChanged limitedUserInterfaces: CPLimitableUserInterface) {}
    /// Does nothing (optional in CarPlay).
    public func sessionConfiguration(_ sessionConfiguration: CPSessionConfiguration, contentStyleChanged contentStyle: CPContentStyle) {}
}

/// The car's configuration for the session: limited interfaces and content
/// style, with a delegate told of changes (`CPSessionConfiguration`).
///
/// As in CarPlay, make one and keep it; it follows the app connected most
/// recently (one app per process is the usual case).
@MainActor
public final class CPSessionConfiguration {
    private var delegateRef = Weak<AnyObject>(nil)

    /// Starts observing the car's configuration.
    public init(delegate: any CPSessionConfigurationDelegate) {
        delegateRef = Weak(delegate)
        CPSessionState.observe(self)
    }

    /// Hears changes (held weakly).
    public var delegate: (any CPSessionConfigurationDelegate)? {
        get { delegateRef.object as? any CPSessionConfigurationDelegate }
        set { delegateRef = Weak(newValue) }
    }

    /// What the car limits now.
    public var limitedUserInterfaces: CPLimitableUserInterface { CPSessionState.current.limited }
    /// The content style now.
    public var contentStyle: CPContentStyle { CPSessionState.current.contentStyle }

    func notify(old: CPSessionState, new: CPSessionState) {
        guard let delegate else { return }
        if old.limited != new.limited { delegate.sessionConfiguration(self, limitedUserInterfacesChanged: new.limited) }
        if old.contentStyle != new.contentStyle { delegate.sessionConfiguration(self, contentStyleChanged: new.contentStyle) }
    }
}

/// The configuration last heard from the car, for the static limits
/// (`CPListTemplate.maximumItemCount`...) and the session configurations.
struct CPSessionState: Sendable, Equatable {
    var limited: CPLimitableUserInterface = []
    var contentStyle: CPContentStyle = .unspecified
    var maximumItemCount = 0
    var maximumSectionCount = 0
    var maximumTabCount = 5

    private static let state = NIOLockedValueBox(CPSessionState())
    private static let observers = NIOLockedValueBox<[Weak<CPSessionConfiguration>]>([])

    static var current: CPSessionState { state.withLockedValue { $0 } }

    static func observe(_ configuration: CPSessionConfiguration) {
        observers.withLockedValue { $0 = $0.filter { $0.object != nil } + [Weak(configuration)] }
    }

    /// A scene connected: its limits and configuration are the current ones (nobody is told).
    @MainActor static func sceneConnected(_ scene: HUSceneConnected) {
        state.withLockedValue { state in
            var limited: CPLimitableUserInterface = []
            if scene.vehicleState.limitKeyboard { limited.insert(.keyboard) }
            if scene.vehicleState.limitLists { limited.insert(.lists) }
            state = CPSessionState(limited: limited, contentStyle: CPContentStyle(scene.contentStyle),
                                   maximumItemCount: Int(scene.maxListItems), maximumSectionCount: Int(scene.maxListSections),
                                   maximumTabCount: Int(scene.maxTabs))
        }
    }

    /// The car's configuration changed: tell every session configuration what changed.
    @MainActor static func configurationChanged(_ configuration: HUSessionConfiguration) {
        let (old, new) = state.withLockedValue { state -> (CPSessionState, CPSessionState) in
            let old = state
            var limited: CPLimitableUserInterface = []
            if configuration.limitKeyboard { limited.insert(.keyboard) }
            if configuration.limitLists { limited.insert(.lists) }
            state.limited = limited
            state.contentStyle = CPContentStyle(configuration.contentStyle)
            state.maximumItemCount = Int(configuration.maxListItems)
            state.maximumSectionCount = Int(configuration.maxListSections)
            return (old, state)
        }
        guard old != new else { return }
        for observer in observers.withLockedValue({ $0.compactMap(\.object) }) { observer.notify(old: old, new: new) }
    }
}
