import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Protocol/TEMPLATES.md section 2: templates by category, stack depth, tab count.
@Suite struct RulesCategoryTests {
    /// The guide's table, row by row: (template, audio, communication, navigation, last column).
    static let table: [(TemplateKind, Bool, Bool, Bool, Bool)] = [
        (.actionSheet, false, true, true, true),
        (.alert, true, true, true, true),
        (.grid, true, true, true, true),
        (.list, true, true, true, true),
        (.tabBar, true, true, true, true),
        (.information, false, true, true, true),
        (.pointOfInterest, false, false, false, true),
        (.nowPlaying, true, false, false, false),
        (.contact, false, true, true, false),
        (.map, false, false, true, false),
        (.search, false, false, true, false),
        (.voiceControl, false, false, true, false),
    ]

    /// Categories of the last column (automaker and public safety included, as documented).
    static let lastColumn: [HUCategory] = [.evCharging, .fueling, .chargingAndFueling, .parking, .quickOrdering, .drivingTask, .publicSafety, .automaker]

    @Test(arguments: table)
    func templateTableByCategory(row: (TemplateKind, Bool, Bool, Bool, Bool)) {
        let (kind, audio, communication, navigation, last) = row
        #expect(CategoryRules.allows(kind, for: .audio) == audio)
        #expect(CategoryRules.allows(kind, for: .communication) == communication)
        #expect(CategoryRules.allows(kind, for: .navigation) == navigation)
        for category in Self.lastColumn {
            #expect(CategoryRules.allows(kind, for: category) == last, "\(kind) for \(category)")
        }
    }

    @Test(arguments: TemplateKind.allCases)
    func legacyCategoriesAllowNoTemplates(kind: TemplateKind) {
        for category in [HUCategory.legacyAudio, .legacyMessaging, .unspecified] {
            #expect(!CategoryRules.allows(kind, for: category))
        }
    }

    @Test(arguments: table)
    func validatorRefusesTemplatesNotAllowedForTheCategory(row: (TemplateKind, Bool, Bool, Bool, Bool)) {
        let (kind, audio, communication, navigation, last) = row
        let columns: [(HUCategory, Bool)] = [(.audio, audio), (.communication, communication), (.navigation, navigation), (.parking, last)]
        for (category, allowed) in columns {
            let violation = TemplateValidator.validate(Fixture.sample(kind), context: Fixture.context(category, Fixture.placement(kind)))
            if allowed {
                #expect(violation == nil, "\(kind) for \(category): \(String(describing: violation))")
            } else {
                #expect(violation?.code == .notAllowedForCategory, "\(kind) for \(category)")
            }
        }
    }

    @Test func stackDepthIsFiveForMostApps() {
        for category in [HUCategory.audio, .communication, .navigation, .evCharging, .parking, .publicSafety, .automaker] {
            #expect(CategoryRules.maxStackDepth(for: category) == 5)
        }
    }

    @Test func fuelingStackDepthIsThree() {
        #expect(CategoryRules.maxStackDepth(for: .fueling) == 3)
    }

    @Test func chargingAndFuelingGetsTheSmallerDepth() {
        #expect(CategoryRules.maxStackDepth(for: .chargingAndFueling) == 3)
    }

    @Test func drivingTaskAndQuickOrderingStackDepthIsTwo() {
        #expect(CategoryRules.maxStackDepth(for: .drivingTask) == 2)
        #expect(CategoryRules.maxStackDepth(for: .quickOrdering) == 2)
    }

    @Test func legacyCategoriesHaveNoStack() {
        #expect(CategoryRules.maxStackDepth(for: .legacyAudio) == 0)
        #expect(CategoryRules.maxStackDepth(for: .legacyMessaging) == 0)
    }

    @Test func audioAppsHaveAtMostFourTabsOthersFive() {
        #expect(CategoryRules.maxTabs(for: .audio) == 4)
        for category in [HUCategory.communication, .navigation, .parking, .quickOrdering] {
            #expect(CategoryRules.maxTabs(for: category) == 5)
        }
    }
}
