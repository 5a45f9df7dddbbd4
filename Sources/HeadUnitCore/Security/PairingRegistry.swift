import HeadUnitWire

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A phone paired with this car: its Ed25519 public key and what its apps may claim.
public struct PairedDeviceRecord: Sendable, Equatable {
    /// Lowercase hex of the first 16 bytes of SHA-256(public key) (computed at the edge).
    public var id: String
    public var name: String
    public var publicKey: [UInt8]
    public var pairedAtUnixMilliseconds: UInt64
    /// Entitlement keys this device's apps may claim; nil: the car's global policy.
    public var allowedEntitlements: Set<String>?

    public init(id: String, name: String, publicKey: [UInt8], pairedAtUnixMilliseconds: UInt64, allowedEntitlements: Set<String>? = nil) {
        self.id = id
        self.name = name
        self.publicKey = publicKey
        self.pairedAtUnixMilliseconds = pairedAtUnixMilliseconds
        self.allowedEntitlements = allowedEntitlements
    }

    /// The device's policy: its own allow-list with the car's per-app grants
    /// (automaker apps), or the global policy when it has none.
    public func entitlementPolicy(global: EntitlementPolicy) -> EntitlementPolicy? {
        guard let allowedEntitlements else { return nil }
        return EntitlementPolicy(allowed: allowedEntitlements, perApp: global.perApp)
    }

    public var wire: HUPairedDevice {
        var device = HUPairedDevice()
        device.deviceID = id
        device.name = name
        device.publicKey = .init(publicKey)
        device.pairedAtUnixMs = pairedAtUnixMilliseconds
        device.defaultPolicy = allowedEntitlements == nil
        device.allowedEntitlements = allowedEntitlements.map { $0.sorted() } ?? []
        return device
    }

    public init(wire: HUPairedDevice) {
        self.init(
            id: wire.deviceID, name: wire.name, publicKey: Array(wire.publicKey), pairedAtUnixMilliseconds: wire.pairedAtUnixMs,
            allowedEntitlements: wire.defaultPolicy ? nil : Set(wire.allowedEntitlements))
    }
}

/// The car's paired devices and its pairing window, as a value. No clock, no
/// randomness, no crypto, no files: the server passes the code it drew,
/// monotonic milliseconds and the key's id in, runs SPAKE2 itself, and
/// persists `devices` when a call says so.
///
/// One window at a time: `open` draws a new code (replacing any earlier one),
/// valid `codeValidMilliseconds`. Every `PairStart` is one guess of the code
/// (PROTOCOL.md section 20.2), counted when it starts (a man in the middle
/// learns whether its guess was right from the car's confirmation, even if
/// it never sends `Pair`). Nothing an attacker does closes the window
/// (issue 23: a budget per window that many addresses could spend locked
/// the owner out). Guesses are limited per source address with backoff
/// (1 s, doubling, at most `maxBackoffMilliseconds`), and all sources
/// together by a rate (a token bucket of `globalBurst` attempts, one more
/// every `globalIntervalMilliseconds`) that delays rather than voids: at
/// most `attemptBound` guesses per window, each right with probability
/// 10^-6. A successful pairing closes the window.
public struct PairingRegistry: Sendable, Equatable {
    public static let codeDigits = 6
    public static let publicKeyBytes = 32
    public static let maxDeviceNameBytes = 256
    /// Sources remembered for backoff; the least recently seen goes first.
    public static let maxSources = 256
    public static let firstBackoffMilliseconds: UInt64 = 1_000
    public static let maxBackoffMilliseconds: UInt64 = 30_000
    /// Attempts all sources together may start at once, and how often one more may.
    public static let defaultGlobalBurst = 16
    public static let defaultGlobalIntervalMilliseconds: UInt64 = 2_000

    public struct Window: Sendable, Equatable {
        public var code: String
        /// Tells a Pair whose PairStart ran under an earlier window.
        public var generation: UInt64
        public var expiresAt: UInt64
        /// Guesses started on this code, all sources together.
        public var attempts: Int
        /// The allow-list the device that pairs with this code gets; nil: the global policy.
        public var allowedEntitlements: Set<String>?
    }

    struct SourceRecord: Sendable, Equatable {
        var attempts: Int
        var nextAllowedAt: UInt64
        var lastSeen: UInt64
    }

    public private(set) var devices: [PairedDeviceRecord]
    public private(set) var window: Window?
    private var sources: [String: SourceRecord] = [:]
    private var generation: UInt64 = 0
    public var codeValidMilliseconds: UInt64
    public let globalBurst: Int
    public let globalIntervalMilliseconds: UInt64
    /// The global bucket in milliseconds of refill (an attempt costs
    /// `globalIntervalMilliseconds`; each millisecond adds one, so no call,
    /// however frequent, loses a fraction), and when it was last refilled.
    private var globalCredit: UInt64
    private var globalAt: UInt64 = 0

    public init(
        devices: [PairedDeviceRecord] = [], codeValidMilliseconds: UInt64 = 120_000, globalBurst: Int = Self.defaultGlobalBurst,
        globalIntervalMilliseconds: UInt64 = Self.defaultGlobalIntervalMilliseconds
    ) {
        self.devices = devices
        self.codeValidMilliseconds = codeValidMilliseconds
        self.globalBurst = max(1, globalBurst)
        self.globalIntervalMilliseconds = max(1, globalIntervalMilliseconds)
        self.globalCredit = UInt64(max(1, globalBurst)) * max(1, globalIntervalMilliseconds)
    }

    /// The most guesses one window can take from all sources together: the
    /// burst plus one per interval while it is open. An attacker's chance of
    /// pairing in one window is at most this times 10^-6.
    public var attemptBound: Int {
        globalBurst + Int(codeValidMilliseconds / globalIntervalMilliseconds)
    }

    public func device(_ id: String) -> PairedDeviceRecord? {
        devices.first { $0.id == id }
    }

    /// Opens a window with `code` (six decimal digits drawn by the caller).
    /// `allowedEntitlements` (StartPairing's): the device that pairs may claim
    /// only these; empty: the car's global policy. An unknown key refuses the
    /// request and leaves any open window as it was. Backoff starts afresh.
    public mutating func open(code: String, allowedEntitlements: [String] = [], now: UInt64) -> Result<HUPairingInfo, RuleViolation> {
        precondition(code.utf8.count == Self.codeDigits && code.utf8.allSatisfy { (0x30...0x39).contains($0) }, "a pairing code is six digits")
        if let unknown = allowedEntitlements.first(where: { !EntitlementKey.all.contains($0) }) {
            return .failure(RuleViolation(.invalidArgument, "allowed_entitlements: '\(unknown)' is not an entitlement key this car knows"))
        }
        generation += 1
        sources.removeAll()
        window = Window(
            code: code, generation: generation, expiresAt: now + codeValidMilliseconds, attempts: 0,
            allowedEntitlements: allowedEntitlements.isEmpty ? nil : Set(allowedEntitlements))
        var info = HUPairingInfo()
        info.code = code
        info.validMs = UInt32(clamping: codeValidMilliseconds)
        info.attempts = UInt32(clamping: attemptBound)
        return .success(info)
    }

    /// A guess may start: the code to run SPAKE2 with, and the window it belongs to.
    public struct Attempt: Sendable, Equatable {
        public var code: String
        public var generation: UInt64
        /// Attempts on this code so far, this one included.
        public var attempts: Int
    }

    public enum AttemptStart: Sendable, Equatable {
        case proceed(Attempt)
        case refused(HUErrorCode, String)
        /// PAIRING_THROTTLED: an attempt from this source can start in
        /// `waitMilliseconds` at the earliest (`Result.limit_value`, section 20.2).
        case throttled(waitMilliseconds: UInt64, String)
    }

    /// A phone's `PairStart` from `source` (its address). Order of checks: a
    /// window is open and not expired (PAIRING_NOT_OPEN), the source is not
    /// in backoff, the car's rate for all sources has an attempt left (both
    /// PAIRING_THROTTLED, with the wait until both allow one; the window
    /// stays open). Counts the guess.
    public mutating func beginAttempt(source: String, now: UInt64) -> AttemptStart {
        guard var open = window else {
            return .refused(.pairingNotOpen, "no pairing code is open: run `headunitctl pair` on the car first")
        }
        guard now < open.expiresAt else {
            window = nil
            return .refused(.pairingNotOpen, "the pairing code expired; open a new one on the car")
        }
        var record = sources[source] ?? SourceRecord(attempts: 0, nextAllowedAt: 0, lastSeen: now)
        // The rate for everyone: refill first, so that a refusal can say when both allow an attempt.
        if now > globalAt {
            globalCredit = min(UInt64(globalBurst) * globalIntervalMilliseconds, globalCredit + (now - globalAt))
            globalAt = now
        }
        let globalWait = globalCredit >= globalIntervalMilliseconds ? 0 : globalIntervalMilliseconds - globalCredit
        guard now >= record.nextAllowedAt else {
            let wait = max(record.nextAllowedAt - now, globalWait)
            return .throttled(waitMilliseconds: wait, "too many attempts from \(source): try again in \(wait) ms")
        }
        guard globalWait == 0 else {
            return .throttled(
                waitMilliseconds: globalWait,
                "the car takes at most \(globalBurst) pairing attempts at once and one more every \(globalIntervalMilliseconds) ms from all sources: try again in \(globalWait) ms (the code stays open)")
        }
        globalCredit -= globalIntervalMilliseconds
        record.attempts += 1
        record.lastSeen = now
        let backoff = Self.firstBackoffMilliseconds << UInt64(min(record.attempts - 1, 16))
        record.nextAllowedAt = now + min(backoff, Self.maxBackoffMilliseconds)
        if sources[source] == nil, sources.count >= Self.maxSources,
            let oldest = sources.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key
        {
            sources[oldest] = nil
        }
        sources[source] = record
        open.attempts += 1
        window = open
        return .proceed(Attempt(code: open.code, generation: open.generation, attempts: open.attempts))
    }

    public enum PairOutcome: Sendable, Equatable {
        /// Paired (or re-paired by the same key, which proved possession): persist `devices`.
        case paired(PairedDeviceRecord)
        case refused(HUErrorCode, String)
    }

    /// A phone's `Pair` whose confirmation and signature the server verified
    /// for the attempt of `generation`. Order of checks: the window is still
    /// that one and open (PAIRING_NOT_OPEN), the key is 32 bytes and the name
    /// fits (INVALID_ARGUMENT). Re-pairing a key already paired replaces its
    /// record: only the holder of that key can do it (it signed), so nobody
    /// narrows or renames another phone's pairing.
    public mutating func complete(
        generation: UInt64, source: String, publicKey: [UInt8], deviceID: String, name: String, now: UInt64, unixMilliseconds: UInt64
    ) -> PairOutcome {
        guard let open = window, open.generation == generation, now < open.expiresAt else {
            return .refused(.pairingNotOpen, "the pairing code this attempt used is no longer open (expired, used or replaced)")
        }
        guard publicKey.count == Self.publicKeyBytes else {
            return .refused(.invalidArgument, "public_key must be a raw Ed25519 key of \(Self.publicKeyBytes) bytes, got \(publicKey.count)")
        }
        guard name.utf8.count <= Self.maxDeviceNameBytes else {
            return .refused(.invalidArgument, "device_name is over \(Self.maxDeviceNameBytes) bytes")
        }
        // One code pairs one device.
        window = nil
        sources.removeAll()
        let record = PairedDeviceRecord(
            id: deviceID, name: name, publicKey: publicKey, pairedAtUnixMilliseconds: unixMilliseconds,
            allowedEntitlements: open.allowedEntitlements)
        if let index = devices.firstIndex(where: { $0.id == deviceID }) {
            devices[index] = record
        } else {
            devices.append(record)
        }
        return .paired(record)
    }

    /// Guesses started on the open code (for the car's screen).
    public var attemptsOnOpenCode: Int { window?.attempts ?? 0 }

    /// Forgets a device; false when it was not paired.
    public mutating func remove(_ id: String) -> Bool {
        guard let index = devices.firstIndex(where: { $0.id == id }) else { return false }
        devices.remove(at: index)
        return true
    }

    /// The wire list for `ListPairedDevices` and the state file.
    public var wire: HUPairingInfo {
        var info = HUPairingInfo()
        info.devices = devices.map(\.wire)
        return info
    }

    /// Compares without an early exit, so the time taken does not tell an
    /// attacker how many leading digits were right.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
