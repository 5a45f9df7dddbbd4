import HeadUnitWire

// The pairing step (PROTOCOL.md section 20.2): the HMI opens a pairing
// window and a new phone pairs over TCP with the code the car shows.
extension ScenarioPlayer {
    /// Where a pairing phone connects: --pair-tcp, else the phone's own TCP endpoint.
    var pairingEndpoint: HeadUnitEndpoint? {
        if let endpoint = options.pairingEndpoint { return endpoint }
        if case .tcp = options.endpoint { return options.endpoint }
        return nil
    }

    /// The code with every digit moved by one: never the code shown.
    static func wrongCode(_ code: String) -> String {
        String(code.map { character -> Character in
            guard let digit = character.wholeNumberValue else { return character == "x" ? "y" : "x" }
            return Character(String((digit + 1) % 10))
        })
    }

    func pair(_ step: HUScenarioPair) async -> Outcome {
        guard let hmi else { return .skipped("no HMI") }
        guard let endpoint = pairingEndpoint else { return .skipped("no TCP endpoint to pair on (--pair-tcp)") }
        let code: String
        do {
            code = try await hmi.startPairing().code
        } catch {
            return failure(error)
        }
        let identity = PhoneIdentity()
        let name = step.deviceName.isEmpty ? "scenario paired phone" : step.deviceName
        let session: PhoneSession
        do {
            session = try await PhoneSession.connect(to: endpoint, deviceName: name) {
                $0.identity = identity
                $0.pairingCode = step.wrongCode ? Self.wrongCode(code) : code
            }
        } catch let error as HeadUnitError {
            if step.expect != .ok && error.code == step.expect { return .expectedError(step.expect) }
            return .failed(step.expect == .ok ? "\(error)" : "expected \(ErrorCodeNames.name(step.expect)), got \(error)")
        } catch {
            return failure(error)
        }
        await session.close()
        if step.expect != .ok { return .failed("expected \(ErrorCodeNames.name(step.expect)), the phone paired") }
        do {
            let listed = try await hmi.pairedDevices().contains { $0.deviceID == identity.deviceID }
            return listed ? .ok("device \(identity.deviceID)") : .failed("paired, but ListPairedDevices does not list \(identity.deviceID)")
        } catch {
            return failure(error)
        }
    }
}
