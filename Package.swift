// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "headunitd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "headunitd", targets: ["headunitd"]),
        .executable(name: "headunitctl", targets: ["headunitctl"]),
        .executable(name: "HeadUnitBench", targets: ["HeadUnitBench"]),
        .executable(name: "HeadUnitFuzz", targets: ["HeadUnitFuzz"]),
        .executable(name: "NIOEchoServer", targets: ["NIOEchoServer"]),
        .library(name: "HeadUnitClient", targets: ["HeadUnitClient"]),
        .library(name: "HeadUnitWire", targets: ["HeadUnitWire"]),
        .library(name: "HeadUnitConformance", targets: ["HeadUnitConformance"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
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
        // The car as pure state machines. No I/O.
        .target(
            name: "HeadUnitCore",
            dependencies: ["HeadUnitWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // SwiftNIO listeners and connection pipelines around the Core.
        .target(
            name: "HeadUnitServer",
            dependencies: [
                "HeadUnitCore", "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
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
        // The SDK a phone app or a car component uses.
        .target(
            name: "HeadUnitClient",
            dependencies: [
                "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The black-box conformance kit: checks any endpoint over the wire only
        // (raw sockets and the frame codec; no HeadUnitClient logic).
        .target(
            name: "HeadUnitConformance",
            dependencies: [
                "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "headunitd",
            dependencies: [
                "HeadUnitServer", "HeadUnitCore", "HeadUnitWire", "Systemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "headunitctl",
            dependencies: [
                "HeadUnitClient", "HeadUnitWire", "HeadUnitConformance",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .executableTarget(
            name: "HeadUnitBench",
            dependencies: [
                "HeadUnitClient", "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // A bare SwiftNIO echo server: the footprint baseline (scripts/footprint.py).
        .executableTarget(
            name: "NIOEchoServer",
            dependencies: [.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")]
        ),
        // The fuzz target's entry point outside fuzz builds: replays files given as arguments.
        .target(name: "CFuzzMain"),
        .executableTarget(
            name: "HeadUnitFuzz",
            dependencies: [
                "HeadUnitWire", "HeadUnitCore", "CFuzzMain",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
        .testTarget(
            name: "HeadUnitWireTests",
            // The vectors are read from Protocol/vectors (their one copy) via #filePath.
            dependencies: [
                "HeadUnitWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .testTarget(
            name: "HeadUnitCoreTests",
            dependencies: ["HeadUnitCore", "HeadUnitWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "SystemdTests",
            dependencies: ["Systemd"]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "HeadUnitClient", "HeadUnitWire", "HeadUnitConformance",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v5]
)
