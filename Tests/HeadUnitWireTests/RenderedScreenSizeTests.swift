import SwiftProtobuf
import Testing
@testable import HeadUnitWire

/// `RenderedScreenSize` must be swift-protobuf's size of the same screen,
/// for every value each field it counts can take.
@Suite struct RenderedScreenSizeTests {
    static func template(_ id: String, title: String = "") -> HUTemplate {
        var template = HUTemplate()
        template.id = id
        var list = HUListTemplate()
        list.title = title
        template.list = list
        return template
    }

    @Test func theSizeIsSwiftProtobufsForEveryValue() throws {
        let strings = ["", "a", "café 🚗", String(repeating: "x", count: 127), String(repeating: "y", count: 300)]
        let stacks: [[HUTemplate]] = [[], [Self.template("")], [Self.template("root"), Self.template(String(repeating: "z", count: 200))]]
        let numbers: [UInt32] = [0, 1, 127, 128, UInt32.max]
        let pendings: [HUPendingSelection?] = [nil, HUPendingSelection(), HUPendingSelection.with {
            $0.eventID = 300
            $0.templateID = "list"
            $0.itemID = "item"
        }]
        let presenteds: [HUTemplate?] = [nil, Self.template("alert", title: String(repeating: "t", count: 500))]
        var checked = 0
        for screen in HUScreen.allCases + [.UNRECOGNIZED(-1)] {
            for appID in strings {
                for sceneID in numbers {
                    for stack in stacks {
                        for presented in presenteds {
                            for pending in pendings {
                                for (items, style) in zip(numbers, HUContentStyle.allCases + [.UNRECOGNIZED(9)]) {
                                    for flags in [(false, false), (true, false), (false, true), (true, true)] {
                                        var rendered = HURenderedScreen()
                                        rendered.screen = screen
                                        rendered.appID = appID
                                        rendered.sceneID = sceneID
                                        rendered.stack = stack.map(\.id)
                                        if let top = stack.last { rendered.top = top }
                                        if let presented { rendered.presented = presented }
                                        if let pending { rendered.pending = pending }
                                        rendered.itemsShown = items
                                        rendered.itemsTotal = items / 2
                                        rendered.contentStyle = style
                                        (rendered.rightHandDrive, rendered.showNowPlayingButton) = flags
                                        let measured = RenderedScreenSize.of(
                                            screen: screen, appID: appID, sceneID: sceneID, stack: stack,
                                            top: stack.last.map { LinearEncoder.size(of: $0) },
                                            presented: presented.map { LinearEncoder.size(of: $0) }, pending: pending,
                                            itemsShown: items, itemsTotal: items / 2, contentStyle: style,
                                            rightHandDrive: flags.0, showNowPlayingButton: flags.1)
                                        let bytes: [UInt8] = try rendered.serializedBytes()
                                        #expect(measured == bytes.count, "\(rendered)")
                                        checked += 1
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(checked > 10_000)
    }
}
