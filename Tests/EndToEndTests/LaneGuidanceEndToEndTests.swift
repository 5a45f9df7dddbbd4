import Foundation
import HeadUnitClient
import HeadUnitWire
import TestSupport
import Testing

/// Lane guidance, the maneuver fields of iOS 17.4, the road name and the
/// maneuver state over real sockets (PROTOCOL.md 16.13, 19.2, 19.5): the
/// cluster and the HMI draw what the app sent, and every refusal of section
/// 16.13's order comes back with its code and limit.
@Suite("Lane guidance over real sockets", .serialized)
struct LaneGuidanceEndToEndTests {
    static func lane(_ status: HULaneStatus, _ highlighted: Double?, _ angles: [Double] = []) -> HULane {
        HULane.with {
            $0.status = status
            if let highlighted { $0.highlightedAngleDeg = highlighted }
            $0.anglesDeg = angles
        }
    }

    static func guidance(_ id: String) -> HULaneGuidance {
        HULaneGuidance.with {
            $0.id = id
            $0.lanes = [lane(.notGood, nil, [-90]), lane(.preferred, 0, [90]), lane(.good, 90)]
            $0.instructionVariants = ["Use the two right lanes", "Right lanes"]
        }
    }

    static func add(_ guidances: [HULaneGuidance]) -> HUEnvelope.OneOf_Body {
        NavWire.nav(.addLaneGuidances(HULaneGuidances.with { $0.laneGuidances = guidances }))
    }

    static func current(_ id: String) -> HUEnvelope.OneOf_Body {
        NavWire.nav(.setCurrentLaneGuidance(HUCurrentLaneGuidance.with { $0.laneGuidanceID = id }))
    }

    @Test func theClusterAndTheHMIReceiveTheLanesRoadAndManeuverState() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("work") })), on: rig.phone)
            try rig.ok(Self.add([Self.guidance("g1"), Self.guidance("g2")]), on: rig.phone)
            var turn = NavWire.maneuver("m1", "Turn right onto Main Street", junction: true)
            turn.maneuverType = .rightTurn
            turn.junctionType = .intersection
            turn.trafficSide = .right
            turn.junctionExitAngleDeg = 90
            turn.junctionElementAnglesDeg = [0, -90, 180]
            turn.highwayExitLabel = "Exit 12"
            turn.linkedLaneGuidanceID = "g1"
            turn.notificationInstructionVariants = ["Turn right onto Main Street"]
            turn.dashboardSymbol = NavWire.asset("turn-dashboard", 100, 100)
            try rig.ok(NavWire.maneuvers([turn]), on: rig.phone)
            try rig.ok(Self.current("g2"), on: rig.phone)
            try rig.ok(NavWire.nav(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = ["Station Road", "Station Rd"] })), on: rig.phone)
            try rig.ok(NavWire.nav(.setManeuverState(HUCurrentManeuverState.with { $0.state = .prepare })), on: rig.phone)
            rig.settle()
            for model in [rig.clusterModel, rig.hmiModel] {
                let section = model.state.maneuvers
                #expect(section.laneGuidances.map(\.id) == ["g2", "g1"])
                #expect(section.laneGuidances.first?.lanes.map(\.status) == [.notGood, .preferred, .good])
                #expect(section.currentLaneGuidanceID == "g2")
                #expect(section.currentRoadNameVariants == ["Station Road", "Station Rd"])
                #expect(section.maneuverState == .prepare)
                #expect(section.maneuvers.first == turn)
            }
            // `headunitctl cluster` prints them.
            let text = HeadUnitClient.MetadataText.maneuvers(rig.clusterModel.state.maneuvers)
            #expect(text.contains("lanes 'g2' (current): not good -90 | preferred 0* 90 | good 90* \"Use the two right lanes\""), "\(text)")
            #expect(text.contains("on: Station Road") && text.contains("maneuver state: prepare"), "\(text)")
            #expect(text.first?.contains("[rightTurn] [exit Exit 12] [junction image]") == true, "\(text)")
            // Clearing the current guidance leaves the linked one.
            try rig.ok(Self.current(""), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.maneuvers.laneGuidances.map(\.id) == ["g1"])
            try rig.ok(NavWire.nav(.finish(HUFinishNavigation())), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.maneuvers == HUManeuversSection())
            #expect(rig.clusterModel.state == rig.hmiModel.state)
        }
    }

    /// Each refusal of PROTOCOL.md 16.13 for the new operations and fields,
    /// with its code and limit; none changes what the cluster sees.
    @Test func everyLaneGuidanceRefusalHasItsCodeAndLimit() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            func refused(
                _ body: HUEnvelope.OneOf_Body, _ code: HUErrorCode, limit: String = "", value: UInt32 = 0,
                sourceLocation: SourceLocation = #_sourceLocation
            ) throws {
                let result = try rig.phone.request(body)
                #expect(result.code == code, "\(result.message)", sourceLocation: sourceLocation)
                #expect(result.limit == limit && result.limitValue == value, "\(result.limit) \(result.limitValue)", sourceLocation: sourceLocation)
            }
            // Session errors first.
            try refused(Self.add([Self.guidance("g1")]), .navigationNotActive)
            try refused(Self.current(""), .navigationNotActive)
            try refused(NavWire.nav(.setCurrentRoadName(HUCurrentRoadName())), .navigationNotActive)
            try refused(NavWire.nav(.setManeuverState(HUCurrentManeuverState.with { $0.state = .initial })), .navigationNotActive)
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("work") })), on: rig.phone)
            rig.settle()
            let before = rig.clusterModel.state

            // add_lane_guidances: count, ids, then each guidance.
            try refused(Self.add([]), .invalidArgument, limit: "navigation.laneGuidances", value: 1)
            try refused(Self.add((0...16).map { Self.guidance("g\($0)") }), .limitExceeded, limit: "navigation.laneGuidances", value: 16)
            try refused(Self.add([Self.guidance("g1"), Self.guidance("g1")]), .invalidArgument)
            try refused(Self.add([Self.guidance("")]), .invalidArgument)
            try refused(Self.add([Self.guidance(String(repeating: "g", count: 65))]), .limitExceeded, limit: "navigation.laneGuidance.id", value: 64)
            var broken = Self.guidance("g1")
            broken.lanes = []
            try refused(Self.add([broken]), .invalidArgument, limit: "navigation.laneGuidance.lanes", value: 1)
            broken.lanes = Array(repeating: Self.lane(.good, 0), count: 17)
            try refused(Self.add([broken]), .limitExceeded, limit: "navigation.laneGuidance.lanes", value: 16)
            broken = Self.guidance("g1")
            broken.instructionVariants = []
            try refused(Self.add([broken]), .invalidArgument, limit: "navigation.laneGuidance.instructionVariants", value: 1)
            broken.instructionVariants = Array(repeating: "Right", count: 17)
            try refused(Self.add([broken]), .limitExceeded, limit: "navigation.variants", value: 16)
            broken.instructionVariants = [String(repeating: "r", count: 257)]
            try refused(Self.add([broken]), .limitExceeded, limit: "navigation.variantScalars", value: 256)
            broken.instructionVariants = ["Right", "Right lanes"]
            try refused(Self.add([broken]), .invalidArgument)
            broken = Self.guidance("g1")
            broken.lanes[0].status = .unspecified
            try refused(Self.add([broken]), .invalidArgument)
            broken.lanes[0] = Self.lane(.notGood, nil, (0..<9).map { Double($0) })
            try refused(Self.add([broken]), .limitExceeded, limit: "navigation.lane.angles", value: 8)
            broken.lanes[0] = Self.lane(.good, 270)
            try refused(Self.add([broken]), .invalidArgument, limit: "navigation.angle", value: 180)
            broken.lanes[0] = Self.lane(.notGood, nil, [.nan])
            try refused(Self.add([broken]), .invalidArgument, limit: "navigation.angle", value: 180)
            broken.lanes[0] = Self.lane(.preferred, nil, [0])
            try refused(Self.add([broken]), .invalidArgument)
            broken.lanes[0] = Self.lane(.good, 45, [45])
            try refused(Self.add([broken]), .invalidArgument)

            // set_current_lane_guidance: only an added one.
            try refused(Self.current("g1"), .unknownItem)

            // The maneuver's newer fields, then its link.
            var maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.highwayExitLabel = String(repeating: "9", count: 65)
            try refused(NavWire.maneuvers([maneuver]), .limitExceeded, limit: "navigation.maneuver.highwayExitLabel", value: 64)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.junctionElementAnglesDeg = (0..<17).map { Double($0) }
            try refused(NavWire.maneuvers([maneuver]), .limitExceeded, limit: "navigation.maneuver.junctionElementAngles", value: 16)
            maneuver.junctionElementAnglesDeg = [0]
            maneuver.junctionExitAngleDeg = -181
            try refused(NavWire.maneuvers([maneuver]), .invalidArgument, limit: "navigation.angle", value: 180)
            maneuver.junctionExitAngleDeg = 0
            try refused(NavWire.maneuvers([maneuver]), .invalidArgument)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.notificationInstructionVariants = ["Right", "Turn right"]
            try refused(NavWire.maneuvers([maneuver]), .invalidArgument)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.roadFollowingVariants = [String(repeating: "r", count: 257)]
            try refused(NavWire.maneuvers([maneuver]), .limitExceeded, limit: "navigation.variantScalars", value: 256)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.dashboardJunctionImage = NavWire.asset("junction", 1000, 1000)
            try refused(NavWire.maneuvers([maneuver]), .imageTooLarge, limit: "image.junctionImage", value: 280)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.dashboardSymbol = NavWire.asset("turn", 1000, 1000)  // the rule its 100 px symbol follows: maneuverSymbol
            try refused(NavWire.maneuvers([maneuver]), .imageTooLarge, limit: "image.maneuverSymbol", value: 100)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.notificationSymbol = NavWire.asset("turn", 240, 100)
            try refused(NavWire.maneuvers([maneuver]), .imageTooLarge, limit: "image.maneuverSymbol", value: 100)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.junctionElementAnglesDeg = [0, .infinity]
            try refused(NavWire.maneuvers([maneuver]), .invalidArgument, limit: "navigation.angle", value: 180)
            maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.linkedLaneGuidanceID = "g1"
            try refused(NavWire.maneuvers([maneuver]), .unknownItem)

            // The session's road name and maneuver state.
            try refused(NavWire.nav(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = ["Rd", "Road"] })), .invalidArgument)
            try refused(
                NavWire.nav(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = [String(repeating: "r", count: 257)] })),
                .limitExceeded, limit: "navigation.variantScalars", value: 256)
            try refused(
                NavWire.nav(.setCurrentRoadName(HUCurrentRoadName.with { $0.variants = Array(repeating: "Rd", count: 17) })),
                .limitExceeded, limit: "navigation.variants", value: 16)
            try refused(NavWire.nav(.setManeuverState(HUCurrentManeuverState())), .invalidArgument)

            rig.settle()
            #expect(rig.clusterModel.state.maneuvers == before.maneuvers)

            // The car cancels guidance: the new operations get NAVIGATION_CANCELLED_BY_CAR.
            try rig.ok(.setVehicleState(HUSetVehicleState.with { $0.state.nativeNavigationActive = true }), on: rig.hmi)
            try refused(Self.add([Self.guidance("g1")]), .navigationCancelledByCar)
            try refused(NavWire.nav(.setManeuverState(HUCurrentManeuverState.with { $0.state = .execute })), .navigationCancelledByCar)
        }
    }

    /// The session keeps the 32 newest lane guidances, never the current one
    /// nor one an upcoming maneuver links: an older one can no longer be named.
    @Test func theSessionForgetsTheOldestLaneGuidancesNotInUse() async throws {
        try await onOwnThread {
            var rig = try NavRig.start()
            defer { rig.stop() }
            try rig.ok(NavWire.nav(.start(HUStartNavigation.with { $0.trip = NavWire.trip("work") })), on: rig.phone)
            try rig.ok(Self.add([Self.guidance("linked"), Self.guidance("current"), Self.guidance("old")]), on: rig.phone)
            var maneuver = NavWire.maneuver("m1", "Turn right")
            maneuver.linkedLaneGuidanceID = "linked"
            try rig.ok(NavWire.maneuvers([maneuver]), on: rig.phone)
            try rig.ok(Self.current("current"), on: rig.phone)
            for batch in 0..<2 {
                try rig.ok(Self.add((0..<16).map { Self.guidance("b\(batch)-\($0)") }), on: rig.phone)
            }
            // 35 added, 32 kept: "old", "b0-0" and "b0-1" went.
            #expect(try rig.phone.request(Self.current("old")).code == .unknownItem)
            #expect(try rig.phone.request(Self.current("b0-1")).code == .unknownItem)
            try rig.ok(Self.current("b0-2"), on: rig.phone)
            try rig.ok(Self.current("current"), on: rig.phone)
            rig.settle()
            #expect(rig.clusterModel.state.maneuvers.laneGuidances.map(\.id) == ["current", "linked"])
        }
    }
}
