import Crypto
import NIOSSL
import X509

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The car's TLS identity (PROTOCOL.md section 20): a P-256 key created on
/// first start in the state directory (`car-identity.pem`, 0600, in a 0700
/// directory, checked like the paired-device list) and a self-signed
/// certificate made from it at every start. Phones pin the key, not the
/// certificate: `publicKeyDER` (its SubjectPublicKeyInfo) is what pairing
/// hands the phone and what the phone compares on every later connection.
public struct CarIdentity: Sendable {
    public static let fileName = "car-identity.pem"
    /// SubjectPublicKeyInfo, DER: the pinned value.
    public let publicKeyDER: [UInt8]
    public let certificate: NIOSSLCertificate
    public let tlsKey: NIOSSLPrivateKey

    public init(privateKey: P256.Signing.PrivateKey) throws {
        self.publicKeyDER = Array(privateKey.publicKey.derRepresentation)
        let name = try DistinguishedName { CommonName("headunitd car") }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(privateKey.publicKey),
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(100 * 365 * 86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: Certificate.Extensions {},
            issuerPrivateKey: .init(privateKey))
        self.certificate = try NIOSSLCertificate(bytes: Array(try certificate.serializeAsPEM().pemString.utf8), format: .pem)
        self.tlsKey = try NIOSSLPrivateKey(bytes: Array(privateKey.pemRepresentation.utf8), format: .pem)
    }

    /// Loads `car-identity.pem` from `directory` (already prepared: 0700,
    /// ours), creating it on first start. Refuses a file that is not a
    /// regular file, belongs to someone else, is open to group or others, or
    /// does not hold a P-256 key.
    public static func loadOrCreate(directory: String) throws -> CarIdentity {
        let path = directory + "/" + fileName
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            guard errno == ENOENT else { throw SecurityError("\(path): \(errorText())") }
            let key = P256.Signing.PrivateKey()
            try write(Array(key.pemRepresentation.utf8), to: path)
            return try CarIdentity(privateKey: key)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SecurityError("\(path): \(errorText())") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw SecurityError("\(path) is not a regular file") }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw SecurityError("\(path) belongs to uid \(info.st_uid), not to this daemon (uid \(geteuid()))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw SecurityError("\(path) is open to other users (mode \(String(info.st_mode & 0o7777, radix: 8))): it must be 0600")
        }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { throw SecurityError("\(path): empty or unreadable") }
        do {
            let key = try P256.Signing.PrivateKey(pemRepresentation: String(decoding: bytes[0..<count], as: UTF8.self))
            return try CarIdentity(privateKey: key)
        } catch {
            throw SecurityError("\(path): not the car's P-256 identity key: \(error)")
        }
    }

    /// A new file (0600), synced, renamed into place.
    static func write(_ bytes: [UInt8], to path: String) throws {
        let temporary = path + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw SecurityError("\(temporary): \(errorText())") }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw SecurityError("saving \(path): \(errorText())")
        }
    }

    static func errorText() -> String { String(cString: strerror(errno)) }
}
