import HeadUnitWire

/// PROTOCOL.md §10.5 (slow consumers and coalesced state) with §12.3 (a
/// `full` after skipped numbers is not a gap), seen from an HMI that stops
/// reading while the screen changes many times.
enum CatchUpChecks {
    /// A list of about `bytes` bytes whose title names its generation.
    static func bigList(generation: Int, bytes: Int, maxElements: Int) -> HUTemplate {
        let text = String(repeating: "x", count: 900)
        let items = max(1, min(bytes / 1000, maxElements - 16))
        var template = Make.list("root", items: 0)
        template.list.title = "generation \(generation)"
        template.list.sections[0].items = (0..<items).map { index in
            var item = Make.item("i\(index)")
            item.general.text = "\(generation) \(index) \(text)"
            return item
        }
        return template
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "hmi.catch-up", .p("10.5"),
            "an HMI that stops reading (it still sends PINGs) while 8 MB of screens change is not cut off (the state is coalesced, not queued); when it reads again it ends at the latest screen, a full whose skipped numbers are no gap (§12.3)",
            needsCarRole: true
        ) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            let stalled = try ctx.hmi("hmi-stalled")
            _ = try PhoneSessionChecks.fullScreen(stalled, "the stalled HMI's first main-screen full") { $0.screen == .main }
            let perUpdate = Int(ctx.limits.maxPayloadBytes) * 2 / 5
            let maxElements = Int(ctx.reference?.limits.maxMessageElements ?? 2000)
            let generations = max(8, (8 << 20) / max(1, perUpdate))
            for generation in 0..<generations {
                // The phone and the launching HMI read; the stalled HMI only proves it is alive (§6).
                try app.ok(.setRoot(bigList(generation: generation, bytes: perUpdate, maxElements: maxElements)), "set_root generation \(generation)")
                try stalled.sendFrame(.ping, payload: [0x5c, UInt8(generation & 0xff)])
            }
            let mark = stalled.received.count
            let last = "generation \(generations - 1)"
            let latest = try stalled.take("the stalled HMI catching up to \(last)", timeoutMs: max(ctx.timeoutMs, 20_000)) { envelope -> HURenderedScreen? in
                guard case .screenUpdate(let update) = envelope.body, update.screen == .main, case .full(let screen)? = update.change else { return nil }
                return screen.top.list.title == last ? screen : nil
            }
            try require(latest.appID == app.appID && latest.stack == ["root"], "the app's latest screen", got: "\(latest.appID) \(latest.stack)")
            let fulls = stalled.received[mark...].filter { envelope in
                if case .screenUpdate(let update) = envelope.body, update.screen == .main, case .full? = update.change { return true }
                return false
            }.count
            try require(fulls <= generations, "at most one full per change (never more than were made)", got: "\(fulls) for \(generations) changes")
            // Still served (its PONGs come in their turn; a request proves it): not cut off.
            try requireCode(try stalled.request(.getStatus(HUGetStatus()), "GetStatus after catching up"), .ok, "the stalled HMI's GetStatus after catching up")
        },
    ]
}
