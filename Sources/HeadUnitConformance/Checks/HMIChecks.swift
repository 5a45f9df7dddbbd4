#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HeadUnitWire

/// PROTOCOL.md §12 The HMI session.
enum HMIChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("hmi.initial-state", .p("12.1"), "right after Welcome an HMI gets a HomeScreen, then ScreenUpdate{SCREEN_MAIN, full}", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            let first = try hmi.readEnvelope("HomeScreen")
            guard case .homeScreen = first.body else { throw CheckFailure(expected: "HomeScreen first after Welcome", got: describe(first)) }
            try require(first.requestID == 0, "request_id 0 on an event (§4)", got: "\(first.requestID)")
            let second = try hmi.readEnvelope("ScreenUpdate{full}")
            guard case .screenUpdate(let update) = second.body, case .full? = update.change else {
                throw CheckFailure(expected: "ScreenUpdate{full} second", got: describe(second))
            }
            try require(update.screen == .main, "the main screen's full first", got: "\(update.screen)")
        },
        ConformanceCheck("hmi.many-hmis", .p("12"), "any number of HMIs may be connected: a second one does not cut off the first; both get HomeScreens", needsCarRole: true) { ctx in
            let first = try ctx.hmi("hmi-1")
            let second = try ctx.hmi("hmi-2")
            try first.requireAlive("a second HMI connecting")
            let phone = try ctx.phone()
            _ = try ctx.announce(phone, [appInfo("com.example.audio", [Entitlement.audio])], device: "Shared Phone")
            for hmi in [first, second] {
                _ = try hmi.take("HomeScreen for \"Shared Phone\" on \(hmi.label)") { envelope -> Bool? in
                    if case .homeScreen(let home) = envelope.body, home.deviceName == "Shared Phone" { return true }
                    return nil
                }
            }
        },
        ConformanceCheck("hmi.sequence", .p("12.3"), "ScreenUpdate.sequence in order: a diff or spinner update the previous number + 1, a full a higher one (it may skip numbers); a new HMI's first full carries the current number", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.ok(.push(Make.list("second")), "push")
            try app.ok(.pop(HUPopTemplate()), "pop")
            // In arrival order: set_root's full, push's, then pop's.
            _ = try PhoneSessionChecks.fullScreen(app.hmi, "the full after set_root") { $0.stack == ["root"] && $0.appID == app.appID }
            _ = try PhoneSessionChecks.fullScreen(app.hmi, "the full after push") { $0.stack == ["root", "second"] }
            _ = try PhoneSessionChecks.fullScreen(app.hmi, "the full after pop") { $0.stack == ["root"] && $0.appID == app.appID }
            let updates = app.hmi.received.compactMap { envelope -> HUScreenUpdate? in
                if case .screenUpdate(let update) = envelope.body, update.screen == .main { return update }
                return nil
            }
            let sequences = updates.map(\.sequence)
            try require(sequences.count >= 4, "at least 4 main-screen updates (initial, launch, set_root, push, pop)", got: "\(sequences.count)")
            for (a, b) in zip(updates, updates.dropFirst()) {
                if let problem = WireConnection.sequenceProblem(b, after: a.sequence) {
                    throw CheckFailure(expected: "a diff or spinner update at the previous number + 1, a full above it (§12.3)", got: "\(problem) in \(sequences)")
                }
            }
            let late = try ctx.hmi("hmi-late")
            let full = try late.take("the new HMI's first ScreenUpdate{full}") { envelope -> HUScreenUpdate? in
                if case .screenUpdate(let update) = envelope.body, update.screen == .main { return update }
                return nil
            }
            try require(full.sequence == sequences.last!, "the screen's current number \(sequences.last!) in the new HMI's full", got: "\(full.sequence)")
        },
        ConformanceCheck("hmi.images-once", .p("12.6"), "an app icon's PNG reaches a new HMI as ImageData before the HomeScreen that names it by ref; GetImage returns it; an unknown ref is UNKNOWN_IMAGE", needsCarRole: true) { ctx in
            let phone = try ctx.phone()
            var app = appInfo("com.example.iconic", [Entitlement.audio])
            let png = HMIChecks.png(side: 120)
            app.icon = HUImage.with { $0.png = Data(png) }
            _ = try ctx.announce(phone, [app])
            let hmi = try ctx.hmi("hmi-images")
            var sent: [String: [UInt8]] = [:]
            let home = try hmi.take("a HomeScreen showing com.example.iconic") { envelope -> HUHomeScreen? in
                if case .imageData(let data) = envelope.body { sent[data.ref] = Array(data.png) }
                if case .homeScreen(let home) = envelope.body, home.icons.contains(where: { $0.appID == app.appID }) { return home }
                return nil
            }
            guard let icon = home.icons.first(where: { $0.appID == app.appID })?.icon, case .ref(let ref) = icon.source else {
                throw CheckFailure(expected: "the icon as Image{ref}", got: "\(home.icons.first(where: { $0.appID == app.appID })?.icon.source.map { "\($0)" } ?? "no icon")")
            }
            try require(sent[ref] == png, "the icon's bytes as ImageData{ref} before the HomeScreen", got: sent[ref].map { "\($0.count) other bytes" } ?? "none")
            let again = try hmi.request(.getImage(HUGetImage.with { $0.ref = ref }), "GetImage for the icon")
            try requireCode(again, .ok, "GetImage for an image shown")
            guard case .imageData(let data)? = again.detail, Array(data.png) == png else {
                throw CheckFailure(expected: "Result.image_data with the icon's bytes", got: describe(again))
            }
            let unknown = try hmi.request(.getImage(HUGetImage.with { $0.ref = String(repeating: "0", count: 64) }), "GetImage for an unknown ref")
            try requireCode(unknown, .unknownImage, "GetImage for a ref nothing shows")
        },
        ConformanceCheck("hmi.get-status", .p("12.5"), "GetStatus is answered with Result{OK, status}", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            let result = try hmi.request(.getStatus(HUGetStatus()), "GetStatus")
            try requireCode(result, .ok, "GetStatus")
            guard case .status(let status)? = result.detail else { throw CheckFailure(expected: "Result.status", got: describe(result)) }
            try require(status.peers >= 1, "at least this HMI among the peers", got: "peers \(status.peers)")
        },
        ConformanceCheck("hmi.launch-no-phone", .p("9"), "LaunchApp with no phone connected: NO_PHONE", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            var launch = HULaunchApp()
            launch.appID = "com.example.audio"
            let result = try hmi.request(.launchApp(launch), "LaunchApp with no phone")
            try requireCode(result, .noPhone, "LaunchApp with no phone (is another phone connected to this endpoint?)")
        },
        ConformanceCheck("hmi.launch-unknown-app", .p("9"), "LaunchApp for an app never announced: UNKNOWN_APP; for a refused app: APP_NOT_LAUNCHABLE", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            let phone = try ctx.phone()
            _ = try ctx.announce(phone, [appInfo("com.example.audio", [Entitlement.audio]), appInfo("com.example.nokeys", [])])
            var launch = HULaunchApp()
            launch.appID = "com.example.nope"
            try requireCode(try hmi.request(.launchApp(launch), "LaunchApp com.example.nope"), .unknownApp, "LaunchApp for an unknown app")
            launch.appID = "com.example.nokeys"
            try requireCode(try hmi.request(.launchApp(launch), "LaunchApp com.example.nokeys"), .appNotLaunchable, "LaunchApp for a refused app")
        },
        ConformanceCheck("hmi.input-no-app", .p("12.4"), "with no app on the main screen, select_item gets NOT_CONNECTED", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            let result = try hmi.request(PhoneSessionChecks.hmiInput("root", PhoneSessionChecks.selectItem("x")), "select_item on the home screen")
            try requireCode(result, .notConnected, "input with no app on the main screen")
        },
        ConformanceCheck("hmi.input-unknown-ids", .p("12.4"), "input naming a template not on top: UNKNOWN_TEMPLATE; an item that does not exist: UNKNOWN_ITEM", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            try app.ok(.push(Make.list("second")), "push")
            try requireCode(try app.hmi.request(PhoneSessionChecks.hmiInput("root", PhoneSessionChecks.selectItem("root.i0")), "select on root under second"), .unknownTemplate, "input on a template not on top")
            try requireCode(try app.hmi.request(PhoneSessionChecks.hmiInput("second", PhoneSessionChecks.selectItem("nope")), "select nope"), .unknownItem, "input naming an unknown item")
        },
    ]

    /// A PNG of `side` x `side` pixels: the signature and an IHDR chunk with
    /// its CRC-32 (all the car reads), then a few filler bytes.
    static func png(side: UInt32) -> [UInt8] {
        func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)] }
        let ihdr = Array("IHDR".utf8) + be(side) + be(side) + [8, 6, 0, 0, 0]
        var crc: UInt32 = 0xffff_ffff
        for byte in ihdr {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1 }
        }
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be(13) + ihdr + be(~crc) + Array("conformance".utf8)
    }
}
