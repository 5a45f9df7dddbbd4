import HeadUnitCore
import HeadUnitSecurity
import HeadUnitWire
import NIOCore

// Pairing over TLS with SPAKE2 (PROTOCOL.md section 20.2): the code
// authenticates the key exchange itself and never travels; each PairStart is
// one online guess, counted per source and connection by the registry and
// shown on the car's screen (PairingAttempt to every HMI) when it fails.

/// Pairing as the host runs it: the paired devices and the window (the
/// Core's `PairingRegistry`), the attempts between PairStart and Pair, and
/// the list's way to disk (`PairingWrites`).
struct HostPairing {
    var registry: PairingRegistry
    /// Attempts between PairStart and Pair, by connection.
    var pending: [PeerID: PendingPairing] = [:]
    /// PairStarts per connection (at most `PendingPairing.maxPerConnection`).
    var startsByPeer: [PeerID: Int] = [:]
    let writes: PairingWrites

    init(registry: PairingRegistry, writes: PairingWrites) {
        self.registry = registry
        self.writes = writes
    }

    func device(_ id: String) -> PairedDeviceRecord? { registry.device(id) }
}

/// The host's answer to a request the connection passed it.
enum HostAnswer {
    case now(HUEnvelope)
    /// Once the host has it (a `Pair` waiting for the disk): the connection
    /// serves none of the peer's later requests before it (PROTOCOL.md section 4).
    case later(EventLoopFuture<HUEnvelope>)
}

/// A pairing attempt between the car's PairStart answer and the phone's Pair.
struct PendingPairing {
    /// Guesses one connection may start.
    static let maxPerConnection = 2
    var spakeKey: [UInt8]
    var transcript: [UInt8]
    var generation: UInt64
    var source: String
}

extension CarHost {
    /// A phone's PairStart, between Welcome and Authenticate. Order of checks:
    /// the message is 32 bytes (INVALID_ARGUMENT, no guess used); this
    /// connection has guesses left (PAIRING_THROTTLED); then the registry's
    /// (PAIRING_NOT_OPEN, PAIRING_THROTTLED with the wait in `limit_value`);
    /// then the guess is counted and the car answers its SPAKE2 message and
    /// confirmation.
    func pairStart(_ request: HUPairStart, requestID: UInt32, from peer: PeerID, source: String, now: UInt64) -> HUEnvelope {
        var result = HUResult()
        func refuse(_ code: HUErrorCode, _ message: String, limit: String = "", limitValue: UInt64 = 0) -> HUEnvelope {
            logger.notice("pairing attempt refused", metadata: ["code": "\(code)", "reason": "\(message)", "peer": "\(peer)", "source": "\(source)"])
            result.code = code
            result.message = message
            result.limit = limit
            result.limitValue = UInt32(clamping: limitValue)
            return Self.answer(result, requestID: requestID)
        }
        let phoneMessage = Array(request.spake2Message)
        guard phoneMessage.count == SPAKE2Exchange.messageBytes else {
            return refuse(.invalidArgument, "spake2_message must be \(SPAKE2Exchange.messageBytes) bytes, got \(phoneMessage.count)")
        }
        guard let identity = configuration.carIdentity else {
            return refuse(.pairingNotOpen, "this car has no TLS identity: pairing is only possible over TLS")
        }
        if pairing.pending.removeValue(forKey: peer) != nil {
            notePairingAttempt(.abandoned, source: source, name: "", "a second PairStart on the same connection abandoned the first")
        }
        let started = pairing.startsByPeer[peer, default: 0]
        guard started < PendingPairing.maxPerConnection else {
            return refuse(
                .pairingThrottled, "this connection already made \(started) pairing attempts: connect again",
                limit: PairingLimitNames.attemptsPerConnection, limitValue: UInt64(PendingPairing.maxPerConnection))
        }
        switch pairing.registry.beginAttempt(source: source, now: now) {
        case .refused(let code, let message):
            return refuse(code, message)
        case .throttled(let wait, let message):
            // Not a guess: it uses none of the connection's attempts.
            return refuse(.pairingThrottled, message, limit: PairingLimitNames.retryAfter, limitValue: wait)
        case .proceed(let attempt):
            pairing.startsByPeer[peer] = started + 1
            do {
                let exchange = try SPAKE2Exchange(role: .car, password: Array(attempt.code.utf8))
                let key = try exchange.finish(peerMessage: phoneMessage)
                let transcript = PairingKeySchedule.transcriptHash(
                    phoneMessage: phoneMessage, carMessage: exchange.message, carPublicKey: identity.publicKeyDER)
                pairing.pending[peer] = PendingPairing(spakeKey: key, transcript: transcript, generation: attempt.generation, source: source)
                result.pairing.spake2Message = .init(exchange.message)
                result.pairing.carConfirmation = .init(PairingKeySchedule.carConfirmation(spakeKey: key, transcript: transcript))
                result.pairing.carPublicKey = .init(identity.publicKeyDER)
                logger.notice("pairing attempt", metadata: ["peer": "\(peer)", "source": "\(source)", "attempts": "\(attempt.attempts)"])
                return Self.answer(result, requestID: requestID)
            } catch {
                // Counted: a point that is not on the curve is a failed guess like any other.
                notePairingAttempt(.failed, source: source, name: "", "the phone's SPAKE2 message is not valid")
                return refuse(.invalidArgument, "spake2_message is not a valid SPAKE2 message")
            }
        }
    }

    /// A phone's Pair: confirms the attempt its PairStart began. Order of
    /// checks: no code (INVALID_ARGUMENT: the old exchange), a PairStart came
    /// first (PAIRING_NOT_OPEN), key and name sizes (INVALID_ARGUMENT), the
    /// confirmation (BAD_PAIRING_CODE: a wrong code or a man in the middle;
    /// shown on the car's screen), the signature (KEY_NOT_PROVEN), then the
    /// registry (the window is still the attempt's). A refusal is answered
    /// at once; a pairing once the list is on disk (`PairingWrites`; the
    /// loop serves everyone else meanwhile, the connection holds its next
    /// requests until the answer is sent).
    func pair(_ request: HUPair, requestID: UInt32, from peer: PeerID, now: UInt64) -> HostAnswer {
        var result = HUResult()
        func refuse(_ code: HUErrorCode, _ message: String) -> HostAnswer {
            logger.notice("pairing refused", metadata: ["code": "\(code)", "reason": "\(message)", "peer": "\(peer)"])
            result.code = code
            result.message = message
            return .now(Self.answer(result, requestID: requestID))
        }
        guard request.code.isEmpty else {
            return refuse(.invalidArgument, "Pair no longer carries the code: start with PairStart (SPAKE2, PROTOCOL.md section 20.2)")
        }
        guard let pending = pairing.pending[peer] else {
            return refuse(.pairingNotOpen, "no pairing attempt on this connection: send PairStart first")
        }
        let key = Array(request.publicKey)
        guard key.count == PairingRegistry.publicKeyBytes else {
            return refuse(.invalidArgument, "public_key must be a raw Ed25519 key of \(PairingRegistry.publicKeyBytes) bytes, got \(key.count)")
        }
        guard request.deviceName.utf8.count <= PairingRegistry.maxDeviceNameBytes else {
            return refuse(.invalidArgument, "device_name is over \(PairingRegistry.maxDeviceNameBytes) bytes")
        }
        // One Pair per PairStart, whatever comes of it.
        pairing.pending[peer] = nil
        let expected = PairingKeySchedule.phoneConfirmation(
            spakeKey: pending.spakeKey, transcript: pending.transcript, publicKey: key, deviceName: request.deviceName)
        guard PairingKeySchedule.constantTimeEqual(expected, Array(request.confirmation)) else {
            notePairingAttempt(.failed, source: pending.source, name: request.deviceName, "wrong code, or someone between the phone and the car")
            return refuse(
                .badPairingCode,
                "the pairing confirmation does not verify: the code was wrong, or someone is between the phone and the car (the car shows the attempt)")
        }
        guard PhoneKeys.isValidSignature(Array(request.signature), publicKey: key, message: PairingKeySchedule.signedMessage(transcript: pending.transcript)) else {
            notePairingAttempt(.failed, source: pending.source, name: request.deviceName, "the phone did not prove it holds its key")
            return refuse(.keyNotProven, "signature does not verify with public_key over this pairing's transcript: the phone must hold the key it pairs")
        }
        let id = DeviceID.of(publicKey: key)
        switch pairing.registry.complete(
            generation: pending.generation, source: pending.source, publicKey: key, deviceID: id, name: request.deviceName, now: now,
            unixMilliseconds: unixMilliseconds())
        {
        case .paired(let record):
            logger.notice("phone paired", metadata: ["device": "\(record.id)", "name": "\(record.name)", "peer": "\(peer)"])
            notePairingAttempt(.paired, source: pending.source, name: record.name, "paired")
            result.pairing.deviceID = record.id
            guard let saved = pairing.writes.save(pairing.registry.devices) else {
                return .now(Self.answer(result, requestID: requestID))
            }
            let paired = result
            return .later(
                saved.assumeIsolated().map { failure in
                    var result = paired
                    if let failure {
                        // Paired for as long as the daemon runs; the phone is told it will not survive a restart.
                        result.message = "paired, but the device list could not be saved (\(failure)); it is lost on restart"
                    }
                    return Self.answer(result, requestID: requestID)
                }.nonisolated())
        case .refused(let code, let message):
            return refuse(code, message)
        }
    }

    /// A connection that ends (or authenticates) with an attempt pending
    /// abandoned it: the guess stays counted and the car shows it.
    func pairingConnectionClosed(_ peer: PeerID) {
        pairing.startsByPeer[peer] = nil
        if let pending = pairing.pending.removeValue(forKey: peer) {
            notePairingAttempt(.abandoned, source: pending.source, name: "", "the phone left before confirming")
        }
    }

    /// Every HMI is told (PairingAttempt), so no attempt is silent.
    func notePairingAttempt(_ outcome: HUPairingAttemptOutcome, source: String, name: String, _ message: String) {
        var attempt = HUPairingAttempt()
        attempt.outcome = outcome
        attempt.source = source
        attempt.deviceName = name
        attempt.failedAttempts = UInt32(clamping: outcome == .paired ? 0 : pairing.registry.attemptsOnOpenCode)
        attempt.message = message
        if outcome != .paired { logger.notice("pairing attempt failed", metadata: ["source": "\(source)", "outcome": "\(outcome)", "reason": "\(message)"]) }
        var envelope = HUEnvelope()
        envelope.body = .pairingAttempt(attempt)
        for hmi in car.hmiPeerIDs { connections[hmi]?.send(envelope) }
    }

    static func answer(_ result: HUResult, requestID: UInt32) -> HUEnvelope {
        var envelope = HUEnvelope()
        envelope.requestID = requestID
        envelope.body = .result(result)
        return envelope
    }
}
