import HeadUnitCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import HeadUnitServer

/// The whole server (its own loop and disk thread), started and stopped in
/// process: a stop waits for the paired-device list still on its way to
/// disk, since the next process reads it at start (PROTOCOL.md 20.4).
@Suite struct ServerStopTests {
    @Test func aStopWaitsForTheLastWriteOfThePairedDevices() async throws {
        let disk = HeldDisk()
        var logger = Logger(label: "HeadUnitServerTests")
        logger.logLevel = .critical
        let server = HeadUnitServer(configuration: ServerConfiguration(listeners: []), logger: logger, disk: disk)
        _ = try await server.start()
        let host = server.host
        let record = PairingStoreInMemoryTests.record("a")
        try await server.eventLoop.submit { _ = host.pairing.writes.save([record]) }.get()
        #expect(disk.waiting.count == 1)

        let stopped = NIOLockedValueBox(false)
        let stop = Task {
            await server.shutdown()
            stopped.withLockedValue { $0 = true }
        }
        // The stop reaches the write and waits for it (a condition, with a generous deadline).
        let deadline = ContinuousClock.now + .seconds(30)
        while try await server.eventLoop.submit({ host.pairing.writes.idleWaiterCount }).get() == 0 {
            try #require(ContinuousClock.now < deadline, "the stop never waited for the disk")
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(!stopped.withLockedValue { $0 })

        disk.finishOldest()
        await stop.value
        #expect(stopped.withLockedValue { $0 })
        #expect(disk.written == [[record]])
    }
}
