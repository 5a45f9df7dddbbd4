/// Applies ScreenUpdates to a RenderedScreen, so the HMI always holds what
/// the car means to draw. `full` replaces everything; a TemplateDiff patches
/// the template it names (top, presented, or a tab's template) element by element.
public enum ScreenModel {
    public static func apply(_ update: HUScreenUpdate, to screen: inout HURenderedScreen) {
        switch update.change {
        case .full(let full):
            screen = full
        case .diff(let diff):
            apply(diff, to: &screen)
        case .spinnerStarted(let pending):
            screen.pending = pending
        case .spinnerStopped(let pending):
            if !screen.hasPending || screen.pending.eventID == pending.eventID { screen.clearPending() }
        case .none:
            break
        }
    }

    public static func apply(_ diff: HUTemplateDiff, to screen: inout HURenderedScreen) {
        for change in diff.changes {
            if case .itemsShown(let shown)? = change.element {
                screen.itemsShown = shown
                continue
            }
            if screen.hasPresented, screen.presented.id == diff.templateID {
                apply(change, to: &screen.presented)
            } else if screen.top.id == diff.templateID {
                apply(change, to: &screen.top)
            } else if case .tabBar(var bar)? = screen.top.kind,
                let index = bar.tabs.firstIndex(where: { $0.template.id == diff.templateID }) {
                apply(change, to: &bar.tabs[index].template)
                screen.top.kind = .tabBar(bar)
            }
        }
    }

    /// One element change on one template.
    public static func apply(_ change: HUElementChange, to template: inout HUTemplate) {
        switch change.element {
        case .replaced(let replacement):
            template = replacement
        case .title(let title):
            setTitle(title, on: &template)
        case .listItem(let item):
            if case .list(var list)? = template.kind {
                for s in list.sections.indices {
                    if let i = list.sections[s].items.firstIndex(where: { $0.id == item.id }) { list.sections[s].items[i] = item }
                }
                template.kind = .list(list)
            }
        case .gridButton(let button):
            if case .grid(var grid)? = template.kind, let i = grid.buttons.firstIndex(where: { $0.id == button.id }) {
                grid.buttons[i] = button
                template.kind = .grid(grid)
            }
        case .barButton(let button):
            replaceBarButton(button, in: &template)
        case .tab(let tab):
            if case .tabBar(var bar)? = template.kind, let i = bar.tabs.firstIndex(where: { $0.id == tab.id }) {
                bar.tabs[i] = tab
                template.kind = .tabBar(bar)
            }
        case .point(let point):
            if case .pointOfInterest(var poi)? = template.kind, let i = poi.points.firstIndex(where: { $0.id == point.id }) {
                poi.points[i] = point
                template.kind = .pointOfInterest(poi)
            }
        case .informationItem(let item):
            if case .information(var info)? = template.kind, let i = info.items.firstIndex(where: { $0.id == item.id }) {
                info.items[i] = item
                template.kind = .information(info)
            }
        case .nowPlaying(let nowPlaying):
            template.kind = .nowPlaying(nowPlaying)
        case .removedID(let id):
            remove(id, from: &template)
        case .selectedPointIndex(let index):
            if case .pointOfInterest(var poi)? = template.kind {
                poi.selectedIndex = index
                template.kind = .pointOfInterest(poi)
            }
        case .itemsShown, .none:
            break
        }
    }

    static func setTitle(_ title: String, on template: inout HUTemplate) {
        switch template.kind {
        case .list(var t): t.title = title; template.kind = .list(t)
        case .grid(var t): t.title = title; template.kind = .grid(t)
        case .information(var t): t.title = title; template.kind = .information(t)
        case .pointOfInterest(var t): t.title = title; template.kind = .pointOfInterest(t)
        case .contact(var t): t.title = title; template.kind = .contact(t)
        case .actionSheet(var t): t.title = title; template.kind = .actionSheet(t)
        case .nowPlaying(var t): t.title = title; template.kind = .nowPlaying(t)
        default: break
        }
    }

    static func replaceBarButton(_ button: HUBarButton, in template: inout HUTemplate) {
        func patch(_ buttons: inout [HUBarButton]) {
            if let i = buttons.firstIndex(where: { $0.id == button.id }) { buttons[i] = button }
        }
        switch template.kind {
        case .list(var t): patch(&t.leadingButtons); patch(&t.trailingButtons); template.kind = .list(t)
        case .grid(var t): patch(&t.leadingButtons); patch(&t.trailingButtons); template.kind = .grid(t)
        case .information(var t): patch(&t.leadingButtons); patch(&t.trailingButtons); template.kind = .information(t)
        case .contact(var t): patch(&t.leadingButtons); patch(&t.trailingButtons); template.kind = .contact(t)
        case .map(var t): patch(&t.leadingButtons); patch(&t.trailingButtons); template.kind = .map(t)
        default: break
        }
    }

    /// Removes the element with `id`, whatever kind it is.
    static func remove(_ id: String, from template: inout HUTemplate) {
        switch template.kind {
        case .list(var t):
            for s in t.sections.indices { t.sections[s].items.removeAll { $0.id == id } }
            t.sections.removeAll { $0.id == id && !id.isEmpty }
            t.leadingButtons.removeAll { $0.id == id }
            t.trailingButtons.removeAll { $0.id == id }
            template.kind = .list(t)
        case .grid(var t):
            t.buttons.removeAll { $0.id == id }
            t.leadingButtons.removeAll { $0.id == id }
            t.trailingButtons.removeAll { $0.id == id }
            template.kind = .grid(t)
        case .tabBar(var t):
            t.tabs.removeAll { $0.id == id }
            template.kind = .tabBar(t)
        case .pointOfInterest(var t):
            t.points.removeAll { $0.id == id }
            template.kind = .pointOfInterest(t)
        case .information(var t):
            t.items.removeAll { $0.id == id }
            t.actions.removeAll { $0.id == id }
            t.leadingButtons.removeAll { $0.id == id }
            t.trailingButtons.removeAll { $0.id == id }
            template.kind = .information(t)
        case .contact(var t):
            t.actions.removeAll { $0.id == id }
            t.leadingButtons.removeAll { $0.id == id }
            t.trailingButtons.removeAll { $0.id == id }
            template.kind = .contact(t)
        case .map(var t):
            t.mapButtons.removeAll { $0.id == id }
            t.leadingButtons.removeAll { $0.id == id }
            t.trailingButtons.removeAll { $0.id == id }
            template.kind = .map(t)
        case .alert(var t):
            t.actions.removeAll { $0.id == id }
            template.kind = .alert(t)
        case .actionSheet(var t):
            t.actions.removeAll { $0.id == id }
            template.kind = .actionSheet(t)
        default:
            break
        }
    }
}
