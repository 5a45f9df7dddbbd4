import Foundation
import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// Section 22 with section 10.4's bounds: the largest snapshot a daemon can
/// write is known (`SnapshotBounds.maximumBytes`), and the next process reads
/// up to it. A worst case built from the limits (every app announced with an
/// icon of the largest size, stacks of the largest lists until the phone's
/// templates reach `max_phone_template_bytes`, a modal, every connection with
/// a long name and a frame and a read's worth of unparsed input) must encode
/// to at most that bound.
@Suite struct SnapshotBoundsTests {
    static let frame = 64 << 10
    static let templateBytes = 512 << 10
    static let maxApps = 4
    static let maxImage = 16 << 10
    static let maxConnections = 12
    static let maxString = 1024

    /// A list that fills most of a frame: `items` items of ~900 bytes.
    static func largeList(_ id: String, items: Int = 60) -> HUTemplate {
        HUTemplate.with {
            $0.id = id
            $0.list = HUListTemplate.with { list in
                list.title = String(repeating: "t", count: 500)
                list.sections = [HUListSection.with { section in
                    section.id = "s"
                    section.items = (0..<items).map { index in
                        HUListItem.with { $0.id = "\(id)-\(index)"; $0.general = HUGeneralItem.with { $0.text = String(repeating: "x", count: 900) } }
                    }
                }]
            }
        }
    }

    static func icon(seed: Int) -> HUImage {
        var bytes = Fixture.pngBytes(width: 120, height: 120)
        var filler = UInt32(truncatingIfNeeded: seed &* 2_654_435_761)
        while bytes.count < maxImage {
            filler = filler &* 1_664_525 &+ 1_013_904_223
            bytes.append(UInt8(filler >> 24))
        }
        return HUImage.with { $0.png = Data(bytes) }
    }

    @Test func aWorstCaseSnapshotEncodesWithinTheBound() throws {
        var h = CarHarness()
        var configuration = h.car.configuration
        configuration.composed = ComposedLimits(maxFrameBytes: Self.frame, maxPhoneTemplateBytes: Self.templateBytes)
        configuration.maxApps = Self.maxApps
        h.car = Car(configuration: configuration)
        let name = String(repeating: "n", count: Self.maxString)
        h.apply(h.car.peerJoined(h.phone, info: PeerInfo(role: .phone, name: name, transport: .unix, resumptionToken: String(repeating: "r", count: 64))))
        h.apply(h.car.peerJoined(h.hmi, info: PeerInfo(role: .hmi, name: name, transport: .unix)))
        for peer in 3...PeerID(Self.maxConnections) {
            h.apply(h.car.peerJoined(peer, info: PeerInfo(role: .hmi, name: name, transport: .unix)))
        }
        let apps = (0..<Self.maxApps).map { String(format: "com.example.app%02d", $0) + String(repeating: "a", count: 200) }
        let announced = h.request(h.phone, .announceApps(HUAnnounceApps.with {
            $0.deviceName = name
            $0.apps = apps.enumerated().map { index, id in
                HUAppInfo.with { $0.appID = id; $0.displayName = String(repeating: "d", count: 200); $0.entitlements = [EntitlementKey.audio]; $0.icon = Self.icon(seed: index) }
            }
        }))
        #expect(announced.code == .ok, "\(announced.message)")
        #expect(announced.appDecisions.decisions.allSatisfy { $0.accepted }, "\(announced.appDecisions)")

        // Stacks of the largest lists, app after app, until the phone's templates are full.
        var accepted = 0
        var refusal: HUResult?
        var scenes: [String: UInt32] = [:]
        fill: for app in apps {
            let scene = h.launch(app)
            scenes[app] = scene
            for depth in 0..<5 {
                let list = Self.largeList("\(app.prefix(18))-\(depth)")
                let result = h.template(app, scene, depth == 0 ? .setRoot(list) : .push(list))
                if result.code == .ok {
                    accepted += 1
                } else {
                    refusal = result
                    break fill
                }
            }
        }
        #expect(refusal?.code == .messageTooLarge && refusal?.limit == "max_phone_template_bytes", "\(String(describing: refusal))")
        let alert = HUTemplate.with {
            $0.id = "alert"
            $0.alert = HUAlertTemplate.with { alert in
                alert.titleVariants = [String(repeating: "a", count: 900)]
                alert.actions = [HUTextButton.with { $0.id = "ok"; $0.title = "OK" }]
            }
        }
        #expect(h.template(apps[0], scenes[apps[0]]!, .present(alert)).code == .ok)
        #expect(h.car.phoneTemplateBytes > Self.templateBytes - Self.frame, "\(h.car.phoneTemplateBytes) of \(Self.templateBytes)")

        // The daemon's snapshot: the Car, and per connection its state with the most unparsed input.
        var snapshot = HUDaemonSnapshot()
        snapshot.format = CarSnapshotFormat.current
        snapshot.car = h.car.snapshot()
        snapshot.nextPeerID = UInt64(Self.maxConnections + 1)
        snapshot.connections = (1...Self.maxConnections).map { peer in
            HUConnectionSnapshot.with {
                $0.peerID = UInt64(peer)
                $0.transport = "unix"
                $0.version = 1
                // Not a whole frame yet: at most a frame's header and payload less a byte, plus one read.
                $0.pendingInput = Data(repeating: 0x55, count: Self.frame + 11 + SnapshotBounds.readBytes)
            }
        }
        let bytes: [UInt8] = try snapshot.serializedBytes()
        let bound = SnapshotBounds.maximumBytes(
            composed: configuration.composed, maxConnections: Self.maxConnections, iconBytes: Self.maxApps * Self.maxImage)
        #expect(bytes.count <= bound, "a worst-case snapshot of \(bytes.count) bytes, over the bound of \(bound)")
        // And it is a worst case: most of the bound is used by what the limits allow.
        #expect(bytes.count > Self.templateBytes + Self.maxApps * Self.maxImage, "\(bytes.count) bytes, \(accepted) lists")
    }
}
