import HeadUnitWire

/// Answers the driver's search (`CPSearchTemplateDelegate`).
@MainActor
public protocol CPSearchTemplateDelegate: AnyObject {
    /// The text changed: call `completionHandler` with the results to show.
    func searchTemplate(_ searchTemplate: CPSearchTemplate, updatedSearchText searchText: String,
                        completionHandler: @escaping ([CPListItem]) -> Void)
    /// The driver selected a result: call `completionHandler` when done (it stops the spinner).
    func searchTemplate(_ searchTemplate: CPSearchTemplate, selectedResult item: CPListItem,
                        completionHandler: @escaping () -> Void)
    /// The driver pressed the keyboard's search button.
    func searchTemplateSearchButtonPressed(_ searchTemplate: CPSearchTemplate)
}

extension CPSearchTemplateDelegate {
    /// Does nothing (optional in CarPlay).
    public func searchTemplateSearchButtonPressed(_ searchTemplate: CPSearchTemplate) {}
}

/// A search field with results, for navigation apps (`CPSearchTemplate`).
@MainActor
public final class CPSearchTemplate: CPTemplate {
    /// The placeholder in the empty field (ours; CarPlay uses the system's).
    public var placeholder: String? { didSet { setNeedsUpdate() } }
    /// The results shown now, by id, to find the one the driver selects.
    private var results: [CPListItem] = []
    private var delegateRef = Weak<AnyObject>(nil)

    /// Answers the driver's search (held weakly).
    public var delegate: (any CPSearchTemplateDelegate)? {
        get { delegateRef.object as? any CPSearchTemplateDelegate }
        set { delegateRef = Weak(newValue) }
    }

    /// A search template.
    public init(identifier: String? = nil) {
        super.init(identifier: identifier, prefix: "search")
    }

    override func wireKind() -> HUTemplate.OneOf_Kind? {
        var search = HUSearchTemplate()
        search.placeholder = placeholder ?? ""
        return .search(search)
    }

    override func handle(_ event: HUAppEvent, _ context: EventContext) -> Bool {
        switch event.kind {
        case .searchTextChanged(let changed):
            let completion = context.completion()
            guard let delegate else { completion(); return true }
            delegate.searchTemplate(self, updatedSearchText: changed.text) { [weak self] items in
                self?.results = items
                completion.complete(with: items.map(\.wireItem))
            }
            return true
        case .searchResultSelected(let selected):
            let completion = context.completion()
            guard let delegate, let item = results.first(where: { $0.identifier == selected.itemID }) else { completion(); return true }
            delegate.searchTemplate(self, selectedResult: item) { completion() }
            return true
        case .searchButtonPressed:
            delegate?.searchTemplateSearchButtonPressed(self)
            return true
        default:
            return false
        }
    }
}
