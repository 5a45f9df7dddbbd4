import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// Issue 48, bug 6: a live now-playing template may carry a `duration_seconds`
/// that is not finite (TEMPLATES.md: finite "unless `live`"; templates.proto:
/// "ignored when live"). The one codec reads and writes a NaN bit for bit,
/// as swift-protobuf does: the HMIs get the template as the phone sent it,
/// NaN included, and the metadata stream's `now_playing` says 0 (live,
/// section 19.5).
@Suite struct NowPlayingNaNTests {
    static func live(duration: Double) -> HUTemplate {
        HUTemplate.with {
            $0.id = "now-playing"
            $0.nowPlaying = HUNowPlayingTemplate.with {
                $0.title = "Live radio"
                $0.live = true
                $0.playbackRate = 1
                $0.durationSeconds = duration
            }
        }
    }

    /// The encoder writes a double's bits as they are: the same bytes as
    /// swift-protobuf for every NaN (quiet, signalling, with a payload, negative).
    @Test(arguments: [Double.nan, -Double.nan, Double.signalingNaN, Double(bitPattern: 0x7FF8_0000_DEAD_BEEF), .infinity])
    func theEncoderAndTheDecoderAgreeOnANaNDuration(duration: Double) throws {
        let template = Self.live(duration: duration)
        let bytes: [UInt8] = try template.serializedBytes()
        #expect(template.wireBytes() == bytes)
        let decoded = try HUTemplate(wireBytes: bytes)
        #expect(decoded.nowPlaying.durationSeconds.bitPattern == duration.bitPattern)
        #expect(decoded.wireBytes() == bytes)
        #expect(template.wireSize == bytes.count)
    }

    @Test func aLiveNowPlayingWithANaNDurationIsShownAsTheAppSentIt() throws {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("radio", [EntitlementKey.audio])])
        let scene = h.launch("radio")
        #expect(h.template("radio", scene, .setRoot(listTemplate("root", items: 2))).code == .ok)
        let template = Self.live(duration: .nan)
        _ = h.drain(h.hmi)
        let pushed = h.template("radio", scene, .push(template))
        #expect(pushed.code == .ok, "\(pushed.message)")
        let shown = h.drain(h.hmi).compactMap { envelope -> HUTemplate? in
            guard case .screenUpdate(let update) = envelope.body, case .full(let screen)? = update.change else { return nil }
            return screen.top
        }.last
        #expect(shown?.nowPlaying.live == true && shown?.nowPlaying.durationSeconds.isNaN == true)
    }
}
