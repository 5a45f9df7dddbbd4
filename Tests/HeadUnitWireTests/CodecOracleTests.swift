import Foundation
import Testing
// Only the check: the oracle's generated types share HeadUnitWire's names.
import enum HeadUnitProtobufOracle.CodecOracle
import enum HeadUnitProtobufOracle.CodecOutcome

/// Our codec held to swift-protobuf's generated code (issue 49, item 7):
/// every vector's payloads, every round-trip fuzz seed and 20,000
/// deterministic mutations of them go through both (`CodecOracle.check`:
/// both take the bytes or both refuse them; equal encodings; exact
/// `wireSize`; decode(encode(x)) == x).
@Suite struct CodecOracleTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // HeadUnitWireTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root

    /// The MESSAGE frames' payloads of Protocol/vectors, with whether the vector says they are malformed.
    static var vectorPayloads: [(name: String, bytes: [UInt8], malformed: Bool)] {
        VectorFile.shared.vectors.flatMap { vector in
            vector.frames.enumerated().compactMap { index, frame in
                frame.kind == "MESSAGE" ? ("\(vector.name)#\(index)", Hex.decode(frame.payload_hex), frame.malformed == true) : nil
            }
        }
    }

    /// Tests/FuzzCorpus/families/codec-<kind>/*, as committed.
    static func seeds(_ kind: CodecOracle.Kind) throws -> [(name: String, bytes: [UInt8])] {
        let folder = root.appendingPathComponent("Tests/FuzzCorpus/families/codec-\(kind.rawValue)")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }.sorted()
        return try names.map { ($0, [UInt8](try Data(contentsOf: folder.appendingPathComponent($0)))) }
    }

    @Test func everyVectorPayloadAgrees() {
        let payloads = Self.vectorPayloads
        #expect(payloads.count >= 40)
        for payload in payloads {
            do {
                let outcome = try CodecOracle.Kind.envelope.check(payload.bytes)
                #expect((outcome == .refusedByBoth) == payload.malformed, "\(payload.name): \(outcome), the vector says malformed: \(payload.malformed)")
            } catch {
                Issue.record("\(payload.name): \(error)")
            }
        }
    }

    @Test(arguments: CodecOracle.Kind.allCases)
    func everyFuzzSeedAgrees(_ kind: CodecOracle.Kind) throws {
        let seeds = try Self.seeds(kind)
        #expect(!seeds.isEmpty, "no seeds for codec-\(kind.rawValue)")
        for seed in seeds {
            do {
                let outcome = try kind.check(seed.bytes)
                // The written seeds are canonical encodings; kept fuzz findings (regression-*) need only agree.
                if seed.name.hasPrefix("seed-") {
                    #expect(outcome == .agreed(encodedBytes: seed.bytes.count), "\(seed.name) is a canonical \(kind) encoding")
                }
            } catch {
                Issue.record("\(kind.rawValue)/\(seed.name): \(error)")
            }
        }
    }

    /// Fixed-seed mutations (bit flips, inserted, removed and overwritten bytes,
    /// copied runs, cuts) of the vectors' payloads and of the seeds, each through its kind.
    @Test func twentyThousandMutationsAgree() throws {
        var bases: [(kind: CodecOracle.Kind, bytes: [UInt8])] = Self.vectorPayloads.map { (.envelope, $0.bytes) }
        for kind in CodecOracle.Kind.allCases {
            bases += try Self.seeds(kind).map { (kind, $0.bytes) }
        }
        var random = SplitMix64(seed: 0x4855_0049)
        var agreed = 0
        var refused = 0
        var disagreements: [String] = []
        for _ in 0..<20_000 {
            let base = bases[Int(random.next() % UInt64(bases.count))]
            var bytes = base.bytes
            for _ in 0...(random.next() % 4) { Self.mutate(&bytes, &random) }
            do {
                switch try base.kind.check(bytes) {
                case .agreed: agreed += 1
                case .refusedByBoth: refused += 1
                }
            } catch {
                if disagreements.count < 10 { disagreements.append("\(base.kind.rawValue): \(error)") }
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        // Both outcomes are reached, so the loop compares decodings and refusals.
        #expect(agreed > 2_000 && refused > 2_000, "agreed \(agreed), refused \(refused)")
    }

    static func mutate(_ bytes: inout [UInt8], _ random: inout SplitMix64) {
        let interesting: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x08, 0x0A, 0x12, 0x0C, 0x0E, 0x0F]
        let position = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count))
        switch random.next() % 7 {
        case 0 where !bytes.isEmpty:
            bytes[position] ^= UInt8(1) << (random.next() % 8)
        case 1:
            bytes.insert(interesting[Int(random.next() % UInt64(interesting.count))], at: min(position, bytes.count))
        case 2 where !bytes.isEmpty:
            bytes.remove(at: position)
        case 3 where !bytes.isEmpty:
            bytes[position] = interesting[Int(random.next() % UInt64(interesting.count))]
        case 4 where !bytes.isEmpty:
            // Copy a run elsewhere: fields sent twice, messages merged.
            let length = 1 + Int(random.next() % UInt64(min(bytes.count - position, 32)))
            let run = bytes[position..<position + length]
            bytes.insert(contentsOf: run, at: Int(random.next() % UInt64(bytes.count + 1)))
        case 5 where !bytes.isEmpty:
            bytes.removeLast(1 + Int(random.next() % UInt64(min(bytes.count, 8))))
        default:
            let byte = UInt8(truncatingIfNeeded: random.next())
            if bytes.isEmpty { bytes.append(byte) } else { bytes[position] = byte }
        }
    }
}

/// A small fixed-seed generator, so the mutations are the same every run.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
