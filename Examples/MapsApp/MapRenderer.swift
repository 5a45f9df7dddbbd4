// The MapsApp's map: a small bundled road network drawn with cairo into the
// BGRA pixels of each CarPlayKit window (main, dashboard, cluster), the route
// highlighted and the car on it, in day and night styles.
import CCairo
import CarPlayKit
import Foundation

/// A point in the map's plane: meters east and north of the town centre.
struct MapPoint: Sendable, Equatable {
    var x: Double
    var y: Double
    init(_ x: Double, _ y: Double) {
        self.x = x
        self.y = y
    }
}

/// The bundled road network: a few dozen roads of a made-up town, a river and parks.
enum Town {
    enum RoadClass { case motorway, primary, street }
    struct Road { var name: String; var kind: RoadClass; var points: [MapPoint] }

    static let roads: [Road] = {
        var roads: [Road] = [
            Road(name: "A1", kind: .motorway, points: [MapPoint(-3800, -2600), MapPoint(-2200, -1500), MapPoint(-800, -900), MapPoint(600, -300),
                                                       MapPoint(1600, 500), MapPoint(2600, 1500), MapPoint(3900, 2700)]),
            Road(name: "Ring Road", kind: .primary, points: [MapPoint(-1600, 0), MapPoint(-1100, 1100), MapPoint(0, 1600), MapPoint(1100, 1100),
                                                             MapPoint(1600, 0), MapPoint(1100, -1100), MapPoint(0, -1600), MapPoint(-1100, -1100), MapPoint(-1600, 0)]),
            Road(name: "Mill Road", kind: .primary, points: [MapPoint(-3800, -1200), MapPoint(-2000, -1200), MapPoint(-1300, -1050)]),
            Road(name: "Main Street", kind: .primary, points: [MapPoint(1600, 500), MapPoint(1900, 1000), MapPoint(2100, 1400), MapPoint(2400, 1400),
                                                               MapPoint(3800, 1400)]),
            Road(name: "High Street", kind: .primary, points: [MapPoint(-3800, 200), MapPoint(-1600, 0), MapPoint(0, 80), MapPoint(1600, 0),
                                                               MapPoint(3800, -200)]),
            Road(name: "North Avenue", kind: .primary, points: [MapPoint(0, -2800), MapPoint(0, -1600), MapPoint(40, 0), MapPoint(0, 1600),
                                                                MapPoint(-100, 2800)]),
            Road(name: "Harbour Road", kind: .primary, points: [MapPoint(-3800, 2300), MapPoint(-1500, 2100), MapPoint(0, 2300), MapPoint(2000, 2500)]),
        ]
        // The streets: a grid, slightly bent, as old towns are.
        for (index, x) in stride(from: -3400.0, through: 3400, by: 400).enumerated() where abs(x) > 100 {
            let bend = index % 3 == 0 ? 60.0 : -40.0
            roads.append(Road(name: "\(index + 1)th Street", kind: .street,
                              points: [MapPoint(x, -2800), MapPoint(x + bend, -900), MapPoint(x - bend, 900), MapPoint(x, 2800)]))
        }
        for (index, y) in stride(from: -2400.0, through: 2400, by: 480).enumerated() {
            roads.append(Road(name: "Lane \(index + 1)", kind: .street, points: [MapPoint(-3800, y), MapPoint(0, y + 50), MapPoint(3800, y)]))
        }
        return roads
    }()

    static let river: [MapPoint] = [MapPoint(-4000, 1500), MapPoint(-2500, 1300), MapPoint(-1200, 1900), MapPoint(300, 1850),
                                    MapPoint(1500, 2100), MapPoint(2800, 1900), MapPoint(4000, 2100)]
    static let parks: [[MapPoint]] = [
        [MapPoint(-900, -700), MapPoint(-300, -700), MapPoint(-300, -250), MapPoint(-900, -250)],
        [MapPoint(2300, -1700), MapPoint(3300, -1800), MapPoint(3400, -900), MapPoint(2400, -1000)],
        [MapPoint(-2800, 500), MapPoint(-2100, 450), MapPoint(-2200, 1000), MapPoint(-2900, 1000)],
    ]

    /// Office to Home: Mill Road, the A1 north-east, then Main Street.
    static let route: [MapPoint] = [MapPoint(-2000, -1200), MapPoint(-1300, -1050), MapPoint(-800, -900), MapPoint(600, -300),
                                    MapPoint(1600, 500), MapPoint(1900, 1000), MapPoint(2100, 1400), MapPoint(2400, 1400)]

    static let routeLength: Double = zip(route, route.dropFirst()).reduce(0) { $0 + hypot($1.1.x - $1.0.x, $1.1.y - $1.0.y) }

    /// The point `distance` meters along the route, and the heading there (radians, counter-clockwise from east).
    static func along(_ distance: Double) -> (MapPoint, Double) {
        var left = max(0, distance)
        for (a, b) in zip(route, route.dropFirst()) {
            let length = hypot(b.x - a.x, b.y - a.y)
            let heading = atan2(b.y - a.y, b.x - a.x)
            if left <= length {
                let t = left / length
                return (MapPoint(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t), heading)
            }
            left -= length
        }
        let a = route[route.count - 2], b = route[route.count - 1]
        return (b, atan2(b.y - a.y, b.x - a.x))
    }
}

/// What every window of the app shows: where the car is, where the driver
/// panned, each window's zoom. Lives on the main actor with the windows.
@MainActor
final class MapModel {
    /// Meters driven along the route.
    private var driven: Double = 0
    private var drivingSince: ContinuousClock.Instant?
    /// Meters a second while guiding (a fast demo).
    let speed = 40.0
    /// The driver's pan, from the car (meters).
    var panOffset = MapPoint(0, 0)
    /// Meters per pixel of the main window, dashboard and cluster.
    var mainZoom = 3.0
    var dashboardZoom = 4.0
    var clusterZoom = 1.2
    var showCompass = true

    var isDriving: Bool { drivingSince != nil }

    func startDriving() {
        guard drivingSince == nil else { return }
        drivingSince = .now
    }

    func stopDriving() {
        driven = distance
        drivingSince = nil
    }

    /// Meters along the route now.
    var distance: Double {
        guard let since = drivingSince else { return driven }
        let elapsed = ContinuousClock.now - since
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return (driven + seconds * speed).truncatingRemainder(dividingBy: Town.routeLength)  // loops: a demo never ends
    }

    /// A pan step: a quarter of the main window.
    func pan(_ direction: CPPanDirection, window: CPWindow) {
        let step = Double(min(window.pixelWidth, window.pixelHeight)) / 4 * mainZoom
        if direction.contains(.left) { panOffset.x -= step }
        if direction.contains(.right) { panOffset.x += step }
        if direction.contains(.up) { panOffset.y += step }
        if direction.contains(.down) { panOffset.y -= step }
    }
}

/// Draws one window's map with cairo. One per window; all share the model.
@MainActor
final class MapView: CPWindowContent {
    enum Kind: String { case main, dashboard, cluster }
    let kind: Kind
    let model: MapModel
    private var announced = false
    private var sent = (frames: 0, bytes: 0, milliseconds: 0.0)

    init(kind: Kind, model: MapModel) {
        self.kind = kind
        self.model = model
    }

    struct Palette {
        var background, park, water, street, streetCasing, primary, motorway, route, routeCasing, label: (Double, Double, Double)
        static let day = Palette(background: (0.949, 0.937, 0.914), park: (0.78, 0.92, 0.76), water: (0.667, 0.827, 0.875),
                                 street: (1, 1, 1), streetCasing: (0.80, 0.79, 0.77), primary: (0.99, 0.90, 0.62),
                                 motorway: (0.96, 0.64, 0.38), route: (0.10, 0.45, 0.91), routeCasing: (0.05, 0.25, 0.60),
                                 label: (0.25, 0.25, 0.28))
        static let night = Palette(background: (0.106, 0.137, 0.188), park: (0.12, 0.22, 0.17), water: (0.05, 0.16, 0.27),
                                   street: (0.24, 0.28, 0.34), streetCasing: (0.15, 0.18, 0.22), primary: (0.42, 0.40, 0.30),
                                   motorway: (0.55, 0.38, 0.22), route: (0.30, 0.64, 1.0), routeCasing: (0.08, 0.30, 0.62),
                                   label: (0.75, 0.78, 0.82))
    }

    func draw(_ pixels: CPPixelBuffer, in window: CPWindow) {
        guard let surface = cairo_image_surface_create_for_data(pixels.baseAddress.assumingMemoryBound(to: UInt8.self), CAIRO_FORMAT_ARGB32,
                                                                 Int32(pixels.width), Int32(pixels.height), Int32(pixels.bytesPerRow)),
              let cr = cairo_create(surface) else { return }
        defer {
            cairo_destroy(cr)
            cairo_surface_finish(surface)
            cairo_surface_destroy(surface)
        }
        let palette = window.contentStyle == .dark ? Palette.night : Palette.day
        let scale = Double(window.scale)
        let (car, heading) = Town.along(model.distance)
        let metersPerPixel: Double
        switch kind {
        case .main: metersPerPixel = model.mainZoom
        case .dashboard: metersPerPixel = model.dashboardZoom
        case .cluster: metersPerPixel = model.clusterZoom
        }
        // The car sits in the middle of the safe area (the part the car's controls leave free).
        let insets = window.safeAreaInsets
        let focusX = (Double(insets.left) + (Double(window.width) - Double(insets.left) - Double(insets.right)) / 2) * scale
        let focusY = (Double(insets.top) + (Double(window.height) - Double(insets.top) - Double(insets.bottom)) / 2) * scale
        let pan = kind == .main ? model.panOffset : MapPoint(0, 0)
        let center = MapPoint(car.x + pan.x, car.y + pan.y)

        func setColor(_ color: (Double, Double, Double)) { cairo_set_source_rgb(cr, color.0, color.1, color.2) }
        func path(_ points: [MapPoint], closed: Bool = false) {
            cairo_new_path(cr)
            for (index, point) in points.enumerated() {
                let x = focusX + (point.x - center.x) / metersPerPixel, y = focusY - (point.y - center.y) / metersPerPixel
                if index == 0 { cairo_move_to(cr, x, y) } else { cairo_line_to(cr, x, y) }
            }
            if closed { cairo_close_path(cr) }
        }
        func stroke(_ points: [MapPoint], width: Double, _ color: (Double, Double, Double)) {
            path(points)
            cairo_set_line_width(cr, width * scale)
            setColor(color)
            cairo_stroke(cr)
        }

        setColor(palette.background)
        cairo_paint(cr)
        cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND)
        cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND)
        for park in Town.parks {
            path(park, closed: true)
            setColor(palette.park)
            cairo_fill(cr)
        }
        stroke(Town.river, width: 90 / metersPerPixel + 4, palette.water)
        // Casings first, then fills, so crossings join cleanly; streets under primaries under the motorway.
        let zoomed = 3 / metersPerPixel  // roads widen as the map zooms in
        let layers: [(Town.RoadClass, Double, (Double, Double, Double))] = [
            (.street, 4 + zoomed, palette.street), (.primary, 7 + zoomed, palette.primary), (.motorway, 10 + zoomed, palette.motorway),
        ]
        for (kind, width, fill) in layers {
            let roads = Town.roads.filter { $0.kind == kind }
            for road in roads { stroke(road.points, width: width + 2, palette.streetCasing) }
            for road in roads { stroke(road.points, width: width, fill) }
        }
        // The route, above the roads.
        stroke(Town.route, width: 14 + zoomed, palette.routeCasing)
        stroke(Town.route, width: 10 + zoomed, palette.route)
        // Names of the main roads (not on the cluster: the driver glances at it).
        if kind != .cluster {
            cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
            cairo_set_font_size(cr, 13 * scale)
            setColor(palette.label)
            for road in Town.roads where road.kind != .street {
                let point = road.points[road.points.count / 2]
                cairo_move_to(cr, focusX + (point.x - center.x) / metersPerPixel + 8 * scale, focusY - (point.y - center.y) / metersPerPixel - 8 * scale)
                cairo_show_text(cr, road.name)
            }
        }
        // The car: a white disc with an arrow along the road.
        let carX = focusX + (car.x - center.x) / metersPerPixel, carY = focusY - (car.y - center.y) / metersPerPixel
        cairo_new_path(cr)
        cairo_arc(cr, carX, carY, 16 * scale, 0, 2 * .pi)
        cairo_set_source_rgb(cr, 1, 1, 1)
        cairo_fill_preserve(cr)
        setColor(palette.routeCasing)
        cairo_set_line_width(cr, 2 * scale)
        cairo_stroke(cr)
        cairo_save(cr)
        cairo_translate(cr, carX, carY)
        cairo_rotate(cr, -heading)  // screen y points down
        cairo_new_path(cr)
        cairo_move_to(cr, 11 * scale, 0)
        cairo_line_to(cr, -8 * scale, 8 * scale)
        cairo_line_to(cr, -4 * scale, 0)
        cairo_line_to(cr, -8 * scale, -8 * scale)
        cairo_close_path(cr)
        cairo_set_source_rgb(cr, 0.85, 0.20, 0.15)
        cairo_fill(cr)
        cairo_restore(cr)
        // The cluster's compass, when the driver wants it.
        if kind == .cluster && model.showCompass {
            let x = Double(pixels.width) - Double(insets.right) * scale - 36 * scale, y = Double(insets.top) * scale + 36 * scale
            cairo_new_path(cr)
            cairo_arc(cr, x, y, 22 * scale, 0, 2 * .pi)
            setColor(palette.background)
            cairo_fill_preserve(cr)
            setColor(palette.label)
            cairo_set_line_width(cr, 2 * scale)
            cairo_stroke(cr)
            cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
            cairo_set_font_size(cr, 18 * scale)
            cairo_move_to(cr, x - 6 * scale, y + 6 * scale)
            cairo_show_text(cr, "N")
        }
        cairo_surface_flush(surface)
    }

    func window(_ window: CPWindow, didSend frame: CPWindow.SentFrame) {
        sent.frames += 1
        sent.bytes += frame.bytes
        sent.milliseconds += frame.encodeMilliseconds
        if sent.frames % 30 == 0 {
            let statistics = window.statistics
            log("video: \(kind.rawValue) \(sent.frames) frames sent (\(statistics.skipped) skipped, \(statistics.keyframes) keyframes), "
                + "average \(sent.bytes / sent.frames) bytes, encoded in \(String(format: "%.1f", sent.milliseconds / Double(sent.frames))) ms")
        }
        guard !announced else { return }
        announced = true
        // The simulator's tests wait for this line (keep its shape).
        log("video: streaming \(kind.rawValue) \(window.pixelWidth)x\(window.pixelHeight) (first frame \(frame.bytes) bytes, encoded in \(String(format: "%.1f", frame.encodeMilliseconds)) ms)")
    }
}
