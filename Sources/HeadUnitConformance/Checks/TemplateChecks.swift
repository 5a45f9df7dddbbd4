import HeadUnitWire

/// Protocol/TEMPLATES.md: templates by category and depth (§2), placement (§3),
/// ids (§4), fields and count limits (§5), driving and refresh rates (§8).
enum TemplateChecks {
    enum Kind: String, CaseIterable, Sendable {
        case nowPlaying = "now playing", actionSheet = "action sheet", alert, grid, list, tabBar = "tab bar", information
        case pointOfInterest = "point of interest", contact, map, search, voiceControl = "voice control"

        var isModal: Bool { self == .alert || self == .actionSheet || self == .voiceControl }

        func make(_ id: String) -> HUTemplate {
            switch self {
            case .nowPlaying: return Make.nowPlaying(id)
            case .actionSheet: return Make.actionSheet(id)
            case .alert: return Make.alert(id)
            case .grid: return Make.grid(id)
            case .list: return Make.list(id)
            case .tabBar: return Make.tabBar(id)
            case .information: return Make.information(id)
            case .pointOfInterest: return Make.pointOfInterest(id)
            case .contact: return Make.contact(id)
            case .map: return Make.map(id)
            case .search: return Make.search(id)
            case .voiceControl: return Make.voiceControl(id)
            }
        }
    }

    struct Category: Sendable {
        var name: String
        var entitlements: [String]
        var allowed: Set<Kind>
        var depth: UInt32
        var tabs: UInt32
    }

    static let general: Set<Kind> = [.actionSheet, .alert, .grid, .list, .tabBar, .information, .pointOfInterest]

    /// The §2 table, one row per category.
    static let categories: [Category] = [
        Category(name: "audio", entitlements: [Entitlement.audio], allowed: [.alert, .grid, .list, .tabBar, .nowPlaying], depth: 5, tabs: 4),
        Category(name: "communication", entitlements: [Entitlement.communication], allowed: [.actionSheet, .alert, .grid, .list, .tabBar, .information, .contact], depth: 5, tabs: 5),
        Category(name: "navigation", entitlements: [Entitlement.maps], allowed: [.actionSheet, .alert, .grid, .list, .tabBar, .information, .contact, .map, .search, .voiceControl], depth: 5, tabs: 5),
        Category(name: "ev-charging", entitlements: [Entitlement.charging], allowed: general, depth: 5, tabs: 5),
        Category(name: "fueling", entitlements: [Entitlement.fueling], allowed: general, depth: 3, tabs: 5),
        Category(name: "charging-and-fueling", entitlements: [Entitlement.charging, Entitlement.fueling], allowed: general, depth: 3, tabs: 5),
        Category(name: "parking", entitlements: [Entitlement.parking], allowed: general, depth: 5, tabs: 5),
        Category(name: "quick-ordering", entitlements: [Entitlement.quickOrdering], allowed: general, depth: 2, tabs: 5),
        Category(name: "driving-task", entitlements: [Entitlement.drivingTask], allowed: general, depth: 2, tabs: 5),
        Category(name: "public-safety", entitlements: [Entitlement.publicSafety], allowed: general, depth: 5, tabs: 5),
    ]

    /// Every template kind, in a place it may go (§3), for one category:
    /// allowed ones must succeed, the others get NOT_ALLOWED_FOR_CATEGORY.
    static func templatesByCategory(_ category: Category) -> ConformanceCheck {
        let allowedText = Kind.allCases.filter { category.allowed.contains($0) }.map(\.rawValue).joined(separator: ", ")
        return ConformanceCheck("templates.category-\(category.name)", .t("2"), "\(category.name) apps may use exactly: \(allowedText); others NOT_ALLOWED_FOR_CATEGORY", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp(category.entitlements)
            try app.ok(.setRoot(Make.list("base")), "set_root list")
            var mismatches: [String] = []
            for kind in Kind.allCases {
                let id = "t-" + kind.rawValue.replacingSpaces()
                let template = kind.make(id)
                let op: HUTemplateRequest.OneOf_Op = kind.isModal ? .present(template) : kind == .nowPlaying ? .push(template) : .setRoot(template)
                let result = try app.request(op, "\(kind.rawValue)")
                let expected: HUErrorCode = category.allowed.contains(kind) ? .ok : .notAllowedForCategory
                if result.code != expected {
                    mismatches.append("\(kind.rawValue): expected \(name(expected)), got \(describe(result))")
                } else if expected == .ok {
                    if kind.isModal { try app.ok(.dismiss(HUPopTemplate()), "dismiss \(kind.rawValue)") }
                    if kind == .nowPlaying { try app.ok(.pop(HUPopTemplate()), "pop \(kind.rawValue)") }
                }
            }
            if !mismatches.isEmpty { throw CheckFailure(mismatches.joined(separator: "; ")) }
        }
    }

    /// max_stack_depth and max_tabs in SceneConnected, and DEPTH_EXCEEDED one past it.
    static func depth(_ category: Category) -> ConformanceCheck {
        ConformanceCheck("templates.depth-\(category.name)", .t("2"), "\(category.name): max_stack_depth \(category.depth), max_tabs \(category.tabs); push past the depth gets DEPTH_EXCEEDED", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp(category.entitlements)
            try require(app.scene.maxStackDepth == category.depth, "SceneConnected.max_stack_depth \(category.depth)", got: "\(app.scene.maxStackDepth)")
            try require(app.scene.maxTabs == category.tabs, "SceneConnected.max_tabs \(category.tabs)", got: "\(app.scene.maxTabs)")
            try app.ok(.setRoot(Make.list("d1")), "set_root")
            if category.depth > 1 {
                for level in 2...Int(category.depth) { try app.ok(.push(Make.list("d\(level)")), "push to depth \(level)") }
            }
            let result = try app.refused(.push(Make.list("d\(category.depth + 1)")), .depthExceeded, "push to depth \(category.depth + 1)")
            if result.limitValue != 0 {
                try require(result.limitValue == category.depth, "limit_value \(category.depth)", got: "\(result.limitValue)")
            }
        }
    }

    enum Place: Sendable { case root, present, pushOnList }

    struct CountRule: Sendable {
        var limit: String
        var value: Int
        var minimum = false
        var category: String
        var entitlements: [String]
        var place: Place = .root
        var make: @Sendable (Int) -> HUTemplate
    }

    static let countRules: [CountRule] = [
        CountRule(limit: "list.items", value: 12, category: "quick-ordering", entitlements: [Entitlement.quickOrdering]) { Make.list("l", items: $0) },
        CountRule(limit: "list.imageRow.images", value: 8, category: "audio", entitlements: [Entitlement.audio]) { Make.imageRowList("l", images: $0) },
        CountRule(limit: "list.leadingButtons", value: 2, category: "audio", entitlements: [Entitlement.audio]) { Make.list("l", leading: $0) },
        CountRule(limit: "list.trailingButtons", value: 2, category: "audio", entitlements: [Entitlement.audio]) { Make.list("l", trailing: $0) },
        CountRule(limit: "grid.buttons", value: 8, category: "audio", entitlements: [Entitlement.audio]) { Make.grid("g", buttons: $0) },
        CountRule(limit: "grid.leadingButtons", value: 2, category: "audio", entitlements: [Entitlement.audio]) { Make.grid("g", leading: $0) },
        CountRule(limit: "grid.trailingButtons", value: 2, category: "audio", entitlements: [Entitlement.audio]) { Make.grid("g", trailing: $0) },
        CountRule(limit: "tabBar.tabs", value: 4, category: "audio", entitlements: [Entitlement.audio]) { Make.tabBar("tb", tabs: $0) },
        CountRule(limit: "tabBar.tabs", value: 5, category: "communication", entitlements: [Entitlement.communication]) { Make.tabBar("tb", tabs: $0) },
        CountRule(limit: "tabBar.tabs", value: 1, minimum: true, category: "audio", entitlements: [Entitlement.audio]) { Make.tabBar("tb", tabs: $0) },
        CountRule(limit: "nowPlaying.buttons", value: 5, category: "audio", entitlements: [Entitlement.audio], place: .pushOnList) { Make.nowPlaying("np", buttons: $0) },
        CountRule(limit: "alert.titleVariants", value: 1, minimum: true, category: "audio", entitlements: [Entitlement.audio], place: .present) { Make.alert("al", titles: $0) },
        CountRule(limit: "alert.actions", value: 1, minimum: true, category: "audio", entitlements: [Entitlement.audio], place: .present) { Make.alert("al", actions: $0) },
        CountRule(limit: "actionSheet.actions", value: 2, minimum: true, category: "communication", entitlements: [Entitlement.communication], place: .present) { Make.actionSheet("as", actions: $0) },
        CountRule(limit: "information.items", value: 10, category: "communication", entitlements: [Entitlement.communication]) { Make.information("in", items: $0) },
        CountRule(limit: "information.items", value: 12, category: "quick-ordering", entitlements: [Entitlement.quickOrdering]) { Make.information("in", items: $0) },
        CountRule(limit: "information.actions", value: 3, category: "communication", entitlements: [Entitlement.communication]) { Make.information("in", actions: $0) },
        CountRule(limit: "information.leadingButtons", value: 2, category: "communication", entitlements: [Entitlement.communication]) { Make.information("in", leading: $0) },
        CountRule(limit: "pointOfInterest.points", value: 12, category: "parking", entitlements: [Entitlement.parking]) { Make.pointOfInterest("poi", points: $0) },
        CountRule(limit: "contact.informativeTexts", value: 3, category: "communication", entitlements: [Entitlement.communication]) { Make.contact("ct", texts: $0) },
        CountRule(limit: "contact.actions", value: 4, category: "communication", entitlements: [Entitlement.communication]) { Make.contact("ct", actions: $0) },
        CountRule(limit: "contact.leadingButtons", value: 2, category: "communication", entitlements: [Entitlement.communication]) { Make.contact("ct", leading: $0) },
        CountRule(limit: "map.leadingButtons", value: 2, category: "navigation", entitlements: [Entitlement.maps]) { Make.map("mp", leading: $0) },
        CountRule(limit: "map.trailingButtons", value: 2, category: "navigation", entitlements: [Entitlement.maps]) { Make.map("mp", trailing: $0) },
        CountRule(limit: "map.mapButtons", value: 4, category: "navigation", entitlements: [Entitlement.maps]) { Make.map("mp", mapButtons: $0) },
        CountRule(limit: "voiceControl.states", value: 1, minimum: true, category: "navigation", entitlements: [Entitlement.maps], place: .present) { Make.voiceControl("vc", states: $0) },
    ]

    /// At the limit: accepted. One past (or one short of a minimum): the code,
    /// with `limit` naming the rule and `limit_value` its value.
    static func count(_ rule: CountRule) -> ConformanceCheck {
        let code: HUErrorCode = rule.minimum ? .invalidTemplate : .limitExceeded
        let bad = rule.minimum ? rule.value - 1 : rule.value + 1
        let title = rule.minimum
            ? "\(rule.category): \(rule.limit) at least \(rule.value); \(bad) gets INVALID_TEMPLATE with limit/limit_value"
            : "\(rule.category): \(rule.limit) up to \(rule.value); \(bad) gets LIMIT_EXCEEDED with limit/limit_value"
        return ConformanceCheck("templates.\(rule.minimum ? "min" : "limit")-\(rule.limit)-\(rule.category)", .t("5"), title, needsCarRole: true) { ctx in
            let app = try ctx.launchedApp(rule.entitlements)
            func op(_ template: HUTemplate) -> HUTemplateRequest.OneOf_Op {
                switch rule.place {
                case .root: return .setRoot(template)
                case .present: return .present(template)
                case .pushOnList: return .push(template)
                }
            }
            if rule.place != .root { try app.ok(.setRoot(Make.list("base")), "set_root list") }
            try app.ok(op(rule.make(rule.value)), "\(rule.limit) = \(rule.value)")
            switch rule.place {
            case .present: try app.ok(.dismiss(HUPopTemplate()), "dismiss")
            case .pushOnList: try app.ok(.pop(HUPopTemplate()), "pop")
            case .root: break
            }
            let result = try app.refused(op(rule.make(bad)), code, "\(rule.limit) = \(bad)")
            try require(result.limit == rule.limit && result.limitValue == UInt32(rule.value),
                        "limit \"\(rule.limit)\", limit_value \(rule.value)", got: "limit \"\(result.limit)\", limit_value \(result.limitValue)")
        }
    }

    /// One rule that is not a count: a template (or op) and the code it must get.
    static func rule(_ id: String, _ section: String, _ title: String, _ entitlements: [String], root: HUTemplate? = Make.list("base"),
                     expect code: HUErrorCode, _ op: @escaping @Sendable () -> HUTemplateRequest.OneOf_Op) -> ConformanceCheck {
        ConformanceCheck("templates.\(id)", .t(section), title, needsCarRole: true) { ctx in
            let app = try ctx.launchedApp(entitlements)
            if let root { try app.ok(.setRoot(root), "set_root \(root.id)") }
            try app.refused(op(), code, title)
        }
    }

    static func withItem(_ change: (inout HUListItem) -> Void) -> HUTemplate {
        var template = Make.list("l")
        change(&template.list.sections[0].items[0])
        return template
    }

    static let rules: [ConformanceCheck] = [
        // §3 placement
        rule("alert-as-root", "3", "an alert as root: INVALID_POSITION (modals are only presented)", [Entitlement.audio], root: nil, expect: .invalidPosition) { .setRoot(Make.alert("al")) },
        rule("alert-pushed", "3", "an alert pushed: INVALID_POSITION", [Entitlement.audio], expect: .invalidPosition) { .push(Make.alert("al")) },
        rule("list-presented", "3", "a list presented: INVALID_POSITION", [Entitlement.audio], expect: .invalidPosition) { .present(Make.list("l")) },
        rule("tab-bar-pushed", "3", "a tab bar pushed: INVALID_POSITION (root only)", [Entitlement.audio], expect: .invalidPosition) { .push(Make.tabBar("tb")) },
        rule("map-pushed", "3", "a map pushed: INVALID_POSITION (root only)", [Entitlement.maps], expect: .invalidPosition) { .push(Make.map("mp")) },
        rule("now-playing-root", "3", "now playing as root: INVALID_POSITION (ours)", [Entitlement.audio], root: nil, expect: .invalidPosition) { .setRoot(Make.nowPlaying("np")) },
        // §4 ids: now-playing is the shared template's id and nobody else's.
        rule("now-playing-other-id", "4", "a now-playing template with an id other than 'now-playing': INVALID_TEMPLATE", [Entitlement.audio], expect: .invalidTemplate) {
            var template = Make.nowPlaying("np")
            template.id = "my-player"
            return .push(template)
        },
        rule("now-playing-id-reserved", "4", "a list with the id 'now-playing': INVALID_TEMPLATE", [Entitlement.audio], expect: .invalidTemplate) { .push(Make.list("now-playing")) },
        rule("tab-bar-in-tab", "3", "a tab bar inside a tab: INVALID_POSITION", [Entitlement.audio], root: nil, expect: .invalidPosition) {
            var outer = Make.tabBar("tb", tabs: 1)
            outer.tabBar.tabs[0].template = Make.tabBar("inner", tabs: 1)
            return .setRoot(outer)
        },
        rule("search-in-tab", "3", "a search template inside a tab: INVALID_POSITION", [Entitlement.maps], root: nil, expect: .invalidPosition) {
            var outer = Make.tabBar("tb", tabs: 1)
            outer.tabBar.tabs[0].template = Make.search("s")
            return .setRoot(outer)
        },
        ConformanceCheck("templates.only-list-on-now-playing", .t("3"), "only a list may be pushed on top of now playing: a grid gets INVALID_POSITION, a list is accepted", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("base")), "set_root")
            try app.ok(.push(Make.nowPlaying("np")), "push now playing")
            try app.refused(.push(Make.grid("g")), .invalidPosition, "a grid pushed on now playing")
            try app.ok(.push(Make.list("queue")), "a list pushed on now playing")
        },
        // §4 ids
        rule("empty-template-id", "4", "an empty template id: INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) { .setRoot(Make.list("")) },
        rule("template-without-kind", "4", "a template without a kind: INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) {
            var template = HUTemplate()
            template.id = "nokind"
            return .setRoot(template)
        },
        rule("duplicate-element-ids", "4", "two elements with one id (item and bar button): INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) {
            var template = Make.list("l", trailing: 1)
            template.list.trailingButtons[0].id = template.list.sections[0].items[0].id
            return .setRoot(template)
        },
        rule("element-id-is-template-id", "4", "an element id equal to the template id: INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) {
            .setRoot(withItem { $0.id = "l" })
        },
        rule("empty-element-id", "4", "an empty item id: INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) {
            .setRoot(withItem { $0.id = "" })
        },
        rule("reserved-now-playing-id", "4", "a now-playing button id \"up-next\" (reserved): INVALID_TEMPLATE", [Entitlement.audio], expect: .invalidTemplate) {
            var template = Make.nowPlaying("np", buttons: 1)
            template.nowPlaying.buttons[0].id = "up-next"
            return .push(template)
        },
        // §5 rules that are not counts
        rule("item-without-kind", "5", "a list item without a kind: INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) {
            .setRoot(withItem { $0.kind = nil })
        },
        rule("progress-out-of-range", "5", "progress 1.5: INVALID_ARGUMENT", [Entitlement.audio], root: nil, expect: .invalidArgument) {
            .setRoot(withItem { $0.general.showsProgress = true; $0.general.progress = 1.5 })
        },
        rule("message-item-audio", "5", "a message item in an audio app: NOT_ALLOWED_FOR_CATEGORY", [Entitlement.audio], root: nil, expect: .notAllowedForCategory) {
            .setRoot(withItem { var message = HUMessageItem(); message.text = "Hi"; message.conversationID = "c1"; $0.message = message })
        },
        rule("message-item-no-conversation", "5", "a message item without conversation_id or phone_or_email: INVALID_TEMPLATE", [Entitlement.communication], root: nil, expect: .invalidTemplate) {
            .setRoot(withItem { var message = HUMessageItem(); message.text = "Hi"; $0.message = message })
        },
        rule("tab-without-template", "5", "a tab without a template: INVALID_TEMPLATE", [Entitlement.audio], root: nil, expect: .invalidTemplate) {
            var template = Make.tabBar("tb", tabs: 1)
            template.tabBar.tabs[0].clearTemplate()
            return .setRoot(template)
        },
        rule("selected-tab-unknown", "5", "selected_tab_id naming no tab: INVALID_ARGUMENT", [Entitlement.audio], root: nil, expect: .invalidArgument) {
            var template = Make.tabBar("tb", tabs: 2)
            template.tabBar.selectedTabID = "nope"
            return .setRoot(template)
        },
        rule("now-playing-negative-elapsed", "5", "now playing elapsed_seconds -1: INVALID_ARGUMENT", [Entitlement.audio], expect: .invalidArgument) {
            var template = Make.nowPlaying("np")
            template.nowPlaying.elapsedSeconds = -1
            return .push(template)
        },
        rule("poi-selected-index", "5", "point of interest selected_index past the points: INVALID_ARGUMENT", [Entitlement.parking], root: nil, expect: .invalidArgument) {
            var template = Make.pointOfInterest("poi", points: 1)
            template.pointOfInterest.selectedIndex = 5
            return .setRoot(template)
        },
        rule("map-panning-without-pan-button", "5", "panning_supported without a map button whose id starts with \"pan\": INVALID_TEMPLATE", [Entitlement.maps], root: nil, expect: .invalidTemplate) {
            var template = Make.map("mp", mapButtons: 1)
            template.map.panningSupported = true
            return .setRoot(template)
        },
        rule("map-guidance-color", "5", "guidance_background_color \"red\" (not #RRGGBB): INVALID_ARGUMENT", [Entitlement.maps], root: nil, expect: .invalidArgument) {
            var template = Make.map("mp")
            template.map.guidanceBackgroundColor = "red"
            return .setRoot(template)
        },
        rule("voice-control-active-state", "5", "active_state_id naming no state: INVALID_TEMPLATE", [Entitlement.maps], expect: .invalidTemplate) {
            var template = Make.voiceControl("vc", states: 1)
            template.voiceControl.activeStateID = "nope"
            return .present(template)
        },
        // §8 driving and refresh rates
        ConformanceCheck("templates.driving-list-cap", .t("8"), "while lists are limited a list shows max_list_items items: template_shown items_shown < items_total", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            ctx.restoreParkedAtEnd(app.hmi)
            var state = HUSetVehicleState()
            state.state.driving = true
            state.state.limitLists = true
            try requireCode(try app.hmi.request(.setVehicleState(state), "SetVehicleState driving"), .ok, "SetVehicleState")
            let cap = try app.phone.take("SessionConfiguration with limit_lists") { envelope -> UInt32? in
                if case .sessionConfiguration(let config) = envelope.body, config.limitLists { return config.maxListItems }
                return nil
            }
            guard cap > 0 else { throw CheckSkipped("the endpoint announced max_list_items 0 (no cap) while driving") }
            let total = Int(cap) + 3
            let result = try app.ok(.setRoot(Make.list("long", items: total)), "set_root with \(total) items while driving")
            try require(result.templateShown.itemsShown == cap && result.templateShown.itemsTotal == UInt32(total),
                        "items_shown \(cap) of items_total \(total)", got: "\(result.templateShown.itemsShown) of \(result.templateShown.itemsTotal)")
        },
        ConformanceCheck("templates.refresh-rate-driving-task", .t("8"), "a driving-task list updated twice within 10 s: RATE_LIMITED, limit refresh.interval_ms = 10000", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.drivingTask])
            try app.ok(.setRoot(Make.list("tasks")), "set_root")
            var updated = Make.list("tasks")
            updated.list.title = "Tasks (1)"
            try app.ok(.update(updated), "the first update")
            updated.list.title = "Tasks (2)"
            let result = try app.refused(.update(updated), .rateLimited, "a second update right after")
            try require(result.limit == "refresh.interval_ms" && result.limitValue == 10000, "limit refresh.interval_ms = 10000", got: "limit \"\(result.limit)\" = \(result.limitValue)")
        },
    ]

    static var all: [ConformanceCheck] {
        categories.map(templatesByCategory) + categories.map(depth) + countRules.map(count) + rules
    }
}

extension String {
    func replacingSpaces() -> String { String(map { $0 == " " ? "-" : $0 }) }
}
