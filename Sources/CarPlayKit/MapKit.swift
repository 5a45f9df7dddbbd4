import Foundation
import HeadUnitWire

// The Core Location and MapKit types CarPlay's navigation and point-of-interest
// templates take, in Apple's shapes, so `MKMapItem(placemark:)` with its name
// set afterwards and `MKCoordinateRegion(center:latitudinalMeters:longitudinalMeters:)`
// port unchanged. The wire carries a place's name, latitude and longitude and a
// region's center and span; nothing here looks anything up.

/// Degrees of latitude or longitude (`CLLocationDegrees`).
public typealias CLLocationDegrees = Double
/// A distance in meters (`CLLocationDistance`).
public typealias CLLocationDistance = Double

/// A latitude and longitude (`CLLocationCoordinate2D`).
public struct CLLocationCoordinate2D: Sendable, Equatable {
    /// Degrees north.
    public var latitude: CLLocationDegrees
    /// Degrees east.
    public var longitude: CLLocationDegrees
    /// 0, 0, as Apple's `init()`.
    public init() {
        self.init(latitude: 0, longitude: 0)
    }
    /// A coordinate.
    public init(latitude: CLLocationDegrees, longitude: CLLocationDegrees) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// A place on the map (`MKPlacemark`): here only its coordinate.
public final class MKPlacemark: Sendable {
    /// Where it is.
    public let coordinate: CLLocationCoordinate2D
    /// A placemark at `coordinate`.
    public init(coordinate: CLLocationCoordinate2D) {
        self.coordinate = coordinate
    }
}

/// A named place (`MKMapItem`), the origin and destination of a `CPTrip` and
/// the location of a `CPPointOfInterest`. A reference type as Apple's is: the
/// name may be set after the item is made, until the template is sent.
@MainActor
public final class MKMapItem {
    /// The place's name, shown by the car.
    public var name: String?
    /// Where it is.
    public let placemark: MKPlacemark
    /// Whether this is the phone's current location (`forCurrentLocation()`).
    public let isCurrentLocation: Bool

    /// An item at a placemark.
    public init(placemark: MKPlacemark) {
        self.placemark = placemark
        self.isCurrentLocation = false
    }

    private init(currentLocation: Void) {
        self.placemark = MKPlacemark(coordinate: CLLocationCoordinate2D())
        self.isCurrentLocation = true
    }

    /// The phone's location. The car knows no location of the phone, so it is
    /// sent as an unnamed place at 0, 0 unless you give it a name.
    public static func forCurrentLocation() -> MKMapItem {
        MKMapItem(currentLocation: ())
    }

    var wire: HUPlace {
        var place = HUPlace()
        place.name = name ?? ""
        place.latitude = placemark.coordinate.latitude
        place.longitude = placemark.coordinate.longitude
        return place
    }
}

/// A region's height and width in degrees (`MKCoordinateSpan`).
public struct MKCoordinateSpan: Sendable, Equatable {
    /// Its height in degrees of latitude.
    public var latitudeDelta: CLLocationDegrees
    /// Its width in degrees of longitude.
    public var longitudeDelta: CLLocationDegrees
    /// An empty span.
    public init() {
        self.init(latitudeDelta: 0, longitudeDelta: 0)
    }
    /// A span.
    public init(latitudeDelta: CLLocationDegrees, longitudeDelta: CLLocationDegrees) {
        self.latitudeDelta = latitudeDelta
        self.longitudeDelta = longitudeDelta
    }
}

/// The region a map shows (`MKCoordinateRegion`), as the car reports it to a
/// point-of-interest template's delegate.
public struct MKCoordinateRegion: Sendable, Equatable {
    /// The region's center.
    public var center: CLLocationCoordinate2D
    /// Its height and width in degrees.
    public var span: MKCoordinateSpan

    /// An empty region at 0, 0.
    public init() {
        self.init(center: CLLocationCoordinate2D(), span: MKCoordinateSpan())
    }

    /// A region.
    public init(center: CLLocationCoordinate2D, span: MKCoordinateSpan) {
        self.center = center
        self.span = span
    }

    /// A region `latitudinalMeters` high and `longitudinalMeters` wide around
    /// `center`, on a spherical Earth (MapKit's own conversion is not published;
    /// this one is within a fraction of a percent of it away from the poles).
    public init(center: CLLocationCoordinate2D, latitudinalMeters: CLLocationDistance, longitudinalMeters: CLLocationDistance) {
        let metersPerDegree = 2 * Double.pi * 6_371_008.8 / 360  // mean Earth radius
        let cosine = max(cos(center.latitude * .pi / 180), 1e-6)
        self.init(center: center, span: MKCoordinateSpan(latitudeDelta: latitudinalMeters / metersPerDegree,
                                                         longitudeDelta: longitudinalMeters / (metersPerDegree * cosine)))
    }

    init(_ region: HUMapRegion) {
        self.init(center: CLLocationCoordinate2D(latitude: region.centerLatitude, longitude: region.centerLongitude),
                  span: MKCoordinateSpan(latitudeDelta: region.spanLatitude, longitudeDelta: region.spanLongitude))
    }
}
