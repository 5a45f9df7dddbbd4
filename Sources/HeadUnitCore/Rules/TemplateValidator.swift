import HeadUnitWire

// OWNER: rules helper. Minimal first version; to be completed (DOMAIN.md §4-§5).
public enum TemplateValidator {
    /// The first rule `template` breaks in `context`, or nil when it may be shown.
    public static func validate(_ template: HUTemplate, context: TemplateContext) -> RuleViolation? {
        guard let kind = TemplateKind(template) else {
            return RuleViolation(.invalidTemplate, "template has no kind")
        }
        if template.id.isEmpty { return RuleViolation(.invalidTemplate, "template id is empty") }
        if !CategoryRules.allows(kind, for: context.category) {
            return RuleViolation(.notAllowedForCategory, "\(kind) is not allowed for \(context.category)")
        }
        if case .grid(let grid) = template.kind, grid.buttons.count > 8 {
            return .limitExceeded("grid.buttons", count: grid.buttons.count, maximum: 8)
        }
        return nil
    }
}
