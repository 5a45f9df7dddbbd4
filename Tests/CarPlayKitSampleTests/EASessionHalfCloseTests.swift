import CarPlayKit
import Foundation
import HeadUnitClient
import Testing

/// Reads an EASession's input stream to its end, as an EADemo-style delegate does.
final class InputDrain: NSObject, StreamDelegate {
    var received: [UInt8] = []
    var ended = false
    var failure: String?

    func stream(_ aStream: Stream, handle eventCode: Stream.Event) {
        guard let input = aStream as? InputStream else { return }
        switch eventCode {
        case .hasBytesAvailable:
            var buffer = [UInt8](repeating: 0, count: 4096)
            while input.hasBytesAvailable {
                let count = input.read(&buffer, maxLength: buffer.count)
                if count <= 0 { break }
                received += buffer[0..<count]
            }
        case .endEncountered: ended = true
        case .errorOccurred: failure = input.streamError.map { "\($0)" } ?? "unknown"
        default: break
        }
    }
}

extension PortDriverTests {
    /// Issue 25, item 5: on iOS an EASession's streams close separately, and
    /// closing the output stream alone is the app saying "I am done writing".
    /// CarPlayKit half-closes the car's session then (PROTOCOL.md 18.6), so an
    /// accessory that answers what it read, then finishes, returns all of it
    /// and the input stream ends with `.endEncountered`.
    @Test("EASession: closing only the output stream half-closes; the accessory's whole answer arrives, then the input ends")
    func closingTheOutputStreamAloneHalfClosesTheSession() async throws {
        let car = try await Car.start()
        defer { car.stop() }
        let protocolString = "com.openmotors.climate"
        let ecu = try await AccessoryPeer.connect(to: car.endpoint, name: "echo ECU")
        try await ecu.serve([protocolString])
        // The accessory echoes until the app finishes, then finishes too.
        let echo = Task {
            for await stream in ecu.sessions {
                Task {
                    for try await bytes in stream { try await stream.write(bytes) }
                    try await stream.finish()
                }
            }
        }
        defer { echo.cancel() }

        let app = CPApplication(bundleIdentifier: "com.sample.echo", displayName: "Echo", entitlements: [.protocols],
                                accessoryProtocols: [protocolString])
        try await app.connect(to: car.endpoint)
        #expect(await Self.eventually { !EAAccessoryManager.shared().connectedAccessories.isEmpty })
        let accessory = try #require(EAAccessoryManager.shared().connectedAccessories.first { $0.protocolStrings.contains(protocolString) })
        let session = try #require(EASession(accessory: accessory, forProtocol: protocolString))
        let drain = InputDrain()
        let input = try #require(session.inputStream), output = try #require(session.outputStream)
        input.delegate = drain
        input.open()
        output.open()

        // More than the stream's buffer, so the writes wait for space as an app's do.
        let sent = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        var written = 0
        let deadline = Date().addingTimeInterval(60)
        while written < sent.count, Date() < deadline {
            let count = sent[written...].withUnsafeBufferPointer { output.write($0.baseAddress!, maxLength: $0.count) }
            #expect(count >= 0, "write failed: \(String(describing: output.streamError))")
            if count < 0 { break }
            written += count
            if count == 0 { try await Task.sleep(nanoseconds: 2_000_000) }
        }
        #expect(written == sent.count)
        output.close()

        #expect(await Self.eventually(60) { drain.ended || drain.failure != nil })
        #expect(drain.failure == nil)
        #expect(drain.received.count == sent.count)
        #expect(drain.received == sent)

        input.close()
        await ecu.close()
        #expect(await Self.eventually { EAAccessoryManager.shared().connectedAccessories.isEmpty })
        await app.disconnect()
    }
}
