import HeadUnitWire

/// The phone's assistant on the car (PROTOCOL.md section 27): the car gives
/// it the voice button, the microphone, the speakers and a screen, and keeps
/// one session at a time. Pure: the car checks who is asking (the phone, the
/// app named), times the session and routes what comes out.
public struct AssistantSession: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        /// A session whose phone sends no `AssistantUpdate` this long ends (TIMED_OUT).
        public var timeoutMilliseconds: UInt64
        public static let timeoutRange: ClosedRange<UInt64> = 2_000...60_000

        public init(timeoutMilliseconds: UInt64 = 10_000) {
            self.timeoutMilliseconds = timeoutMilliseconds
        }
    }

    /// A text the driver says or the assistant shows, in UTF-8 bytes.
    public static let maxTextBytes = 512
    /// Turns of the exchange the car shows (the oldest drop first).
    public static let turnsShown = 8
    /// The owner of the assistant's audio (its `VOICE` stream, its
    /// microphone): the empty app id, which no app can have (16.1 refuses it).
    public static let audioOwner = ""

    /// The open session.
    public struct Open: Sendable, Equatable {
        public var id: UInt64
        public var state: HUAssistantState
        public var source: HUAssistantSource
        public var appID: String
        public var turns: [HUAssistantTurn] = []
    }

    public var limits: Limits
    /// The phone carrying the apps has an assistant (`AnnounceApps.assistant`).
    public internal(set) var available = false
    public private(set) var open: Open?
    public private(set) var lastEnded: HUAssistantEndedInfo?
    var nextID: UInt64 = 1
    /// The phone's notifications: the assistant's to read (selecting one opens it, 27.7).
    public internal(set) var notifications = CarNotifications()

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// The assistant listens: the microphone is its (24.6).
    public var listening: Bool { open?.state == .listening }

    /// A session may open (the car checked the phone and the app): ASSISTANT_BUSY
    /// while one is open, or while a call (an app's, ringing included, or
    /// the car's own) outranks the assistant.
    public func mayStart(callActive: Bool) -> RuleViolation? {
        if let open {
            return RuleViolation(.assistantBusy, "assistant session \(open.id) is open; end it first (the voice button or AssistantInput.end)")
        }
        if callActive {
            return RuleViolation(.assistantBusy, "a call is in progress: it outranks the assistant")
        }
        return nil
    }

    /// Opens a session (after `mayStart`); the phone is told `started`, as the car describes it.
    mutating func start(_ started: HUAssistantStarted) -> HUAssistantEvent {
        let id = nextID
        nextID += 1
        open = Open(id: id, state: .starting, source: started.source, appID: started.appID)
        return HUAssistantEvent.with {
            $0.sessionID = id
            $0.started = started
        }
    }

    /// The text of `AssistantSay` or `AssistantUpdate`: at most 512 bytes; `required`: not empty.
    public static func textProblem(_ text: String, required: Bool) -> RuleViolation? {
        if required, text.isEmpty {
            return RuleViolation(.invalidArgument, "the driver's text is empty")
        }
        if text.utf8.count > maxTextBytes {
            return RuleViolation(
                .invalidArgument, "text of \(text.utf8.count) bytes, at most \(maxTextBytes)",
                limit: "assistant.textBytes", limitValue: UInt32(maxTextBytes))
        }
        return nil
    }

    /// The driver's text reaches the open session: one turn, and the phone hears it.
    mutating func heard(_ text: String) -> HUAssistantEvent? {
        guard open != nil else { return nil }
        addTurn(fromDriver: true, text)
        return HUAssistantEvent.with {
            $0.sessionID = open!.id
            $0.heard = HUAssistantHeard.with { $0.text = text }
        }
    }

    /// `AssistantUpdate`'s own checks, in order: the session (UNKNOWN_SESSION),
    /// the state (INVALID_ARGUMENT; not needed with `end`), the text.
    public func updateProblem(_ update: HUAssistantUpdate) -> RuleViolation? {
        guard let open, open.id == update.sessionID else {
            let what = open.map { "the open session is \($0.id)" } ?? "no session is open"
            return RuleViolation(.unknownSession, "assistant session \(update.sessionID) is not open (\(what))")
        }
        if !update.end {
            switch update.state {
            case .listening, .thinking, .speaking: break
            case .starting, .unspecified, .UNRECOGNIZED:
                return RuleViolation(.invalidArgument, "an update's state is LISTENING, THINKING or SPEAKING (STARTING is the car's)")
            }
        }
        return Self.textProblem(update.text, required: false)
    }

    /// Applies an update that passed `updateProblem`; true when it ended the session.
    mutating func apply(_ update: HUAssistantUpdate) -> Bool {
        if !update.text.isEmpty { addTurn(fromDriver: false, update.text) }
        if update.end {
            _ = end(.byAssistant)
            return true
        }
        open!.state = update.state
        return false
    }

    /// Ends the open session; the event the phone is told, unless the phone ended it.
    mutating func end(_ reason: HUAssistantEndReason) -> HUAssistantEvent? {
        guard let ended = open else { return nil }
        open = nil
        lastEnded = HUAssistantEndedInfo.with {
            $0.sessionID = ended.id
            $0.reason = reason
        }
        guard reason != .byAssistant else { return nil }
        return HUAssistantEvent.with {
            $0.sessionID = ended.id
            $0.ended = HUAssistantEnded.with { $0.reason = reason }
        }
    }

    /// As a daemon restart hands it over (CarSnapshot): no session is open.
    mutating func restore(available: Bool, nextID: UInt64, lastEnded: HUAssistantEndedInfo?) {
        self.available = available
        self.nextID = max(nextID, 1)
        self.lastEnded = lastEnded
    }

    /// The phone carrying the apps went for good: no assistant until the next one says so.
    mutating func phoneEnded() {
        available = false
        notifications.phoneEnded()
    }

    private mutating func addTurn(fromDriver: Bool, _ text: String) {
        if open!.turns.count == Self.turnsShown { open!.turns.removeFirst() }
        open!.turns.append(HUAssistantTurn.with {
            $0.fromDriver = fromDriver
            $0.text = text
        })
    }

    /// `HomeScreen.assistant`: the open session as the HMI draws it.
    public var view: HUAssistantView? {
        open.map { open in
            HUAssistantView.with {
                $0.sessionID = open.id
                $0.state = open.state
                $0.source = open.source
                $0.appID = open.appID
                $0.turns = open.turns
            }
        }
    }
}
