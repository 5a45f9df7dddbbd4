import Foundation
import HeadUnitClient
import HeadUnitWire

/// The phone's assistant, standing in for Siri (PROTOCOL.md section 27): the
/// car's voice button opens it, the driver's request arrives as text (the
/// car's "say" box; speech recognition is not ours), the assistant turns it
/// into one of SiriKit's communication intents and runs it with the app's
/// handler (``CPApplication/intentsExtension``): resolve, confirm, handle.
/// What it answers is shown on the car and spoken into the assistant's
/// `VOICE` stream with espeak-ng when installed.
///
/// What it understands (case-insensitive):
///
/// | the driver says | intent |
/// |---|---|
/// | "send a message to Jane saying on my way", "text Jane saying ..." | `INSendMessageIntent` (asks for what is missing) |
/// | "read my messages", "read my messages from Jane" | `INSearchForMessagesIntent`, then `INSetMessageAttributeIntent(.read)` |
/// | "call Jane" | `INStartCallIntent` |
/// | "missed calls", "who called me" | `INSearchCallHistoryIntent(.missed)` |
///
/// Enabled by ``CPApplication/connect(to:deviceName:assistant:)`` with
/// `assistant: true`; ours: Siri is the phone's, and a CarPlayKit phone
/// carries one app.
@MainActor
public final class CPAssistant {
    /// What the assistant understood the driver to ask.
    public enum Request: Equatable, Sendable {
        case sendMessage(to: String?, content: String?)
        case readMessages(from: String?)
        case call(String?)
        case missedCalls
    }

    /// A parameter the assistant asked the driver for: the next thing said fills it.
    enum Asked { case recipient, content, contact }

    private weak var application: CPApplication?
    private var sessionID: UInt64 = 0
    private var request: Request?
    private var asked: Asked?
    /// A message item's conversation: a reply is sent in it.
    private var conversation: String?
    /// Events handled one after the other (an intent's handler may take time).
    private var last: Task<Void, Never>?
    /// Every line the assistant spoke or showed, in order (logs and tests).
    public private(set) var transcript: [String] = []

    init(application: CPApplication) { self.application = application }

    /// Reads the driver's words as a request; nil when it is none of the table's.
    public nonisolated static func understand(_ text: String) -> Request? {
        let words = text.trimmingCharacters(in: .whitespacesAndNewlines.union(.punctuationCharacters))
        let lower = words.lowercased()
        func after(_ prefixes: [String]) -> String? {
            for prefix in prefixes where lower.hasPrefix(prefix) { return String(words.dropFirst(prefix.count)) }
            return nil
        }
        if let rest = after(["send a message to ", "send message to ", "send a text to ", "message ", "text ", "tell "]) {
            let lowerRest = rest.lowercased()
            for separator in [" saying ", " that "] {
                if let range = lowerRest.range(of: separator) {
                    let cut = lowerRest.distance(from: lowerRest.startIndex, to: range.lowerBound)
                    let name = String(rest.prefix(cut))
                    let content = String(rest.dropFirst(cut + separator.count))
                    return .sendMessage(to: name.isEmpty ? nil : name, content: content.isEmpty ? nil : content)
                }
            }
            return .sendMessage(to: rest.isEmpty ? nil : rest, content: nil)
        }
        if lower == "send a message" || lower == "send message" { return .sendMessage(to: nil, content: nil) }
        if lower.hasPrefix("read") && lower.contains("message") {
            if let range = lower.range(of: " from ") {
                return .readMessages(from: String(words[range.upperBound...]))
            }
            return .readMessages(from: nil)
        }
        if lower.contains("missed call") || lower.hasPrefix("who called") { return .missedCalls }
        if let rest = after(["call ", "phone "]) { return .call(rest.isEmpty ? nil : rest) }
        if lower == "call" { return .call(nil) }
        return nil
    }

    func handle(_ event: HUAssistantEvent) {
        let previous = last
        last = Task { @MainActor in
            await previous?.value
            await self.run(event)
        }
    }

    private func run(_ event: HUAssistantEvent) async {
        switch event.kind {
        case .started(let started):
            (sessionID, request, asked, conversation) = (event.sessionID, nil, nil, nil)
            if started.source == .messageItem {
                // A message item: read what is new in its conversation, else offer a reply.
                await update(.thinking)
                await openConversation(started.conversationID, contact: started.contact)
                return
            }
            if started.source == .notification {
                // The driver selected a notification: read it (its conversation, or the missed calls).
                await update(.thinking)
                await readNotification(started.notification)
                return
            }
            switch started.cellAction {
            case .startCall:
                // The "Ask Siri" row of a calling app: whom to call.
                request = .call(nil)
                return await ask(.contact, "Who do you want to call?")
            case .playMedia:
                return await finish("Playing media by voice isn't supported yet.")
            case .unspecified, .UNRECOGNIZED:
                break
            }
            // Typed with no session open: the request follows at once, no greeting.
            await update(.listening, started.source == .say ? "" : "What can I help you with?")
        case .heard(let heard) where event.sessionID == sessionID:
            transcript.append("> " + heard.text)
            await update(.thinking)
            await understood(heard.text)
        case .ended:
            if event.sessionID == sessionID { (sessionID, request, asked) = (0, nil, nil) }
        case .heard, nil:
            break
        }
    }

    /// The driver's words: the answer to what was asked, or a new request.
    private func understood(_ text: String) async {
        if let asked, let request {
            self.asked = nil
            switch (asked, request) {
            case (.recipient, .sendMessage(_, let content)): self.request = .sendMessage(to: text, content: content)
            case (.content, .sendMessage(let to, _)): self.request = .sendMessage(to: to, content: text)
            case (.contact, .call): self.request = .call(text)
            default: break
            }
        } else if let understood = Self.understand(text) {
            request = understood
        } else {
            return await finish("Sorry, I can't help with that.")
        }
        await perform()
    }

    private func handler(for intent: INIntent) -> Any? { application?.intentsExtension?.handler(for: intent) }
    private var appName: String { application?.displayName ?? "The app" }

    private func perform() async {
        switch request {
        case .sendMessage(let to, let content)?:
            let intent = INSendMessageIntent(
                recipients: to.map { [INPerson(personHandle: nil, displayName: $0)] }, content: content, conversationIdentifier: conversation)
            guard let handler = handler(for: intent) as? INSendMessageIntentHandling else { return await finish("\(appName) can't send messages.") }
            guard case .success(let recipients) = await handler.resolveRecipients(for: intent) else { return await ask(.recipient, "Who do you want to send it to?") }
            guard case .success(let words) = await handler.resolveContent(for: intent) else {
                return await ask(.content, "What do you want to say to \(Self.names(recipients))?")
            }
            let resolved = INSendMessageIntent(recipients: recipients, content: words, conversationIdentifier: intent.conversationIdentifier)
            guard await handler.confirm(intent: resolved).code == .ready else { return await finish("\(appName) can't send that now.") }
            let sent = await handler.handle(intent: resolved)
            await finish(sent.code == .success ? "Sent to \(Self.names(recipients)): \(words)" : "The message to \(Self.names(recipients)) wasn't sent.")
        case .readMessages(let from)?:
            guard let found = await unreadMessages(from: from.map { [INPerson(personHandle: nil, displayName: $0)] }, in: nil) else {
                return await finish("\(appName) can't read messages.")
            }
            guard !found.messages.isEmpty else { return await finish(found.succeeded ? "You have no new messages." : "\(appName) couldn't find your messages.") }
            await readAndMarkRead(found.messages)
        case .call(let name)?:
            let intent = INStartCallIntent(contacts: name.map { [INPerson(personHandle: nil, displayName: $0)] })
            guard let handler = handler(for: intent) as? INStartCallIntentHandling else { return await finish("\(appName) can't make calls.") }
            guard case .success(let contacts) = await handler.resolveContacts(for: intent) else { return await ask(.contact, "Who do you want to call?") }
            let started = await handler.handle(intent: INStartCallIntent(contacts: contacts))
            await finish([.ready, .continueInApp].contains(started.code) ? "Calling \(Self.names(contacts))." : "\(appName) couldn't call \(Self.names(contacts)).")
        case .missedCalls?:
            let intent = INSearchCallHistoryIntent(callTypes: .missed)
            guard let handler = handler(for: intent) as? INSearchCallHistoryIntentHandling else { return await finish("\(appName) can't look up calls.") }
            let found = await handler.handle(intent: intent)
            let callers = (found.callRecords ?? []).compactMap { $0.caller?.displayName }
            await finish(callers.isEmpty ? "You have no missed calls." : "Missed calls from \(callers.joined(separator: ", ")).")
        case nil:
            await finish("Sorry, I can't help with that.")
        }
    }

    /// A notification selected on the car: its app's search-for-messages in
    /// its conversation (then marked read), or its missed calls.
    private func readNotification(_ notification: HUNotificationInfo) async {
        if notification.category == .missedCall {
            request = .missedCalls
            return await perform()
        }
        guard let found = await unreadMessages(from: nil, in: notification.conversationID.isEmpty ? nil : notification.conversationID) else {
            return await finish("\(appName) can't read messages.")
        }
        guard !found.messages.isEmpty else { return await finish("There's nothing new from \(notification.sender).") }
        await readAndMarkRead(found.messages)
    }

    private func openConversation(_ conversationID: String, contact: String) async {
        conversation = conversationID.isEmpty ? nil : conversationID
        if let found = await unreadMessages(from: nil, in: conversation), !found.messages.isEmpty {
            return await readAndMarkRead(found.messages)
        }
        request = .sendMessage(to: contact.isEmpty ? nil : contact, content: nil)
        await perform()
    }

    /// The app's `INSearchForMessagesIntent` for unread messages (from the
    /// senders, in the conversation): nil when the app handles no such
    /// intent; no messages when it failed.
    private func unreadMessages(from senders: [INPerson]?, in conversation: String?) async -> (messages: [INMessage], succeeded: Bool)? {
        let intent = INSearchForMessagesIntent(senders: senders, attributes: .unread, conversationIdentifiers: conversation.map { [$0] })
        guard let handler = handler(for: intent) as? INSearchForMessagesIntentHandling else { return nil }
        let found = await handler.handle(intent: intent)
        let succeeded = found.code == .success
        return (succeeded ? found.messages ?? [] : [], succeeded)
    }

    /// Reads the messages out, then marks them read (`INSetMessageAttributeIntent`).
    private func readAndMarkRead(_ messages: [INMessage]) async {
        let lines = messages.map { "\($0.sender?.displayName ?? "Someone") said: \($0.content ?? "")" }
        let mark = INSetMessageAttributeIntent(identifiers: messages.map(\.identifier), attribute: .read)
        if let handler = handler(for: mark) as? INSetMessageAttributeIntentHandling {
            _ = await handler.handle(intent: mark)
        }
        await finish(lines.joined(separator: ". "))
    }

    private static func names(_ people: [INPerson]) -> String { people.map(\.displayName).joined(separator: " and ") }

    /// Asks the driver for a missing value: spoken, then listening.
    private func ask(_ what: Asked, _ question: String) async {
        asked = what
        await speak(question)
        await update(.listening)
    }

    /// The answer, spoken, and the session ends.
    private func finish(_ answer: String) async {
        await speak(answer)
        await update(.speaking, end: true)
        (request, asked, conversation) = (nil, nil, nil)
    }

    private func update(_ state: HUAssistantState, _ text: String = "", end: Bool = false) async {
        guard sessionID != 0, let phone = application?.phone else { return }
        if !text.isEmpty { transcript.append(text) }
        // Refused (the car ended the session meanwhile): nothing more to say in it.
        var shown = Substring(text)
        while shown.utf8.count > AssistantTextLimit.bytes { shown = shown.dropLast() }  // the car takes 512 bytes (27.3)
        do { try await phone.updateAssistant(sessionID: sessionID, state: state, text: String(shown), end: end) } catch {}
    }

    /// Shown on the car, and spoken through the assistant's VOICE stream when espeak-ng is installed.
    private func speak(_ text: String) async {
        await update(.speaking, text)
        guard let phone = application?.phone, let clip = CPSpeech.render(text) else { return }
        let format = HUAudioFormat.with { $0.codec = .pcmS16Le; $0.sampleRate = UInt32(clip.rate); $0.channels = 1 }
        guard let stream = try? await phone.openAudioStream(appID: "", type: .voice, format: format) else { return }
        let chunk = clip.rate / 10  // 100 ms: within any window (120 ms at least)
        var start = 0
        var spokenSinceUpdate = 0
        while start < clip.samples.count {
            let end = min(start + chunk, clip.samples.count)
            do { try await stream.write(samples: Array(clip.samples[start..<end])) } catch { return }
            spokenSinceUpdate += end - start
            // A long answer: the car hears from the assistant within its timeout (27.3).
            if spokenSinceUpdate >= clip.rate * 5 {
                spokenSinceUpdate = 0
                await update(.speaking)
            }
            start = end
        }
        await stream.waitUntilPlayed()
        try? await stream.close()
    }
}

enum AssistantTextLimit { static let bytes = 512 }

/// Text to speech for the phone's voices: espeak-ng's rendering (22050 Hz
/// mono 16-bit), nil when the program is not installed or fails.
public enum CPSpeech {
    public struct Clip: Sendable {
        public var rate: Int
        public var samples: [Int16]
        public init(rate: Int, samples: [Int16]) {
            self.rate = rate
            self.samples = samples
        }
    }

    public static func render(_ text: String) -> Clip? {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":").map { "\($0)/espeak-ng" }
        guard let binary = paths.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("carplaykit-speech-\(getpid())-\(UUID().uuidString).wav").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-w", file, text]
        do { try process.run() } catch { return nil }
        process.waitUntilExit()
        guard process.terminationStatus == 0, let data = FileManager.default.contents(atPath: file) else { return nil }
        return wav([UInt8](data))
    }

    /// A mono 16-bit WAV's rate and samples.
    public static func wav(_ bytes: [UInt8]) -> Clip? {
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, Array(bytes[0..<4]) == Array("RIFF".utf8), Array(bytes[8..<12]) == Array("WAVE".utf8) else { return nil }
        var at = 12
        var rate = 0
        var channels = 0
        var bits = 0
        while at + 8 <= bytes.count {
            let id = String(decoding: bytes[at..<(at + 4)], as: UTF8.self)
            let size = u32(at + 4)
            let body = at + 8
            if id == "fmt ", body + 16 <= bytes.count {
                channels = u16(body + 2)
                rate = u32(body + 4)
                bits = u16(body + 14)
            } else if id == "data" {
                guard channels == 1, bits == 16, rate > 0 else { return nil }
                // A streamed WAV may say 0 or 0xFFFFFFFF: read to the end then.
                let end = size == 0 || body + size > bytes.count ? bytes.count : body + size
                var samples: [Int16] = []
                samples.reserveCapacity((end - body) / 2)
                var index = body
                while index + 1 < end {
                    samples.append(Int16(bitPattern: UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8))
                    index += 2
                }
                return Clip(rate: rate, samples: samples)
            }
            at = body + size + (size & 1)
        }
        return nil
    }
}
