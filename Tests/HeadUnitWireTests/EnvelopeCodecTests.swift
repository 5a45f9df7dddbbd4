import Foundation
import NIOCore
import Testing
@testable import HeadUnitWire

@Suite struct EnvelopeCodecTests {
    static func roundTrip(_ envelope: HUEnvelope) throws -> HUEnvelope {
        var buffer = ByteBuffer()
        EnvelopeCodec.writeFrame(envelope, into: &buffer)
        let frame = try #require(try FrameParser.parse(&buffer, maxPayload: 1 << 20))
        #expect(frame.header == FrameHeader(kind: .message, length: UInt32(frame.payload.readableBytes)))
        #expect(buffer.readableBytes == 0)
        return try EnvelopeCodec.decode(frame.payload)
    }

    static let samples: [HUEnvelope] = {
        var hello = HUEnvelope()
        hello.requestID = 1
        hello.hello = .with {
            $0.minVersion = 1
            $0.maxVersion = 3
            $0.role = .phone
            $0.name = "Ünïcødé phone 📱"
            $0.auth = Data([0, 1, 2, 255])
        }
        var template = HUEnvelope()
        template.requestID = .max
        template.templateRequest = .with {
            $0.appID = "com.example.radio"
            $0.sceneID = 1
            $0.setRoot = .with {
                $0.id = "root"
                $0.list = .with {
                    $0.title = "Radio"
                    $0.sections = [
                        .with {
                            $0.id = "s"
                            $0.items = (0..<12).map { i in
                                .with {
                                    $0.id = "item-\(i)"
                                    $0.general = .with { $0.text = "Item \(i)"; $0.progress = 0.5; $0.showsProgress = true }
                                }
                            }
                        }
                    ]
                }
            }
        }
        var event = HUEnvelope()
        event.appEvent = .with {
            $0.eventID = .max
            $0.poiRegionChanged = .with { $0.region = .with { $0.centerLatitude = -33.9; $0.spanLongitude = 0.25 } }
        }
        var update = HUEnvelope()
        update.screenUpdate = .with {
            $0.screen = .main
            $0.sequence = 1 << 40
            $0.diff = .with { $0.templateID = "root"; $0.changes = [.with { $0.removedID = "item-3" }, .with { $0.selectedPointIndex = -1 }] }
        }
        return [HUEnvelope(), hello, template, event, update]
    }()

    @Test(arguments: samples)
    func roundTrips(_ envelope: HUEnvelope) throws {
        #expect(try Self.roundTrip(envelope) == envelope)
    }

    @Test func emptyEnvelopeIsAnEmptyPayload() throws {
        let buffer = EnvelopeCodec.frame(HUEnvelope(), allocator: ByteBufferAllocator())
        #expect(Array(buffer.readableBytesView) == [0x48, 0x55, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(try EnvelopeCodec.decode(ByteBuffer()).body == nil)
    }

    @Test func decodeReadsOnlyTheSlice() throws {
        // Two envelopes back to back: each payload slice decodes on its own.
        var first = HUEnvelope()
        first.requestID = 7
        first.getStatus = HUGetStatus()
        var second = HUEnvelope()
        second.appClosed = .with { $0.appID = "x" }
        var buffer = ByteBuffer()
        EnvelopeCodec.writeFrame(first, into: &buffer)
        EnvelopeCodec.writeFrame(second, into: &buffer)
        let a = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
        let b = try #require(try FrameParser.parse(&buffer, maxPayload: 1024))
        #expect(try EnvelopeCodec.decode(a.payload) == first)
        #expect(try EnvelopeCodec.decode(b.payload) == second)
    }

    @Test(arguments: [[0xFF], [0x08], [0x12, 0x05, 0x08, 0x01], [0x0A, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]] as [[UInt8]])
    func malformedPayloadsThrow(_ bytes: [UInt8]) {
        #expect(throws: EnvelopeCodec.DecodeError.self) { try EnvelopeCodec.decode(ByteBuffer(bytes: bytes)) }
    }

    @Test func unknownFieldsAreSkippedAndNotKept() throws {
        // request_id 6, then field 99 (an unknown body from a newer version).
        let bytes: [UInt8] = [0x08, 0x06, 0x9A, 0x06, 0x00]
        let decoded = try EnvelopeCodec.decode(ByteBuffer(bytes: bytes))
        #expect(decoded.requestID == 6)
        #expect(decoded.body == nil)
        var out = ByteBuffer()
        EnvelopeCodec.writeFrame(decoded, into: &out)
        #expect(Array(out.readableBytesView.dropFirst(FrameHeader.size)) == [0x08, 0x06])
    }
}
