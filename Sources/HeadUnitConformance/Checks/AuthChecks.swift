import Crypto
import HeadUnitSecurity
import HeadUnitWire

/// PROTOCOL.md §20: pairing and authentication of phones on TCP, and the
/// HMI's paired-device requests. The checks about the AUTHENTICATING state
/// run against a TCP endpoint whose Welcome says `auth_required`.
enum AuthChecks {
    /// A TCP phone after a Welcome with auth_required, not yet authenticated.
    static func authenticating(_ ctx: CheckContext, _ label: String = "phone") throws -> (WireConnection, HUWelcome) {
        guard !ctx.options.endpoint.isUnix, ctx.reference?.authRequired == true else {
            throw CheckSkipped("the endpoint does not require authentication (a Unix socket, or a TCP test bench with allow_unpaired_tcp)")
        }
        ctx.authenticatePhones = false
        let connection = try ctx.connect(label: label)
        let welcome = try ctx.handshake(connection, role: .phone, name: "conformance \(label)")
        ctx.authenticatePhones = true
        try require(welcome.authRequired && welcome.authChallenge.count == 32, "auth_required with a 32-byte challenge (§20.1)", got: "\(welcome.authChallenge.count) bytes")
        return (connection, welcome)
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("auth.unix-phone", .p("20"), "a phone on the Unix socket never authenticates: auth_required false, no challenge", needsCarRole: true) { ctx in
            let connection = try ctx.connect(try ctx.carEndpoint(), label: "unix phone")
            ctx.authenticatePhones = false
            let welcome = try ctx.handshake(connection, role: .phone)
            try require(!welcome.authRequired && welcome.authChallenge.isEmpty, "auth_required false, empty challenge", got: "\(welcome.authRequired), \(welcome.authChallenge.count) bytes")
        },
        ConformanceCheck("auth.request-before-authenticate", .p("20.1"), "a request before Authenticate: Goodbye AUTH_REQUIRED whose reason names it", transport: .tcpOnly) { ctx in
            let (phone, _) = try authenticating(ctx)
            try phone.send(.announceApps(HUAnnounceApps()), requestID: 1)
            let goodbye = try phone.goodbye("Goodbye AUTH_REQUIRED")
            try requireCode(goodbye, .authRequired, "AnnounceApps before Authenticate")
            try require(goodbye.reason.firstRange(of: "AnnounceApps") != nil, "a reason naming AnnounceApps", got: "\"\(goodbye.reason)\"")
        },
        ConformanceCheck("auth.data-before-authenticate", .p("20.1"), "a DATA frame before Authenticate: Goodbye AUTH_REQUIRED whose reason names the DATA frame and its channel", transport: .tcpOnly) { ctx in
            let (phone, _) = try authenticating(ctx)
            try phone.sendFrame(.data, channel: 3, payload: [1])
            let goodbye = try phone.goodbye("Goodbye AUTH_REQUIRED")
            try requireCode(goodbye, .authRequired, "DATA before Authenticate")
            try require(goodbye.reason.firstRange(of: "DATA") != nil && goodbye.reason.firstRange(of: "3") != nil, "a reason naming the DATA frame on channel 3", got: "\"\(goodbye.reason)\"")
        },
        ConformanceCheck("auth.ping-allowed", .p("20.1"), "PING while authenticating is answered; the connection stays", transport: .tcpOnly) { ctx in
            let (phone, _) = try authenticating(ctx)
            try phone.pingRoundTrip([0x41], "PONG while authenticating")
        },
        ConformanceCheck("auth.unknown-device", .p("20.3"), "Authenticate for a device that is not paired: Goodbye AUTH_FAILED", transport: .tcpOnly) { ctx in
            let (phone, welcome) = try authenticating(ctx)
            let stranger = KitIdentity()
            var authenticate = HUAuthenticate()
            authenticate.deviceID = stranger.deviceID
            authenticate.signature = .init(try stranger.signature(challenge: Array(welcome.authChallenge), connectionID: welcome.connectionID))
            try phone.send(.authenticate(authenticate), requestID: 1)
            try phone.expectFatal(.authFailed, after: "Authenticate of a device never paired")
        },
        ConformanceCheck("auth.bad-signature", .p("20.3"), "Authenticate of a paired device over another connection's challenge (a replay): Goodbye AUTH_FAILED", needsCarRole: true, transport: .tcpOnly) { ctx in
            _ = try ctx.phone("paired phone")  // pairs the kit's key when it is not yet
            let (first, firstWelcome) = try authenticating(ctx, "first")
            let (second, _) = try authenticating(ctx, "second")
            var authenticate = HUAuthenticate()
            authenticate.deviceID = ctx.identity.deviceID
            authenticate.signature = .init(try ctx.identity.signature(challenge: Array(firstWelcome.authChallenge), connectionID: firstWelcome.connectionID))
            try second.send(.authenticate(authenticate), requestID: 1)
            try second.expectFatal(.authFailed, after: "a signature over another connection's challenge")
            try first.pingRoundTrip([0x42], "the first connection unaffected")
        },
        ConformanceCheck("auth.pair-bad-code", .p("20.2"), "SPAKE2 pairing with a wrong code: the car's confirmation does not verify, Pair is BAD_PAIRING_CODE (not fatal); a Pair carrying the code itself: INVALID_ARGUMENT", needsCarRole: true, transport: .tcpOnly) { ctx in
            let code = try ctx.openPairingWindow()
            let (phone, _) = try authenticating(ctx)
            let wrong = code == "000000" ? "111111" : "000000"
            let exchange = try SPAKE2Exchange(role: .phone, password: Array(wrong.utf8))
            var start = HUPairStart()
            start.spake2Message = .init(exchange.message)
            let started = try phone.request(.pairStart(start), "PairStart (§20.2)")
            try requireCode(started, .ok, "PairStart in an open window")
            let carMessage = Array(started.pairing.spake2Message)
            let key = try exchange.finish(peerMessage: carMessage)
            let transcript = PairingKeySchedule.transcriptHash(phoneMessage: exchange.message, carMessage: carMessage, carPublicKey: phone.carPublicKey)
            try require(
                !PairingKeySchedule.constantTimeEqual(
                    PairingKeySchedule.carConfirmation(spakeKey: key, transcript: transcript), Array(started.pairing.carConfirmation)),
                "the car's confirmation not verifying with a wrong code", got: "a confirmation that verifies")
            let identity = KitIdentity()
            var pair = HUPair()
            pair.publicKey = .init(identity.publicKey)
            pair.deviceName = "wrong code"
            pair.confirmation = .init(
                PairingKeySchedule.phoneConfirmation(spakeKey: key, transcript: transcript, publicKey: identity.publicKey, deviceName: pair.deviceName))
            pair.signature = .init(try identity.key.signature(for: PairingKeySchedule.signedMessage(transcript: transcript)))
            try requireCode(try phone.request(.pair(pair), "Pair after a wrong code"), .badPairingCode, "a wrong pairing code")
            var old = HUPair()
            old.code = code
            old.publicKey = .init(identity.publicKey)
            try requireCode(try phone.request(.pair(old), "Pair carrying the code"), .invalidArgument, "a Pair carrying the code (the exchange before SPAKE2)")
            try phone.pingRoundTrip([0x43], "the connection stays after refused Pairs")
        },
        ConformanceCheck("auth.after-authenticate", .p("20.3"), "after Authenticate, Pair and Authenticate are NOT_FOR_ROLE; an authenticated phone joins the car", needsCarRole: true, transport: .tcpOnly) { ctx in
            let phone = try ctx.phone()
            try requireCode(try phone.request(.authenticate(HUAuthenticate()), "Authenticate again"), .notForRole, "Authenticate after authenticating")
            try requireCode(try phone.request(.pair(HUPair()), "Pair after authenticating"), .notForRole, "Pair after authenticating")
            try requireCode(try ctx.announce(phone, [appInfo("com.example.authenticated", [Entitlement.audio])]), .ok, "AnnounceApps once authenticated")
        },
        ConformanceCheck("auth.paired-devices", .p("20.4"), "ListPairedDevices answers the list; RemovePairedDevice of an unknown id: UNKNOWN_DEVICE; StartPairing with an unknown key: INVALID_ARGUMENT", needsCarRole: true) { ctx in
            let hmi = try ctx.hmi()
            try requireCode(try hmi.request(.listPairedDevices(HUListPairedDevices()), "ListPairedDevices"), .ok, "ListPairedDevices")
            var remove = HURemovePairedDevice()
            remove.deviceID = String(repeating: "0", count: 32)
            try requireCode(try hmi.request(.removePairedDevice(remove), "RemovePairedDevice unknown"), .unknownDevice, "an unknown device id")
            var start = HUStartPairing()
            start.allowedEntitlements = ["com.example.not-an-entitlement"]
            try requireCode(try hmi.request(.startPairing(start), "StartPairing with an unknown key"), .invalidArgument, "an unknown entitlement key")
        },
    ]
}
