import COpenH264
import NIOCore

/// A picture in I420 (planar Y, then U and V at half size): what both the
/// encoder takes and the decoder gives.
public struct I420Picture: Sendable {
    public var width: Int
    public var height: Int
    public var y: [UInt8]
    public var u: [UInt8]
    public var v: [UInt8]

    public init(width: Int, height: Int, luma: UInt8 = 16, chroma: UInt8 = 128) {
        self.width = width
        self.height = height
        y = [UInt8](repeating: luma, count: width * height)
        u = [UInt8](repeating: chroma, count: (width / 2) * (height / 2))
        v = u
    }

    /// From BGRA pixels (a cairo `FORMAT_ARGB32` surface on a little-endian
    /// machine), BT.601 limited range, chroma averaged over 2x2 blocks.
    public init(bgra: UnsafeRawBufferPointer, width: Int, height: Int, stride: Int) {
        self.init(width: width, height: height)
        let bytes = bgra.bindMemory(to: UInt8.self)
        let half = width / 2
        for row in 0..<height {
            let line = row * stride
            for column in 0..<width {
                let p = line + column * 4
                let b = Int(bytes[p]), g = Int(bytes[p + 1]), r = Int(bytes[p + 2])
                y[row * width + column] = UInt8(clamping: ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16)
                if row % 2 == 0, column % 2 == 0 {
                    let index = (row / 2) * half + column / 2
                    u[index] = UInt8(clamping: ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128)
                    v[index] = UInt8(clamping: ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128)
                }
            }
        }
    }
}

public struct VideoCodecError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// OpenH264's encoder, constrained baseline (PROTOCOL.md section 25.2), one
/// access unit per picture, Annex B. Not thread-safe: one owner.
public final class H264Encoder {
    private var encoder: UnsafeMutablePointer<ISVCEncoder?>?
    public let width: Int
    public let height: Int
    private var forceKeyframe = true

    /// - Parameters:
    ///   - bitrate: bits per second the rate control aims at.
    ///   - keyframeInterval: an IDR every this many frames at least (section 25.2's `keyframe_interval_ms` x fps).
    public init(width: Int, height: Int, fps: Double = 30, bitrate: Int = 4_000_000, keyframeInterval: Int = 60) throws {
        self.width = width
        self.height = height
        var created: UnsafeMutablePointer<ISVCEncoder?>?
        guard WelsCreateSVCEncoder(&created) == 0, let created, let vtable = created.pointee?.pointee else {
            throw VideoCodecError(description: "WelsCreateSVCEncoder failed")
        }
        encoder = created
        var params = SEncParamBase()
        params.iUsageType = SCREEN_CONTENT_REAL_TIME  // a drawn map: flat areas, sharp lines
        params.iPicWidth = Int32(width)
        params.iPicHeight = Int32(height)
        params.iTargetBitrate = Int32(bitrate)
        params.iRCMode = RC_BITRATE_MODE
        params.fMaxFrameRate = Float(fps)
        guard vtable.Initialize(created, &params) == 0 else {
            throw VideoCodecError(description: "OpenH264 Initialize failed for \(width)x\(height)")
        }
        var interval = Int32(keyframeInterval)
        _ = vtable.SetOption(created, ENCODER_OPTION_IDR_INTERVAL, &interval)
        // Every frame is sent: the phone skips frames itself, when the link is busy (section 25.5).
        var skip = false
        _ = vtable.SetOption(created, ENCODER_OPTION_RC_FRAME_SKIP, &skip)
    }

    deinit {
        if let encoder {
            _ = encoder.pointee?.pointee.Uninitialize(encoder)
            WelsDestroySVCEncoder(encoder)
        }
    }

    /// The next frame is an IDR (a keyframe request, or after a skipped frame).
    public func requestKeyframe() { forceKeyframe = true }

    /// Encodes one picture: the access unit (Annex B) and whether it is an
    /// IDR, or nil when the encoder had nothing to send for it.
    public func encode(_ picture: I420Picture, timestampMilliseconds: Int64) throws -> (accessUnit: [UInt8], isKeyframe: Bool)? {
        guard let encoder, let vtable = encoder.pointee?.pointee else { throw VideoCodecError(description: "encoder gone") }
        precondition(picture.width == width && picture.height == height)
        if forceKeyframe {
            _ = vtable.ForceIntraFrame(encoder, true)
            forceKeyframe = false
        }
        var y = picture.y, u = picture.u, v = picture.v
        var info = SFrameBSInfo()
        let status: Int32 = y.withUnsafeMutableBufferPointer { yp in
            u.withUnsafeMutableBufferPointer { up in
                v.withUnsafeMutableBufferPointer { vp in
                    var source = SSourcePicture()
                    source.iColorFormat = Int32(videoFormatI420.rawValue)
                    source.iPicWidth = Int32(width)
                    source.iPicHeight = Int32(height)
                    source.iStride = (Int32(width), Int32(width / 2), Int32(width / 2), 0)
                    source.pData = (yp.baseAddress, up.baseAddress, vp.baseAddress, nil)
                    source.uiTimeStamp = timestampMilliseconds
                    return vtable.EncodeFrame(encoder, &source, &info)
                }
            }
        }
        guard status == 0 else { throw VideoCodecError(description: "OpenH264 EncodeFrame failed (\(status))") }
        guard info.eFrameType != videoFrameTypeSkip, info.eFrameType != videoFrameTypeInvalid, info.iLayerNum > 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(Int(info.iFrameSizeInBytes))
        withUnsafeBytes(of: &info.sLayerInfo) { raw in
            let layers = raw.bindMemory(to: SLayerBSInfo.self)
            for index in 0..<Int(info.iLayerNum) {
                let layer = layers[index]
                var size = 0
                for nal in 0..<Int(layer.iNalCount) { size += Int(layer.pNalLengthInByte[nal]) }
                out.append(contentsOf: UnsafeBufferPointer(start: layer.pBsBuf, count: size))
            }
        }
        return (out, info.eFrameType == videoFrameTypeIDR)
    }
}

/// OpenH264's decoder: access units in, I420 pictures out (the car side's
/// tests, and any HMI written in Swift). Not thread-safe: one owner.
public final class H264Decoder {
    private var decoder: UnsafeMutablePointer<ISVCDecoder?>?

    public init() throws {
        var created: UnsafeMutablePointer<ISVCDecoder?>?
        guard WelsCreateDecoder(&created) == 0, let created, let vtable = created.pointee?.pointee else {
            throw VideoCodecError(description: "WelsCreateDecoder failed")
        }
        decoder = created
        var params = SDecodingParam()
        params.sVideoProperty.eVideoBsType = VIDEO_BITSTREAM_AVC
        guard vtable.Initialize(created, &params) == 0 else { throw VideoCodecError(description: "OpenH264 decoder Initialize failed") }
    }

    deinit {
        if let decoder {
            _ = decoder.pointee?.pointee.Uninitialize(decoder)
            WelsDestroyDecoder(decoder)
        }
    }

    /// Decodes one access unit; the picture it completes, or nil (none yet).
    /// Throws when the stream is broken (ask for a keyframe).
    public func decode(_ accessUnit: [UInt8]) throws -> I420Picture? {
        guard let decoder, let vtable = decoder.pointee?.pointee else { throw VideoCodecError(description: "decoder gone") }
        var planes: (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?) = (nil, nil, nil)
        var info = SBufferInfo()
        let state = accessUnit.withUnsafeBufferPointer { bytes in
            withUnsafeMutablePointer(to: &planes) { pointer in
                pointer.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 3) { dst in
                    vtable.DecodeFrameNoDelay(decoder, bytes.baseAddress, Int32(bytes.count), dst, &info)
                }
            }
        }
        guard state == dsErrorFree else { throw VideoCodecError(description: "OpenH264 decode error 0x\(String(state.rawValue, radix: 16))") }
        guard info.iBufferStatus == 1, let yp = planes.0, let up = planes.1, let vp = planes.2 else { return nil }
        let system = info.UsrData.sSystemBuffer
        let width = Int(system.iWidth), height = Int(system.iHeight)
        let yStride = Int(system.iStride.0), cStride = Int(system.iStride.1)
        var picture = I420Picture(width: width, height: height)
        for row in 0..<height {
            picture.y.withUnsafeMutableBufferPointer { $0.baseAddress!.advanced(by: row * width).update(from: yp.advanced(by: row * yStride), count: width) }
        }
        for row in 0..<height / 2 {
            picture.u.withUnsafeMutableBufferPointer { $0.baseAddress!.advanced(by: row * (width / 2)).update(from: up.advanced(by: row * cStride), count: width / 2) }
            picture.v.withUnsafeMutableBufferPointer { $0.baseAddress!.advanced(by: row * (width / 2)).update(from: vp.advanced(by: row * cStride), count: width / 2) }
        }
        return picture
    }
}
