import Foundation
import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// PROTOCOL.md section 12.6: what the HMIs are sent carries images by ref,
/// each held by the car while a state shows it.
@Suite("Images once (HMIImages)")
struct HMIImagesTests {
    static func png(_ seed: UInt8) -> HUImage {
        var image = Fixture.png(width: 40, height: 40)
        image.png.append(contentsOf: [UInt8](repeating: seed, count: 64))
        return image
    }

    /// Every image field of every template kind, each a PNG of its own.
    static func templates() -> [HUTemplate] {
        var seed: UInt8 = 0
        func next() -> HUImage { seed += 1; return png(seed) }
        let bar = { HUBarButton.with { $0.id = "b\(seed)"; $0.image = next() } }
        let list = HUTemplate.with {
            $0.id = "list"
            $0.list = HUListTemplate.with {
                $0.leadingButtons = [bar()]
                $0.trailingButtons = [bar()]
                $0.sections = [HUListSection.with {
                    $0.items = [
                        HUListItem.with { $0.id = "g"; $0.general = HUGeneralItem.with { $0.image = next(); $0.accessoryImage = next() } },
                        HUListItem.with { $0.id = "r"; $0.imageRow = HUImageRowItem.with { $0.images = [next(), next()] } },
                        HUListItem.with { $0.id = "m"; $0.message = HUMessageItem.with { $0.leadingImage = next(); $0.trailingImage = next() } },
                    ]
                }]
            }
        }
        let grid = HUTemplate.with {
            $0.id = "grid"
            $0.grid = HUGridTemplate.with {
                $0.buttons = [HUGridButton.with { $0.id = "gb"; $0.image = next() }]
                $0.leadingButtons = [bar()]
                $0.trailingButtons = [bar()]
            }
        }
        let tabs = HUTemplate.with {
            $0.id = "tabs"
            $0.tabBar = HUTabBarTemplate.with { $0.tabs = [HUTab.with { $0.id = "t"; $0.image = next(); $0.template = grid }] }
        }
        let nowPlaying = HUTemplate.with {
            $0.id = "now-playing"
            $0.nowPlaying = HUNowPlayingTemplate.with {
                $0.artwork = next()
                $0.buttons = [HUNowPlayingButton.with { $0.id = "n"; $0.image = next() }]
            }
        }
        let information = HUTemplate.with {
            $0.id = "info"
            $0.information = HUInformationTemplate.with { $0.leadingButtons = [bar()]; $0.trailingButtons = [bar()] }
        }
        let poi = HUTemplate.with {
            $0.id = "poi"
            $0.pointOfInterest = HUPointOfInterestTemplate.with {
                $0.points = [HUPointOfInterest.with { $0.id = "p"; $0.pinImage = next(); $0.selectedPinImage = next() }]
            }
        }
        let contact = HUTemplate.with {
            $0.id = "contact"
            $0.contact = HUContactTemplate.with {
                $0.image = next()
                $0.actions = [HUContactAction.with { $0.id = "a"; $0.image = next() }]
                $0.leadingButtons = [bar()]
                $0.trailingButtons = [bar()]
            }
        }
        let map = HUTemplate.with {
            $0.id = "map"
            $0.map = HUMapTemplate.with {
                $0.leadingButtons = [bar()]
                $0.trailingButtons = [bar()]
                $0.mapButtons = [HUMapButton.with { $0.id = "mb"; $0.image = next(); $0.focusedImage = next() }]
            }
        }
        let voice = HUTemplate.with {
            $0.id = "voice"
            $0.voiceControl = HUVoiceControlTemplate.with { $0.states = [HUVoiceControlState.with { $0.id = "v"; $0.image = next() }] }
        }
        return [list, grid, tabs, nowPlaying, information, poi, contact, map, voice]
    }

    @Test func everyImageOfEveryTemplateKindGoesByRefAndIsHeld() {
        var images = HMIImages()
        for template in Self.templates() {
            var screen = HURenderedScreen.with {
                $0.top = template
                $0.presented = template
                $0.searchResults = template.list.sections.first?.items ?? []
            }
            let inline = screen
            #expect(ImageWalk.contains(screen, where: ImageWalk.isInline))
            images.externalize(&screen)
            // No PNG left anywhere (the walk misses no image field), and each ref is held.
            #expect(!ImageWalk.contains(screen, where: ImageWalk.isInline), "\(template.id): an inline PNG is left")
            let refs = HMIImages.refs(in: screen)
            #expect(!refs.isEmpty)
            for ref in refs {
                #expect(images.png(ref).map { HMIImages.ref(of: $0) } == ref)
            }
            // Putting the bytes back gives the screen as it was.
            var restored = screen
            ImageWalk.rewrite(&restored, where: ImageWalk.isRef) { image in
                if case .ref(let ref) = image.source, let png = images.png(ref) { image.source = .png(png) }
            }
            #expect(restored == inline, "\(template.id)")
        }
    }

    /// Publishing takes a screen's refs from the walk `externalize` makes
    /// (issue 30): they must be what walking the frame that carries it finds.
    @Test func externalizeReturnsTheRefsOfAScreenWithoutInlinePNGs() {
        var images = HMIImages()
        for template in Self.templates() {
            var screen = HURenderedScreen.with {
                $0.top = template
                $0.presented = template
                $0.searchResults = template.list.sections.first?.items ?? []
            }
            // Inline PNGs replaced: the refs are unknown to it (nil), and the scan sees them inline first.
            #expect(ImageWalk.scan(screen).hasInline)
            #expect(images.externalize(&screen) == nil, "\(template.id)")
            // Now by ref: the refs come back, as a walk of the whole update envelope finds them.
            let envelope = HUEnvelope.with {
                $0.screenUpdate = HUScreenUpdate.with { $0.screen = .main; $0.sequence = 7; $0.full = screen }
            }
            let expected = HMIImages.refs(in: envelope)
            #expect(!expected.isEmpty)
            #expect(!ImageWalk.scan(screen).hasInline)
            #expect(images.externalize(&screen) == expected, "\(template.id)")
        }
        // No image at all: no refs, and none inline.
        var bare = HURenderedScreen.with { $0.top = HUTemplate.with { $0.id = "bare"; $0.search = HUSearchTemplate() } }
        #expect(images.externalize(&bare) == [])
    }

    @Test func theSameBytesHaveTheSameRefAndUnshownImagesAreForgotten() {
        var images = HMIImages()
        var first = HUHomeScreen.with { $0.icons = [HUHomeScreenIcon.with { $0.icon = Self.png(1) }, HUHomeScreenIcon.with { $0.icon = Self.png(1) }] }
        images.externalize(&first)
        #expect(first.icons[0].icon.ref == first.icons[1].icon.ref)
        #expect(images.count == 1)
        images.endRound()
        // Still shown in the next round: kept; not shown in a whole round: forgotten.
        var second = HUHomeScreen.with { $0.icons = [HUHomeScreenIcon.with { $0.icon = Self.png(2) }] }
        images.externalize(&second)
        images.endRound()
        #expect(images.png(first.icons[0].icon.ref) == nil)
        #expect(images.png(second.icons[0].icon.ref) != nil)
    }

    /// Through the Car: a new HMI's home screen names the app icon by ref,
    /// `GetImage` returns its bytes, an unknown ref is UNKNOWN_IMAGE.
    @Test func aNewHMIGetsTheHomeScreenByRefAndGetImageAnswers() {
        var harness = CarHarness()
        harness.join(harness.phone, .phone)
        let icon = Fixture.png(width: 120, height: 120)
        let result = harness.request(harness.phone, .announceApps(HUAnnounceApps.with {
            $0.deviceName = "Test Phone"
            $0.apps = [HUAppInfo.with { $0.appID = "a"; $0.displayName = "A"; $0.entitlements = ["com.apple.developer.carplay-audio"]; $0.icon = icon }]
        }))
        #expect(result.appDecisions.decisions.first?.accepted == true, "\(result)")
        harness.join(harness.hmi, .hmi)
        let home = harness.drain(harness.hmi).compactMap { envelope -> HUHomeScreen? in
            if case .homeScreen(let home) = envelope.body { return home }
            return nil
        }.last
        guard case .ref(let ref)? = home?.icons.first?.icon.source else {
            Issue.record("icon not by ref: \(String(describing: home))")
            return
        }
        #expect(ref == HMIImages.ref(of: icon.png))
        let answer = harness.request(harness.hmi, .getImage(HUGetImage.with { $0.ref = ref }))
        #expect(answer.code == .ok && answer.imageData.png == icon.png)
        #expect(harness.request(harness.hmi, .getImage(HUGetImage.with { $0.ref = "nope" })).code == .unknownImage)
    }

    /// A publish whose home-screen inputs did not change does not build the
    /// home screen again (`HomeInputs`), yet its icons stay in use round after
    /// round; a change (a scene connecting marks the icon running) sends it again.
    @Test func anUnchangedHomeScreenKeepsItsIconsAcrossPublishes() {
        var harness = CarHarness()
        harness.join(harness.phone, .phone)
        let icon = Fixture.png(width: 120, height: 120)
        _ = harness.request(harness.phone, .announceApps(HUAnnounceApps.with {
            $0.deviceName = "Test Phone"
            $0.apps = [HUAppInfo.with { $0.appID = "a"; $0.displayName = "A"; $0.entitlements = ["com.apple.developer.carplay-audio"]; $0.icon = icon }]
        }))
        harness.join(harness.hmi, .hmi)
        _ = harness.drain(harness.hmi)
        let ref = HMIImages.ref(of: icon.png)
        for _ in 0..<5 {
            // A request that changes no home-screen input (each request publishes).
            _ = harness.request(harness.phone, .getStatus(HUGetStatus()))
            #expect(harness.car.hmiImage(ref)?.png == icon.png, "the icon is still shown")
        }
        #expect(harness.drain(harness.hmi).allSatisfy { if case .homeScreen = $0.body { false } else { true } }, "no home screen resent")
        // The app is launched: its icon shows it running, so the home screen is sent again.
        _ = harness.launch("a")
        let homes = harness.drain(harness.hmi).compactMap { envelope -> HUHomeScreen? in
            if case .homeScreen(let home) = envelope.body { return home }
            return nil
        }
        #expect(homes.last?.icons.first?.running == true, "\(homes)")
        #expect(harness.car.hmiImage(ref)?.png == icon.png)
    }

    /// `HomeInputs` keeps each app's info by reference: the same reference
    /// is equal without a look inside, another one with the same info is
    /// equal, and a changed name or icon is not.
    @Test func homeInputsCompareAppInfosByReferenceThenByValue() {
        let info = HUAppInfo.with { $0.appID = "a"; $0.displayName = "A"; $0.icon = Fixture.png(width: 120, height: 120) }
        let app = AppState(info: info)
        let calls = CopyOnWrite(wrappedValue: CallSession())
        func inputs(_ info: CopyOnWrite<HUAppInfo>?) -> HomeInputs {
            HomeInputs(
                deviceName: "Phone", nowPlayingAppID: "", phoneLink: .connected, calls: calls, assistant: CopyOnWrite(wrappedValue: AssistantSession()),
                apps: [HomeInputs.App(id: "a", info: info, category: .audio, running: false)])
        }
        #expect(inputs(app.sharedInfo) == inputs(app.sharedInfo), "the same reference")
        #expect(inputs(app.sharedInfo) == inputs(CopyOnWrite(wrappedValue: info)), "another reference to an equal info")
        var renamed = info
        renamed.displayName = "B"
        #expect(inputs(app.sharedInfo) != inputs(CopyOnWrite(wrappedValue: renamed)), "a changed name")
        var reiconed = info
        reiconed.icon = Fixture.png(width: 121, height: 121)
        #expect(inputs(app.sharedInfo) != inputs(CopyOnWrite(wrappedValue: reiconed)), "a changed icon")
        #expect(inputs(app.sharedInfo) != inputs(nil), "an app gone")
    }
}
