#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HeadUnitWire
// Only the check: the oracle's generated types share our types' names.
import enum HeadUnitProtobufOracle.CodecOracle

/// Round-trip fuzz families, one per template kind and one for the Envelope
/// (issue 49, item 7): the input is one message's bytes, decoded by our codec
/// and by swift-protobuf's generated code (HeadUnitProtobufOracle); both take
/// it or both refuse it, and what both take encodes to the same bytes
/// (`CodecOracle.check`). A template kind's input is also checked inside a
/// `Template`. Selected with `HEADUNIT_FUZZ_FAMILY=codec-<kind>` (e.g.
/// `codec-list`, `codec-envelope`); any disagreement is a crash whose
/// message holds the input's bytes.
enum CodecFuzz {
    static let prefix = "codec-"

    /// The round-trip family named by HEADUNIT_FUZZ_FAMILY, or nil for the other targets.
    static let selected: CodecOracle.Kind? = {
        guard let name = getenv("HEADUNIT_FUZZ_FAMILY").map({ String(cString: $0) }), name.hasPrefix(prefix) else { return nil }
        guard let kind = CodecOracle.Kind(rawValue: String(name.dropFirst(prefix.count))) else {
            FuzzChecks.fail("HEADUNIT_FUZZ_FAMILY=\(name): not one of \(CodecOracle.Kind.allCases.map { prefix + $0.rawValue })")
        }
        return kind
    }()

    static func run(_ kind: CodecOracle.Kind, _ input: UnsafeBufferPointer<UInt8>) {
        do {
            try kind.check(Array(input))
        } catch {
            FuzzChecks.fail("the codecs disagree, \(error)")
        }
    }
}

// MARK: - Seeds

extension CodecFuzz {
    /// Writes each family's seeds as DIR/codec-<kind>/seed-<n> (`HeadUnitFuzz --write-family-seeds DIR`).
    static func writeSeeds(into root: String) -> CInt {
        for kind in CodecOracle.Kind.allCases {
            let folder = root + "/" + prefix + kind.rawValue
            mkdir(folder, 0o755)
            for (index, bytes) in seeds(kind).enumerated() {
                guard let file = fopen(folder + "/seed-\(index + 1)", "wb") else { return 1 }
                _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
                fclose(file)
            }
        }
        return 0
    }

    /// A realistic message of each kind (as a CarPlay app would send it), and a
    /// second one reaching the kind's other fields: images as PNG bytes and refs,
    /// negative and fractional numbers, repeated fields with several elements.
    static func seeds(_ kind: CodecOracle.Kind) -> [[UInt8]] {
        switch kind {
        case .list: [list.wireBytes(), messageList.wireBytes()]
        case .grid: [grid.wireBytes()]
        case .tabBar: [tabBar.wireBytes()]
        case .nowPlaying: [nowPlaying(live: false).wireBytes(), nowPlaying(live: true).wireBytes()]
        case .alert: [alert.wireBytes()]
        case .actionSheet: [actionSheet.wireBytes()]
        case .information: [information.wireBytes()]
        case .pointOfInterest: [pointsOfInterest.wireBytes()]
        case .contact: [contact.wireBytes()]
        case .map: [map.wireBytes()]
        case .search: [HUSearchTemplate.with { $0.placeholder = "Search for places" }.wireBytes()]
        case .voiceControl: [voiceControl.wireBytes()]
        case .envelope: envelopes.map { $0.wireBytes() }
        }
    }

    /// The header of a 1x1 PNG, enough for the car to read its size.
    static let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0])

    static func asset(_ name: String, width: UInt32 = 44, height: UInt32 = 44) -> HUImage {
        HUImage.with { $0.asset = name; $0.widthPx = width; $0.heightPx = height; $0.darkAsset = name + ".dark" }
    }

    static func bar(_ id: String, _ title: String, style: HUButtonStyle = .default) -> HUBarButton {
        HUBarButton.with { $0.id = id; $0.title = title; $0.style = style }
    }

    static func text(_ id: String, _ title: String, style: HUButtonStyle = .default) -> HUTextButton {
        HUTextButton.with { $0.id = id; $0.title = title; $0.style = style }
    }

    static var list: HUListTemplate {
        HUListTemplate.with {
            $0.title = "Podcasts"
            $0.leadingButtons = [bar("back", "Library")]
            $0.trailingButtons = [HUBarButton.with { $0.id = "sort"; $0.image = asset("sort"); $0.disabled = true }]
            $0.emptyViewTitleVariants = ["Nothing to play yet", "Empty"]
            $0.emptyViewSubtitleVariants = ["Subscribe on your phone"]
            $0.sections = [
                HUListSection.with { section in
                    section.id = "recent"
                    section.header = "Recently played"
                    section.items = (0..<4).map { index in
                        HUListItem.with {
                            $0.id = "episode-\(index)"
                            $0.general = HUGeneralItem.with {
                                $0.text = "Episode \(index): Ünïcödé ✓"
                                $0.detailText = "42 min"
                                $0.image = HUImage.with { $0.png = png; $0.widthPx = 1; $0.heightPx = 1 }
                                $0.accessory = .disclosureIndicator
                                $0.showsProgress = true
                                $0.progress = Float(index) / 4
                                $0.playing = index == 0
                                $0.playingIndicatorLocation = .trailing
                                $0.explicitContent = index == 2
                            }
                        }
                    }
                },
                HUListSection.with { section in
                    section.id = "shows"
                    section.items = [HUListItem.with {
                        $0.id = "row"
                        $0.imageRow = HUImageRowItem.with {
                            $0.text = "Shows"
                            $0.images = [asset("a"), HUImage.with { $0.ref = String(repeating: "ab", count: 32) }]
                            $0.imageTitles = ["A", "B"]
                        }
                    }]
                },
            ]
        }
    }

    static var messageList: HUListTemplate {
        HUListTemplate.with {
            $0.title = "Messages"
            $0.sections = [HUListSection.with { section in
                section.id = "conversations"
                section.items = [
                    HUListItem.with {
                        $0.id = "c1"
                        $0.message = HUMessageItem.with {
                            $0.text = "Alice"
                            $0.detailText = "See you at 6"
                            $0.leadingImage = asset("alice")
                            $0.leadingIndicator = .unread
                            $0.trailingKind = .text
                            $0.trailingText = "12:04"
                            $0.conversationID = "conversation-1"
                        }
                    },
                    HUListItem.with {
                        $0.id = "c2"
                        $0.message = HUMessageItem.with {
                            $0.text = "Bob"
                            $0.leadingIndicator = .pin
                            $0.trailingKind = .image
                            $0.trailingImage = asset("mute")
                            $0.phoneOrEmail = "+44 20 7946 0000"
                        }
                    },
                    HUListItem.with {
                        $0.id = "c3"
                        $0.general = HUGeneralItem.with { $0.text = "Read"; $0.read = true; $0.showReadStatus = true; $0.disabled = true; $0.accessory = .cloud }
                    },
                ]
            }]
        }
    }

    static var grid: HUGridTemplate {
        HUGridTemplate.with {
            $0.title = "Radio"
            $0.buttons = (0..<8).map { index in
                HUGridButton.with {
                    $0.id = "station-\(index)"
                    $0.titleVariants = ["Station number \(index)", "St. \(index)"]
                    $0.image = asset("station-\(index)", width: 96, height: 96)
                    $0.disabled = index == 7
                }
            }
            $0.leadingButtons = [bar("favorites", "Favorites")]
            $0.trailingButtons = [bar("search", "Search", style: .confirm)]
        }
    }

    static var tabBar: HUTabBarTemplate {
        HUTabBarTemplate.with {
            $0.tabs = [
                HUTab.with {
                    $0.id = "library"
                    $0.title = "Library"
                    $0.image = asset("library")
                    $0.badge = "3"
                    $0.template = HUTemplate.with { $0.id = "library-list"; $0.list = list }
                },
                HUTab.with {
                    $0.id = "browse"
                    $0.systemItem = .favorites
                    $0.showUnreadDot = true
                    $0.template = HUTemplate.with { $0.id = "browse-grid"; $0.grid = grid }
                },
                HUTab.with {
                    $0.id = "about"
                    $0.title = "About"
                    $0.template = HUTemplate.with { $0.id = "about-info"; $0.information = information }
                },
            ]
            $0.selectedTabID = "browse"
        }
    }

    static func nowPlaying(live: Bool) -> HUNowPlayingTemplate {
        HUNowPlayingTemplate.with {
            $0.title = live ? "Morning Show" : "Clair de lune"
            $0.artist = "Claude Debussy"
            $0.album = "Suite bergamasque"
            $0.artwork = HUImage.with { $0.png = png; $0.widthPx = 1; $0.heightPx = 1 }
            $0.elapsedSeconds = live ? 0 : 83.25
            // A live stream's duration is ignored and may be anything, NaN included (issue 49).
            $0.durationSeconds = live ? .nan : 301.5
            $0.live = live
            $0.playbackRate = live ? 1 : 0.75
            $0.buttons = [
                HUNowPlayingButton.with { $0.id = "shuffle"; $0.kind = .shuffle; $0.selected = true },
                HUNowPlayingButton.with { $0.id = "repeat"; $0.kind = .repeat },
                HUNowPlayingButton.with { $0.id = "rate"; $0.kind = .playbackRate; $0.disabled = live },
                HUNowPlayingButton.with { $0.id = "heart"; $0.kind = .image; $0.image = asset("heart") },
            ]
            $0.upNextEnabled = !live
            $0.upNextTitle = "Up Next"
            $0.albumArtistButtonEnabled = true
            $0.spokenAudio = live
        }
    }

    static var alert: HUAlertTemplate {
        HUAlertTemplate.with {
            $0.titleVariants = ["Your download could not be completed", "Download failed"]
            $0.actions = [text("retry", "Try Again", style: .confirm), text("cancel", "Cancel", style: .cancel)]
        }
    }

    static var actionSheet: HUActionSheetTemplate {
        HUActionSheetTemplate.with {
            $0.title = "Delete episode?"
            $0.message = "It will be removed from all your devices."
            $0.actions = [text("delete", "Delete", style: .destructive), text("keep", "Keep", style: .cancel)]
        }
    }

    static var information: HUInformationTemplate {
        HUInformationTemplate.with {
            $0.title = "Order status"
            $0.layout = .twoColumn
            $0.items = [
                HUInformationItem.with { $0.id = "store"; $0.title = "Store"; $0.detail = "Main Street 12" },
                HUInformationItem.with { $0.id = "ready"; $0.title = "Ready at"; $0.detail = "18:30" },
            ]
            $0.actions = [text("call", "Call Store"), text("directions", "Directions", style: .confirm)]
            $0.leadingButtons = [bar("back", "Back")]
            $0.trailingButtons = [bar("refresh", "Refresh")]
        }
    }

    static var pointsOfInterest: HUPointOfInterestTemplate {
        HUPointOfInterestTemplate.with {
            $0.title = "Chargers nearby"
            $0.selectedIndex = -1
            $0.points = [
                HUPointOfInterest.with {
                    $0.id = "c1"
                    $0.location = HULocation.with { $0.latitude = 48.858_37; $0.longitude = -2.294_481 }
                    $0.title = "Fast charger"
                    $0.subtitle = "150 kW"
                    $0.summary = "2 of 4 free"
                    $0.detailTitle = "Fast charger, car park B"
                    $0.detailSubtitle = "Open 24 hours"
                    $0.detailSummary = "Pay by card"
                    $0.pinImage = asset("pin", width: 24, height: 24)
                    $0.selectedPinImage = asset("pin-selected", width: 24, height: 24)
                    $0.primaryButton = text("go", "Go", style: .confirm)
                    $0.secondaryButton = text("call", "Call")
                },
                HUPointOfInterest.with {
                    $0.id = "c2"
                    $0.location = HULocation.with { $0.latitude = -33.856_8; $0.longitude = 151.215_3 }
                    $0.title = "Slow charger"
                },
            ]
        }
    }

    static var contact: HUContactTemplate {
        HUContactTemplate.with {
            $0.title = "Alice Martin"
            $0.subtitle = "Mobile"
            $0.image = asset("alice", width: 120, height: 120)
            $0.informativeTexts = ["Last call: yesterday", "Birthday today"]
            $0.actions = [
                HUContactAction.with { $0.id = "call"; $0.kind = .call; $0.title = "Call" },
                HUContactAction.with { $0.id = "message"; $0.kind = .message },
                HUContactAction.with { $0.id = "go"; $0.kind = .directions },
                HUContactAction.with { $0.id = "share"; $0.kind = .custom; $0.title = "Share ETA"; $0.image = asset("share") },
            ]
            $0.leadingButtons = [bar("back", "Contacts")]
        }
    }

    static var map: HUMapTemplate {
        HUMapTemplate.with {
            $0.leadingButtons = [bar("destinations", "Destinations")]
            $0.trailingButtons = [bar("settings", "Settings")]
            $0.mapButtons = [
                HUMapButton.with { $0.id = "pan"; $0.image = asset("pan"); $0.focusedImage = asset("pan.focused") },
                HUMapButton.with { $0.id = "zoom-in"; $0.image = asset("plus") },
                HUMapButton.with { $0.id = "zoom-out"; $0.image = asset("minus"); $0.hidden = true; $0.disabled = true },
            ]
            $0.automaticallyHidesNavigationBar = true
            $0.hidesButtonsWithNavigationBar = true
            $0.panningSupported = true
            $0.guidanceBackgroundColor = "#1C2A3F"
        }
    }

    static var voiceControl: HUVoiceControlTemplate {
        HUVoiceControlTemplate.with {
            $0.states = [
                HUVoiceControlState.with { $0.id = "listening"; $0.titleVariants = ["Listening…", "Listening"]; $0.image = asset("mic"); $0.repeats = true },
                HUVoiceControlState.with { $0.id = "working"; $0.titleVariants = ["Working on it"] },
            ]
            $0.activeStateID = "listening"
        }
    }

    /// Envelopes: a request of each template kind, and a Hello.
    static var envelopes: [HUEnvelope] {
        let templates: [HUTemplate] = [
            HUTemplate.with { $0.id = "root"; $0.list = list },
            HUTemplate.with { $0.id = "tabs"; $0.tabBar = tabBar },
            HUTemplate.with { $0.id = "playing"; $0.nowPlaying = nowPlaying(live: true) },
            HUTemplate.with { $0.id = "alert"; $0.alert = alert },
            HUTemplate.with { $0.id = "map"; $0.map = map },
        ]
        var envelopes = templates.enumerated().map { index, template in
            HUEnvelope.with {
                $0.requestID = UInt32(10 + index)
                $0.templateRequest = HUTemplateRequest.with {
                    $0.appID = "com.example.podcasts"
                    $0.sceneID = 1
                    $0.animated = true
                    if index == 0 { $0.setRoot = template } else { $0.push = template }
                }
            }
        }
        envelopes.append(HUEnvelope.with {
            $0.requestID = 1
            $0.hello = HUHello.with { $0.minVersion = 1; $0.maxVersion = 3; $0.role = .phone; $0.name = "Alice's iPhone" }
        })
        return envelopes
    }
}
