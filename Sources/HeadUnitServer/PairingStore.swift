import Crypto
import HeadUnitCore
import HeadUnitWire
import Logging
import NIOCore
import NIOPosix
import SwiftProtobuf

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

struct PairingStoreError: Error, CustomStringConvertible {
    var description: String
}

/// The paired devices on disk: `paired-devices.json` (PairingInfo's JSON
/// mapping, `devices` only) in the daemon's state directory. The directory
/// is 0700 and the file 0600, both owned by the daemon (or root); every save
/// writes a new file and renames it over the old one, so a crash or a full
/// disk leaves the previous list intact.
public struct PairingStore: Sendable {
    public static let fileName = "paired-devices.json"
    public let directory: String
    public var path: String { directory + "/" + Self.fileName }

    public init(directory: String) {
        self.directory = directory
    }

    /// Creates the directory (0700) when missing and checks it: ours or
    /// root's, not readable or writable by anyone else.
    public func prepare() throws {
        var current = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0, errno != EEXIST {
                throw PairingStoreError(description: "creating \(current): \(Self.errorText())")
            }
        }
        var info = stat()
        guard stat(directory, &info) == 0 else { throw PairingStoreError(description: "\(directory): \(Self.errorText())") }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw PairingStoreError(description: "\(directory) is not a directory") }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw PairingStoreError(description: "\(directory) belongs to uid \(info.st_uid), not to this daemon (uid \(geteuid())): refusing to keep keys there")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw PairingStoreError(description: "\(directory) is open to other users (mode \(String(info.st_mode & 0o7777, radix: 8))): it must be 0700")
        }
    }

    /// The saved devices; none when the file does not exist yet.
    public func load() throws -> [PairedDeviceRecord] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return [] }
            throw PairingStoreError(description: "\(path): \(Self.errorText())")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw PairingStoreError(description: "\(path): \(Self.errorText())") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw PairingStoreError(description: "\(path) is not a regular file") }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw PairingStoreError(description: "\(path) belongs to uid \(info.st_uid), not to this daemon (uid \(geteuid()))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw PairingStoreError(description: "\(path) is open to other users (mode \(String(info.st_mode & 0o7777, radix: 8))): it must be 0600")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw PairingStoreError(description: "\(path): \(Self.errorText())")
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
            if bytes.count > 4 << 20 { throw PairingStoreError(description: "\(path): larger than 4 MiB") }
        }
        do {
            var options = JSONDecodingOptions()
            options.ignoreUnknownFields = false
            let info = try HUPairingInfo(jsonUTF8Bytes: bytes, options: options)
            return info.devices.map(PairedDeviceRecord.init(wire:))
        } catch {
            throw PairingStoreError(description: "\(path): not a valid paired-device list: \(error)")
        }
    }

    /// Writes `devices` to a temporary file (0600), syncs it and renames it into place.
    public func save(_ devices: [PairedDeviceRecord]) throws {
        var info = HUPairingInfo()
        info.devices = devices.map(\.wire)
        let text = try info.jsonString() + "\n"
        let temporary = path + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw PairingStoreError(description: "\(temporary): \(Self.errorText())") }
        var failure: String?
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty, failure == nil {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno != EINTR { failure = Self.errorText() }
            } else {
                bytes = bytes.dropFirst(written)
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = Self.errorText() }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = Self.errorText() }
        if let failure {
            unlink(temporary)
            throw PairingStoreError(description: "saving \(path): \(failure)")
        }
        // The rename itself must survive a power cut.
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}

/// Where the paired-device list goes to be kept: one whole list per write,
/// done off the serving loop, answered on it. The daemon's is a
/// `PairingStore` on the server's thread pool (`PairingStoreOnThreads`); a
/// test's may hold a write back to play a slow disk.
protocol PairedDeviceDisk: Sendable {
    /// Starts writing `devices`; the future completes on `eventLoop` once
    /// they are on disk (or fails saying why they are not).
    func write(_ devices: [PairedDeviceRecord], completingOn eventLoop: EventLoop) -> EventLoopFuture<Void>
}

/// `PairingStore.save` (a write, two fsyncs and a rename) on a thread pool:
/// a slow disk delays the one answer that waits for it, never the loop.
struct PairingStoreOnThreads: PairedDeviceDisk {
    let store: PairingStore
    let threads: NIOThreadPool

    func write(_ devices: [PairedDeviceRecord], completingOn eventLoop: EventLoop) -> EventLoopFuture<Void> {
        threads.runIfActive(eventLoop: eventLoop) { [store] in try store.save(devices) }
    }
}

/// The paired-device list's way to disk, on the serving loop. The list in
/// memory (`PairingRegistry`) changes at once; the disk follows in order:
/// one write at a time, and a list saved while one is being written waits
/// as the next, a newer one replacing it (the last state wins, so at most
/// two lists are ever held). Each `save` answers once a list at least as
/// new as its own is on disk, with why not if it could not be (logged).
final class PairingWrites {
    /// Answers nil when written, else why not.
    typealias Outcome = String?
    private let disk: (any PairedDeviceDisk)?
    private let eventLoop: EventLoop
    private let logger: Logger
    /// Whether a write is on its way; its waiters.
    private var writing: [EventLoopPromise<Outcome>]?
    /// The list to write once that one is done, and who waits for it.
    private var next: (devices: [PairedDeviceRecord], waiting: [EventLoopPromise<Outcome>])?
    /// Waiting for every write to end (a stop or a handover).
    private var idleWaiters: [EventLoopPromise<Void>] = []

    init(disk: (any PairedDeviceDisk)?, eventLoop: EventLoop, logger: Logger) {
        self.disk = disk
        self.eventLoop = eventLoop
        self.logger = logger
    }

    /// Saves `devices` (the registry's whole list). nil without a disk: the
    /// list is kept in memory only and there is nothing to wait for.
    func save(_ devices: [PairedDeviceRecord]) -> EventLoopFuture<Outcome>? {
        eventLoop.preconditionInEventLoop()
        guard disk != nil else { return nil }
        let promise = eventLoop.makePromise(of: Outcome.self)
        if writing == nil {
            start(devices, waiting: [promise])
        } else {
            next = (devices, (next?.waiting ?? []) + [promise])
        }
        return promise.futureResult
    }

    /// How many wait for `idle()` (a stop or a handover in progress).
    var idleWaiterCount: Int { idleWaiters.count }

    /// Succeeds once no write is on its way or waiting.
    func idle() -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        guard writing != nil else { return eventLoop.makeSucceededVoidFuture() }
        let promise = eventLoop.makePromise(of: Void.self)
        idleWaiters.append(promise)
        return promise.futureResult
    }

    private func start(_ devices: [PairedDeviceRecord], waiting: [EventLoopPromise<Outcome>]) {
        guard let disk else { return }
        writing = waiting
        disk.write(devices, completingOn: eventLoop).assumeIsolated().whenComplete { result in
            self.finished(result)
        }
    }

    private func finished(_ result: Result<Void, Error>) {
        let outcome: Outcome
        switch result {
        case .success:
            outcome = nil
        case .failure(let error):
            logger.error("cannot save paired devices", metadata: ["error": "\(error)"])
            outcome = "\(error)"
        }
        let waiting = writing ?? []
        writing = nil
        if let next {
            self.next = nil
            start(next.devices, waiting: next.waiting)
        }
        for promise in waiting { promise.succeed(outcome) }
        if writing == nil {
            let idle = idleWaiters
            idleWaiters.removeAll()
            for promise in idle { promise.succeed(()) }
        }
    }
}

/// The Ed25519 half of pairing and authentication (swift-crypto).
enum PhoneKeys {
    static func isValidSignature(_ signature: [UInt8], publicKey: [UInt8], message: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    /// Six decimal digits from the system's CSPRNG (getrandom on Linux).
    static func pairingCode() -> String {
        var generator = SystemRandomNumberGenerator()
        let number = UInt32.random(in: 0..<1_000_000, using: &generator)
        let text = String(number)
        return String(repeating: "0", count: 6 - text.count) + text
    }

    static func challenge() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<AuthenticationChallenge.challengeBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
}
