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

    static func echo(_ stream: AccessoryStream) async throws {
        for try await bytes in stream { try await stream.write(bytes) }
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

/// stdin -> the session, the session -> stdout. Returns when the session
/// ends (the stdin reader, blocked in read(2), is left behind: the command exits).
func pipe(_ stream: AccessoryStream) async throws {
    Task.detached {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let count = read(0, &chunk, chunk.count)
            if count <= 0 { break }
            try await stream.write(Array(chunk[0..<count]))
        }
        try await stream.close(detail: "end of input")
    }
    for try await bytes in stream {
        bytes.withUnsafeReadableBytes { writeOutput($0) }
    }
    if let closed = await stream.closeReason() {
        writeError("session \(stream.channel) ended: \(closed.reason) \(closed.detail)\n")
    }
}
