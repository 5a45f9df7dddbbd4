import Logging
import XCTest

@testable import Systemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The Swift layer over libsystemd, against real sockets and environment variables.
/// (The daemon under systemd-socket-activate and under systemd itself is tested
/// black-box by .ci/systemd-tests.sh.)
final class SystemdTests: XCTestCase {
    private var directory = ""

    override func setUp() {
        var template = Array("/tmp/systemd-tests.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template))
    }

    override func tearDown() {
        for name in ["listen.sock", "notify.sock"] { unlink(directory + "/" + name) }
        rmdir(directory)
        for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "FDSTORE"] {
            unsetenv(name)
        }
    }

    // MARK: - sockets

    private func unixSocket(type: CInt, path: String) -> CInt {
        let fd = socket(AF_UNIX, type, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(rc, 0)
        return fd
    }

    private var stream: CInt {
        #if canImport(Glibc)
        Int32(SOCK_STREAM.rawValue)
        #else
        SOCK_STREAM
        #endif
    }

    private var datagram: CInt {
        #if canImport(Glibc)
        Int32(SOCK_DGRAM.rawValue)
        #else
        SOCK_DGRAM
        #endif
    }

    func testListeningUnixStreamSocketIsRecognizedWithItsPath() {
        let path = directory + "/listen.sock"
        let fd = unixSocket(type: stream, path: path)
        defer { close(fd) }
        XCTAssertEqual(SocketActivation.kind(of: fd), .other, "not listening yet")
        XCTAssertEqual(listen(fd, 16), 0)
        XCTAssertEqual(SocketActivation.kind(of: fd), .unixStream(path: path))
    }

    func testListeningTCPSocketIsRecognizedWithItsPort() {
        let fd = socket(AF_INET, stream, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(rc, 0)
        XCTAssertEqual(listen(fd, 16), 0)
        let port = SocketActivation.inetPort(of: fd)
        XCTAssertNotEqual(port, 0)
        XCTAssertEqual(SocketActivation.kind(of: fd), .inetStream(port: port))
    }

    func testDatagramSocketsAndPipesAreNotListeners() {
        let fd = unixSocket(type: datagram, path: directory + "/listen.sock")
        defer { close(fd) }
        XCTAssertEqual(SocketActivation.kind(of: fd), .other)
        var fds: [CInt] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        XCTAssertEqual(SocketActivation.kind(of: fds[0]), .other)
    }

    func testNoListenFDsWithoutActivation() throws {
        unsetenv("LISTEN_FDS")
        XCTAssertEqual(try SocketActivation.inheritedFDs(), [])
    }

    func testListenFDsMeantForAnotherProcessAreIgnored() throws {
        setenv("LISTEN_PID", "\(getpid() + 1)", 1)
        setenv("LISTEN_FDS", "2", 1)
        setenv("LISTEN_FDNAMES", "unix:tcp", 1)
        XCTAssertEqual(try SocketActivation.inheritedFDs(unsetEnvironment: false), [])
    }

    // MARK: - notify

    func testNotifyIsANoOpWithoutNotifySocket() {
        unsetenv("NOTIFY_SOCKET")
        XCTAssertFalse(Notify.ready())
        XCTAssertFalse(Notify.watchdog())
    }

    func testNotifySendsOneLineStatusToTheSocket() throws {
        let path = directory + "/notify.sock"
        let fd = unixSocket(type: datagram, path: path)
        defer { close(fd) }
        setenv("NOTIFY_SOCKET", path, 1)

        XCTAssertTrue(Notify.status("1 phone,\n2 apps"))
        XCTAssertEqual(receive(fd), "STATUS=1 phone, 2 apps")
        XCTAssertTrue(Notify.ready())
        XCTAssertEqual(receive(fd), "READY=1")
        XCTAssertTrue(Notify.stopping())
        XCTAssertEqual(receive(fd), "STOPPING=1")
        XCTAssertTrue(Notify.watchdog())
        XCTAssertEqual(receive(fd), "WATCHDOG=1")
        XCTAssertTrue(Notify.reloading())
        XCTAssertTrue(receive(fd).hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        XCTAssertNotNil(getenv("NOTIFY_SOCKET"), "kept for the next notification")
    }

    private func receive(_ fd: CInt) -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
    }

    // MARK: - watchdog

    func testWatchdogPingsAtHalfTheInterval() {
        setenv("WATCHDOG_USEC", "3000000", 1)
        XCTAssertEqual(Watchdog.timeoutMicroseconds(), 3_000_000)
        XCTAssertEqual(Watchdog.pingIntervalNanoseconds(), 1_500_000_000)
    }

    func testWatchdogForAnotherProcessOrUnsetIsOff() {
        setenv("WATCHDOG_USEC", "3000000", 1)
        setenv("WATCHDOG_PID", "\(getpid() + 1)", 1)
        XCTAssertNil(Watchdog.pingIntervalNanoseconds())
        unsetenv("WATCHDOG_PID")
        unsetenv("WATCHDOG_USEC")
        XCTAssertNil(Watchdog.pingIntervalNanoseconds())
    }

    // MARK: - logging

    func testJournalLinesCarryThePriorityPrefixAndNoTimestamp() {
        let handler = JournalLogHandler(label: "headunitd", style: .journal)
        XCTAssertEqual(handler.format(level: .warning, message: "slow peer\ncut off", metadata: ["peer": "3", "a": "b"]),
                       "<4>headunitd: slow peer cut off a=b peer=3")
        XCTAssertEqual(handler.format(level: .error, message: "x", metadata: [:]), "<3>headunitd: x")
        XCTAssertEqual(handler.format(level: .info, message: "x", metadata: [:]), "<6>headunitd: x")
        XCTAssertEqual(handler.format(level: .debug, message: "x", metadata: [:]), "<7>headunitd: x")
    }

    func testPlainLinesAreTimestamped() {
        let line = JournalLogHandler(label: "headunitd", style: .plain).format(level: .notice, message: "ready", metadata: [:])
        XCTAssertTrue(line.hasSuffix(" notice headunitd: ready"), line)
        XCTAssertEqual(line.count, "2025-01-31T12:00:00.123Z notice headunitd: ready".count, line)
    }

    func testQuietByDefault() {
        XCTAssertEqual(JournalLogHandler(label: "x").logLevel, .notice)
    }

    func testJournalIsDetectedOnlyWhenJournalStreamIsOurStderr() {
        var info = stat()
        XCTAssertEqual(fstat(2, &info), 0)
        setenv("JOURNAL_STREAM", "\(info.st_dev):\(info.st_ino)", 1)
        XCTAssertTrue(JournalLogHandler.stderrIsJournal())
        setenv("JOURNAL_STREAM", "\(info.st_dev):\(info.st_ino + 1)", 1)
        XCTAssertFalse(JournalLogHandler.stderrIsJournal())
        setenv("JOURNAL_STREAM", "garbage", 1)
        XCTAssertFalse(JournalLogHandler.stderrIsJournal())
        unsetenv("JOURNAL_STREAM")
        XCTAssertEqual(JournalLogHandler.detectStyle(), .plain)
    }

    // MARK: - fd store (restart handover)

    func testFDStoreCapacityNeedsANotifySocketAndAPositiveFDSTORE() {
        setenv("FDSTORE", "513", 1)
        unsetenv("NOTIFY_SOCKET")
        XCTAssertEqual(FDStore.capacity, 0, "nowhere to send the fds")
        setenv("NOTIFY_SOCKET", directory + "/notify.sock", 1)
        XCTAssertEqual(FDStore.capacity, 513)
        setenv("FDSTORE", "0", 1)
        XCTAssertEqual(FDStore.capacity, 0)
        setenv("FDSTORE", "lots", 1)
        XCTAssertEqual(FDStore.capacity, 0)
    }

    func testStoreSendsTheDescriptorWithItsNameAndRemoveNamesIt() throws {
        let path = directory + "/notify.sock"
        let manager = unixSocket(type: datagram, path: path)
        defer { close(manager) }
        setenv("NOTIFY_SOCKET", path, 1)
        var pair: [CInt] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, stream, 0, &pair), 0)
        defer { close(pair[0]); close(pair[1]) }
        XCTAssertTrue(FDStore.store(pair[0], name: "conn-7"))
        // What systemd receives: the assignment and, with SCM_RIGHTS, a duplicate of the fd.
        var buffer = [UInt8](repeating: 0, count: 256)
        var control = [UInt8](repeating: 0, count: 64)
        let (count, received): (Int, CInt?) = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { ancillary in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = ancillary.baseAddress
                    message.msg_controllen = ancillary.count
                    let count = recvmsg(manager, &message, 0)
                    // One cmsghdr with one int: the header is 16 bytes on 64-bit Linux.
                    guard message.msg_controllen >= 20 else { return (count, nil) }
                    return (count, ancillary.load(fromByteOffset: 16, as: CInt.self))
                }
            }
        }
        XCTAssertEqual(String(decoding: buffer[..<max(count, 0)], as: UTF8.self), "FDSTORE=1\nFDNAME=conn-7")
        let duplicate = try XCTUnwrap(received)
        defer { close(duplicate) }
        XCTAssertTrue(FDStore.isConnectedStreamSocket(duplicate))
        XCTAssertTrue(FDStore.remove(name: "conn-7"))
        XCTAssertEqual(receive(manager), "FDSTOREREMOVE=1\nFDNAME=conn-7")
    }

    func testASnapshotGoesThroughAMemoryFile() throws {
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let fd = try FDStore.memoryFile(name: "snapshot", bytes: bytes)
        defer { close(fd) }
        XCTAssertEqual(try FDStore.readAll(fd, limit: 1 << 20), bytes)
        XCTAssertThrowsError(try FDStore.readAll(fd, limit: 1_000), "over the limit")
        XCTAssertFalse(FDStore.isConnectedStreamSocket(fd))
    }

    func testAListeningSocketIsNotAStoredConnection() {
        let fd = unixSocket(type: stream, path: directory + "/listen.sock")
        defer { close(fd) }
        XCTAssertEqual(listen(fd, 4), 0)
        XCTAssertFalse(FDStore.isConnectedStreamSocket(fd))
    }
}
