import Foundation

/// Counts, in debug builds, how often swift-protobuf's coding (the generated
/// `decodeMessage`/`traverse`) runs on the current thread, so a test can
/// show the daemon's request path never uses it (issue 49: one codec).
/// Release builds count nothing.
public enum ProtobufRuntimeUse {
    @inline(__always)
    static func note() {
        #if DEBUG
        let dictionary = Thread.current.threadDictionary
        dictionary[key] = ((dictionary[key] as? Int) ?? 0) + 1
        #endif
    }

    /// Uses on the calling thread so far (always 0 in release builds).
    public static var onThisThread: Int {
        #if DEBUG
        return (Thread.current.threadDictionary[key] as? Int) ?? 0
        #else
        return 0
        #endif
    }

    /// Whether the count means anything in this build.
    public static var isCounted: Bool {
        #if DEBUG
        return true
        #else
        return false
        #endif
    }

    private static let key = "headunit.protobufRuntimeUse"
}
