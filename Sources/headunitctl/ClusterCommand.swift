import ArgumentParser
import HeadUnitClient
import HeadUnitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `headunitctl cluster`: the instrument cluster's view of the car.
struct Cluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Connect as an instrument cluster and print the metadata stream (guidance, maneuvers, estimates, alerts, now playing).",
        discussion: "The first update is the whole state; after it, each line block shows the sections that changed. Runs until interrupted. With --zoom-in, --zoom-out, --compass or --speed-limit it sends that cluster input instead and exits."
    )
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Send zoom in to the navigation app's cluster scene, then exit.") var zoomIn = false
    @Flag(help: "Send zoom out, then exit.") var zoomOut = false
    @Option(help: "Send the compass setting (enabled, disabled, user-preference), then exit.") var compass: String?
    @Option(help: "Send the speed-limit setting (enabled, disabled, user-preference), then exit.") var speedLimit: String?

    static func setting(_ text: String) throws -> HUClusterSetting {
        switch text {
        case "enabled": return .enabled
        case "disabled": return .disabled
        case "user-preference": return .userPreference
        case "unspecified": return .unspecified
        default: throw ValidationError("a setting is enabled, disabled, user-preference or unspecified, not '\(text)'")
        }
    }

    func validate() throws {
        if let compass { _ = try Self.setting(compass) }
        if let speedLimit { _ = try Self.setting(speedLimit) }
    }

    func run() async throws {
        if connection.tcp != nil { throw fail("the cluster role is allowed over the Unix socket only (drop --tcp)") }
        let cluster: ClusterSession
        do { cluster = try await ClusterSession.connect(to: connection.endpoint, name: "headunitctl cluster") } catch {
            throw fail("cannot connect to headunitd at \(connection.endpoint) as cluster: \(error)")
        }
        var input: HUClusterInput?
        if zoomIn { input = HUClusterInput.with { $0.zoomIn = true } }
        if zoomOut { input = HUClusterInput.with { $0.zoomOut = true } }
        if let compass { input = HUClusterInput.with { $0.compass = (try? Self.setting(compass))! } }
        if let speedLimit { input = HUClusterInput.with { $0.speedLimit = (try? Self.setting(speedLimit))! } }
        if let input {
            do {
                try await cluster.send(input)
                print("cluster input: OK")
                await cluster.close()
                return
            } catch {
                await cluster.close()
                throw fail("cluster input: \(error)")
            }
        }
        do { try await cluster.subscribe() } catch {
            await cluster.close()
            throw fail("subscribe: \(error)")
        }
        var model = MetadataModel()
        for await update in cluster.updates {
            let changed = model.apply(update)
            print(update.full ? "== cluster state (version \(update.version))" : "-- version \(update.version)")
            for line in MetadataText.render(model.state, changed: update.full ? nil : changed) {
                print("   " + line)
            }
            flushOutput()
        }
        let reason = await cluster.connection.closedReason()
        print("connection closed\(reason.map { ": \($0)" } ?? "")")
    }
}
