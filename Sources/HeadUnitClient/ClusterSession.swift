import HeadUnitWire
import NIOCore
import NIOPosix

/// The metadata state as a subscriber keeps it (PROTOCOL.md 19.5): a full
/// update replaces everything, a change replaces the sections it carries.
public struct MetadataModel: Sendable, Equatable {
    public private(set) var state = HUMetadataState()
    public private(set) var version: UInt64 = 0
    public private(set) var updates = 0

    public init() {}

    /// Applies an update; returns the names of the sections it replaced.
    @discardableResult
    public mutating func apply(_ update: HUMetadataUpdate) -> [String] {
        updates += 1
        version = update.version
        let s = update.state
        if update.full { state = s }
        var changed: [String] = []
        if s.hasGuidance { state.guidance = s.guidance; changed.append("guidance") }
        if s.hasManeuvers { state.maneuvers = s.maneuvers; changed.append("maneuvers") }
        if s.hasTripEstimates { state.tripEstimates = s.tripEstimates; changed.append("trip_estimates") }
        if s.hasAlert { state.alert = s.alert; changed.append("alert") }
        if s.hasNowPlaying { state.nowPlaying = s.nowPlaying; changed.append("now_playing") }
        if s.hasDisplay { state.display = s.display; changed.append("display") }
        if s.hasPreviews { state.previews = s.previews; changed.append("previews") }
        if s.hasCluster { state.cluster = s.cluster; changed.append("cluster") }
        if s.hasAudio { state.audio = s.audio; changed.append("audio") }
        if s.hasBanner { state.banner = s.banner; changed.append("banner") }
        return changed
    }
}

/// An instrument cluster or head-up display (Unix socket only): subscribes to
/// the metadata stream and sends cluster input to the navigation app.
public final class ClusterSession: Sendable {
    public let connection: HeadUnitConnection

    private init(connection: HeadUnitConnection) {
        self.connection = connection
    }

    public static func connect(
        to endpoint: HeadUnitEndpoint, name: String = "headunit-cluster",
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> ClusterSession {
        let configuration = HeadUnitConnection.Configuration(role: .cluster, name: name)
        let connection = try await HeadUnitConnection.connect(to: endpoint, configuration: configuration, group: group)
        return ClusterSession(connection: connection)
    }

    /// Asks for the stream: a full update follows, then changes (see `updates`).
    public func subscribe() async throws {
        try await connection.request(.subscribeMetadata(HUSubscribeMetadata()))
    }

    /// Zoom, compass or speed-limit settings for the navigation app's cluster scene.
    public func send(_ input: HUClusterInput) async throws {
        try await connection.request(.clusterInput(input))
    }

    /// Metadata updates in arrival order; other events are skipped.
    public var updates: AsyncCompactMapSequence<AsyncStream<HUEnvelope>, HUMetadataUpdate> {
        connection.events.compactMap { envelope in
            if case .metadataUpdate(let update) = envelope.body { return update }
            return nil
        }
    }

    public func close() async {
        await connection.close()
    }
}

/// The metadata stream as text, for `headunitctl cluster` and logs.
public enum MetadataText {
    public static func distance(_ meters: Double) -> String {
        meters >= 1000 ? String(format1: meters / 1000) + " km" : "\(Int(meters.rounded())) m"
    }

    public static func duration(_ seconds: UInt32) -> String {
        seconds >= 3600 ? "\(seconds / 3600) h \(seconds % 3600 / 60) min" : "\(seconds / 60) min"
    }

    static func clock(_ seconds: Double) -> String {
        let total = Int(max(0, seconds))
        let s = total % 60
        return "\(total / 60):\(s < 10 ? "0" : "")\(s)"
    }

    static func estimates(_ e: HUTravelEstimates) -> String {
        "\(distance(e.distanceRemainingM)), \(duration(e.timeRemainingS))"
    }

    static func name(_ value: some CustomStringConvertible) -> String { "\(value)" }

    public static func guidance(_ g: HUGuidanceSection) -> String {
        var line: String
        switch g.state {
        case .idle: line = "no guidance"
        case .active: line = "guiding"
        case .paused: line = "paused: \(g.pauseReason)" + (g.pauseDescription.isEmpty ? "" : " \"\(g.pauseDescription)\"")
        case .ended: line = "guidance ended: \(g.endReason)"
        case .UNRECOGNIZED(let raw): line = "guidance state \(raw)"
        }
        if !g.appID.isEmpty { line += " (\(g.appID))" }
        if g.state == .active || g.state == .paused {
            line += " to \(g.trip.destination.name.isEmpty ? g.trip.id : g.trip.destination.name) via \(g.routeChoiceID)"
        }
        if g.nativeNavigationActive { line += " [car navigation active]" }
        return line
    }

    public static func maneuvers(_ m: HUManeuversSection) -> [String] {
        if m.maneuvers.isEmpty { return ["no maneuvers"] }
        var lines = m.maneuvers.enumerated().map { index, maneuver in
            let lane = maneuver.displayStyle == .symbolOnly && maneuver.instructionVariants.isEmpty
            var line = (index == 0 ? "next: " : "then: ") + (lane ? "lane guidance" : (maneuver.instructionVariants.first ?? ""))
            if maneuver.hasEstimates { line += " in \(estimates(maneuver.estimates))" }
            if maneuver.maneuverType != .unspecified { line += " [\(maneuver.maneuverType)]" }
            if !maneuver.highwayExitLabel.isEmpty { line += " [exit \(maneuver.highwayExitLabel)]" }
            if maneuver.hasJunctionImage { line += " [junction image]" }
            return line
        }
        // The lanes (PROTOCOL.md 19.5), one line per guidance drawn.
        for guidance in m.laneGuidances {
            let current = guidance.id == m.currentLaneGuidanceID ? " (current)" : ""
            lines.append("lanes '\(guidance.id)'\(current): " + guidance.lanes.map(lane).joined(separator: " | ")
                + (guidance.instructionVariants.first.map { " \"\($0)\"" } ?? ""))
        }
        if let road = m.currentRoadNameVariants.first { lines.append("on: \(road)") }
        if m.maneuverState != .unspecified { lines.append("maneuver state: \(m.maneuverState)") }
        return lines
    }

    /// A lane as text: its status, then its directions (degrees, the highlighted one marked `*`).
    public static func lane(_ lane: HULane) -> String {
        let status: String
        switch lane.status {
        case .notGood: status = "not good"
        case .good: status = "good"
        case .preferred: status = "preferred"
        case .unspecified, .UNRECOGNIZED: status = "?"
        }
        let angles = (lane.hasHighlightedAngleDeg ? ["\(Int(lane.highlightedAngleDeg.rounded()))*"] : [])
            + lane.anglesDeg.map { "\(Int($0.rounded()))" }
        return ([status] + angles).joined(separator: " ")
    }

    /// The lines for the sections `changed` of `state` (every section when nil).
    public static func render(_ state: HUMetadataState, changed: [String]? = nil) -> [String] {
        let all = changed == nil
        func wants(_ section: String) -> Bool { all || changed!.contains(section) }
        var lines: [String] = []
        if wants("guidance") { lines.append(guidance(state.guidance)) }
        if wants("maneuvers") { lines += maneuvers(state.maneuvers) }
        if wants("trip_estimates") {
            lines.append(state.tripEstimates.present ? "trip: \(estimates(state.tripEstimates.estimates)) to go" : "trip: no estimates")
        }
        if wants("alert") {
            if state.alert.hasAlert {
                let alert = state.alert.alert
                var line = "alert: \(alert.titleVariants.first ?? alert.id)"
                if let subtitle = alert.subtitleVariants.first { line += " - \(subtitle)" }
                if !alert.actions.isEmpty { line += " [" + alert.actions.map(\.title).joined(separator: "] [") + "]" }
                if alert.durationMs > 0 { line += " (\(alert.durationMs / 1000) s)" }
                lines.append(line)
            } else {
                lines.append("alert: none")
            }
        }
        // The navigation banner (PROTOCOL.md 19.9): a full render names it only while one is shown.
        if wants("banner"), !all || !state.banner.appID.isEmpty {
            let banner = state.banner
            if banner.appID.isEmpty {
                lines.append("banner: none")
            } else {
                var line = "banner \(banner.bannerID) (\(banner.appID)): \(banner.instructionVariants.first ?? "")"
                if let subtitle = banner.subtitleVariants.first { line += " - \(subtitle)" }
                if banner.hasEstimates { line += " in \(estimates(banner.estimates))" }
                lines.append(line)
            }
        }
        if wants("now_playing") {
            let np = state.nowPlaying
            if np.appID.isEmpty {
                lines.append("now playing: nothing")
            } else {
                let time = np.live ? "live" : "\(clock(np.elapsedSeconds))/\(clock(np.durationSeconds))"
                let parts = [np.title, np.artist, np.album].filter { !$0.isEmpty }.joined(separator: " - ")
                lines.append("now playing (\(np.appID)): \(parts) \(time) \(np.playbackRate > 0 ? "playing" : "paused")")
            }
        }
        if wants("display") { lines.append("content style: \(state.display.contentStyle == .light ? "light" : "dark")") }
        if wants("previews") {
            let p = state.previews
            lines.append(p.hasPreviews
                ? "previews (\(p.appID)): \(p.previews.trips.map(\.id).joined(separator: ", ")); looking at \(p.previewedTripID) via \(p.previewedRouteChoiceID)"
                : "previews: none")
        }
        if wants("cluster") {
            let c = state.cluster
            var line = c.appID.isEmpty ? "cluster: no app" : "cluster: \(c.appID)"
            if let text = c.inactiveDescriptionVariants.first { line += " \"\(text)\"" }
            if c.panning { line += " [panning]" }
            if !c.dashboardButtons.isEmpty { line += "; dashboard buttons " + c.dashboardButtons.map(\.id).joined(separator: ", ") }
            lines.append(line)
        }
        if wants("audio") {
            let a = state.audio
            var line: String
            switch a.mainOwner {
            case .car: line = "audio: car source \(a.carSource)"
            case .phone: line = "audio: \(a.appID)\(a.mainSpoken ? " (spoken)" : "")"
            case .none, .UNRECOGNIZED: line = "audio: nothing"
            }
            if !a.promptAppID.isEmpty { line += "; prompt from \(a.promptAppID)" + (a.mainPaused ? ", main paused" : a.mainDucked ? ", main ducked" : "") }
            line += "; prompt style \(a.promptStyle)"
            if a.callActive { line += "; call" }
            if a.voiceSessionActive { line += "; voice session" }
            if !a.voiceAppID.isEmpty { line += "; voice control by \(a.voiceAppID)" }
            if !a.microphoneAppID.isEmpty { line += "; MICROPHONE to \(a.microphoneAppID) (\(a.microphonePurpose))" }
            lines.append(line)
        }
        return lines
    }
}

extension String {
    /// One decimal, without Foundation (`String(format:)` is Foundation's,
    /// and it links Foundation and ICU's data, 34 MiB, into the package).
    public init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths < 0 ? "-" : "")\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }
}
