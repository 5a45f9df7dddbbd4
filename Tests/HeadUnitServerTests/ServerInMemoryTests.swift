import HeadUnitCore
import HeadUnitWire
import NIOCore
import NIOEmbedded
import Testing

@testable import HeadUnitServer

/// The server's handlers and host in memory: the pipeline a Unix connection
/// gets, frames written in, frames read out (PROTOCOL.md sections 2, 4, 6).
@Suite struct ServerInMemoryTests {
    @Test func handshakeThenAnAnswer() throws {
        let server = InMemoryServer()
        let hmi = try server.connectUnix()
        let welcome = try hmi.handshake(role: .hmi)
        #expect(welcome.version == 1)
        let id = try hmi.request(.listPairedDevices(HUListPairedDevices()))
        let result = try #require(try hmi.result(for: id))
        #expect(result.code == .ok)
        #expect(result.pairing.devices.isEmpty)
    }

    @Test func pingIsAnsweredWithItsPayload() throws {
        let server = InMemoryServer()
        let phone = try server.connectUnix()
        try phone.handshake(role: .phone)
        try phone.ping([1, 2, 3, 4])
        let pongs = try phone.frames().filter { $0.kind == .pong }
        #expect(pongs.count == 1)
        #expect(pongs.first.map { Array($0.payload.readableBytesView) } == [1, 2, 3, 4])
    }

    /// A stream out of step (section 2): that peer gets a Goodbye saying why
    /// and is closed; another peer is served as before.
    @Test func aFramingFailureCutsOnlyThatPeer() throws {
        let server = InMemoryServer()
        let broken = try server.connectUnix()
        let other = try server.connectUnix()
        try broken.handshake(role: .phone)
        try other.handshake(role: .hmi)
        _ = try other.frames()

        try broken.send(Array("XX not a frame header".utf8))
        let goodbyes = try broken.envelopes().compactMap { envelope -> HUGoodbye? in
            if case .goodbye(let goodbye) = envelope.body { return goodbye }
            return nil
        }
        let goodbye = try #require(goodbyes.first)
        #expect(goodbye.code == .badMagic)
        #expect(goodbye.reason.contains("0x4855"))
        #expect(!broken.isOpen)

        try other.ping([9])
        #expect(try other.frames().contains { $0.kind == .pong })
        #expect(other.isOpen)
        let id = try other.request(.listPairedDevices(HUListPairedDevices()))
        #expect(try other.result(for: id)?.code == .ok)
    }

    /// The Unix socket's cap (section 10.1): a connection past it is told
    /// why and closed; those admitted are served on; a place freed is taken.
    @Test func aConnectionOverTheCapIsToldWhyAndTheOthersCarryOn() throws {
        var configuration = ServerConfiguration(listeners: [])
        configuration.connectionCaps = ConnectionCaps(maxUnix: 2, unixReserved: 0)
        let server = InMemoryServer(configuration: configuration)
        let first = try server.connectUnix()
        let second = try server.connectUnix()
        let third = try server.connectUnix()
        let goodbye = try #require(try third.envelopes().compactMap { envelope -> HUGoodbye? in
            if case .goodbye(let goodbye) = envelope.body { return goodbye }
            return nil
        }.first)
        #expect(goodbye.code == .tooManyConnections)
        #expect(!goodbye.reason.isEmpty)
        #expect(!third.isOpen)

        try first.handshake(role: .hmi)
        try second.handshake(role: .phone)
        try second.ping([1])
        #expect(try second.frames().contains { $0.kind == .pong })

        try first.channel.close().wait()
        let fourth = try server.connectUnix()
        try fourth.handshake(role: .cluster)
        #expect(fourth.isOpen)
    }

    /// Fan-out to the HMIs (section 10.5): an HMI that takes no writes skips
    /// the home screen's updates; the others get each one; once it takes
    /// writes again it gets the latest home screen, once.
    @Test func anHMIBehindSkipsUpdatesAndGetsTheLatestOnceItCatchesUp() throws {
        let server = InMemoryServer()
        let fast = try server.connectUnix()
        let slow = try server.connectUnix()
        try fast.handshake(role: .hmi)
        try slow.handshake(role: .hmi)
        let phone = try server.connectUnix()
        try phone.handshake(role: .phone)
        _ = try fast.envelopes()
        _ = try slow.envelopes()

        slow.channel.isWritable = false
        slow.channel.pipeline.fireChannelWritabilityChanged()
        for name in ["Radio", "Maps", "Messages"] {
            var app = HUAppInfo()
            app.appID = "com.example.\(name.lowercased())"
            app.displayName = name
            app.entitlements = ["com.apple.developer.carplay-audio"]
            var announce = HUAnnounceApps()
            announce.deviceName = "phone"
            announce.apps = [app]
            let id = try phone.request(.announceApps(announce))
            #expect(try phone.result(for: id)?.code == .ok)
        }
        func homeScreens(_ peer: InMemoryPeer) throws -> [HUHomeScreen] {
            try peer.envelopes().compactMap { envelope in
                if case .homeScreen(let home) = envelope.body { return home }
                return nil
            }
        }
        let seen = try homeScreens(fast)
        #expect(seen.count == 3)
        #expect(seen.last?.icons.count == 3)
        #expect(try homeScreens(slow).isEmpty)

        slow.channel.isWritable = true
        slow.channel.pipeline.fireChannelWritabilityChanged()
        let caughtUp = try homeScreens(slow)
        #expect(caughtUp.count == 1)
        #expect(caughtUp.first?.icons.map(\.displayName) == seen.last?.icons.map(\.displayName))
    }
}
