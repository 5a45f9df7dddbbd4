import Testing
@testable import HeadUnitWire

@Suite struct ProtocolVersionTests {
    @Test func daemonSpeaksVersionOneOnly() {
        #expect(ProtocolVersion.minimum == 1)
        #expect(ProtocolVersion.maximum == 1)
    }

    /// (client min, client max) -> the version chosen against the daemon's 1...1.
    @Test(arguments: [
        // Overlapping ranges: the highest common version.
        (UInt32(1), UInt32(1), UInt32?(1)),
        (1, 3, 1),  // a newer client that still speaks 1 (the compatibility window)
        (0, 1, 1),
        (0, 9, 1),
        (1, .max, 1),
        (0, .max, 1),
        // No overlap.
        (0, 0, nil),  // a Hello without versions
        (2, 3, nil),  // too new
        (2, 2, nil),
        (.max, .max, nil),
        // Inverted (empty) ranges never negotiate, even around 1.
        (3, 1, nil),
        (1, 0, nil),
        (2, 1, nil),
    ])
    func negotiate(clientMin: UInt32, clientMax: UInt32, expected: UInt32?) {
        #expect(ProtocolVersion.negotiate(clientMin: clientMin, clientMax: clientMax) == expected)
    }

    @Test func chosenVersionLiesInBothRanges() {
        for low in UInt32(0)...4 {
            for high in UInt32(0)...4 {
                guard let version = ProtocolVersion.negotiate(clientMin: low, clientMax: high) else {
                    #expect(low > high || high < ProtocolVersion.minimum || low > ProtocolVersion.maximum)
                    continue
                }
                #expect((low...high).contains(version))
                #expect((ProtocolVersion.minimum...ProtocolVersion.maximum).contains(version))
                #expect(version == min(high, ProtocolVersion.maximum))
            }
        }
    }
}
