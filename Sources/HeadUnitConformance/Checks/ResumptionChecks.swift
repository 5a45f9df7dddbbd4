import HeadUnitWire

/// PROTOCOL.md §21: a phone that drops and comes back, and §16.11.
enum ResumptionChecks {
    static func resume(_ connection: WireConnection, token: String, _ what: String) throws -> HUResult {
        var resume = HUResumeSession()
        resume.resumptionToken = token
        return try connection.request(.resumeSession(resume), what)
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("resume.token", .p("21"), "accepted apps: AppDecisions carries a 32-hex-digit resumption_token and resume_grace_ms as in Welcome") { ctx in
            let phone = try ctx.phone()
            let result = try ctx.announce(phone, [appInfo("com.example.resume", [Entitlement.audio])])
            try requireCode(result, .ok, "AnnounceApps")
            let token = result.appDecisions.resumptionToken
            try require(token.count == 32 && token.allSatisfy { $0.isHexDigit }, "a token of 32 hex digits", got: "\"\(token)\"")
            try require(result.appDecisions.resumeGraceMs == ctx.wireLimits.resumeGraceMs, "resume_grace_ms \(ctx.wireLimits.resumeGraceMs)",
                        got: "\(result.appDecisions.resumeGraceMs)")
        },
        ConformanceCheck("resume.refused", .p("16.11"), "ResumeSession with no session waiting, a wrong token, or from the connection carrying the apps: RESUME_REFUSED") { ctx in
            let stranger = try ctx.phone("stranger")
            try requireCode(try resume(stranger, token: String(repeating: "0", count: 32), "ResumeSession with a made-up token"), .resumeRefused, "a token nobody was given")
            let phone = try ctx.phone()
            let result = try ctx.announce(phone, [appInfo("com.example.resume", [Entitlement.audio])])
            try requireCode(result, .ok, "AnnounceApps")
            try requireCode(try resume(phone, token: result.appDecisions.resumptionToken, "ResumeSession on the connection carrying the apps"),
                            .resumeRefused, "its own token from the connection that carries the apps")
        },
        ConformanceCheck("resume.after-drop", .p("21"), "a phone dropped without Goodbye: HMI sees RECONNECTING, screens kept; ResumeSession on a new connection: resumed with its scenes, CONNECTED", needsCarRole: true) { ctx in
            let app = try ctx.launchedApp([Entitlement.audio])
            try app.ok(.setRoot(Make.list("root")), "set_root")
            let token = try app.phone.backlogToken()
            app.phone.close()  // no Goodbye: the link is lost (section 21)
            try app.hmi.take("HomeScreen with phone_link RECONNECTING") { envelope -> Bool? in
                if case .homeScreen(let home) = envelope.body, home.phoneLink == .reconnecting { return true }
                return nil
            }
            let again = try ctx.phone("phone again")
            let result = try resume(again, token: token, "ResumeSession with the token")
            try requireCode(result, .ok, "ResumeSession within resume_grace_ms")
            try require(result.resumed.resumptionToken.count == 32 && result.resumed.resumptionToken != token, "a new token", got: "\"\(result.resumed.resumptionToken)\"")
            try require(result.resumed.scenes.contains { $0.sceneID == app.scene.sceneID }, "scene \(app.scene.sceneID) in resumed.scenes", got: describe(result))
            try require(result.resumed.apps.contains { $0.appID == app.appID }, "\(app.appID) in resumed.apps", got: describe(result))
            try app.hmi.take("HomeScreen with phone_link CONNECTED") { envelope -> Bool? in
                if case .homeScreen(let home) = envelope.body, home.phoneLink == .connected { return true }
                return nil
            }
            // The app carries on with the same scene id.
            var request = HUTemplateRequest()
            request.appID = app.appID
            request.sceneID = app.scene.sceneID
            request.push = Make.list("next")
            try requireCode(try again.request(.templateRequest(request), "push on the resumed scene"), .ok, "a push on the resumed scene")
        },
        ConformanceCheck("resume.goodbye-ends", .p("21"), "a phone that sent Goodbye meant to leave: its token is refused") { ctx in
            let phone = try ctx.phone()
            let result = try ctx.announce(phone, [appInfo("com.example.resume", [Entitlement.audio])])
            try requireCode(result, .ok, "AnnounceApps")
            phone.leave()
            let again = try ctx.phone("phone again")
            try requireCode(try resume(again, token: result.appDecisions.resumptionToken, "ResumeSession after Goodbye"), .resumeRefused, "the token of a phone that said Goodbye")
        },
    ]
}

extension WireConnection {
    /// The resumption token of the AnnounceApps answer this connection received (§21).
    func backlogToken() throws -> String {
        for envelope in received.reversed() {
            if case .result(let result) = envelope.body, !result.appDecisions.resumptionToken.isEmpty { return result.appDecisions.resumptionToken }
        }
        throw CheckFailure(expected: "a resumption_token in the AnnounceApps answer (§21)", got: "none")
    }
}
