import Crypto
import HeadUnitSecurity
import HeadUnitWire
import NIOConcurrencyHelpers

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The phone's Ed25519 key for TCP authentication (PROTOCOL.md section 20).
/// Paired once with a code the car shows; afterwards the connection signs the
/// daemon's challenge with it after every Welcome on TCP.
///
///     let identity = try PhoneIdentity.loadOrCreate()            // ~/.local/state/headunitctl/phone-key
///     let phone = try await PhoneSession.connect(to: .tcp(host: "127.0.0.1", port: 7420), deviceName: "Alice's iPhone") {
///         $0.identity = identity
///         $0.pairingCode = "123456"                                // first time only
///     }
public struct PhoneIdentity: Sendable {
    /// Kept as raw bytes: the key type itself is not Sendable.
    private let rawPrivateKey: [UInt8]
    /// The car this phone paired with: its TLS key (SPKI DER), pinned on every
    /// later TLS connection (PROTOCOL.md section 20). nil: not paired yet.
    public var carKey: [UInt8]?

    public init(privateKey: Curve25519.Signing.PrivateKey = .init()) {
        self.rawPrivateKey = Array(privateKey.rawRepresentation)
    }

    public var privateKey: Curve25519.Signing.PrivateKey {
        // 32 bytes that came from a valid key: cannot fail.
        try! Curve25519.Signing.PrivateKey(rawRepresentation: rawPrivateKey)
    }

    public var publicKey: [UInt8] { Array(privateKey.publicKey.rawRepresentation) }

    /// The id the car knows this phone by: lowercase hex of the first 16 bytes
    /// of SHA-256(public key), as the daemon derives it.
    public var deviceID: String { DeviceID.of(publicKey: publicKey) }

    /// The admission ticket for a new TCP connection to the car this phone
    /// paired with (PROTOCOL.md section 10.1): the TLS server name that lets
    /// the car admit the connection as this device's before any stranger can
    /// evict it. nil when not paired (no car key). Each call's counter is
    /// larger than the last one this process made (the clock in microseconds).
    public func admissionTicket() -> String? {
        guard let carKey else { return nil }
        return try? AdmissionTicket(signing: privateKey, deviceID: deviceID, carKeyDER: carKey, counter: TicketCounter.next()).serverName
    }

    /// The Authenticate message for this connection's challenge.
    public func authenticate(challenge: [UInt8], connectionID: UInt64) throws -> HUAuthenticate {
        var message = Array("headunitd-auth-v1".utf8)
        message += challenge
        withUnsafeBytes(of: connectionID.bigEndian) { message += $0 }
        var authenticate = HUAuthenticate()
        authenticate.deviceID = deviceID
        authenticate.signature = .init(try privateKey.signature(for: message))
        return authenticate
    }

    // MARK: - The key file

    /// $HEADUNIT_PHONE_KEY, else $XDG_STATE_HOME/headunitctl/phone-key, else ~/.local/state/headunitctl/phone-key.
    public static var defaultPath: String {
        func environment(_ name: String) -> String? {
            guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else { return nil }
            return value
        }
        if let path = environment("HEADUNIT_PHONE_KEY") { return path }
        let state = environment("XDG_STATE_HOME") ?? ((environment("HOME") ?? "/tmp") + "/.local/state")
        return state + "/headunitctl/phone-key"
    }

    /// Reads the key at `path` (32 raw private-key bytes as hex), or creates one
    /// there (directory 0700, file 0600) when there is none.
    public static func loadOrCreate(path: String = defaultPath) throws -> PhoneIdentity {
        if let identity = try load(path: path) { return identity }
        let identity = PhoneIdentity()
        try identity.save(path: path)
        return identity
    }

    /// nil when the file does not exist.
    public static func load(path: String) throws -> PhoneIdentity? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw IdentityError("\(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw IdentityError("\(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & 0o077 == 0 else {
            throw IdentityError("\(path) is readable by other users (mode \(String(info.st_mode & 0o777, radix: 8))): chmod 600 it")
        }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { throw IdentityError("\(path): empty or unreadable") }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace
        // Line 1: the key; line 2 (once paired): "car " and the car's key in hex.
        let lines = text.split(separator: "\n").map { String($0).trimmingWhitespace }
        guard let first = lines.first, let bytes = Hex.bytes(first, uppercase: true), bytes.count == 32,
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: bytes)
        else {
            throw IdentityError("\(path): not a phone key (64 hex digits)")
        }
        var identity = PhoneIdentity(privateKey: key)
        if lines.count > 1, lines[1].hasPrefix("car ") {
            guard let car = Hex.bytes(lines[1].dropFirst(4), uppercase: true), !car.isEmpty else {
                throw IdentityError("\(path): line 2 is not 'car' and the car's key in hex")
            }
            identity.carKey = car
        }
        return identity
    }

    public func save(path: String) throws {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            var current = path.hasPrefix("/") ? "" : "."
            for component in path[..<slash].split(separator: "/") {
                current += "/" + component
                if mkdir(current, 0o700) != 0, errno != EEXIST {
                    throw IdentityError("creating \(current): \(String(cString: strerror(errno)))")
                }
            }
        }
        let temporary = path + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw IdentityError("\(temporary): \(String(cString: strerror(errno)))") }
        var content = Hex.string(privateKey.rawRepresentation) + "\n"
        if let carKey { content += "car " + Hex.string(carKey) + "\n" }
        let text = Array(content.utf8)
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == text.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw IdentityError("saving \(path): \(String(cString: strerror(errno)))")
        }
    }

    public struct IdentityError: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        String(self.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}

/// A ticket's counter: the wall clock in microseconds, strictly increasing
/// within the process (two connections in one microsecond, or a clock set
/// back, still get larger counters than before).
enum TicketCounter {
    private static let last = NIOLockedValueBox<UInt64>(0)

    static func next() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let micros = UInt64(max(0, now.tv_sec)) * 1_000_000 + UInt64(max(0, now.tv_nsec)) / 1_000
        return last.withLockedValue { last in
            last = max(last + 1, micros)
            return last
        }
    }
}
