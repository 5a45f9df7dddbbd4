import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// The template session as a value of its own (issue 49 item 4): the car
/// composes it instead of holding each of its facts, and its bookkeeping
/// (ids, sequences, pending and timed-out events) is tested here alone.
@Suite struct TemplateSessionTests {
    static func storedProperties(of value: Any) -> [String] {
        Mirror(reflecting: value).children.map { $0.label ?? "?" }
    }

    @Test func carHoldsAtMostEighteenStoredProperties() {
        let car = Car(configuration: CarConfiguration(vehicle: .standard, entitlements: .acceptAll))
        let stored = Self.storedProperties(of: car)
        #expect(stored.count <= 18, "Car holds \(stored.count) stored properties: \(stored)")
        #expect(stored.contains("templates"), "the template session is one value the car composes")
    }

    @Test func templateSessionHoldsAtMostTwentyStoredProperties() {
        let stored = Self.storedProperties(of: TemplateSession())
        #expect(stored.count <= 20, "TemplateSession holds \(stored.count) stored properties: \(stored)")
        #expect(Self.storedProperties(of: PeerTable()).count <= 20)
    }

    static func selection(_ appID: String, kind: HUSceneKind = .main, spinner: Bool = true, search: Bool = false) -> TemplateSession.PendingEvent {
        TemplateSession.PendingEvent(appID: appID, sceneKind: kind, templateID: "list", itemID: "a", showsSpinner: spinner, isSearch: search)
    }

    @Test func aSelectionReplacesTheSameAppsSpinningOnesOnly() {
        var session = TemplateSession()
        let first = session.startPending(Self.selection("music"))
        let search = session.startPending(Self.selection("music", spinner: false, search: true))
        let other = session.startPending(Self.selection("news"))
        #expect(first.replaced.isEmpty && search.replaced.isEmpty && other.replaced.isEmpty)
        #expect([first.eventID, search.eventID, other.eventID] == [1, 2, 3], "event ids count up from 1")

        let second = session.startPending(Self.selection("music"))
        #expect(second.replaced.map(\.id) == [first.eventID], "only music's spinning selection is replaced")
        #expect(Set(session.pendingEvents.keys) == [search.eventID, other.eventID, second.eventID])
        #expect(session.spinning(on: TemplateSession.SceneRef(appID: "music", kind: .main))?.eventID == second.eventID)
        #expect(session.spinning(on: TemplateSession.SceneRef(appID: "music", kind: .dashboard)) == nil)

        // A search (no spinner) replaces nothing.
        let again = session.startPending(Self.selection("music", spinner: false, search: true))
        #expect(again.replaced.isEmpty)
    }

    @Test func aTimedOutEventIsRememberedWithinItsBound() {
        var session = TemplateSession()
        var ids: [UInt64] = []
        for _ in 0..<(TemplateSession.timedOutMemory + 1) {
            ids.append(session.startPending(Self.selection("app", spinner: false)).eventID)
        }
        for id in ids { #expect(session.timeOut(id) != nil) }
        #expect(session.timeOut(ids[0]) == nil, "timed out once only")
        #expect(session.pendingEvents.isEmpty)
        #expect(session.timedOutEvents.count == TemplateSession.timedOutMemory, "bounded")
        #expect(!session.hasTimedOut(ids[0], appID: "app"), "the oldest is forgotten")
        #expect(session.hasTimedOut(ids.last!, appID: "app"))
        #expect(!session.hasTimedOut(ids.last!, appID: "other"), "an event is another app's to complete")
    }

    @Test func endingAnAppsPendingEventsLeavesOtherAppsAlone() {
        var session = TemplateSession()
        let music = session.startPending(Self.selection("music")).eventID
        let news = session.startPending(Self.selection("news")).eventID
        let ended = session.endPending(of: "music")
        #expect(ended.map(\.id) == [music])
        #expect(Array(session.pendingEvents.keys) == [news])
    }

    @Test func scenesIdsAndScreenSequencesCountUp() {
        var session = TemplateSession()
        #expect(session.newSceneID() == 1 && session.newSceneID() == 2)
        #expect(session.sequence(.main, advance: false) == 0)
        #expect(session.sequence(.main, advance: true) == 1)
        #expect(session.sequence(.main, advance: false) == 1, "reading does not advance it")
        #expect(session.sequence(.dashboard, advance: true) == 1, "each screen counts its own")
    }
}
