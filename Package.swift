// swift-tools-version:6.0
import PackageDescription

/// Release builds of the daemon-only request path (HeadUnitCore, HeadUnitServer):
/// - no run-time exclusivity checks (debug builds and tests keep them): the
///   Car's sub-states behind `CopyOnWrite` boxes, CarHost's and the handlers'
///   class state made every access a checked one (BENCHMARKS.md, round five);
/// - copies and destroys of large values (protobuf oneofs, optional messages,
///   `CarEffect`) compiled to code of their own (`-disable-type-layout`):
///   by default each called the type's value witness, looking its metadata
///   up and walking its layout at run time (BENCHMARKS.md, round ten).
/// Only for targets that no library product contains: SwiftPM refuses a
/// product with unsafe flags in a dependency resolved by version, whatever
/// the `.when` condition (scripts/versioned-dependency-test.sh checks this).
/// HeadUnitWire is in every library product, so it builds with the defaults
/// (its generated model holds no class storage, which the exclusivity flag
/// was for; a hot class property there would say `@exclusivity(unchecked)`).
let daemonReleaseSettings: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked", "-Xfrontend", "-disable-type-layout"], .when(configuration: .release))
]

let package = Package(
    name: "headunitd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "headunitd", targets: ["headunitd"]),
        .executable(name: "headunitctl", targets: ["headunitctl"]),
        .executable(name: "HeadUnitBench", targets: ["HeadUnitBench"]),
        .executable(name: "headunit-sim", targets: ["headunit-sim"]),
        .executable(name: "HeadUnitFuzz", targets: ["HeadUnitFuzz"]),
        .executable(name: "NIOEchoServer", targets: ["NIOEchoServer"]),
        .library(name: "HeadUnitClient", targets: ["HeadUnitClient"]),
        .library(name: "HeadUnitWire", targets: ["HeadUnitWire"]),
        .library(name: "HeadUnitConformance", targets: ["HeadUnitConformance"]),
        .library(name: "CarPlayKit", targets: ["CarPlayKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"4.0.0"),
        // TLS 1.3 on TCP (NIOSSL, BoringSSL's SPAKE2 for pairing) and the car's self-signed certificate.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        // Only the web simulator (headunit-sim) uses these; headunitd never links them.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
    ],
    targets: [
        // bytes <-> frames <-> protobuf messages; no sockets, no clocks.
        .target(
            name: "HeadUnitWire",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // Our protoc plugin: HeadUnitWire/Generated's plain model and its one codec
        // (scripts/generate-protos.sh runs it; its output is committed).
        .executableTarget(
            name: "protoc-gen-headunit",
            dependencies: [
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SwiftProtobufPluginLibrary", package: "swift-protobuf"),
            ]
        ),
        // The car as pure state machines. No I/O.
        .target(
            name: "HeadUnitCore",
            dependencies: [
                "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                // SHA-256 names each image the HMIs are sent once (Observers/HMIImages.swift).
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: daemonReleaseSettings
        ),
        // TLS on TCP and pairing crypto (PROTOCOL.md section 20): the car's identity
        // key and certificate, pinning, SPAKE2 (BoringSSL's) and the pairing key schedule.
        .target(
            name: "HeadUnitSecurity",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // SwiftNIO listeners and connection pipelines around the Core.
        .target(
            name: "HeadUnitServer",
            dependencies: [
                "HeadUnitCore", "HeadUnitWire", "HeadUnitSecurity",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // TLSUserEvent: a TCP connection's TLS handshake completed.
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // Ed25519 for phone authentication (pairing keys, challenge signatures).
                .product(name: "Crypto", package: "swift-crypto"),
                // The paired-device file is PairingInfo's JSON mapping.
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                // Decoding the phone's Opus audio (PROTOCOL.md section 24).
                "COpus",
                // The car's speakers and microphone on a board ("alsa:DEVICE", section 24.5).
                "CALSA",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: daemonReleaseSettings
        ),
        .systemLibrary(
            name: "CALSA",
            pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]
        ),
        .systemLibrary(
            name: "COpus",
            pkgConfig: "opus",
            providers: [.apt(["libopus-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // libsystemd: listen fds by name, notify, watchdog.
        .target(
            name: "Systemd",
            dependencies: [
                "CSystemd",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Cisco's OpenH264: H.264 constrained baseline, encoder and decoder in one library.
        .systemLibrary(
            name: "COpenH264",
            pkgConfig: "openh264",
            providers: [.apt(["libopenh264-dev"])]
        ),
        // cairo: the MapsApp example draws its map with it (only that example links it).
        .systemLibrary(
            name: "CCairo",
            pkgConfig: "cairo",
            providers: [.apt(["libcairo2-dev"])]
        ),
        // The base view as H.264 (PROTOCOL.md section 25): the phone's encoder, a decoder for the car side.
        .target(
            name: "HeadUnitVideo",
            dependencies: [
                "COpenH264", "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The SDK a phone app or a car component uses.
        .target(
            name: "HeadUnitClient",
            dependencies: [
                "HeadUnitWire", "HeadUnitSecurity",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The phone's Ed25519 identity (PhoneIdentity) for TCP authentication.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Apple-CarPlay-shaped templates on top of HeadUnitClient (docs/CARPLAYKIT.md).
        .target(
            name: "CarPlayKit",
            // HeadUnitVideo: a navigation scene's window encodes what the app draws (CPWindow).
            dependencies: ["HeadUnitClient", "HeadUnitWire", "HeadUnitVideo", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")]
        ),
        // The black-box conformance kit: checks any endpoint over the wire only
        // (raw sockets and the frame codec; no HeadUnitClient logic).
        .target(
            name: "HeadUnitConformance",
            dependencies: [
                "HeadUnitWire", "HeadUnitSecurity",
                .product(name: "NIOCore", package: "swift-nio"),
                // Ed25519 and SHA-256: the kit's TCP phone pairs and authenticates (PROTOCOL.md section 20).
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "headunitd",
            dependencies: [
                "HeadUnitServer", "HeadUnitCore", "HeadUnitWire", "HeadUnitSecurity", "Systemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "headunitctl",
            dependencies: [
                "HeadUnitClient", "HeadUnitWire", "HeadUnitConformance",
                // `test-pattern`: a phone that encodes a test pattern (a video source before a map app draws one).
                "HeadUnitVideo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .executableTarget(
            name: "HeadUnitBench",
            dependencies: [
                "HeadUnitClient", "HeadUnitWire", "HeadUnitSecurity",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The audio run's Opus streams (AudioBench).
                "COpus",
                // The video run's pre-encoded frames (VideoBench).
                "HeadUnitVideo",
            ]
        ),
        // The web simulator: an HMI and a cluster peer served to a browser over HTTP + WebSocket.
        .executableTarget(
            name: "headunit-sim",
            dependencies: [
                "HeadUnitClient", "HeadUnitWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            ],
            resources: [.copy("Web")]
        ),
        // A bare SwiftNIO echo server: the footprint baseline (scripts/footprint.py).
        .executableTarget(
            name: "NIOEchoServer",
            dependencies: [.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")]
        ),
        // The fuzz target's entry point outside fuzz builds: replays files given as arguments.
        .target(name: "CFuzzMain"),
        // swift-protobuf's own generated code (protoc-gen-swift 1.39) for the same .proto
        // files: the independent oracle our codec is held to (scripts/generate-oracle.sh),
        // and the one check comparing them (CodecOracle.swift, hand-written; it alone imports
        // HeadUnitWire). Tests and the fuzz target only; in no vended product.
        .target(
            name: "HeadUnitProtobufOracle",
            dependencies: ["HeadUnitWire", .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        .executableTarget(
            name: "HeadUnitFuzz",
            dependencies: [
                "HeadUnitWire", "HeadUnitCore", "CFuzzMain", "HeadUnitProtobufOracle",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // CarPlayKit examples: short apps runnable against the daemon (docs/CARPLAYKIT.md, "Examples").
        .executableTarget(name: "RadioApp", dependencies: ["CarPlayKit"], path: "Examples/RadioApp"),
        .executableTarget(name: "MessagesApp", dependencies: ["CarPlayKit"], path: "Examples/MessagesApp"),
        .executableTarget(name: "MapsApp", dependencies: ["CarPlayKit", "CCairo"], path: "Examples/MapsApp"),
        .executableTarget(name: "ComfortApp", dependencies: ["CarPlayKit", "HeadUnitClient"], path: "Examples/ComfortApp"),
        // A CarPlay sample's template code ported in Apple's style: compiles with only the documented differences.
        // The Apple-style ports import CarPlayKit alone; their drivers (PortDriverTests) start the real
        // daemon (TestSupport's TestDaemon) and act as the HMI (its RawSocketClient).
        .testTarget(
            name: "CarPlayKitSampleTests",
            // HeadUnitVideo: the HMI's H.264 decoder for the map windows' video (MapsVideoTests).
            dependencies: ["CarPlayKit", "HeadUnitClient", "HeadUnitWire", "HeadUnitVideo", "TestSupport", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // What the test targets that start the real daemon share (one copy, no symlinks): TestDaemon
        // (the launcher), RawSocketClient (the one raw protocol client) and the `.ownThread` trait.
        .target(
            name: "TestSupport",
            dependencies: [
                "HeadUnitWire",
                // RawSocketClient.tcp: TLS 1.3 through TLSBridge, as the daemon's TCP listener requires.
                "HeadUnitSecurity",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "HeadUnitWireTests",
            // The vectors are read from Protocol/vectors (their one copy) via #filePath.
            dependencies: [
                "HeadUnitWire", "HeadUnitProtobufOracle",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .testTarget(
            name: "HeadUnitCoreTests",
            dependencies: ["HeadUnitCore", "HeadUnitWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // The server's handlers driven in memory (EmbeddedChannel, time advanced by the test): no socket, no daemon.
        .testTarget(
            name: "HeadUnitServerTests",
            dependencies: [
                "HeadUnitServer", "HeadUnitCore", "HeadUnitWire", "HeadUnitSecurity",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // The phone's side of pairing: its Ed25519 key, the car's P-256 identity.
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            // The daemon's own command line (an executable target, imported @testable).
            name: "HeadUnitDaemonTests",
            dependencies: ["headunitd", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .testTarget(
            name: "SystemdTests",
            dependencies: ["Systemd"]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "TestSupport",
                "CarPlayKit", "HeadUnitClient", "HeadUnitWire", "HeadUnitConformance", "HeadUnitSecurity", "HeadUnitVideo",
                // The server in process, for a restart handover without systemd (AudioRestartHandoverTests).
                "HeadUnitServer", .product(name: "Logging", package: "swift-log"),
                // An Opus encoder for the app side of the audio tests (PROTOCOL.md section 24).
                "COpus",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // SHA-256, to check image refs (PROTOCOL.md section 12.6).
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
