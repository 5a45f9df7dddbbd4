import ArgumentParser
import HeadUnitClient
import HeadUnitWire

// Calls from the command line (PROTOCOL.md section 26): what the car's call
// banner shows and its buttons send.

/// `headunitctl call` (list), `headunitctl call answer 6f1c3c2e-...`, `headunitctl call keys UUID --digits 123#`.
struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the phone's calls, or press answer, end, hold, resume, mute, unmute or keys on one.",
        discussion: """
            Without an action: the calls as the HMI's home screen shows them (also in 'headunitctl watch').
            With one: the driver's button (CallInput); prints what the app answered (done, or it failed
            the action) or the car's refusal. The UUID may be left out when the phone has one call.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "answer, end, hold, resume, mute, unmute or keys; none: list the calls.")
    var action: String?
    @Argument(help: "The call's UUID (default: the only call).")
    var uuid: String?
    @Option(help: "keys: the digits to send (0-9 * # , ).")
    var digits: String = ""

    func run() async throws {
        guard let action else {
            try await runHMI(connection, "calls") { hmi in
                let home = await hmi.waitForHomeScreen()
                let calls = home?.calls ?? []
                if calls.isEmpty { print("no calls") }
                for call in calls { print(ScreenText.describe(call)) }
            }
            return
        }
        var message = HUCallAction()
        switch action {
        case "answer": message.kind = .answer
        case "end", "decline": message.kind = .end
        case "hold", "resume": (message.kind, message.onHold) = (.setHeld, action == "hold")
        case "mute", "unmute": (message.kind, message.muted) = (.setMuted, action == "mute")
        case "keys": (message.kind, message.digits) = (.playDtmf, digits)
        default: throw fail("unknown action '\(action)'; one of answer, end, decline, hold, resume, mute, unmute, keys")
        }
        try await runHMI(connection, "call \(action)") { hmi in
            if let uuid {
                message.callUuid = uuid
            } else {
                let calls = await hmi.waitForHomeScreen()?.calls ?? []
                guard calls.count == 1 else { throw fail("the phone has \(calls.count) calls: name one by its UUID") }
                message.callUuid = calls[0].callUuid
            }
            let outcome = try await hmi.callAction(message)
            print("\(outcome.appID): \(outcome.fulfilled ? "done" : "the app failed it")")
        }
    }
}
