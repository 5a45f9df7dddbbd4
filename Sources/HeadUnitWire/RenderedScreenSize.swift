/// The encoded size of a `RenderedScreen` (session.proto) whose top and
/// presented templates are measured already, from its other fields' values,
/// without building the message. The composed bound measures the screen of
/// every scene a template request changes (PROTOCOL.md section 10.4); its
/// templates' sizes are kept as they are stored, and the rest is a few
/// numbers and strings. Fields in number order, proto3 defaults left out, as
/// swift-protobuf writes them: `RenderedScreenSizeTests` compares.
public enum RenderedScreenSize {
    /// `top` and `presented`: the encoded sizes of those templates (nil: not
    /// on the screen). The search results, selected tab and remote commands
    /// are not here: a screen with any of them is measured whole.
    public static func of(
        screen: HUScreen, appID: String, sceneID: UInt32, stack: [HUTemplate], top: Int?, presented: Int?,
        pending: HUPendingSelection?, itemsShown: UInt32, itemsTotal: UInt32, contentStyle: HUContentStyle,
        rightHandDrive: Bool, showNowPlayingButton: Bool
    ) -> Int {
        var size = enumFieldSize(screen.rawValue)  // screen = 1
        size += WireBytes.stringFieldSize(appID)  // app_id = 2
        size += WireBytes.varintFieldSize(UInt64(sceneID))  // scene_id = 3
        for template in stack {
            // stack = 4: every id written, an empty one too.
            let count = template.id.utf8.count
            size += 1 + varintSize(UInt64(count)) + count
        }
        if let top { size += LinearEncoder.messageFieldSize(fieldNumber: LinearEncoder.renderedTopField, contentBytes: top) }
        if let presented {
            size += LinearEncoder.messageFieldSize(fieldNumber: LinearEncoder.renderedPresentedField, contentBytes: presented)
        }
        if let pending { size += LinearEncoder.messageFieldSize(fieldNumber: 7, contentBytes: LinearEncoder.size(of: pending)) }
        size += WireBytes.varintFieldSize(UInt64(itemsShown))  // items_shown = 8
        size += WireBytes.varintFieldSize(UInt64(itemsTotal))  // items_total = 9
        size += enumFieldSize(contentStyle.rawValue)  // content_style = 10
        size += rightHandDrive ? 2 : 0  // right_hand_drive = 11
        size += showNowPlayingButton ? 2 : 0  // show_now_playing_button = 12
        return size
    }

    /// An enum field with a one-byte tag: its value as an int32 varint (a
    /// negative one sign-extended to ten bytes), left out when zero.
    private static func enumFieldSize(_ rawValue: Int) -> Int {
        WireBytes.varintFieldSize(UInt64(bitPattern: Int64(rawValue)))
    }
}
