import ArgumentParser
import HeadUnitClient
import HeadUnitWire
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `headunitctl accessory PROTOCOL...`: a car feature serving External
/// Accessory protocols. Each accepted session echoes, sends a file, or (the
/// default, one session at a time) joins stdin and stdout.
struct Accessory: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve External Accessory protocols as a car feature (Unix socket only).",
        discussion: "Example, two terminals: `headunitctl accessory com.openmotors.climate` here, `headunitctl session com.example.climate com.openmotors.climate` there: what you type in one comes out of the other.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Protocol strings to serve (the vehicle must declare them).")
    var protocols: [String]

    @Flag(help: "Send every session's bytes back to it.")
    var echo = false

    @Option(help: "Send this file to each session, then close it.")
    var file: String?

    func run() async throws {
        let endpoint = try connection.hmiEndpoint
        let peer: AccessoryPeer
        do {
            peer = try await AccessoryPeer.connect(to: endpoint, name: "headunitctl accessory")
            try await peer.serve(protocols)
        } catch {
            throw fail("cannot serve \(protocols.joined(separator: ", ")): \(error)")
        }
        writeError("serving \(protocols.joined(separator: ", ")); waiting for sessions\n")
        for await stream in peer.sessions {
            writeError("session \(stream.channel): \(stream.appID) on \(stream.protocolName)\n")
            if echo {
                Task { try? await Self.echo(stream) }
            } else if let file {
                Task { try? await Self.send(file: file, to: stream) }
            } else {
                try await pipe(stream)
            }
        }
    }

    /// Every byte back, then finishes its own direction once the app finished
    /// (half-close): the app reads the whole echo before the session ends.
    static func echo(_ stream: AccessoryStream) async throws {
        for try await bytes in stream { try await stream.write(bytes) }
        if !(await stream.isEnded) { try await stream.finish(detail: "echoed everything") }
    }

    static func send(file: String, to stream: AccessoryStream) async throws {
        guard let handle = fopen(file, "rb") else { throw Failure("cannot open \(file)") }
        defer { fclose(handle) }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = fread(&chunk, 1, chunk.count, handle)
            if count == 0 { break }
            try await stream.write(Array(chunk[0..<count]))
        }
        try await stream.close(detail: "end of \(file)")
    }
}

/// `headunitctl session APP PROTOCOL`: the phone side. Announces one automaker
/// app speaking PROTOCOL, opens a session on it and joins it to stdin/stdout.
struct Session: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Open an External Accessory session as an automaker app and join it to stdin/stdout.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The app id to announce (entitlement com.apple.developer.carplay-protocols).")
    var appID: String

    @Argument(help: "The protocol to open a session on.")
    var protocolName: String

    func run() async throws {
        let phone: PhoneSession
        let stream: AccessoryStream
        do {
            phone = try await PhoneSession.connect(to: connection.endpoint, deviceName: "headunitctl session")
            let app = HUAppInfo.with {
                $0.appID = appID
                $0.displayName = appID
                $0.entitlements = [EntitlementKeys.protocols]
                $0.accessoryProtocols = [protocolName]
            }
            let decision = try await phone.announce([app]).first
            guard decision?.accepted == true else { throw Failure("the car refused \(appID): \(decision?.reason ?? "no decision")") }
            stream = try await phone.openAccessorySession(appID: appID, protocol: protocolName)
        } catch {
            throw fail("\(error)")
        }
        writeError("session \(stream.channel) open on \(stream.protocolName)\n")
        try await pipe(stream)
        await phone.close()
    }
}

enum EntitlementKeys {
    static let protocols = "com.apple.developer.carplay-protocols"
}

/// stdin -> the session, the session -> stdout. At the end of stdin only this
/// side's direction ends (half-close, 18.6): what the other side still sends
/// is read to the end. Returns when the session ended, or when the other side
/// finished and stdin ended too (a stdin reader still blocked in read(2) after
/// the session ended is left behind: the command exits).
func pipe(_ stream: AccessoryStream) async throws {
    let writer = Task.detached {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = read(0, &chunk, chunk.count)
            if count <= 0 { break }
            try await stream.write(Array(chunk[0..<count]))
        }
        try await stream.finish(detail: "end of input")
    }
    for try await bytes in stream {
        bytes.withUnsafeReadableBytes { writeOutput($0) }
    }
    // The other side finished but the session is open: our input may still be going.
    if !(await stream.isEnded) {
        try? await writer.value
    }
    if let closed = await stream.closeReason() {
        writeError("session \(stream.channel) ended: \(closed.reason) \(closed.detail)\n")
    }
}
