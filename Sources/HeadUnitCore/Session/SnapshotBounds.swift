/// The largest restart snapshot (PROTOCOL.md section 22) a daemon with these
/// limits can write: the writer checks its snapshot against it before handing
/// over (and stops with Goodbye instead if it were ever over), and the next
/// process reads up to it, so what one writes the other accepts.
///
/// What a snapshot holds is bounded by section 10.4: the phone's templates
/// and announced apps (`max_phone_template_bytes`, and their icons:
/// `max_apps` x `max_image_bytes`), the screens and home
/// screen the HMIs last saw and the metadata state (each within one frame),
/// the calls (section 26.8: a copy of the home screen's, within another frame),
/// per-app navigation texts (a few frames' worth), the lane guidances the
/// guiding app's session holds (`LaneGuidanceLimits.heldBytes`; one app
/// guides at a time, an ended session holds none), the audio streams a
/// restart closes, the output's watchers and the video viewers (at most
/// `audio.streams` app ids, `audio.output_watchers` and three screens'
/// `max_video_viewers` peer ids: within the 1 MiB margin), and per connection its
/// peer record and the bytes read but not yet parsed (at most a frame plus
/// one socket read).
public enum SnapshotBounds {
    /// One read NIO may still have asked for when reading stopped (its receive buffer's ceiling).
    public static let readBytes = 64 << 10
    /// A peer's record: name, role, token, device (strings of at most `max_string_bytes`).
    public static let peerRecordBytes = 8 << 10

    /// `iconBytes`: the apps' icons, which `max_phone_template_bytes` does not
    /// count (`max_apps` x `max_image_bytes`).
    public static func maximumBytes(composed: ComposedLimits, maxConnections: Int, iconBytes: Int) -> Int {
        let frame = composed.maxFrameBytes
        let state = composed.maxPhoneTemplateBytes + iconBytes + 13 * frame + (1 << 20) + LaneGuidanceLimits.heldBytes
        let perConnection = frame + 8 + readBytes + peerRecordBytes
        return state + max(maxConnections, 1) * perConnection
    }
}
