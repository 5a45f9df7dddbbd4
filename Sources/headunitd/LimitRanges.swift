import HeadUnitCore
import HeadUnitServer
import HeadUnitWire

/// One `DaemonLimits` field, as read, and the range the daemon can serve
/// (PROTOCOL.md section 20.6). The range belongs to the limit's owner; this
/// table only names it.
struct LimitRange: Sendable, Equatable {
    /// The field as config.proto spells it.
    var key: String
    /// As read from the file (0: the default, always in range).
    var value: UInt64
    var range: ClosedRange<UInt64>
    /// What a range that depends on another field depends on.
    var bound: String?

    init<Bound: BinaryInteger>(_ key: String, _ value: some BinaryInteger, _ range: ClosedRange<Bound>, bound: String? = nil) {
        self.key = key
        self.value = UInt64(value)
        self.range = UInt64(range.lowerBound)...UInt64(range.upperBound)
        self.bound = bound
    }

    var isValid: Bool { value == 0 || range.contains(value) }

    var problem: String {
        "limits.\(key) is \(value), must be \(range.lowerBound) to \(range.upperBound)" + (bound.map { " (\($0))" } ?? "")
    }
}

extension DaemonConfig {
    /// Every `DaemonLimits` field with its range: one entry each (a test holds
    /// this table to config.proto). Ranges that depend on another field use
    /// that field's value as it will be served (configured, else default).
    static func limitRanges(_ limits: HUDaemonLimits) -> [LimitRange] {
        typealias Connection = ConnectionLimits
        typealias Caps = ConnectionCaps
        let maxOutboundBytes = limits.maxOutboundBytes > 0 ? Int(limits.maxOutboundBytes) : ServerConfiguration(listeners: []).maxOutboundBytes
        let maxTCPFirstFlight = limits.maxTcpFirstFlight > 0 ? Int(limits.maxTcpFirstFlight) : ConnectionCaps().maxTCPFirstFlight
        let audioWindow = limits.audioWindowMs > 0 ? limits.audioWindowMs : AudioStreams.Limits().windowMilliseconds
        return [
            LimitRange("max_payload_bytes", limits.maxPayloadBytes, Connection.maxPayloadBytesRange),
            LimitRange("heartbeat_interval_ms", limits.heartbeatIntervalMs, Connection.heartbeatIntervalRange),
            LimitRange("heartbeat_timeout_ms", limits.heartbeatTimeoutMs, Connection.heartbeatTimeoutRange),
            LimitRange("handshake_timeout_ms", limits.handshakeTimeoutMs, Connection.handshakeTimeoutRange),
            LimitRange("completion_timeout_ms", limits.completionTimeoutMs, Connection.completionTimeoutRange),
            LimitRange("max_errors_per_second", limits.maxErrorsPerSecond, Connection.maxErrorsPerSecondRange),
            LimitRange("max_outbound_bytes", limits.maxOutboundBytes, ServerConfiguration.maxOutboundBytesRange),
            LimitRange("slow_consumer_timeout_ms", limits.slowConsumerTimeoutMs, ServerConfiguration.slowConsumerTimeoutRange),
            LimitRange("shutdown_grace_ms", limits.shutdownGraceMs, ServerConfiguration.shutdownGraceRange),
            LimitRange("max_connections", limits.maxConnections, Caps.maxTotalRange),
            LimitRange("max_unix_connections", limits.maxUnixConnections, Caps.maxUnixRange),
            LimitRange("max_tcp_connections", limits.maxTcpConnections, Caps.maxTCPRange),
            LimitRange("announce_timeout_ms", limits.announceTimeoutMs, Connection.announceTimeoutRange),
            LimitRange("max_requests_per_second", limits.maxRequestsPerSecond, Connection.maxRequestsPerSecondRange),
            LimitRange("max_string_bytes", limits.maxStringBytes, MessageLimits.maxStringBytesRange),
            LimitRange("max_image_bytes", limits.maxImageBytes, MessageLimits.maxImageBytesRange),
            LimitRange("max_message_elements", limits.maxMessageElements, MessageLimits.maxElementsRange),
            LimitRange("max_apps", limits.maxApps, CarConfiguration.maxAppsRange),
            LimitRange("resume_grace_ms", limits.resumeGraceMs, Connection.resumeGraceRange),
            LimitRange("max_tcp_unauthenticated", limits.maxTcpUnauthenticated, Caps.maxTCPUnauthenticatedRange),
            LimitRange("max_tcp_unauthenticated_per_source", limits.maxTcpUnauthenticatedPerSource, Caps.maxTCPUnauthenticatedPerSourceRange),
            LimitRange("unix_reserved_connections", limits.unixReservedConnections, Caps.unixReservedRange),
            LimitRange("auth_timeout_ms", limits.authTimeoutMs, Connection.authTimeoutRange),
            LimitRange("max_unauthenticated_frames", limits.maxUnauthenticatedFrames, Connection.maxUnauthenticatedFramesRange),
            LimitRange("tcp_evictions_per_source_per_second", limits.tcpEvictionsPerSourcePerSecond, Caps.tcpEvictionsPerSourcePerSecondRange),
            LimitRange("max_tcp_per_device", limits.maxTcpPerDevice, Caps.maxTCPPerDeviceRange),
            LimitRange("max_tcp_first_flight", limits.maxTcpFirstFlight, Caps.maxTCPFirstFlightRange),
            LimitRange(
                "max_tcp_first_flight_per_source", limits.maxTcpFirstFlightPerSource,
                Caps.maxTCPFirstFlightPerSourceRange(maxTCPFirstFlight: maxTCPFirstFlight), bound: "at most max_tcp_first_flight, \(maxTCPFirstFlight)"),
            LimitRange("tcp_first_flight_timeout_ms", limits.tcpFirstFlightTimeoutMs, Caps.tcpFirstFlightTimeoutRange),
            LimitRange("max_phone_template_bytes", limits.maxPhoneTemplateBytes, ComposedLimits.maxPhoneTemplateBytesRange),
            LimitRange("max_pending_remote_commands", limits.maxPendingRemoteCommands, RemoteCommands.Limits.maxPendingRange),
            LimitRange("remote_command_timeout_ms", limits.remoteCommandTimeoutMs, RemoteCommands.Limits.timeoutRange),
            LimitRange("max_video_viewers", limits.maxVideoViewers, VideoRoutes.Limits.maxViewersRange),
            LimitRange(
                "video_viewer_buffer_bytes", limits.videoViewerBufferBytes,
                ServerConfiguration.videoViewerBufferRange(maxOutboundBytes: maxOutboundBytes),
                bound: "at most half the write buffer's high-water mark for max_outbound_bytes \(maxOutboundBytes)"),
            LimitRange("keyframe_request_interval_ms", limits.keyframeRequestIntervalMs, VideoRoutes.Limits.keyframeIntervalRange),
            LimitRange(
                "audio_jitter_ms", limits.audioJitterMs, AudioStreams.Limits.jitterRange(windowMilliseconds: audioWindow),
                bound: "below audio_window_ms, \(audioWindow)"),
            LimitRange("audio_window_ms", limits.audioWindowMs, AudioStreams.Limits.windowRange, bound: "the longest Opus packet is 120 ms"),
            LimitRange("max_audio_streams", limits.maxAudioStreams, AudioStreams.Limits.maxStreamsRange),
            LimitRange(
                "max_calls", limits.maxCalls, CallSession.Limits.maxCallsRange,
                bound: "one app holds one fewer, so another app's call finds a slot"),
            LimitRange("max_call_actions", limits.maxCallActions, CallSession.Limits.maxActionsPerAppRange),
            LimitRange("call_action_timeout_ms", limits.callActionTimeoutMs, CallSession.Limits.actionTimeoutRange),
            LimitRange("call_ring_timeout_ms", limits.callRingTimeoutMs, CallSession.Limits.ringTimeoutRange),
            LimitRange("assistant_timeout_ms", limits.assistantTimeoutMs, AssistantSession.Limits.timeoutRange),
        ]
    }

    /// Run once the file (and `--max-payload`) is read: a limit out of its
    /// range stops the start, naming every such key, its value and its range.
    static func checkLimitRanges(_ limits: HUDaemonLimits) throws {
        let problems = limitRanges(limits).filter { !$0.isValid }.map(\.problem)
        guard problems.isEmpty else { throw ConfigError(description: problems.joined(separator: "; ")) }
    }
}
