import Crypto
import HeadUnitSecurity
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A real TCP proxy between a phone and the car, for the tests of issue 23's
/// "Done means": it records every byte both ways, and can tamper with,
/// inject, replay or reorder the phone's TLS records once armed, or (as a
/// man in the middle) terminate the phone's TLS with a key of its own and
/// open its own TLS connection to the car.
final class TLSProxy: @unchecked Sendable {
    // @unchecked: mutable state is behind `state`'s lock.
    enum Mode: Sendable {
        /// Forward the bytes as they are (records, once armed, are mangled by `attack`).
        case relay
        /// Terminate TLS with its own key toward the phone; a new TLS connection to the car.
        case manInTheMiddle
    }

    enum Attack: Sendable {
        /// On the phone's records toward the car.
        case tamper, inject, replay, reorder
        /// Half of the phone's next record reaches the car, then the proxy
        /// closes both sides (a truncation: the rest never arrives).
        case truncate
        /// One bit of the car's next record toward the phone flipped.
        case tamperToPhone
    }

    struct State {
        var phoneToCar: [UInt8] = []
        var carToPhone: [UInt8] = []
        var attack: Attack?
        var armed = false
        /// Records seen from the phone (for replay), and one held back (reorder).
        var records: [[UInt8]] = []
        var held: [UInt8]?
        var pending: [UInt8] = []
        var pendingDown: [UInt8] = []
        var attacked = false
        /// A truncation happened: close both sides after delivering.
        var cut = false
    }

    let state = NIOLockedValueBox(State())
    let mode: Mode
    let port: Int
    private let server: Channel
    private let group = MultiThreadedEventLoopGroup.singleton

    init(toPort target: Int, mode: Mode = .relay) throws {
        self.mode = mode
        let loop = group.next()
        let mitmContext: NIOSSLContext? =
            mode == .manInTheMiddle ? try TLSSetup.serverContext(identity: CarIdentity(privateKey: P256.Signing.PrivateKey())) : nil
        let carContext: NIOSSLContext? = mode == .manInTheMiddle ? try TLSSetup.clientContext() : nil
        var proxy: TLSProxy?
        let box = NIOLockedValueBox<TLSProxy?>(nil)
        server = try ServerBootstrap(group: loop)
            .childChannelOption(.allowRemoteHalfClosure, value: false)
            .childChannelInitializer { phoneSide in
                let carBootstrap = ClientBootstrap(group: phoneSide.eventLoop).channelInitializer { carSide in
                    carSide.eventLoop.makeCompletedFuture {
                        if let carContext {
                            try carSide.pipeline.syncOperations.addHandler(
                                TLSSetup.clientHandler(context: carContext, pinnedCarKey: nil) { _ in })
                        }
                    }
                }
                return carBootstrap.connect(host: "127.0.0.1", port: target).flatMapThrowing { carSide in
                    guard let owner = box.withLockedValue({ $0 }) else { throw SecurityError("proxy gone") }
                    if let mitmContext {
                        try phoneSide.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: mitmContext))
                    }
                    let (toCar, toPhone) = ProxyGlue.pair(owner: owner)
                    try phoneSide.pipeline.syncOperations.addHandler(toCar)
                    try carSide.pipeline.syncOperations.addHandler(toPhone)
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = server.localAddress?.port ?? 0
        proxy = self
        box.withLockedValue { $0 = proxy }
    }

    /// From now on the phone's next TLS records get `attack`.
    func arm(_ attack: Attack) {
        state.withLockedValue {
            $0.attack = attack
            $0.armed = true
        }
    }

    var attacked: Bool { state.withLockedValue { $0.attacked } }

    func capture() -> (phoneToCar: [UInt8], carToPhone: [UInt8]) {
        state.withLockedValue { ($0.phoneToCar, $0.carToPhone) }
    }

    func close() { try? server.close().wait() }

    /// What goes from the phone to the car: recorded, split into TLS records
    /// (5-byte header: type, version, length), and mangled once armed.
    func fromPhone(_ bytes: [UInt8]) -> [UInt8] {
        state.withLockedValue { state in
            state.phoneToCar += bytes
            // Past a man in the middle's TLS the bytes are frames: nothing to mangle.
            if mode == .manInTheMiddle { return bytes }
            state.pending += bytes
            var out: [UInt8] = []
            while state.pending.count >= 5 {
                let length = Int(state.pending[3]) << 8 | Int(state.pending[4])
                guard state.pending.count >= 5 + length else { break }
                let record = Array(state.pending[0..<(5 + length)])
                state.pending.removeFirst(5 + length)
                out += mangle(record, &state)
            }
            return out
        }
    }

    private func mangle(_ record: [UInt8], _ state: inout State) -> [UInt8] {
        defer { state.records.append(record) }
        // Only application data (23) once armed: the handshake stays intact.
        guard state.armed, record[0] == 23, let attack = state.attack, attack != .tamperToPhone else { return record }
        switch attack {
        case .truncate:
            state.armed = false
            state.attacked = true
            state.cut = true
            return Array(record[0..<(record.count / 2)])
        case .tamperToPhone:
            return record
        case .tamper:
            state.armed = false
            state.attacked = true
            var changed = record
            changed[changed.count / 2 + 2] ^= 0x01
            return changed
        case .inject:
            state.armed = false
            state.attacked = true
            let fake: [UInt8] = [23, 3, 3, 0, 40] + (0..<40).map { _ in UInt8.random(in: 0...255) }
            return fake + record
        case .replay:
            state.armed = false
            state.attacked = true
            guard let earlier = state.records.last(where: { $0[0] == 23 }) else { return record }
            return earlier + record
        case .reorder:
            if let held = state.held {
                state.armed = false
                state.attacked = true
                state.held = nil
                return record + held
            }
            state.held = record
            return []
        }
    }

    /// Whether a truncation asked for both sides to close (once).
    func takeCut() -> Bool {
        state.withLockedValue { state in
            defer { state.cut = false }
            return state.cut
        }
    }

    /// What goes from the car to the phone: recorded; once armed with
    /// `tamperToPhone`, one bit of the next application data record flipped.
    func fromCar(_ bytes: [UInt8]) -> [UInt8] {
        state.withLockedValue { state in
            state.carToPhone += bytes
            guard mode == .relay, state.armed, state.attack == .tamperToPhone else { return bytes }
            state.pendingDown += bytes
            var out: [UInt8] = []
            while state.pendingDown.count >= 5 {
                let length = Int(state.pendingDown[3]) << 8 | Int(state.pendingDown[4])
                guard state.pendingDown.count >= 5 + length else { break }
                var record = Array(state.pendingDown[0..<(5 + length)])
                state.pendingDown.removeFirst(5 + length)
                if state.armed, record[0] == 23 {
                    state.armed = false
                    state.attacked = true
                    record[record.count / 2 + 2] ^= 0x01
                }
                out += record
            }
            if !state.armed {
                // Past the attack: the rest as it comes.
                out += state.pendingDown
                state.pendingDown = []
            }
            return out
        }
    }
}

/// Joins the phone's and the car's side of the proxy through its recorder.
final class ProxyGlue: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var partner: ProxyGlue?
    private var context: ChannelHandlerContext?
    private let owner: TLSProxy
    private let isPhoneSide: Bool

    init(owner: TLSProxy, isPhoneSide: Bool) {
        self.owner = owner
        self.isPhoneSide = isPhoneSide
    }

    static func pair(owner: TLSProxy) -> (ProxyGlue, ProxyGlue) {
        let phone = ProxyGlue(owner: owner, isPhoneSide: true), car = ProxyGlue(owner: owner, isPhoneSide: false)
        phone.partner = car
        car.partner = phone
        return (phone, car)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { partner = nil }

    private func deliver(_ bytes: [UInt8]) {
        guard let context, !bytes.isEmpty else { return }
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = Array(unwrapInboundIn(data).readableBytesView)
        if isPhoneSide {
            partner?.deliver(owner.fromPhone(bytes))
            if owner.takeCut() {
                partner?.context?.close(promise: nil)
                context.close(promise: nil)
            }
        } else {
            partner?.deliver(owner.fromCar(bytes))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.context?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
