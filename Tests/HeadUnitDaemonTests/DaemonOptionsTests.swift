import ArgumentParser
import XCTest

@testable import headunitd

/// The daemon reads its usual arguments without swift-argument-parser (its
/// run-time reflection was 45% of the start, issue 30 item 4); these tests hold
/// that direct reading to ArgumentParser's own parse of the same arguments.
final class DaemonOptionsTests: XCTestCase {
    func testEveryFormReadDirectlyIsWhatArgumentParserParses() throws {
        let forms: [[String]] = [
            [],
            ["--config", "/etc/headunitd/headunitd.json"],  // systemd's unit
            ["--unix-socket", "/tmp/h.sock", "--no-tcp", "--config", "/tmp/c.json"],  // the end-to-end tests
            ["--no-tcp", "--unix-socket", "/tmp/h.sock"],
            ["--tcp", "127.0.0.1:0", "--unix-socket", "/tmp/h.sock", "--log-level", "debug"],
            ["--max-payload", "1048576", "--no-tcp"],
            ["--max-payload", "+7"],
            ["--print-default-config"],
            ["--log-level", "TRACE", "--config", "relative/path.json", "--tcp", "[::1]:7420"],
            ["--config", ""],
            ["--unix-socket", "/tmp/with space/h.sock", "--print-default-config", "--no-tcp", "--max-payload", "0",
             "--tcp", "host:1", "--log-level", "info", "--config", "c.json"],
        ]
        for arguments in forms {
            let direct = try XCTUnwrap(DaemonOptions(plainArguments: arguments), "\(arguments) not read directly")
            let parsed = try HeadUnitDaemon.parse(arguments).options
            XCTAssertEqual(direct, parsed, "\(arguments)")
        }
    }

    func testEverythingElseGoesToArgumentParser() {
        let others: [[String]] = [
            ["--help"], ["-h"], ["help"],
            ["--config"],  // a value missing
            ["--config", "--no-tcp"],  // an option where the value should be
            ["--tcp", "-1"],
            ["--no-tcp", "--no-tcp"],  // repeats
            ["--config", "a.json", "--config", "b.json"],
            ["--config=a.json"],  // other spellings
            ["--max-payload", "lots"], ["--max-payload", "4294967296"], ["--max-payload", "-1"],
            ["--bogus"], ["positional"], ["--"],
            ["--generate-completion-script", "bash"],
        ]
        for arguments in others {
            XCTAssertNil(DaemonOptions(plainArguments: arguments), "\(arguments)")
        }
        // Each of those ArgumentParser refuses with its message, or answers (help, completions):
        // the daemon never reads them in a way ArgumentParser would not.
        XCTAssertThrowsError(try HeadUnitDaemon.parse(["--config"]))
        XCTAssertThrowsError(try HeadUnitDaemon.parse(["--max-payload", "lots"]))
        XCTAssertThrowsError(try HeadUnitDaemon.parse(["--bogus"]))
        XCTAssertEqual(try HeadUnitDaemon.parse(["--config=a.json"]).options.configFile, "a.json")
    }

    /// A flag added to the command is either read directly or left to ArgumentParser,
    /// never dropped: every long name in the help is one the direct reading knows.
    func testTheDirectReadingKnowsEveryOption() {
        let help = HeadUnitDaemon.helpMessage(columns: 400)
        let names = help.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\n" })
            .filter { $0.hasPrefix("--") }
            .map(String.init)
        let known = ["--unix-socket", "--tcp", "--no-tcp", "--config", "--log-level", "--max-payload", "--print-default-config", "--help"]
        XCTAssertFalse(names.isEmpty)
        for name in Set(names) {
            XCTAssertTrue(known.contains(name), "\(name) is in the help but not read directly")
        }
    }
}
