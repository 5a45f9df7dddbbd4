// The baseline for the daemon's footprint (scripts/footprint.py): a bare
// SwiftNIO server that echoes whatever it reads, on a Unix socket, one event
// loop, no Foundation, no logging, no protobuf. What headunitd costs above
// this is the daemon's own code and its dependencies.
//
//   NIOEchoServer /path/to.sock
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

final class Echo: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.write(data, promise: nil)
    }
    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }
}

let path = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "/tmp/nio-echo.sock"
unlink(path)
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let channel = try ServerBootstrap(group: group)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Echo()) }
    }
    .bind(unixDomainSocketPath: path)
    .wait()
print("listening on \(path)")
fflush(nil)  // every stream: Swift 6 forbids naming the global stdout
try channel.closeFuture.wait()
