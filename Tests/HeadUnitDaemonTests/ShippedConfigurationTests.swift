import HeadUnitCore
import XCTest

@testable import headunitd

/// Issue 47 item 7: with the shipped `systemd/headunitd.json` (the Debian
/// package installs the same file as /etc/headunitd/headunitd.json), a local
/// process that can open the socket but has no car role could hold the Unix
/// slots and keep a restarting HMI out. The shipped file now carries access
/// rules naming the groups `headunitd.sysusers` creates, and the daemon's
/// admission keeps slots for them.
final class ShippedConfigurationTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The groups `systemd/headunitd.sysusers` creates (its `g NAME ...` lines).
    static func sysusersGroups() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("systemd/headunitd.sysusers"), encoding: .utf8)
        var groups: Set<String> = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 2, fields[0] == "g" { groups.insert(String(fields[1])) }
        }
        return groups
    }

    /// The system's database as a test machine has it not: the sysusers'
    /// groups at made-up gids, no other name.
    static let gids: [String: UInt32] = ["headunit": 64_999, "headunit-hmi": 64_998, "headunit-phone": 64_997]
    static let accounts = AccountDatabase(uid: { _ in nil }, gid: { gids[$0] })

    func testTheShippedConfigurationNamesTheSysusersGroupsAndReservesTheirSlots() throws {
        // Read as the daemon reads --config.
        let file = try DaemonConfig.load(path: Self.root.appendingPathComponent("systemd/headunitd.json").path)
        let sysusers = try Self.sysusersGroups()
        XCTAssertTrue(sysusers.isSuperset(of: ["headunit", "headunit-hmi", "headunit-phone"]), "\(sysusers)")
        // Every car role names headunit-hmi, the phone role headunit-phone: groups sysusers creates.
        for rule in [file.hmiAccess, file.clusterAccess, file.accessoryAccess] {
            XCTAssertEqual(rule.groups, ["headunit-hmi"])
        }
        XCTAssertEqual(file.phoneAccess.groups, ["headunit-phone"])
        for rule in [file.hmiAccess, file.clusterAccess, file.accessoryAccess, file.phoneAccess] {
            XCTAssertTrue(Set(rule.groups).isSubset(of: sysusers))
        }

        let security = try DaemonConfig.security(file, accounts: Self.accounts)
        XCTAssertEqual(security.access.hmi.gids, [64_998])
        XCTAssertEqual(security.access.phone.gids, [64_997])
        XCTAssertTrue(security.authenticatePhonesOverTCP)

        // The daemon's admission with the default caps and these rules.
        let caps = ConnectionCaps()
        var admission = Admission(caps: caps, access: security.access)
        XCTAssertGreaterThan(admission.unixReserve, 0)
        XCTAssertEqual(admission.unixReserve, caps.unixReserved)
        // A member of the socket's group with no car role fills what it may...
        let stranger = PeerCredentials(pid: 100, uid: 1_000, gid: 64_999)
        var id: UInt64 = 0
        for _ in 0..<(caps.maxUnix - admission.unixReserve) {
            id += 1
            XCTAssertEqual(admission.admit(id, .unix(stranger), now: 0), .admit)
        }
        id += 1
        guard case .refuse = admission.admit(id, .unix(stranger), now: 0) else { return XCTFail("the stranger took a reserved slot") }
        // ...and the restarting HMI (group headunit-hmi) still gets in, as does a USB phone bridge.
        id += 1
        XCTAssertEqual(admission.admit(id, .unix(PeerCredentials(pid: 200, uid: 1_001, gid: 64_998)), now: 0), .admit)
        id += 1
        XCTAssertEqual(admission.admit(id, .unix(PeerCredentials(pid: 300, uid: 1_002, gid: 64_997)), now: 0), .admit)
        // The stranger may not take the HMI role; the HMI's group may.
        XCTAssertNotNil(security.access.refusal(role: .hmi, credentials: stranger))
        XCTAssertNil(security.access.refusal(role: .hmi, credentials: PeerCredentials(pid: 200, uid: 1_001, gid: 64_998)))
    }

    /// A rule naming a group the system does not have stops the start: a
    /// rule that matched nobody would keep the HMI out.
    func testAGroupTheSystemDoesNotHaveStopsTheStart() throws {
        let file = try DaemonConfig.load(path: Self.root.appendingPathComponent("systemd/headunitd.json").path)
        XCTAssertThrowsError(try DaemonConfig.security(file, accounts: AccountDatabase(uid: { _ in nil }, gid: { _ in nil }))) { error in
            XCTAssertTrue("\(error)".contains("no group 'headunit-hmi'"), "\(error)")
        }
    }

    /// Names resolve through the system's database: root is uid 0 and gid 0 everywhere.
    func testTheSystemDatabaseResolvesNames() {
        XCTAssertEqual(AccountDatabase.system.uid("root"), 0)
        XCTAssertEqual(AccountDatabase.system.gid("root"), 0)
        XCTAssertNil(AccountDatabase.system.gid("no-such-group-headunitd-test"))
    }
}
