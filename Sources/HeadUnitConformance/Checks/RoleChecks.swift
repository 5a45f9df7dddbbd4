import HeadUnitWire

/// PROTOCOL.md §1: what each role may send; anything else is NOT_FOR_ROLE (not fatal).
enum RoleChecks {
    /// Messages only the daemon sends: no peer may send them.
    static let daemonOnly: [(String, HUEnvelope.OneOf_Body)] = [
        ("Welcome", .welcome(HUWelcome())), ("Result", .result(HUResult())),
        ("SceneConnected", .sceneConnected(HUSceneConnected())), ("SceneDisconnected", .sceneDisconnected(HUSceneDisconnected())),
        ("AppEvent", .appEvent(HUAppEvent())), ("SessionConfiguration", .sessionConfiguration(HUSessionConfiguration())),
        ("HomeScreen", .homeScreen(HUHomeScreen())), ("ScreenUpdate", .screenUpdate(HUScreenUpdate())),
    ]
    static let phoneOnly: [(String, HUEnvelope.OneOf_Body)] = [
        ("AnnounceApps", .announceApps(HUAnnounceApps())), ("TemplateRequest", .templateRequest(HUTemplateRequest())),
        ("CompleteEvent", .completeEvent(HUCompleteEvent())), ("AppClosed", .appClosed(HUAppClosed())),
    ]
    static let hmiOnly: [(String, HUEnvelope.OneOf_Body)] = [
        ("LaunchApp", .launchApp(HULaunchApp())), ("HmiInput", .hmiInput(HUHmiInput())),
        ("SetVehicleState", .setVehicleState(HUSetVehicleState())), ("CloseApp", .closeApp(HUCloseApp())),
    ]

    /// Sends each message and expects NOT_FOR_ROLE echoing its request id. A new
    /// connection is opened before the flood limit (§10) could be reached.
    static func refused(_ ctx: CheckContext, role: HURole, _ messages: [(String, HUEnvelope.OneOf_Body)]) throws {
        let budget = max(1, Int(ctx.limits.maxErrorsPerSecond) - 1)
        var connection: WireConnection?
        var used = 0
        for (label, body) in messages {
            if connection == nil || used >= budget {
                connection?.leave()
                connection = role == .phone ? try ctx.phone("phone") : try ctx.carRole(role, "\(roleName(role).lowercased())")
                used = 0
            }
            let id = connection!.newRequestID()
            try connection!.send(body, requestID: id)
            try connection!.expectError(.notForRole, requestID: id, after: "\(label) from \(roleName(role))")
            used += 1
        }
        try connection?.requireAlive("NOT_FOR_ROLE refusals")
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck("roles.phone-not-for-role", .p("1"), "a phone sending HMI messages or daemon messages gets NOT_FOR_ROLE, not fatal") { ctx in
            try refused(ctx, role: .phone, hmiOnly + [("GetStatus", .getStatus(HUGetStatus()))] + daemonOnly)
        },
        ConformanceCheck("roles.hmi-not-for-role", .p("1"), "an HMI sending phone messages or daemon messages gets NOT_FOR_ROLE, not fatal", needsCarRole: true) { ctx in
            try refused(ctx, role: .hmi, phoneOnly + daemonOnly)
        },
        ConformanceCheck("roles.cluster-accessory", .p("1"), "a cluster and an accessory may send GetStatus (Result OK with status); phone and HMI messages get NOT_FOR_ROLE", needsCarRole: true) { ctx in
            for role in [HURole.cluster, .accessory] {
                let connection = try ctx.carRole(role, roleName(role).lowercased())
                let result = try connection.request(.getStatus(HUGetStatus()), "GetStatus from \(roleName(role))")
                try requireCode(result, .ok, "GetStatus from \(roleName(role))")
                guard case .status? = result.detail else { throw CheckFailure(expected: "Result.status for GetStatus", got: describe(result)) }
                connection.leave()
                try refused(ctx, role: role, Array(phoneOnly.prefix(2)) + Array(hmiOnly.prefix(2)))
            }
        },
    ]
}
