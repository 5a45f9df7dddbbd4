import NIOConcurrencyHelpers
import NIOCore
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// TLS 1.3 for the TCP transport (PROTOCOL.md section 1, "TLS on TCP"):
/// the car presents its self-signed certificate, the phone pins the car's
/// key once paired (and accepts any key only to pair, where SPAKE2 binds the
/// key it saw). The phone proves itself inside the session (`Authenticate`).
public enum TLSSetup {
    /// The server side: TLS 1.3 only, no client certificates.
    public static func serverContext(identity: CarIdentity) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(identity.certificate)], privateKey: .privateKey(identity.tlsKey))
        configuration.minimumTLSVersion = .tlsv13
        configuration.maximumTLSVersion = .tlsv13
        // On close the car sends close_notify and waits this long for the
        // peer's (NIOSSL's default is 5 s): a restart or a cut-off peer must
        // not hold the connection (or the exiting process) for seconds.
        configuration.shutdownTimeout = .milliseconds(300)
        configuration.keyLogCallback = KeyLogFile.fromEnvironment()?.callback
        return try NIOSSLContext(configuration: configuration)
    }

    /// The phone side: TLS 1.3 only; the certificate is judged by `pinning`
    /// (no CA, no host name: the car's key is the identity).
    public static func clientContext() throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv13
        configuration.maximumTLSVersion = .tlsv13
        // Not `.none`: NIOSSL only calls a custom verification callback otherwise.
        configuration.certificateVerification = .noHostnameVerification
        configuration.keyLogCallback = KeyLogFile.fromEnvironment()?.callback
        return try NIOSSLContext(configuration: configuration)
    }

    /// A client handler that accepts the car's certificate only when its key
    /// is `pinnedCarKey` (SPKI DER); nil: any key (to pair). `seen` gets the
    /// key the car presented (the pairing transcript binds it). `serverName`
    /// is sent as the ClientHello's SNI: a paired phone's `AdmissionTicket`
    /// (PROTOCOL.md section 10.1), nil for none.
    public static func clientHandler(
        context: NIOSSLContext, pinnedCarKey: [UInt8]?, serverName: String? = nil, seen: @escaping @Sendable ([UInt8]) -> Void
    ) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: context, serverHostname: serverName) { certificates, promise in
            guard let leaf = certificates.first, let key = try? leaf.extractPublicKey().toSPKIBytes() else {
                promise.succeed(.failed)
                return
            }
            if let pinnedCarKey, !PairingKeySchedule.constantTimeEqual(key, pinnedCarKey) {
                promise.succeed(.failed)
                return
            }
            seen(key)
            promise.succeed(.certificateVerified)
        }
    }
}

/// `SSLKEYLOGFILE`: when set, TLS secrets are appended to that file in the
/// NSS key log format, so Wireshark/tshark can decrypt a capture
/// (docs/WIRESHARK.md). For debugging only: whoever reads the file reads the traffic.
public final class KeyLogFile: Sendable {
    let fd: CInt

    init?(path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    public static func fromEnvironment() -> KeyLogFile? {
        guard let value = getenv("SSLKEYLOGFILE").map({ String(cString: $0) }), !value.isEmpty else { return nil }
        return shared(path: value)
    }

    // One descriptor per path for the process; O_APPEND keeps each line whole.
    private static let files = NIOLockedValueBox<[String: KeyLogFile]>([:])
    static func shared(path: String) -> KeyLogFile? {
        files.withLockedValue { files in
            if let file = files[path] { return file }
            let file = KeyLogFile(path: path)
            files[path] = file
            return file
        }
    }

    public var callback: NIOSSLKeyLogCallback {
        { [fd] line in
            var bytes = Array(line.readableBytesView)
            if bytes.last != 0x0A { bytes.append(0x0A) }
            _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        }
    }
}
