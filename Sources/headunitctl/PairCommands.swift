import ArgumentParser
import HeadUnitClient
import HeadUnitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The car side of pairing (an HMI request over the Unix socket): show a
/// one-time code, list or forget paired phones.
struct Pair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Car side: open a pairing window and print its one-time code (or --list / --remove ID).",
        discussion: "A phone on TCP must be paired once: run this on the car, then `headunitctl pair-phone --code CODE --tcp HOST:PORT` on the phone side within the code's validity (2 minutes by default). Every attempt shows here; wrong attempts from one address wait longer each time (1 s, doubling, up to 30 s)."
    )
    @OptionGroup var connection: ConnectionOptions

    @Flag(name: .customLong("list"), help: "List the paired phones.")
    var list = false

    @Option(name: .customLong("remove"), help: "Forget the paired phone with this device id.")
    var remove: String?

    @Option(
        name: .customLong("allow"), parsing: .singleValue,
        help: "An entitlement key the paired phone's apps may claim (repeat it); none: the car's global policy.")
    var allow: [String] = []

    @Flag(name: .customLong("watch"), help: "Stay until a phone pairs or the window ends, printing every attempt (PairingAttempt: wrong codes, abandoned and throttled tries).")
    var watch = false

    func validate() throws {
        if list && remove != nil { throw ValidationError("give --list or --remove, not both") }
        if (!allow.isEmpty || watch) && (list || remove != nil) { throw ValidationError("--allow and --watch are for opening a pairing window") }
    }

    func run() async throws {
        if list {
            try await runHMI(connection, "paired devices") { hmi in
                let devices = try await hmi.pairedDevices()
                if devices.isEmpty { print("no paired phones") }
                for device in devices {
                    let policy = device.defaultPolicy ? "the car's entitlement policy" : "entitlements [\(device.allowedEntitlements.joined(separator: ", "))]"
                    print("\(device.deviceID) \"\(device.name)\" paired at \(device.pairedAtUnixMs / 1000) (unix s), \(policy)")
                }
            }
        } else if let remove {
            try await runHMI(connection, "remove \(remove)") { hmi in try await hmi.removePairedDevice(remove) }
        } else {
            try await runHMI(connection, "pairing") { hmi in
                let info = try await hmi.startPairing(allowedEntitlements: allow)
                print("pairing code \(info.code) (valid \(info.validMs / 1000) s, \(info.attempts) attempts)")
                flushOutput()
                if watch {
                    let paired = await Self.watchAttempts(hmi, for: .milliseconds(Int64(info.validMs)))
                    if !paired { throw PairingWindowEnded() }
                }
            }
        }
    }
}

extension Pair {
    /// Prints each `PairingAttempt` the car sends HMIs until one pairs (true),
    /// the window's validity runs out or the car says Goodbye (false).
    static func watchAttempts(_ hmi: HMISession, for validity: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await update in hmi.updates {
                    switch update {
                    case .other(let envelope):
                        guard case .pairingAttempt(let attempt)? = envelope.body else { continue }
                        print(describe(attempt))
                        flushOutput()
                        if attempt.outcome == .paired { return true }
                    case .goodbye:
                        return false
                    default:
                        continue
                    }
                }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: validity)
                return false
            }
            let paired = await group.next() ?? false
            group.cancelAll()
            return paired
        }
    }

    static func describe(_ attempt: HUPairingAttempt) -> String {
        let outcome: String
        switch attempt.outcome {
        case .paired: outcome = "paired"
        case .failed: outcome = "failed (wrong code, or a man in the middle)"
        case .abandoned: outcome = "abandoned"
        case .throttled: outcome = "throttled (too soon after a failure, or too many attempts)"
        case .unspecified, .UNRECOGNIZED: outcome = "outcome \(attempt.outcome.rawValue)"
        }
        let who = attempt.deviceName.isEmpty ? attempt.source : "\(attempt.source) \"\(attempt.deviceName)\""
        var line = "attempt from \(who): \(outcome), \(attempt.failedAttempts) failed on this code"
        if !attempt.message.isEmpty { line += " (\(attempt.message))" }
        return line
    }
}

/// The phone side: pair this machine's phone key with the car using the code
/// it shows, then authenticate once to prove it works.
struct PairPhone: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair-phone",
        abstract: "Phone side: pair the phone key (created if missing) with the car's code over TCP.",
        discussion: "The key is kept in --key (default \(PhoneIdentity.defaultPath), mode 0600) and used by every phone command over TCP afterwards (play, session)."
    )
    @OptionGroup var connection: ConnectionOptions

    @Option(name: .customLong("code"), help: "The six-digit code `headunitctl pair` printed on the car.")
    var code: String

    @Option(name: .customLong("key"), help: "The phone key file.")
    var key: String = PhoneIdentity.defaultPath

    @Option(name: .customLong("name"), help: "The name the car lists this phone under.")
    var name: String = "headunitctl phone"

    func run() async throws {
        guard case .tcp = connection.endpoint else {
            throw fail("pairing is for phones on TCP (give --tcp HOST:PORT); the Unix socket needs none")
        }
        var identity: PhoneIdentity
        do { identity = try PhoneIdentity.loadOrCreate(path: key) } catch { throw fail("\(error)") }
        do {
            let pairing = identity
            let phone = try await PhoneSession.connect(to: connection.endpoint, deviceName: name) {
                $0.identity = pairing
                $0.pairingCode = code
                // Under a guessing flood the car holds attempts back: say that we wait, and why.
                $0.pairingWait = { wait, reason in
                    let milliseconds = wait.nanoseconds / 1_000_000
                    writeError("the car is throttling pairing attempts: waiting \(milliseconds / 1000).\(milliseconds % 1000 / 100) s, then trying again (\(reason))\n")
                }
            }
            // Pinned from now on: a later TLS connection to another key fails.
            identity.carKey = phone.connection.carPublicKey
            do { try identity.save(path: key) } catch { throw fail("paired, but the car's key could not be saved: \(error)") }
            print("paired: device id \(identity.deviceID), key \(key) (car key pinned)")
            await phone.close()
        } catch {
            throw fail("pairing with \(connection.endpoint): \(error)")
        }
    }
}

/// `pair --watch`: the window closed (or the car left) with no phone paired.
struct PairingWindowEnded: Error, CustomStringConvertible {
    var description: String { "no phone paired while the window was open" }
}
