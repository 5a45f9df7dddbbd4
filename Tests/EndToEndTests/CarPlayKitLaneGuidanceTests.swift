import CarPlayKit
import Foundation
import HeadUnitClient
import HeadUnitWire
import Testing

/// CarPlayKit's lane guidance against the daemon (docs/CARPLAYKIT.md): what
/// the app sets reaches the cluster, and a linked or current guidance the
/// car may not hold is added first, so the car never refuses the link.
@Suite("CarPlayKit lane guidance against the daemon", .serialized)
@MainActor
struct CarPlayKitLaneGuidanceTests {
    static func guidance(_ index: Int) -> CPLaneGuidance {
        let guidance = CPLaneGuidance(identifier: "lanes-\(index)")
        guidance.instructionVariants = ["Lane \(index)"]
        guidance.lanes = [
            CPLane(angles: [Measurement(value: -45, unit: UnitAngle.degrees)]),
            CPLane(angles: [], highlightedAngle: Measurement(value: Double.pi / 2, unit: UnitAngle.radians), isPreferred: true),
        ]
        return guidance
    }

    /// The cluster's state once `done` holds (30 s at most).
    static func clusterState(_ endpoint: HeadUnitEndpoint, until done: @escaping @Sendable (HUMetadataState) -> Bool) async throws -> HUMetadataState? {
        let cluster = try await ClusterSession.connect(to: endpoint)
        try await cluster.subscribe()
        let found = await withTaskGroup(of: HUMetadataState?.self) { group in
            group.addTask {
                var model = MetadataModel()
                for await update in cluster.updates {
                    model.apply(update)
                    if done(model.state) { return model.state }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: 30_000_000_000)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        await cluster.close()
        return found
    }

    @Test("a linked guidance never added, and a current one added 40 guidances ago, are added first; angles go in degrees")
    func linkedAndCurrentGuidancesAreAddedWhenTheCarMayNotHoldThem() async throws {
        let recorder = CarPlayKitTemplateTests.Recorder()
        let rig = try await CarPlayKitTemplateTests.Rig.start("com.test.lanes", [.maps], recorder)
        defer { rig.stop() }
        let map = CPMapTemplate(identifier: "map")
        try await rig.controller.setRootTemplate(map, animated: false)
        let route = CPRouteChoice(summaryVariants: ["Fastest"], additionalInformationVariants: [], selectionSummaryVariants: [])
        let trip = CPTrip(origin: MKMapItem.forCurrentLocation(), destination: MKMapItem.forCurrentLocation(), routeChoices: [route])
        let session = map.startNavigationSession(for: trip)

        // Linked without add(_:): CarPlayKit adds it first.
        let linked = Self.guidance(0)
        let turn = CPManeuver(identifier: "turn")
        turn.instructionVariants = ["Turn right"]
        turn.maneuverType = .roundaboutExit2
        turn.junctionType = .roundabout
        turn.trafficSide = .left
        turn.linkedLaneGuidance = linked
        session.upcomingManeuvers = [turn]
        try await rig.controller.waitForPendingUpdates()

        // 40 more: the car keeps the 32 newest and those in use, so the first of them may be gone.
        let many = (1...40).map(Self.guidance)
        session.add(many)
        session.currentLaneGuidance = many[0]
        session.currentRoadNameVariants = ["Rd", "Station Road"]  // sent longest first
        session.maneuverState = .execute
        try await rig.controller.waitForPendingUpdates()

        let endpoint = HeadUnitEndpoint.unix(path: rig.daemon.unixSocketPath)
        let state = try #require(await Self.clusterState(endpoint) { $0.maneuvers.currentLaneGuidanceID == "lanes-1" })
        let section = state.maneuvers
        #expect(section.laneGuidances.map(\.id) == ["lanes-1", "lanes-0"])
        #expect(section.maneuvers.first?.maneuverType == .roundaboutExit2 && section.maneuvers.first?.junctionType == .roundabout)
        #expect(section.maneuvers.first?.trafficSide == .left && section.maneuvers.first?.linkedLaneGuidanceID == "lanes-0")
        let lanes = try #require(section.laneGuidances.first?.lanes)
        #expect(lanes.map(\.status) == [.notGood, .preferred] && lanes[0].anglesDeg == [-45])
        #expect(abs(lanes[1].highlightedAngleDeg - 90) < 1e-9, "π/2 rad sent as 90 degrees: \(lanes[1].highlightedAngleDeg)")
        #expect(section.currentRoadNameVariants == ["Station Road", "Rd"] && section.maneuverState == .execute)
        #expect(session.currentLaneGuidance === many[0] && session.maneuverState == .execute)
    }
}
