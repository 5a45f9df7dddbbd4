import Foundation
import HeadUnitWire
import Testing
@testable import HeadUnitCore

/// Protocol/TEMPLATES.md section 6: image sizes in points times the display scale.
@Suite struct RulesImageTests {
    @Test func crcMatchesThePNGSpecification() {
        // Every PNG ends with IEND and this CRC.
        #expect(ImageRules.crc32(Array("IEND".utf8)) == 0xAE42_6082)
    }

    @Test func pngSizeIsReadFromTheIHDRChunk() throws {
        let size = try #require(ImageRules.pngSize(Fixture.pngBytes(width: 120, height: 80)))
        #expect(size.width == 120)
        #expect(size.height == 80)
    }

    @Test func brokenPNGsAreInvalidArguments() {
        var bytes = Fixture.pngBytes(width: 10, height: 10)
        bytes[1] = 0x51  // signature
        #expect(ImageRules.pngSize(bytes) == nil)
        bytes = Fixture.pngBytes(width: 10, height: 10)
        bytes[18] ^= 0xFF  // width changed under the CRC
        #expect(ImageRules.pngSize(bytes) == nil)
        #expect(ImageRules.pngSize(Array(Fixture.pngBytes(width: 10, height: 10).prefix(20))) == nil)
        #expect(ImageRules.pngSize(Fixture.pngBytes(width: 0, height: 10)) == nil)

        var image = HUImage()
        image.png = Data(bytes)
        #expect(ImageRules.check(image, use: .gridButton, scale: 2, what: "x")?.code == .invalidArgument)
    }

    @Test(arguments: [
        (ImageUse.gridButton, UInt32(40)),
        (.tab, 24),
        (.nowPlayingButton, 20),
        (.contactAction, 50),
        (.appIcon, 60),
    ])
    func guideMaximaAtTwoAndThreeTimes(use: ImageUse, points: UInt32) {
        for scale in [UInt32(2), 3] {
            let side = points * scale
            #expect(ImageRules.check(Fixture.png(width: side, height: side), use: use, scale: scale, what: "x") == nil)
            let violation = ImageRules.check(Fixture.png(width: side + 1, height: side), use: use, scale: scale, what: "x")
            #expect(violation?.code == .imageTooLarge)
            #expect(violation?.limit == "image.\(use.rawValue)")
            #expect(violation?.limitValue == side)
        }
    }

    @Test func maneuverMaximaAreRectangles() {
        #expect(ImageUse.maneuverSymbolTwoLines.maximumPoints == (120, 50))
        #expect(ImageUse.laneGuidance.maximumPoints == (120, 18))
        #expect(ImageUse.junctionImage.maximumPoints == (140, 100))
        #expect(ImageRules.check(Fixture.asset(width: 360, height: 54), use: .laneGuidance, scale: 3, what: "lanes") == nil)
        #expect(ImageRules.check(Fixture.asset(width: 360, height: 55), use: .laneGuidance, scale: 3, what: "lanes")?.code == .imageTooLarge)
    }

    @Test func assetsMustDeclareTheirSize() {
        #expect(ImageRules.check(Fixture.asset(width: 0, height: 0), use: .gridButton, scale: 2, what: "x")?.code == .invalidArgument)
        #expect(ImageRules.check(Fixture.asset(width: 80, height: 80), use: .gridButton, scale: 2, what: "x") == nil)
    }

    @Test func declaredSizeMustMatchThePNG() {
        var image = Fixture.png(width: 40, height: 40)
        image.widthPx = 20
        image.heightPx = 20
        #expect(ImageRules.check(image, use: .gridButton, scale: 2, what: "x")?.code == .invalidArgument)
    }

    @Test func absurdScaleDoesNotOverflow() {
        #expect(ImageRules.check(Fixture.asset(width: .max, height: .max), use: .nowPlayingArtwork, scale: .max, what: "x") == nil)
        #expect(ImageRules.check(Fixture.asset(width: 41, height: 41), use: .gridButton, scale: 0, what: "x")?.code == .imageTooLarge)
    }

    @Test func imagesNeedASource() {
        #expect(ImageRules.check(HUImage(), use: .gridButton, scale: 2, what: "x")?.code == .invalidArgument)
    }

    @Test func gridIconAtMostFortyPoints() throws {
        var template = Fixture.grid()
        guard case .grid(var grid) = template.kind else { return }
        grid.buttons[0].image = Fixture.png(width: 81, height: 81)
        template.kind = .grid(grid)
        let violation = try #require(TemplateValidator.validate(template, context: Fixture.context(.audio, .root, scale: 2)))
        #expect(violation.code == .imageTooLarge)
        #expect(violation.message.contains("grid button g0"))
        #expect(TemplateValidator.validate(template, context: Fixture.context(.audio, .root, scale: 3)) == nil)
    }

    @Test func tabIconAtMostTwentyFourPoints() {
        var template = Fixture.tabBar()
        guard case .tabBar(var tabBar) = template.kind else { return }
        tabBar.tabs[0].image = Fixture.asset(width: 49, height: 48)
        template.kind = .tabBar(tabBar)
        #expect(TemplateValidator.validate(template, context: Fixture.context(.audio))?.code == .imageTooLarge)
    }

    @Test func nowPlayingButtonAtMostTwentyPoints() {
        var template = Fixture.nowPlaying()
        guard case .nowPlaying(var nowPlaying) = template.kind else { return }
        nowPlaying.buttons[0].kind = .image
        nowPlaying.buttons[0].image = Fixture.asset(width: 60, height: 60)
        template.kind = .nowPlaying(nowPlaying)
        #expect(TemplateValidator.validate(template, context: Fixture.context(.audio, .push(onTopOf: .list), scale: 3)) == nil)
        #expect(TemplateValidator.validate(template, context: Fixture.context(.audio, .push(onTopOf: .list), scale: 2))?.code == .imageTooLarge)
    }

    @Test func contactActionButtonAtMostFiftyPoints() {
        var template = Fixture.contact()
        guard case .contact(var contact) = template.kind else { return }
        contact.actions[0].image = Fixture.asset(width: 101, height: 100)
        template.kind = .contact(contact)
        #expect(TemplateValidator.validate(template, context: Fixture.context(.communication))?.code == .imageTooLarge)
    }

    @Test func listItemImagesAreChecked() {
        var list = Fixture.listTemplate(Fixture.list())
        guard case .general(var general) = list.sections[0].items[0].kind else { return }
        general.image = Fixture.asset(width: 129, height: 10)
        list.sections[0].items[0].kind = .general(general)
        #expect(TemplateValidator.validate(Fixture.template("list", .list(list)), context: Fixture.context(.audio))?.code == .imageTooLarge)
    }

    @Test func pointOfInterestPinsAreChecked() {
        var template = Fixture.pointOfInterest()
        guard case .pointOfInterest(var poi) = template.kind else { return }
        poi.points[0].pinImage = Fixture.asset(width: 80, height: 80)
        poi.points[0].selectedPinImage = Fixture.asset(width: 161, height: 160)
        template.kind = .pointOfInterest(poi)
        let violation = TemplateValidator.validate(template, context: Fixture.context(.parking))
        #expect(violation?.code == .imageTooLarge)
        #expect(violation?.limit == "image.pointOfInterestSelectedPin")
    }
}
