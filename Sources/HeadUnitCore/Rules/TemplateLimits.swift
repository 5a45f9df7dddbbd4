/// The count limits of the template catalogue (Protocol/TEMPLATES.md section 5). The limit names
/// used in `RuleViolation.limit` are listed in Protocol/TEMPLATES.md.
public enum TemplateLimits {
    public static let gridButtons = 8
    public static let audioTabs = 4
    public static let otherTabs = 5
    public static let pointsOfInterest = 12
    public static let contactInformativeTexts = 3
    public static let contactActions = 4
    public static let informationItems = 10
    public static let quickOrderingInformationItems = 12
    public static let informationActions = 3
    /// Leading or trailing navigation-bar buttons of any template (guide: map; applied to all).
    public static let barButtonsPerSide = 2
    public static let mapButtons = 4
    public static let nowPlayingButtons = 5
    public static let quickOrderingListItems = 12
    /// Images in one image-row list item (our choice; the API exposes a runtime maximum).
    public static let imageRowImages = 8
    /// Text variants of one string (alert titles, grid button titles, empty
    /// list texts, voice control titles): CarPlay apps send a handful, longest
    /// first; more only add up in every screen the HMI is sent (section 10.4).
    public static let variants = 16

    // Minimum counts (reported as ERROR_CODE_INVALID_TEMPLATE with the limit name).
    public static let actionSheetMinimumActions = 2
    public static let alertMinimumActions = 1
    public static let alertMinimumTitleVariants = 1
    public static let voiceControlMinimumStates = 1
    public static let tabBarMinimumTabs = 1
}
