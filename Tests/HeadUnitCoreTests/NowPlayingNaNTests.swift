import HeadUnitWire
import NIOCore
import Testing

@testable import HeadUnitCore

/// Issue 48, bug 6: a live now-playing template may carry a `duration_seconds`
/// that is not finite (TEMPLATES.md: finite "unless `live`"; templates.proto:
/// "ignored when live"). The phone's bytes and the car's encoder agree on a
/// NaN bit for bit, so there is one answer whichever path builds the screen:
/// the HMIs get the template as the phone sent it, NaN included, and the
/// metadata stream's `now_playing` says 0 (live, section 19.5).
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
        #expect(try LinearEncoder.bytes(template) == bytes)
        let decoded = try HUTemplate(serializedBytes: bytes)
        #expect(decoded.nowPlaying.durationSeconds.bitPattern == duration.bitPattern)
        #expect(try LinearEncoder.bytes(decoded) == bytes)
        #expect(LinearEncoder.size(of: template) == bytes.count)
        // What the car keeps of the bytes it may splice into screens (the debug
        // build's check of them tripped on NaN != NaN: the daemon died).
        #expect(SceneState.Held.decodes(bytes, to: template))
    }

    @Test func aLiveNowPlayingWithANaNDurationIsShownAsTheAppSentIt() throws {
        var h = CarHarness()
        h.join(h.hmi, .hmi)
        h.join(h.phone, .phone)
        _ = h.announce([("radio", [EntitlementKey.audio])])
        let scene = h.launch("radio")
        #expect(h.template("radio", scene, .setRoot(listTemplate("root", items: 2))).code == .ok)
        let template = Self.live(duration: .nan)
        let bytes: [UInt8] = try template.serializedBytes()
        _ = h.drain(h.hmi)
        let pushed = h.template("radio", scene, .push(template), wire: WireTemplate(opField: WireTemplate.pushField, bytes: bytes))
        #expect(pushed.code == .ok, "\(pushed.message)")
        // The phone's bytes are kept to be sent as they are (the debug build's
        // check of them is what tripped), NaN as sent.
        let held = try #require(h.car.templates.apps["radio"]?.scenes[.main]?.stackHeld.last)
        #expect(held.encoded == bytes)
        let shown = h.drain(h.hmi).compactMap { envelope -> HUTemplate? in
            guard case .screenUpdate(let update) = envelope.body, case .full(let screen)? = update.change else { return nil }
            return screen.top
        }.last
        #expect(shown?.nowPlaying.live == true && shown?.nowPlaying.durationSeconds.isNaN == true)
    }
}
