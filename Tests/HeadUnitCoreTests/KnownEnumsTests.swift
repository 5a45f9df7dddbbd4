import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// The limits' walk (`MessageLimits.checkAll`) finds the same unknown enum
/// value as the car's own walk (`KnownEnums.firstUnknown`), with the same
/// field path, so the connection can hand it to the car instead of the car
/// walking the request again (issue 30). The fuzz target checks the same on
/// every message it delivers.
@Suite struct KnownEnumsTests {
    func push(accessories: [HUAccessoryType]) -> HUEnvelope {
        let items = accessories.enumerated().map { index, accessory in
            HUListItem.with {
                $0.id = "item-\(index)"
                $0.general = HUGeneralItem.with { $0.text = "Item \(index)"; $0.accessory = accessory }
            }
        }
        return HUEnvelope.with {
            $0.requestID = 7
            $0.templateRequest = HUTemplateRequest.with {
                $0.appID = "app"
                $0.push = HUTemplate.with {
                    $0.id = "list"
                    $0.list = HUListTemplate.with { $0.sections = [HUListSection.with { $0.items = items }] }
                }
            }
        }
    }

    @Test func theLimitsWalkFindsWhatTheCarsWalkFinds() {
        let limits = MessageLimits()
        for envelope in [
            push(accessories: [.none, .none]),
            push(accessories: [.none, .UNRECOGNIZED(77), .UNRECOGNIZED(78)]),
            HUEnvelope.with { $0.setVehicleState = HUSetVehicleState.with { $0.state.contentStyle = .UNRECOGNIZED(9) } },
        ] {
            let checked = limits.checkAll(envelope)
            #expect(checked.violation == nil)
            #expect(checked.unknownEnum == .found(KnownEnums.firstUnknown(in: envelope)))
        }
        // The first of two, named by field numbers only (no element index).
        guard case .found(let unknown?) = limits.checkAll(push(accessories: [.none, .UNRECOGNIZED(77), .UNRECOGNIZED(78)])).unknownEnum else {
            Issue.record("no unknown value found")
            return
        }
        #expect(unknown.value == 77 && unknown.typeName == "AccessoryType" && unknown.fieldPath.hasSuffix(".4") && !unknown.fieldPath.contains("["))
    }

    @Test func aBrokenLimitLeavesTheEnumsToTheCar() {
        let tight = MessageLimits(maxStringBytes: 3)
        let checked = tight.checkAll(push(accessories: [.UNRECOGNIZED(77)]))
        #expect(checked.violation?.limit == "max_string_bytes")
        #expect(checked.unknownEnum == .notYet)
    }
}
