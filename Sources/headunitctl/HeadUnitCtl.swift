import ArgumentParser
import HeadUnitClient
import HeadUnitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct HeadUnitCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "headunitctl",
        abstract: "Talk to headunitd: play a phone from a scenario, watch the car's screens, inject input.",
        discussion: "Car commands (status, watch, launch, tap, press, back) connect as an HMI, over the Unix socket only. Any number of HMIs may be connected at once: a running `watch` stays connected and shows what the other commands change. `accessory` serves External Accessory protocols as a car feature (Unix socket only); `session` opens one as an automaker app on the phone side. `cluster` prints the instrument cluster's metadata stream. `pair` opens a pairing window on the car (HMI) and prints its code; `pair-phone` pairs this machine's phone key over TCP with it. `conform` runs the black-box conformance kit against any endpoint.",
        subcommands: [Status.self, Watch.self, Launch.self, Tap.self, Press.self, Back.self, Play.self, Accessory.self, Session.self, Conform.self, Cluster.self, Pair.self, PairPhone.self, Command.self, Button.self, Call.self, TestPattern.self]
    )
}

/// --unix-socket / --tcp, shared by every command.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("unix-socket"), help: "The daemon's Unix socket (default: \(HeadUnitEndpoint.defaultUnixSocketPath)).")
    var unixSocket: String?

    @Option(name: .customLong("tcp"), help: "Connect over TCP to HOST:PORT instead (phones only; e.g. 127.0.0.1:7420).")
    var tcp: String?

    func validate() throws {
        if unixSocket != nil && tcp != nil { throw ValidationError("give --unix-socket or --tcp, not both") }
        if let tcp, HeadUnitEndpoint.tcp(tcp) == nil { throw ValidationError("--tcp wants HOST:PORT, got '\(tcp)'") }
    }

    var endpoint: HeadUnitEndpoint {
        if let tcp, let endpoint = HeadUnitEndpoint.tcp(tcp) { return endpoint }
        return .unix(path: unixSocket ?? HeadUnitEndpoint.defaultUnixSocketPath)
    }

    /// The HMI role is refused over TCP: say so before the daemon does.
    var hmiEndpoint: HeadUnitEndpoint {
        get throws {
            if tcp != nil { throw ValidationError("car commands connect as the HMI, which is allowed over the Unix socket only (drop --tcp)") }
            return endpoint
        }
    }

    func connectHMI() async throws -> HMISession {
        let endpoint = try hmiEndpoint
        do {
            return try await HMISession.connect(to: endpoint, name: "headunitctl")
        } catch {
            throw Failure("cannot connect to headunitd at \(endpoint) as HMI: \(error)")
        }
    }
}

/// A failure printed as one clear line, exit status 1.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func fail(_ message: String) -> ExitCode {
    writeError("headunitctl: \(message)\n")
    return ExitCode(1)
}

/// Runs an HMI action; prints OK or the car's typed error and exits non-zero on failure.
func runHMI(_ options: ConnectionOptions, _ what: String, _ action: (HMISession) async throws -> Void) async throws {
    let hmi: HMISession
    do { hmi = try await options.connectHMI() } catch { throw fail("\(error)") }
    do {
        try await action(hmi)
        print("\(what): OK")
        await hmi.close()
    } catch {
        await hmi.close()
        throw fail("\(what): \(error)")
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the daemon's peers, apps and scenes.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let hmi: HMISession
        do { hmi = try await connection.connectHMI() } catch { throw fail("\(error)") }
        let welcome = hmi.connection.welcome
        do {
            let status = try await hmi.status()
            print("daemon \(welcome.daemonName), protocol v\(welcome.version) (speaks \(welcome.daemonMinVersion)...\(welcome.daemonMaxVersion)), vehicle \(welcome.vehicle.manufacturer) \(welcome.vehicle.model)")
            print("peers \(status.peers), phones \(status.phones), apps \(status.apps), scenes \(status.scenes)")
            for peer in status.peer {
                print("  peer #\(peer.connectionID) \(peer.role) \"\(peer.name)\" over \(peer.transport)")
            }
            for app in status.app {
                print("  app \(app.appID) \"\(app.displayName)\" \(app.category)\(app.accepted ? "" : " (refused)")")
                for scene in app.scene {
                    var line = "    scene \(scene.sceneID) \(scene.kind): stack [\(scene.stack.joined(separator: ", "))]"
                    if !scene.presented.isEmpty { line += ", presented \(scene.presented)" }
                    print(line)
                }
            }
            let state = status.vehicleState
            print("vehicle: \(state.driving ? "driving" : "parked")\(state.limitLists ? ", lists limited" : "")\(state.limitKeyboard ? ", keyboard limited" : ""), \(state.contentStyle)\(state.nativeNavigationActive ? ", native navigation" : "")")
            for accessory in status.accessoryProtocols {
                print("accessory protocol \(accessory.protocol): " + (accessory.available
                    ? "served by peer #\(accessory.servedBy), \(accessory.sessions) session(s)" : "declared, unavailable"))
            }
            await hmi.close()
        } catch {
            await hmi.close()
            throw fail("status: \(error)")
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Connect as the car's HMI and print the home screen and every screen update.",
        discussion: "Runs until interrupted or until the daemon closes the connection (another HMI replacing this one, for example)."
    )
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print only one line per update (no full screen after each).")
    var brief = false
    @Flag(inversion: .prefixedNo, help: "Watch the screens' base-view video and print its frame rate and latency per screen every 2 s.")
    var video = true

    func run() async throws {
        let hmi: HMISession
        do { hmi = try await connection.connectHMI() } catch { throw fail("\(error)") }
        let welcome = hmi.connection.welcome
        print("watching \(welcome.daemonName) (\(welcome.vehicle.manufacturer) \(welcome.vehicle.model), \(welcome.vehicle.mainDisplay.widthPt)x\(welcome.vehicle.mainDisplay.heightPt)@\(welcome.vehicle.mainDisplay.scale)x) as HMI #\(welcome.connectionID)")
        var screens: [HUScreen] = [.main]
        if welcome.vehicle.dashboardPresent { screens.append(.dashboard) }
        if welcome.vehicle.instrumentClusterPresent { screens.append(.instrumentCluster) }
        let videoReport = video ? Task { [screens] in await Self.reportVideo(hmi, screens: screens) } : nil
        defer { videoReport?.cancel() }
        for await update in hmi.updates {
            switch update {
            case .homeScreen(let home):
                print(ScreenText.render(home))
            case .screen(let screenUpdate, let rendered):
                if case .full? = screenUpdate.change {
                    print(ScreenText.render(rendered))
                } else {
                    print(ScreenText.render(screenUpdate))
                    if !brief { print("  -> " + ScreenText.summary(rendered)) }
                }
            case .image(let data):
                print("image \(data.ref.prefix(12)) (\(data.png.count) bytes, shown by ref from now on)")
            case .notice(let result):
                print("notice: \(HeadUnitError(result: result))")
            case .goodbye(let goodbye):
                print("goodbye: \(HeadUnitError(goodbye: goodbye))")
            case .other(let envelope):
                if case .videoStreams = envelope.body { break }  // reportVideo prints them
                print("other: \(envelope)")
            }
            flushOutput()
        }
        let reason = await hmi.connection.closedReason()
        print("connection closed\(reason.map { ": \($0)" } ?? "")")
    }
}

struct Launch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Launch an app from the car's home screen.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The app id (bundle id) as announced by the phone.")
    var appID: String

    func run() async throws {
        try await runHMI(connection, "launch \(appID)") { try await $0.launch(appID) }
    }
}

struct Tap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Select a list item on the template on screen.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The template on top (or presented).") var templateID: String
    @Argument(help: "The list item id.") var itemID: String

    func run() async throws {
        try await runHMI(connection, "tap \(itemID) on \(templateID)") { try await $0.selectItem(itemID, on: templateID) }
    }
}

struct Press: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Press a button (bar, grid, alert, action sheet, information, contact, POI card, map).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The template on top (or presented).") var templateID: String
    @Argument(help: "The button id.") var buttonID: String

    func run() async throws {
        try await runHMI(connection, "press \(buttonID) on \(templateID)") { try await $0.pressButton(buttonID, on: templateID) }
    }
}

struct Back: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Press the car's back button.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The template on top (default: whatever the main screen shows).") var templateID: String?

    func run() async throws {
        try await runHMI(connection, "back") { hmi in
            var target = templateID
            if target == nil {
                guard let screen = await hmi.waitForScreen(timeout: .seconds(2), where: { !$0.appID.isEmpty }) else {
                    throw Failure("the main screen shows no app")
                }
                target = screen.hasPresented ? screen.presented.id : screen.top.id
            }
            try await hmi.goBack(on: target!)
        }
    }
}

struct Play: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a phone and its apps from a scenario file (JSON, Protocol/scenario.proto).",
        discussion: "The phone connects over --unix-socket or --tcp. Scenario steps for the car (launch, hmi_input, expect_screen...) run on an HMI connection over the Unix socket, which replaces any HMI already connected; --without-hmi keeps it (HMI steps are skipped, launch steps wait for the app to be launched from the car). Exits 1 when a step fails."
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The scenario file.") var scenario: String
    @Flag(help: "Open no HMI connection; leave the car's HMI (e.g. `headunitctl watch`) connected.")
    var withoutHMI = false
    @Option(help: "The Unix socket for the HMI connection when the phone uses --tcp (default: the default socket).")
    var hmiSocket: String?
    @Option(help: "The car's TCP listener (HOST:PORT) where pair steps pair a new phone (default: --tcp, if given).")
    var pairTcp: String?
    @Flag(help: "Run every step even after a failure.")
    var keepGoing = false
    @Option(help: "Hold at least this many milliseconds after every step, so a person can watch the simulator follow (0 to 60000; a step's pause_ms holds longer).")
    var pace: UInt32 = 0

    func run() async throws {
        let scenarioFile: HUScenario
        do { scenarioFile = try ScenarioPlayer.load(path: scenario) } catch { throw fail("\(error)") }
        var options = ScenarioPlayer.Options(endpoint: connection.endpoint)
        options.openHMI = !withoutHMI
        options.stopOnFailure = !keepGoing
        guard pace <= 60_000 else { throw fail("--pace \(pace) is over 60000 ms") }
        options.pace = .milliseconds(Int64(pace))
        if let hmiSocket { options.hmiEndpoint = .unix(path: hmiSocket) }
        if let pairTcp {
            guard let endpoint = HeadUnitEndpoint.tcp(pairTcp) else { throw fail("--pair-tcp wants HOST:PORT, got '\(pairTcp)'") }
            options.pairingEndpoint = endpoint
        }
        options.log = { print($0); flushOutput() }
        let report: ScenarioPlayer.Report
        do {
            report = try await ScenarioPlayer(options: options).play(scenarioFile)
        } catch {
            throw fail("cannot play \(scenario): \(error)")
        }
        if !report.succeeded {
            throw fail("\(report.failures.count) step(s) failed; first: \(report.failures[0])")
        }
    }
}
