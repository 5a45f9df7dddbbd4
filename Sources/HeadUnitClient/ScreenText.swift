import HeadUnitWire

/// Readable one-line and multi-line renderings of what the car shows, for
/// `headunitctl watch` and failure messages.
public enum ScreenText {
    /// "list 'songs'", "grid 'genres'"...
    public static func name(_ template: HUTemplate) -> String {
        "\(kindName(template)) '\(template.id)'"
    }

    public static func kindName(_ template: HUTemplate) -> String {
        switch template.kind {
        case .list: return "list"
        case .grid: return "grid"
        case .tabBar: return "tab_bar"
        case .nowPlaying: return "now_playing"
        case .alert: return "alert"
        case .actionSheet: return "action_sheet"
        case .information: return "information"
        case .pointOfInterest: return "point_of_interest"
        case .contact: return "contact"
        case .map: return "map"
        case .search: return "search"
        case .voiceControl: return "voice_control"
        case .none: return "empty"
        }
    }

    /// "app com.x, stack [root, genres], top grid 'genres', presented alert 'a'".
    public static func summary(_ screen: HURenderedScreen) -> String {
        if screen.appID.isEmpty { return "home screen" }
        var text = "app \(screen.appID), stack [\(screen.stack.joined(separator: ", "))], top \(name(screen.top))"
        if screen.hasPresented { text += ", presented \(name(screen.presented))" }
        if screen.itemsTotal > 0 { text += ", \(screen.itemsShown)/\(screen.itemsTotal) items" }
        if screen.hasPending && screen.pending.eventID != 0 { text += ", spinner on '\(screen.pending.itemID)'" }
        return text
    }

    /// The screen as an indented block, one element per line.
    public static func render(_ screen: HURenderedScreen) -> String {
        var lines = ["[\(screenName(screen.screen))] \(summary(screen))"]
        if !screen.appID.isEmpty {
            lines += describe(screen.top, indent: "  ")
            if screen.hasPresented {
                lines.append("  presented:")
                lines += describe(screen.presented, indent: "    ")
            }
        }
        return lines.joined(separator: "\n")
    }

    public static func render(_ home: HUHomeScreen) -> String {
        var lines = ["[home] \(home.deviceName.isEmpty ? "no phone" : home.deviceName): \(home.icons.count) apps"]
        for icon in home.icons {
            lines.append("  \(icon.running ? "*" : " ") \(icon.appID)  \"\(icon.displayName)\"  \(icon.category)")
        }
        if !home.nowPlayingAppID.isEmpty { lines.append("  now playing: \(home.nowPlayingAppID)") }
        // The phone's calls (PROTOCOL.md section 26.7).
        for call in home.calls { lines.append("  " + describe(call)) }
        if home.hasLastCallEnded {
            let ended = home.lastCallEnded
            lines.append("  last call ended: \(ended.callUuid) (\(ended.appID)) \(ended.reason)")
        }
        return lines.joined(separator: "\n")
    }

    /// "call 6f1c... com.example.chat \"Ada\" +15550100: active, muted; may end, setHeld..."
    public static func describe(_ call: HUCallInfo) -> String {
        let who = call.description_p.localizedCallerName.isEmpty ? call.description_p.remoteHandle.value : call.description_p.localizedCallerName
        var state = "\(call.phase)"
        if call.onHold { state += ", on hold" }
        if call.muted { state += ", muted" }
        let actions = call.availableActions.map { "\($0)" }.joined(separator: ", ")
        return "call \(call.callUuid) \(call.appID) \(call.outgoing ? "to" : "from") \"\(who)\": \(state); may \(actions.isEmpty ? "nothing" : actions)"
    }

    public static func render(_ update: HUScreenUpdate) -> String {
        let head = "[\(screenName(update.screen)) #\(update.sequence)]"
        switch update.change {
        case .full: return "\(head) full redraw"
        case .diff(let diff):
            return "\(head) diff on '\(diff.templateID)': " + diff.changes.map(describe).joined(separator: "; ")
        case .spinnerStarted(let p): return "\(head) spinner on '\(p.itemID)' (event \(p.eventID))"
        case .spinnerStopped(let p): return "\(head) spinner stopped on '\(p.itemID)'"
        case .none: return "\(head) (empty)"
        }
    }

    public static func screenName(_ screen: HUScreen) -> String {
        switch screen {
        case .main: return "main"
        case .dashboard: return "dashboard"
        case .instrumentCluster: return "cluster"
        default: return "screen \(screen.rawValue)"
        }
    }

    static func describe(_ change: HUElementChange) -> String {
        switch change.element {
        case .listItem(let item): return "item '\(item.id)'"
        case .gridButton(let button): return "grid button '\(button.id)'"
        case .barButton(let button): return "bar button '\(button.id)'"
        case .tab(let tab): return "tab '\(tab.id)'"
        case .point(let point): return "point '\(point.id)'"
        case .informationItem(let item): return "information item '\(item.id)'"
        case .nowPlaying(let np): return "now playing '\(np.title)'"
        case .removedID(let id): return "removed '\(id)'"
        case .selectedPointIndex(let index): return "selected point \(index)"
        case .itemsShown(let count): return "\(count) items shown"
        case .replaced(let template): return "replaced by \(name(template))"
        case .title(let title): return "title \"\(title)\""
        case .none: return "(empty)"
        }
    }

    /// The template's content, one element per line.
    public static func describe(_ template: HUTemplate, indent: String) -> [String] {
        var lines: [String] = []
        func bar(_ leading: [HUBarButton], _ trailing: [HUBarButton]) {
            let all = leading + trailing
            if !all.isEmpty { lines.append(indent + "bar: " + all.map { "[\($0.title.isEmpty ? $0.id : $0.title)](\($0.id))" }.joined(separator: " ")) }
        }
        switch template.kind {
        case .list(let t):
            lines.append(indent + "\"\(t.title)\"")
            bar(t.leadingButtons, t.trailingButtons)
            for section in t.sections {
                if !section.header.isEmpty { lines.append(indent + "-- \(section.header)") }
                for item in section.items {
                    switch item.kind {
                    case .general(let g):
                        var text = "\(indent)  \(item.id): \(g.text)"
                        if !g.detailText.isEmpty { text += " / \(g.detailText)" }
                        if g.playing { text += " (playing)" }
                        if g.showsProgress { text += " [\(Int(g.progress * 100))%]" }
                        if g.accessory == .disclosureIndicator { text += " >" }
                        lines.append(text)
                    case .imageRow(let r): lines.append("\(indent)  \(item.id): \(r.text) [\(r.images.count) images]")
                    case .message(let m): lines.append("\(indent)  \(item.id): \(m.text) (message)")
                    case .none: lines.append("\(indent)  \(item.id)")
                    }
                }
            }
        case .grid(let t):
            lines.append(indent + "\"\(t.title)\"")
            bar(t.leadingButtons, t.trailingButtons)
            lines.append(indent + "  " + t.buttons.map { "[\($0.titleVariants.first ?? "")](\($0.id))" }.joined(separator: " "))
        case .tabBar(let t):
            for tab in t.tabs {
                let selected = tab.id == t.selectedTabID ? "*" : " "
                lines.append("\(indent)\(selected) tab \(tab.id) \"\(tab.title)\"\(tab.badge.isEmpty ? "" : " (\(tab.badge))"): \(name(tab.template))")
            }
        case .nowPlaying(let t):
            lines.append("\(indent)\(t.title) - \(t.artist) (\(t.album)) \(Int(t.elapsedSeconds))/\(t.live ? "live" : "\(Int(t.durationSeconds))") s, rate \(t.playbackRate)")
            if !t.buttons.isEmpty { lines.append(indent + "  buttons: " + t.buttons.map(\.id).joined(separator: " ")) }
        case .alert(let t):
            lines.append(indent + "\"\(t.titleVariants.first ?? "")\"")
            lines.append(indent + "  " + t.actions.map { "[\($0.title)](\($0.id))" }.joined(separator: " "))
        case .actionSheet(let t):
            lines.append(indent + "\"\(t.title)\" \(t.message)")
            lines.append(indent + "  " + t.actions.map { "[\($0.title)](\($0.id))" }.joined(separator: " "))
        case .information(let t):
            lines.append(indent + "\"\(t.title)\"")
            bar(t.leadingButtons, t.trailingButtons)
            for item in t.items { lines.append("\(indent)  \(item.title): \(item.detail)") }
            if !t.actions.isEmpty { lines.append(indent + "  " + t.actions.map { "[\($0.title)](\($0.id))" }.joined(separator: " ")) }
        case .pointOfInterest(let t):
            lines.append(indent + "\"\(t.title)\" \(t.points.count) points, selected \(t.selectedIndex)")
            for p in t.points { lines.append("\(indent)  \(p.id): \(p.title) (\(p.location.latitude), \(p.location.longitude))") }
        case .contact(let t):
            lines.append(indent + "\"\(t.title)\" \(t.subtitle)")
            for text in t.informativeTexts { lines.append(indent + "  " + text) }
            lines.append(indent + "  " + t.actions.map { "[\($0.title.isEmpty ? $0.id : $0.title)](\($0.id))" }.joined(separator: " "))
        case .map(let t):
            bar(t.leadingButtons, t.trailingButtons)
            lines.append(indent + "map buttons: " + t.mapButtons.map(\.id).joined(separator: " "))
        case .search(let t):
            lines.append(indent + "search \"\(t.placeholder)\"")
        case .voiceControl(let t):
            lines.append(indent + "voice control, state \(t.activeStateID)")
        case .none:
            break
        }
        return lines
    }
}
