import HeadUnitWire

/// Who may connect how, and who may send what. The connection layer applies
/// this table so the Car only ever sees messages a peer's role may send.
public enum RolePolicy {
    /// Car roles are local components and must use the Unix socket; a phone may use either.
    public static func isAllowed(_ role: HURole, over transport: Transport) -> Bool {
        switch role {
        case .phone: return true
        case .hmi, .cluster, .accessory: return transport == .unix
        case .unspecified, .UNRECOGNIZED: return false
        }
    }

    /// Whether a peer of `role` may send an envelope with this body to the car.
    /// Hello and Goodbye are handled by the connection itself and never reach this table.
    public static func maySend(_ body: HUEnvelope.OneOf_Body, role: HURole) -> Bool {
        switch body {
        // Connection control: Hello is the handshake, Goodbye a farewell any peer may say.
        case .hello, .goodbye: return true
        // Only the car sends these.
        case .welcome, .result, .sceneConnected, .sceneDisconnected, .appEvent,
            .sessionConfiguration, .homeScreen, .screenUpdate, .imageData, .navigationEvent, .metadataUpdate,
            .accessoryAvailability, .sessionRequested, .sessionOpened, .sessionClosed, .sessionFinished,
            .remoteCommandEvent,
            .videoStreams, .audioStreamClosed, .microphoneStarted, .callActionEvent, .callActionTimedOut, .assistantEvent:
            return false
        // Calls (section 26): the app reports, requests and answers; the HMI presses.
        case .callReport, .callRequest, .callActionAnswer: return role == .phone
        case .callInput: return role == .hmi
        // The phone's assistant (section 27): the phone speaks for it; the HMI is the driver.
        case .assistantUpdate, .postNotification: return role == .phone
        case .assistantInput, .notificationInput: return role == .hmi
        // Base-view video (section 25): the car's components that draw a screen.
        case .watchVideo, .requestKeyframe:
            return role == .hmi || role == .cluster
        // Hearing the car's output (section 24.7): the car's components that play or show it.
        case .watchAudio:
            return role == .hmi || role == .cluster
        // Audio streams are the phone's apps' (section 24).
        case .openAudioStream, .closeAudioStream, .audioCredit:
            return role == .phone
        case .navigationRequest: return role == .phone
        // Remote commands (section 23): the app declares and answers, the HMI asks.
        case .remoteCommands, .remoteCommandAnswer: return role == .phone
        case .sendRemoteCommand, .carButton: return role == .hmi
        case .navigationInput: return role == .hmi
        case .clusterInput: return role == .cluster
        // The metadata stream is for the car's components that draw it.
        case .subscribeMetadata: return role == .cluster || role == .hmi
        // Phone -> car.
        case .announceApps, .templateRequest, .completeEvent, .appClosed, .openSession, .resumeSession:
            return role == .phone
        // Accessory -> car.
        case .serveProtocols, .answerSession:
            return role == .accessory
        // Either end of an External Accessory session.
        case .closeSession, .sessionCredit:
            return role == .phone || role == .accessory
        // HMI -> car.
        case .launchApp, .hmiInput, .setVehicleState, .closeApp, .getImage:
            return role == .hmi
        // Pairing is the car's business: its HMI shows the code and manages the list.
        case .startPairing, .listPairedDevices, .removePairedDevice:
            return role == .hmi
        // Only between Welcome and authentication (ConnectionStateMachine), never after.
        case .pair, .pairStart, .authenticate:
            return false
        // The daemon's own notices.
        case .pairingAttempt:
            return false
        // Status shows every peer and app: for the car's own components, not for phones.
        case .getStatus:
            switch role {
            case .hmi, .cluster, .accessory: return true
            case .phone, .unspecified, .UNRECOGNIZED: return false
            }
        }
    }

    /// DATA frames carry External Accessory session bytes: phones and accessories only.
    public static func maySendData(role: HURole) -> Bool {
        switch role {
        case .phone, .accessory: return true
        case .hmi, .cluster, .unspecified, .UNRECOGNIZED: return false
        }
    }

    /// VIDEO frames carry an app's base view: phones only (section 25).
    public static func maySendVideo(role: HURole) -> Bool {
        role == .phone
    }

    /// A short name for logs and reasons.
    public static func name(of body: HUEnvelope.OneOf_Body) -> String {
        switch body {
        case .hello: return "Hello"
        case .welcome: return "Welcome"
        case .goodbye: return "Goodbye"
        case .result: return "Result"
        case .announceApps: return "AnnounceApps"
        case .templateRequest: return "TemplateRequest"
        case .completeEvent: return "CompleteEvent"
        case .appClosed: return "AppClosed"
        case .resumeSession: return "ResumeSession"
        case .sceneConnected: return "SceneConnected"
        case .sceneDisconnected: return "SceneDisconnected"
        case .appEvent: return "AppEvent"
        case .sessionConfiguration: return "SessionConfiguration"
        case .launchApp: return "LaunchApp"
        case .hmiInput: return "HmiInput"
        case .setVehicleState: return "SetVehicleState"
        case .getStatus: return "GetStatus"
        case .closeApp: return "CloseApp"
        case .homeScreen: return "HomeScreen"
        case .screenUpdate: return "ScreenUpdate"
        case .imageData: return "ImageData"
        case .getImage: return "GetImage"
        case .serveProtocols: return "ServeProtocols"
        case .accessoryAvailability: return "AccessoryAvailability"
        case .openSession: return "OpenSession"
        case .sessionRequested: return "SessionRequested"
        case .answerSession: return "AnswerSession"
        case .sessionOpened: return "SessionOpened"
        case .closeSession: return "CloseSession"
        case .sessionClosed: return "SessionClosed"
        case .sessionCredit: return "SessionCredit"
        case .sessionFinished: return "SessionFinished"
        case .navigationRequest: return "NavigationRequest"
        case .navigationEvent: return "NavigationEvent"
        case .navigationInput: return "NavigationInput"
        case .subscribeMetadata: return "SubscribeMetadata"
        case .metadataUpdate: return "MetadataUpdate"
        case .clusterInput: return "ClusterInput"
        case .startPairing: return "StartPairing"
        case .pair: return "Pair"
        case .pairStart: return "PairStart"
        case .pairingAttempt: return "PairingAttempt"
        case .authenticate: return "Authenticate"
        case .listPairedDevices: return "ListPairedDevices"
        case .removePairedDevice: return "RemovePairedDevice"
        case .remoteCommands: return "RemoteCommands"
        case .sendRemoteCommand: return "SendRemoteCommand"
        case .carButton: return "CarButtonPressed"
        case .remoteCommandEvent: return "RemoteCommandEvent"
        case .remoteCommandAnswer: return "RemoteCommandAnswer"
        case .callReport: return "CallReport"
        case .callRequest: return "CallRequest"
        case .callActionEvent: return "CallActionEvent"
        case .callActionAnswer: return "CallActionAnswer"
        case .callActionTimedOut: return "CallActionTimedOut"
        case .callInput: return "CallInput"
        case .assistantInput: return "AssistantInput"
        case .assistantEvent: return "AssistantEvent"
        case .assistantUpdate: return "AssistantUpdate"
        case .postNotification: return "PostNotification"
        case .notificationInput: return "NotificationInput"
        case .watchVideo: return "WatchVideo"
        case .videoStreams: return "VideoStreams"
        case .requestKeyframe: return "RequestKeyframe"
        case .openAudioStream: return "OpenAudioStream"
        case .closeAudioStream: return "CloseAudioStream"
        case .audioCredit: return "AudioCredit"
        case .audioStreamClosed: return "AudioStreamClosed"
        case .microphoneStarted: return "MicrophoneStarted"
        case .watchAudio: return "WatchAudio"
        }
    }

    public static func name(of role: HURole) -> String {
        switch role {
        case .unspecified: return "unspecified"
        case .phone: return "phone"
        case .hmi: return "hmi"
        case .cluster: return "cluster"
        case .accessory: return "accessory"
        case .UNRECOGNIZED(let raw): return "unknown(\(raw))"
        }
    }
}
