import HeadUnitCore
import HeadUnitWire

/// The bounds mode of the structure-aware fuzzer (issue 24): instead of
/// mutating message bytes, each chunk of the input picks a request and how
/// close to its limits to build it (list items, string lengths, alert
/// actions, icon sizes, variants, trips), so valid requests that add up are
/// what the fuzzer explores. The session runs with a small frame maximum (64
/// KiB) and phone template budget (256 KiB) so sums are reached within a few
/// steps. After every step `SessionFuzz.checkBounds` holds: no frame the car
/// makes is over the maximum, the metadata snapshot fits, the phone's
/// templates stay within `max_phone_template_bytes`, and the HMI's model
/// (what it was sent, applied) equals the car's: no silent drop.
enum BoundsFuzz {
    static let frameLimit = 64 << 10
    static let maxString = 1024
    static let maxImage = 16 << 10

    static let prepared: SessionFuzz = {
        var fresh = SessionFuzz()
        var configuration = CarConfiguration(vehicle: .standard, entitlements: .acceptAll)
        configuration.composed = ComposedLimits(maxFrameBytes: frameLimit, maxPhoneTemplateBytes: 256 << 10)
        fresh.car = Car(configuration: configuration)
        var connection = ConnectionConfiguration()
        connection.limits.maxPayloadBytes = UInt32(frameLimit)
        connection.limits.message = MessageLimits(maxStringBytes: maxString, maxImageBytes: maxImage, maxElements: 2000)
        fresh.connectionConfiguration = connection
        fresh.frameLimit = frameLimit
        var session = SessionFuzz.joined(fresh)
        for frame in FuzzFamily.frames(FuzzFamily.preamble()) { session.step(frame) }
        return session
    }()

    /// A parameter byte scaled to 0...maximum (missing bytes: the maximum).
    static func scaled(_ parameters: [UInt8], _ index: Int, _ maximum: Int) -> Int {
        guard index < parameters.count else { return maximum }
        return Int(parameters[index]) * maximum / 255
    }

    static func text(_ length: Int, _ seed: Int) -> String {
        String(repeating: Character(UnicodeScalar(UInt8(97 + seed % 26))), count: max(1, length))
    }

    static func list(_ id: String, items: Int, textLength: Int) -> HUTemplate {
        HUTemplate.with { template in
            template.id = id
            template.list = HUListTemplate.with {
                $0.sections = [HUListSection.with { section in
                    section.id = "s"
                    section.items = (0..<max(1, items)).map { index in
                        HUListItem.with { $0.id = "i\(index)"; $0.general = HUGeneralItem.with { $0.text = text(textLength, index) } }
                    }
                }]
            }
        }
    }

    static func png(_ bytes: Int) -> HUImage {
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        let chunk: [UInt8] = Array("IHDR".utf8) + be(60) + be(60) + [8, 6, 0, 0, 0]
        png += be(13) + chunk + be(ImageRules.crc32(chunk))
        if bytes > png.count { png += [UInt8](repeating: 0, count: bytes - png.count) }
        return HUImage.with { $0.png = .init(png) }
    }

    static func variants(_ count: Int, _ length: Int) -> [String] {
        (0..<max(1, count)).map { text(length, $0) }
    }

    /// One request near its limits, chosen by `selector`, sized by `parameters`.
    static func body(selector: UInt8, parameters p: [UInt8]) -> HUEnvelope.OneOf_Body? {
        let app = FuzzFamily.appID
        let template = { (op: HUTemplateRequest.OneOf_Op) -> HUEnvelope.OneOf_Body in
            .templateRequest(HUTemplateRequest.with { $0.appID = app; $0.sceneID = 1; $0.op = op })
        }
        let navigation = { (op: HUNavigationRequest.OneOf_Op) -> HUEnvelope.OneOf_Body in
            .navigationRequest(HUNavigationRequest.with { $0.appID = FuzzFamily.navigationAppID; $0.op = op })
        }
        // Items x length within one frame: the fuzzer finds the sums.
        let items = 1 + scaled(p, 0, 120)
        let length = 1 + scaled(p, 1, maxString - 1)
        switch selector % 14 {
        case 0: return template(.setRoot(list("root", items: items, textLength: length)))
        case 1: return template(.push(list("p\(scaled(p, 2, 9))", items: items, textLength: length)))
        case 2:
            return template(.present(HUTemplate.with {
                $0.id = "alert"
                $0.alert = HUAlertTemplate.with { alert in
                    alert.titleVariants = variants(1 + scaled(p, 2, 15), length)
                    alert.actions = (0..<items).map { index in HUTextButton.with { $0.id = "a\(index)"; $0.title = text(length, index) } }
                }
            }))
        case 3: return template(.pop(HUPopTemplate()))
        case 4: return template(.dismiss(HUPopTemplate()))
        case 5: return template(.update(list("root", items: items, textLength: length)))
        case 6:
            return .announceApps(HUAnnounceApps.with { announce in
                announce.apps = (0..<(1 + scaled(p, 2, 3))).map { index in
                    HUAppInfo.with {
                        $0.appID = "com.example.icon\(scaled(p, 3, 60) + index)"
                        $0.displayName = text(length, index)
                        $0.entitlements = ["com.apple.developer.carplay-audio"]
                        $0.icon = png(scaled(p, 4, maxImage))
                    }
                }
            })
        case 7: return navigation(.start(HUStartNavigation.with { $0.trip = trip(p, length) }))
        case 8:
            return navigation(.updateManeuvers(HUManeuverUpdate.with {
                $0.maneuvers = (0..<(1 + scaled(p, 2, 1))).map { index in
                    HUManeuver.with {
                        $0.id = "m\(index)"
                        $0.instructionVariants = variants(1 + scaled(p, 3, 15), length)
                        $0.dashboardInstructionVariants = variants(1 + scaled(p, 4, 15), length)
                    }
                }
            }))
        case 9:
            return navigation(.showTripPreviews(HUTripPreviews.with { previews in
                previews.trips = (0..<(1 + scaled(p, 2, 11))).map { index in
                    var trip = trip(p, length)
                    trip.id = "t\(index)"
                    return trip
                }
            }))
        case 10:
            return navigation(.showAlert(HUNavigationAlert.with {
                $0.id = "nav-alert"
                $0.titleVariants = variants(1 + scaled(p, 2, 15), length)
                $0.subtitleVariants = variants(1 + scaled(p, 3, 15), length)
            }))
        case 11:
            return navigation(.setClusterDescriptions(HUClusterDescriptions.with { $0.inactiveDescriptionVariants = variants(1 + scaled(p, 2, 15), length) }))
        case 12:
            let driving = (p.first ?? 0) % 2 == 0
            return .setVehicleState(HUSetVehicleState.with { $0.state = HUVehicleState.with { $0.driving = driving } })
        default:
            return .launchApp(HULaunchApp.with { $0.appID = (p.first ?? 0) % 2 == 0 ? app : FuzzFamily.navigationAppID })
        }
    }

    static func trip(_ p: [UInt8], _ length: Int) -> HUTrip {
        HUTrip.with {
            $0.id = "trip"
            $0.routeChoices = (0..<(1 + scaled(p, 5, 2))).map { index in
                HURouteChoice.with {
                    $0.id = "r\(index)"
                    $0.summaryVariants = variants(1 + scaled(p, 6, 15), length)
                    $0.additionalInformationVariants = variants(scaled(p, 7, 16), length)
                }
            }
        }
    }
}
