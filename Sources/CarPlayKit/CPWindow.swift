import Foundation
import HeadUnitClient
import HeadUnitVideo
import HeadUnitWire
import NIOCore

/// The pixels of one frame of a window: BGRA, 8 bits each, premultiplied
/// alpha (cairo's `FORMAT_ARGB32` on a little-endian machine; alpha is
/// ignored: the car shows the map opaque), `width` x `height` at the
/// window's pixel size, rows `bytesPerRow` apart.
///
/// The window keeps one buffer and hands it to ``CPWindowContent/draw(_:in:)``
/// for each frame; it holds the previous frame's pixels. Valid only during
/// that call: the window encodes it afterwards.
// @unchecked: raw memory used by one side at a time: the app draws on the main actor, then the window awaits its encoder.
public final class CPPixelBuffer: @unchecked Sendable {
    /// Pixels across.
    public let width: Int
    /// Pixels down.
    public let height: Int
    /// Bytes from one row to the next (`width * 4`).
    public let bytesPerRow: Int
    /// The first pixel's first byte (blue).
    public let baseAddress: UnsafeMutableRawPointer

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        bytesPerRow = width * 4
        baseAddress = .allocate(byteCount: bytesPerRow * height, alignment: 16)
        baseAddress.initializeMemory(as: UInt8.self, repeating: 0, count: bytesPerRow * height)
    }

    deinit { baseAddress.deallocate() }

    /// All the bytes, row after row.
    public var bytes: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: baseAddress, count: bytesPerRow * height) }

    /// Fills the buffer with one colour (components 0...255).
    public func fill(red: UInt8, green: UInt8, blue: UInt8) {
        let pixel = UInt32(blue) | UInt32(green) << 8 | UInt32(red) << 16 | 0xFF00_0000
        baseAddress.withMemoryRebound(to: UInt32.self, capacity: width * height) { $0.update(repeating: pixel, count: width * height) }
    }
}

/// What a window shows, standing in for its `rootViewController`: the app
/// draws the window's pixels when the window asks (after
/// ``CPWindow/setNeedsDisplay()``, a change of the window's safe area or
/// content style, a pan or a cluster zoom, and at the window's frame rate
/// while ``CPWindow/isAnimating``).
@MainActor
public protocol CPWindowContent: AnyObject {
    /// Draws the whole window into `pixels` (at ``CPWindow/pixelWidth`` x
    /// ``CPWindow/pixelHeight``). Keep it short: it runs on the main actor;
    /// the window encodes and sends the frame elsewhere.
    func draw(_ pixels: CPPixelBuffer, in window: CPWindow)
    /// A frame left for the car (its number, size, encode time): for
    /// statistics and logs. Optional.
    func window(_ window: CPWindow, didSend frame: CPWindow.SentFrame)
}

extension CPWindowContent {
    /// Does nothing.
    public func window(_ window: CPWindow, didSend frame: CPWindow.SentFrame) {}
}

/// The car's window for a scene, standing in for `UIWindow`: a navigation
/// app draws its map in it (main, dashboard and instrument-cluster scenes
/// each have one, at their own size and scale).
///
/// Set ``rootViewController`` to the app's ``CPWindowContent``; the window
/// asks it for frames, encodes them as H.264 (PROTOCOL.md section 25) and
/// sends them on the scene's video channel, at most
/// ``preferredFramesPerSecond`` a second and only when something changed
/// (``setNeedsDisplay()``) or while ``isAnimating``. The newest picture
/// always wins: nothing is queued behind a frame being encoded or sent. A
/// keyframe the car asks for is the last picture encoded again, without
/// drawing.
///
///     func templateApplicationScene(_ scene: CPTemplateApplicationScene,
///                                   didConnect controller: CPInterfaceController, to window: CPWindow) {
///         window.rootViewController = mapView   // draws BGRA pixels
///     }
///     // later, after a pan: window.setNeedsDisplay()
@MainActor
public final class CPWindow {
    /// Width in points.
    public nonisolated let width: UInt32
    /// Height in points.
    public nonisolated let height: UInt32
    /// Pixels per point (2 or 3).
    public nonisolated let scale: UInt32
    /// Width in pixels (what ``CPWindowContent/draw(_:in:)`` fills).
    public nonisolated let pixelWidth: Int
    /// Height in pixels.
    public nonisolated let pixelHeight: Int
    /// The area not covered by the car's own controls, in points from each
    /// edge (keep the map's focus, the car's position, inside it). Changes
    /// redraw the window.
    public internal(set) var safeAreaInsets: (top: UInt32, left: UInt32, bottom: UInt32, right: UInt32) {
        didSet { if safeAreaInsets != oldValue { setNeedsDisplay() } }
    }
    /// The car's light or dark content for this window (`traitCollection.userInterfaceStyle`). Changes redraw the window.
    public internal(set) var contentStyle: CPContentStyle {
        didSet { if contentStyle != oldValue { setNeedsDisplay() } }
    }
    /// What the window shows (ours: a ``CPWindowContent``, not a `UIViewController`).
    public var rootViewController: (any CPWindowContent)? {
        didSet { setNeedsDisplay() }
    }
    /// Frames a second at most (the car's `max_fps` caps it; 30 on the main
    /// window, 15 on the dashboard and cluster by default).
    public var preferredFramesPerSecond: Int
    /// Redraw at ``preferredFramesPerSecond`` until set back to false (the
    /// car moving on the map, an animation), instead of on request only.
    public var isAnimating = false {
        didSet { wake() }
    }
    /// Counts since the window connected.
    public private(set) var statistics = Statistics()

    /// A frame that left for the car.
    public struct SentFrame: Sendable {
        /// 1, 2, 3... (a gap: a frame skipped because the link was busy).
        public var number: UInt32
        /// The access unit's size.
        public var bytes: Int
        /// An IDR (the first frame, asked for, or after a skipped frame).
        public var isKeyframe: Bool
        /// Converting and encoding it took this long, off the main actor.
        public var encodeMilliseconds: Double
    }

    /// What the window did so far.
    public struct Statistics: Sendable, Equatable {
        /// Frames the app drew.
        public var drawn = 0
        /// Frames sent to the car.
        public var sent = 0
        /// Keyframes among them.
        public var keyframes = 0
        /// Frames encoded but not sent: the previous one had not left yet (latest frame wins).
        public var skipped = 0
        /// Keyframes the car asked for.
        public var keyframeRequests = 0
    }

    /// The scene's video channel; 0 for a window that only tells its geometry.
    let channel: UInt32
    private let params: HUVideoStreamParams
    private weak var phone: PhoneSession?
    private var needsDisplay = true
    private var keyframeNext = false
    private var hasPicture = false
    private var stopped = false
    private var started = false
    private var waiting: CheckedContinuation<Void, Never>?

    init(_ display: HUDisplay, video: HUVideoStreamParams = HUVideoStreamParams(), style: CPContentStyle = .unspecified,
         phone: PhoneSession? = nil, framesPerSecond: Int = 30) {
        width = display.widthPt
        height = display.heightPt
        scale = max(display.scale, 1)
        pixelWidth = video.widthPx > 0 ? Int(video.widthPx) : Int(display.widthPt * max(display.scale, 1))
        pixelHeight = video.heightPx > 0 ? Int(video.heightPx) : Int(display.heightPt * max(display.scale, 1))
        safeAreaInsets = (display.safeArea.top, display.safeArea.left, display.safeArea.bottom, display.safeArea.right)
        contentStyle = style
        channel = video.channel
        params = video
        self.phone = phone
        preferredFramesPerSecond = video.maxFps > 0 ? min(framesPerSecond, Int(video.maxFps)) : framesPerSecond
    }

    /// Draw the window again soon (the app's state changed: a pan, a zoom, the car moved).
    public func setNeedsDisplay() {
        needsDisplay = true
        wake()
    }

    // MARK: the stream (CPApplication starts and stops it)

    /// Starts sending frames once the app sets ``rootViewController``; a window without a channel never streams.
    func start() {
        guard channel != 0, phone != nil, !started else { return }
        started = true
        Task { @MainActor in await self.stream() }
    }

    /// The scene ended: no more frames.
    func stop() {
        stopped = true
        wake()
    }

    /// The car asked for an IDR (a new viewer, a lost frame).
    func keyframeRequested() {
        statistics.keyframeRequests += 1
        keyframeNext = true
        wake()
    }

    private func wake() {
        let continuation = waiting
        waiting = nil
        continuation?.resume()
    }

    private var hasWork: Bool {
        rootViewController != nil && (needsDisplay || isAnimating || (keyframeNext && hasPicture))
    }

    private func stream() async {
        let fps = Double(max(1, preferredFramesPerSecond))
        // The encoder's own IDR interval, in frames: the car's keyframe_interval_ms at our rate.
        let interval = max(1, Int((Double(params.keyframeIntervalMs > 0 ? params.keyframeIntervalMs : 2000) / 1000 * fps).rounded()))
        let bitrate = max(500_000, min(4_000_000, pixelWidth * pixelHeight * 2))
        let encoder: WindowEncoder
        do {
            encoder = try WindowEncoder(width: pixelWidth, height: pixelHeight, fps: fps, bitrate: bitrate, keyframeInterval: interval)
        } catch {
            print("CarPlayKit: no video for the \(pixelWidth)x\(pixelHeight) window: \(error)")
            return
        }
        let pixels = CPPixelBuffer(width: pixelWidth, height: pixelHeight)
        var frameNumber: UInt32 = 0
        var nextDue = ContinuousClock.now
        while !stopped {
            guard hasWork else {
                await withCheckedContinuation { waiting = $0 }
                continue
            }
            // Pacing: one frame per 1/fps at most; what changes meanwhile goes in the next one.
            let now = ContinuousClock.now
            if nextDue > now {
                try? await Task.sleep(until: nextDue, clock: .continuous)
                continue
            }
            nextDue = now + .seconds(1) / Double(max(1, preferredFramesPerSecond))
            guard let content = rootViewController, let phone else { break }
            let redraw = needsDisplay || isAnimating
            needsDisplay = false
            let drawnAt = Self.monotonicMicroseconds()
            if redraw {
                content.draw(pixels, in: self)
                statistics.drawn += 1
            }
            let keyframe = keyframeNext
            keyframeNext = false
            // Off the main actor: conversion and encoding take milliseconds per frame.
            guard let encoded = await encoder.encode(redraw ? pixels : nil, keyframe: keyframe, timestampMilliseconds: Int64(drawnAt / 1000)) else {
                continue
            }
            hasPicture = true
            if stopped { break }
            frameNumber += 1
            let header = VideoFrameHeader(timestampMicroseconds: drawnAt, frameNumber: frameNumber, isKeyframe: encoded.isKeyframe)
            let sent = await phone.sendVideoFrame(channel: channel, header, accessUnit: ByteBuffer(bytes: encoded.accessUnit))
            if sent {
                statistics.sent += 1
                if encoded.isKeyframe { statistics.keyframes += 1 }
                content.window(self, didSend: SentFrame(number: frameNumber, bytes: encoded.accessUnit.count, isKeyframe: encoded.isKeyframe,
                                                        encodeMilliseconds: encoded.milliseconds))
            } else {
                // The previous frame has not left yet: this one is dropped, and the
                // car's decoder needs an IDR after the gap (the last picture, re-encoded).
                statistics.skipped += 1
                keyframeNext = true
            }
        }
    }

    nonisolated static func monotonicMicroseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000 + UInt64(time.tv_nsec) / 1000
    }
}

/// One window's H.264 encoder on its own serial queue, so converting and
/// encoding never hold the main actor nor a thread of Swift's cooperative
/// pool. One frame at a time: the window awaits each before the next.
// @unchecked: `last` and the encoder are touched only on `queue`.
final class WindowEncoder: @unchecked Sendable {
    private let queue = DispatchQueue(label: "CarPlayKit.window-encoder")
    private let encoder: H264Encoder
    /// The last picture encoded: a keyframe request without a change encodes it again.
    private var last: I420Picture?

    /// BGRA to I420 (BT.601 limited range, chroma from the top-left pixel of
    /// each 2x2 block), into the picture's own planes. Raw pointers, so a
    /// debug build converts a 1600x960 window in milliseconds, not the
    /// hundred or more that array subscripts cost.
    static func convert(_ pixels: CPPixelBuffer, into picture: inout I420Picture) {
        let width = pixels.width, height = pixels.height, stride = pixels.bytesPerRow, half = width / 2
        let source = UnsafePointer(pixels.baseAddress.assumingMemoryBound(to: UInt8.self))
        var y = picture.y, u = picture.u, v = picture.v
        picture.y = []
        picture.u = []
        picture.v = []
        y.withUnsafeMutableBufferPointer { yPlane in
            u.withUnsafeMutableBufferPointer { uPlane in
                v.withUnsafeMutableBufferPointer { vPlane in
                    guard let yOut = yPlane.baseAddress, let uOut = uPlane.baseAddress, let vOut = vPlane.baseAddress else { return }
                    for row in 0..<height {
                        let line = source + row * stride
                        let luma = yOut + row * width
                        for column in 0..<width {
                            let pixel = line + column &* 4
                            let b = Int32(pixel[0]), g = Int32(pixel[1]), r = Int32(pixel[2])
                            luma[column] = UInt8(truncatingIfNeeded: ((66 &* r &+ 129 &* g &+ 25 &* b &+ 128) >> 8) &+ 16)
                        }
                        guard row & 1 == 0 else { continue }
                        let chroma = (row / 2) * half
                        for column in 0..<half {
                            let pixel = line + column &* 8
                            let b = Int32(pixel[0]), g = Int32(pixel[1]), r = Int32(pixel[2])
                            uOut[chroma + column] = UInt8(truncatingIfNeeded: ((-38 &* r &- 74 &* g &+ 112 &* b &+ 128) >> 8) &+ 128)
                            vOut[chroma + column] = UInt8(truncatingIfNeeded: ((112 &* r &- 94 &* g &- 18 &* b &+ 128) >> 8) &+ 128)
                        }
                    }
                }
            }
        }
        picture.y = y
        picture.u = u
        picture.v = v
    }

    init(width: Int, height: Int, fps: Double, bitrate: Int, keyframeInterval: Int) throws {
        encoder = try H264Encoder(width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval)
    }

    /// Encodes `pixels` (nil: the last picture again); nil when there is nothing to send.
    func encode(_ pixels: CPPixelBuffer?, keyframe: Bool, timestampMilliseconds: Int64) async
        -> (accessUnit: [UInt8], isKeyframe: Bool, milliseconds: Double)? {
        await withCheckedContinuation { continuation in
            queue.async {
                let start = ContinuousClock.now
                if let pixels {
                    var picture = self.last ?? I420Picture(width: pixels.width, height: pixels.height)
                    self.last = nil  // one owner of the planes while they are written: no copy
                    Self.convert(pixels, into: &picture)
                    self.last = picture
                }
                guard let picture = self.last else { return continuation.resume(returning: nil) }
                if keyframe { self.encoder.requestKeyframe() }
                guard let (accessUnit, isKeyframe) = try? self.encoder.encode(picture, timestampMilliseconds: timestampMilliseconds) else {
                    return continuation.resume(returning: nil)
                }
                let elapsed = ContinuousClock.now - start
                let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
                continuation.resume(returning: (accessUnit, isKeyframe, milliseconds))
            }
        }
    }
}
