import Foundation
import HeadUnitServer
import HeadUnitWire
import Logging
import TestSupport
import Testing

/// PROTOCOL.md 26.8 through a real restart handover (section 22), in
/// process as `AudioRestartHandoverTests` does it: a call action waiting for
/// the app's answer is not carried, so its HMI is answered NOT_CONNECTED
/// before the handover (it used to wait for ever); the call is kept, and
/// the app's late answer to the next process is UNKNOWN_EVENT.
@Suite("A restart while a call action waits", .serialized)
struct CallRestartHandoverTests {
    @Test func aCallActionWaitingAtTheRestartIsAnsweredAndTheCallIsKept() async throws {
        try await onOwnThread {
            var daemon = try InProcessDaemon()
            let path = daemon.path
            let first = try daemon.start()

            let hmi = RecordingPeer(try RawSocketClient.unix(path))
            defer { hmi.close() }
            try hmi.client.handshake(role: .hmi, name: "hmi")
            let phone = RecordingPeer(try RawSocketClient.unix(path))
            defer { phone.close() }
            try phone.client.handshake(role: .phone, name: "phone")
            let chat = CallSocketTests.chat, uuid = CallSocketTests.first
            let app = HUAppInfo.with { $0.appID = chat; $0.displayName = "Chat"; $0.entitlements = ["com.apple.developer.carplay-communication"] }
            #expect(try phone.request(.announceApps(HUAnnounceApps.with { $0.deviceName = "phone"; $0.apps = [app] })).code == .ok)
            let reported = try phone.request(.callReport(HUCallReport.with {
                $0.appID = chat
                $0.callUuid = uuid
                $0.kind = .newIncoming
                $0.description_p = HUCallDescription.with { $0.remoteHandle = HUCallHandle.with { $0.type = .phoneNumber; $0.value = "+15550100" } }
            }))
            #expect(reported.code == .ok, "\(reported.message)")

            // The driver answers; the app has the action and has not answered it.
            let requestID: UInt32 = 7_001
            try hmi.client.send(.callInput(HUCallInput.with { $0.action = CallSocketTests.action(.answer, uuid) }), requestID: requestID)
            let event = try phone.waitFor { envelope -> HUCallActionEvent? in
                if case .callActionEvent(let event) = envelope.body { return event }
                return nil
            }
            #expect(event.action.kind == .answer && event.action.callUuid == uuid)

            // The restart: the HMI is answered before its connection is handed over.
            let store = AudioRestartHandoverTests.StandInFDStore()
            let report = try AudioRestartHandoverTests.blocking { await first.handOver(store: store.store) }
            #expect(report.snapshotStored && report.handedOver == 2 && report.closed == 0, "\(report)")
            let answer = try hmi.waitFor { envelope -> HUResult? in
                if envelope.requestID == requestID, case .result(let result) = envelope.body { return result }
                return nil
            }
            #expect(answer.code == .notConnected && answer.message.contains("restart"), "\(answer)")

            daemon.configuration.restored = store.handedBack()
            let second = try daemon.start()
            defer { try? AudioRestartHandoverTests.blocking { await second.shutdown() } }

            // The app's late answer reaches a car that never had the action; the call is still there.
            let late = try phone.request(.callActionAnswer(HUCallActionAnswer.with { $0.appID = chat; $0.actionID = event.actionID; $0.fulfilled = true }))
            #expect(late.code == .unknownEvent, "\(late)")
            let status = try hmi.request(.getStatus(HUGetStatus()))
            #expect(status.code == .ok)
            // The driver can act on the kept call again: a new action reaches the app.
            try hmi.client.send(.callInput(HUCallInput.with { $0.action = CallSocketTests.action(.answer, uuid) }), requestID: requestID + 1)
            let nextEvent = try phone.waitFor { envelope -> HUCallActionEvent? in
                if case .callActionEvent(let next) = envelope.body, next.actionID != event.actionID { return next }
                return nil
            }
            #expect(nextEvent.action.callUuid == uuid && nextEvent.actionID > event.actionID)
            try? FileManager.default.removeItem(atPath: daemon.directory)
        }
    }
}
