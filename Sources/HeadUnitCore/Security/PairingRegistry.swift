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
/// randomness, no files: the server passes the code it drew, monotonic
/// milliseconds and the key's id in, and persists `devices` when a call says so.
///
/// One window at a time: `open` draws a new code (replacing any earlier one),
/// valid `codeValidMilliseconds`, voided after `maxAttempts` wrong codes or
/// one successful pairing.
public struct PairingRegistry: Sendable, Equatable {
    public static let codeDigits = 6
    public static let publicKeyBytes = 32
    public static let maxDeviceNameBytes = 256

    public struct Window: Sendable, Equatable {
        public var code: String
        public var expiresAt: UInt64
        public var attemptsLeft: Int
        /// The allow-list the device that pairs with this code gets; nil: the global policy.
        public var allowedEntitlements: Set<String>?
    }

    public private(set) var devices: [PairedDeviceRecord]
    public private(set) var window: Window?
    public var codeValidMilliseconds: UInt64
    public var maxAttempts: Int

    public init(devices: [PairedDeviceRecord] = [], codeValidMilliseconds: UInt64 = 120_000, maxAttempts: Int = 5) {
        self.devices = devices
        self.codeValidMilliseconds = codeValidMilliseconds
        self.maxAttempts = maxAttempts
    }

    public func device(_ id: String) -> PairedDeviceRecord? {
        devices.first { $0.id == id }
    }

    /// Opens a window with `code` (six decimal digits drawn by the caller).
    /// `allowedEntitlements` (StartPairing's): the device that pairs may claim
    /// only these; empty: the car's global policy. An unknown key refuses the
    /// request and leaves any open window as it was.
    public mutating func open(code: String, allowedEntitlements: [String] = [], now: UInt64) -> Result<HUPairingInfo, RuleViolation> {
        precondition(code.utf8.count == Self.codeDigits && code.utf8.allSatisfy { (0x30...0x39).contains($0) }, "a pairing code is six digits")
        if let unknown = allowedEntitlements.first(where: { !EntitlementKey.all.contains($0) }) {
            return .failure(RuleViolation(.invalidArgument, "allowed_entitlements: '\(unknown)' is not an entitlement key this car knows"))
        }
        window = Window(
            code: code, expiresAt: now + codeValidMilliseconds, attemptsLeft: maxAttempts,
            allowedEntitlements: allowedEntitlements.isEmpty ? nil : Set(allowedEntitlements))
        var info = HUPairingInfo()
        info.code = code
        info.validMs = UInt32(clamping: codeValidMilliseconds)
        info.attempts = UInt32(clamping: maxAttempts)
        return .success(info)
    }

    public enum PairOutcome: Sendable, Equatable {
        /// Paired (or re-paired: same key, new name): persist `devices`.
        case paired(PairedDeviceRecord)
        case refused(HUErrorCode, String)
    }

    /// A phone's `Pair`. `deviceID` is derived from `publicKey` by the caller.
    /// Order of checks: a window is open and not expired (PAIRING_NOT_OPEN),
    /// the key is 32 bytes and the name fits (INVALID_ARGUMENT, no attempt
    /// used), the code matches (BAD_PAIRING_CODE, one attempt used).
    public mutating func pair(
        code: String, publicKey: [UInt8], deviceID: String, name: String, now: UInt64, unixMilliseconds: UInt64
    ) -> PairOutcome {
        guard var open = window else {
            return .refused(.pairingNotOpen, "no pairing code is open: run `headunitctl pair` on the car first")
        }
        guard now < open.expiresAt else {
            window = nil
            return .refused(.pairingNotOpen, "the pairing code expired; open a new one on the car")
        }
        guard publicKey.count == Self.publicKeyBytes else {
            return .refused(.invalidArgument, "public_key must be a raw Ed25519 key of \(Self.publicKeyBytes) bytes, got \(publicKey.count)")
        }
        guard name.utf8.count <= Self.maxDeviceNameBytes else {
            return .refused(.invalidArgument, "device_name is over \(Self.maxDeviceNameBytes) bytes")
        }
        guard Self.constantTimeEqual(Array(code.utf8), Array(open.code.utf8)) else {
            open.attemptsLeft -= 1
            if open.attemptsLeft <= 0 {
                window = nil
                return .refused(.badPairingCode, "wrong pairing code; that was the last attempt, the code is void")
            }
            window = open
            return .refused(.badPairingCode, "wrong pairing code (\(open.attemptsLeft) attempt\(open.attemptsLeft == 1 ? "" : "s") left)")
        }
        // One code pairs one device.
        window = nil
        let record = PairedDeviceRecord(
            id: deviceID, name: name, publicKey: publicKey, pairedAtUnixMilliseconds: unixMilliseconds,
            allowedEntitlements: open.allowedEntitlements)
        if let index = devices.firstIndex(where: { $0.id == deviceID }) {
            // Re-pairing the same key: the new window's allow-list and name replace the old.
            devices[index] = record
        } else {
            devices.append(record)
        }
        return .paired(record)
    }

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
