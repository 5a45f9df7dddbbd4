import Foundation
import HeadUnitClient
import HeadUnitWire
import NIOCore
import NIOPosix
import TestSupport
import Testing

/// The SDK's connection against a tiny in-process fake daemon: handshake,
/// automatic PONG, request/answer correlation with many requests in flight.
/// Runs without headunitd.
@Suite struct ClientConnectionTests {
    /// Answers Hello with Welcome and then PINGs; answers every other request
    /// with OK + TemplateShown(depth = request id), in reverse order per read
    /// batch so correlation by request_id is exercised.
    // @unchecked: a channel handler, used only on its channel's event loop.
    final class FakeDaemonHandler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = Frame
        typealias OutboundOut = ByteBuffer
        var pongs: [String] = []
        var batch: [HUEnvelope] = []
        let onPong: @Sendable (String) -> Void

        init(onPong: @escaping @Sendable (String) -> Void) { self.onPong = onPong }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.header.kind {
            case .pong:
                onPong(String(buffer: frame.payload))
            case .message:
                guard let envelope = try? EnvelopeCodec.decode(frame.payload) else { return }
                if case .hello = envelope.body {
                    var answer = HUEnvelope()
                    answer.requestID = envelope.requestID
                    var welcome = HUWelcome()
                    welcome.version = 1
                    welcome.daemonName = "fake"
                    answer.body = .welcome(welcome)
                    var out = context.channel.allocator.buffer(capacity: 64)
                    EnvelopeCodec.writeFrame(answer, into: &out)
                    out.writeFrame(kind: .ping, payload: ByteBuffer(string: "are-you-there"))
                    context.writeAndFlush(wrapOutboundOut(out), promise: nil)
                } else if envelope.requestID != 0 {
                    batch.append(envelope)
                }
            default:
                break
            }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            guard !batch.isEmpty else { return }
            var out = context.channel.allocator.buffer(capacity: 64 * batch.count)
            for request in batch.reversed() {
                var answer = HUEnvelope()
                answer.requestID = request.requestID
                var result = HUResult()
                var shown = HUTemplateShown()
                shown.depth = request.requestID
                result.detail = .templateShown(shown)
                answer.body = .result(result)
                EnvelopeCodec.writeFrame(answer, into: &out)
            }
            batch.removeAll()
            context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        }
    }

    // @unchecked: `pongs` is only touched under `lock`.
    final class PongBox: @unchecked Sendable {
        let lock = NSLock()
        var pongs: [String] = []
        func add(_ pong: String) { lock.lock(); pongs.append(pong); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return pongs }
    }

    func withFakeDaemon(_ body: (HeadUnitEndpoint, PongBox) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fake-hu-\(UUID().uuidString.prefix(8)).sock").path
        let pongs = PongBox()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maxPayload: 1 << 20)))
                    try channel.pipeline.syncOperations.addHandler(FakeDaemonHandler(onPong: { pongs.add($0) }))
                }
            }
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
        do {
            try await body(.unix(path: path), pongs)
        } catch {
            try? await server.close().get()
            throw error
        }
        try? await server.close().get()
    }

    @Test func handshakeAndAutomaticPong() async throws {
        try await withFakeDaemon { endpoint, pongs in
            let connection = try await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "test"))
            #expect(connection.welcome.daemonName == "fake")
            for _ in 0..<100 where pongs.all.isEmpty { try await Task.sleep(nanoseconds: 10_000_000) }
            #expect(pongs.all == ["are-you-there"])
            await connection.close()
        }
    }

    @Test func manyRequestsInFlightAreMatchedByRequestID() async throws {
        try await withFakeDaemon { endpoint, _ in
            let connection = try await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "test"))
            let request = HUTemplateRequest.with { $0.appID = "a" }
            // 500 concurrent requests: each must get the answer carrying its own id.
            let mismatches = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<500 {
                    group.addTask {
                        let envelope = try await connection.roundTrip(.templateRequest(request))
                        guard case .result(let result)? = envelope.body, case .templateShown(let shown)? = result.detail else { return false }
                        return shown.depth == envelope.requestID
                    }
                }
                var bad = 0
                for try await ok in group where !ok { bad += 1 }
                return bad
            }
            #expect(mismatches == 0)
            await connection.close()
        }
    }

    @Test func pipelinedOnTheConnectionsEventLoop() async throws {
        try await withFakeDaemon { endpoint, _ in
            let connection = try await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "test"))
            let count = try await withTaskExecutorPreference(connection.taskExecutor) {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<64 {
                        group.addTask {
                            for _ in 0..<50 { try await connection.request(.getStatus(HUGetStatus())) }
                            return 50
                        }
                    }
                    return try await group.reduce(0, +)
                }
            }
            #expect(count == 3200)
            await connection.close()
        }
    }

    @Test func requestsFailWhenTheConnectionCloses() async throws {
        var connection: HeadUnitConnection?
        try await withFakeDaemon { endpoint, _ in
            connection = try await HeadUnitConnection.connect(to: endpoint, configuration: .init(role: .phone, name: "test"))
        }
        await connection!.close()
        await #expect(throws: HeadUnitError.self) {
            try await connection!.request(.getStatus(HUGetStatus()))
        }
    }

    @Test func errorCodeNamesRoundTrip() async throws {
        try await onOwnThread {
            #expect(ErrorCodeNames.name(.depthExceeded) == "ERROR_CODE_DEPTH_EXCEEDED")
            #expect(ErrorCodeNames.code(named: "ERROR_CODE_LIMIT_EXCEEDED") == .limitExceeded)
            #expect(ErrorCodeNames.code(named: "ok") == .ok)
        }
    }

    @Test func screenModelAppliesDiffs() async throws {
        try await onOwnThread {
            var screen = HURenderedScreen()
            var update = HUScreenUpdate()
            var full = HURenderedScreen()
            full.appID = "a"
            var item = HUListItem()
            item.id = "i1"
            item.general.text = "old"
            var section = HUListSection()
            section.items = [item]
            full.top.id = "root"
            full.top.list.sections = [section]
            update.change = .full(full)
            ScreenModel.apply(update, to: &screen)
            item.general.text = "new"
            var change = HUElementChange()
            change.listItem = item
            var diff = HUTemplateDiff()
            diff.templateID = "root"
            diff.changes = [change]
            update.change = .diff(diff)
            ScreenModel.apply(update, to: &screen)
            #expect(screen.top.list.sections[0].items[0].general.text == "new")
        }
    }
}
