import NIOCore

/// Events kept until someone takes them, with "wait for the first one that
/// matches, up to a timeout". Lives on one event loop; no locks: its state
/// is a `NIOLoopBoundBox`, so every touch off the loop traps.
///
/// Unlike an AsyncStream, a waiter can give up (timeout) without ending the
/// stream, and can pick a matching event out of order: a scenario waiting for
/// `item_selected` leaves the lifecycle events before it in place.
final class Mailbox<Element: Sendable>: Sendable {
    private let eventLoop: EventLoop
    private let capacity: Int
    private let state: NIOLoopBoundBox<State>

    private struct State {
        // A ring: once full, each new element drops the oldest in O(1) (an array
        // moved every kept element, which made an app that never takes its
        // lifecycle events spend most of its CPU in memmove).
        var buffer = CircularBuffer<Element>()
        var waiters: [Waiter] = []
        var nextWaiterID = 0
        var finished = false
    }

    private struct Waiter {
        var id: Int
        var matches: (Element) -> Bool
        var continuation: CheckedContinuation<Element?, Never>
        var timeout: Scheduled<Void>?
    }

    init(eventLoop: EventLoop, capacity: Int = 4096) {
        self.eventLoop = eventLoop
        self.capacity = capacity
        state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// On the loop: hands the element to the first waiter that wants it, else keeps it.
    func post(_ element: Element) {
        if let index = state.value.waiters.firstIndex(where: { $0.matches(element) }) {
            let waiter = state.value.waiters.remove(at: index)
            waiter.timeout?.cancel()
            waiter.continuation.resume(returning: element)
            return
        }
        state.value.buffer.append(element)
        if state.value.buffer.count > capacity { state.value.buffer.removeFirst(state.value.buffer.count - capacity) }
    }

    /// On the loop: no more elements will come; waiters get nil.
    func finish() {
        state.value.finished = true
        let all = state.value.waiters
        state.value.waiters.removeAll()
        for waiter in all {
            waiter.timeout?.cancel()
            waiter.continuation.resume(returning: nil)
        }
    }

    /// The first element (kept or future) that matches, or nil after `timeout`
    /// or when the mailbox is finished.
    func take(timeout: TimeAmount, where matches: @escaping @Sendable (Element) -> Bool) async -> Element? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
            let start: @Sendable () -> Void = {
                if let index = self.state.value.buffer.firstIndex(where: matches) {
                    continuation.resume(returning: self.state.value.buffer.remove(at: index))
                    return
                }
                if self.state.value.finished {
                    continuation.resume(returning: nil)
                    return
                }
                let id = self.state.value.nextWaiterID
                self.state.value.nextWaiterID += 1
                let timer = self.eventLoop.scheduleTask(in: timeout) {
                    if let index = self.state.value.waiters.firstIndex(where: { $0.id == id }) {
                        self.state.value.waiters.remove(at: index).continuation.resume(returning: nil)
                    }
                }
                self.state.value.waiters.append(Waiter(id: id, matches: matches, continuation: continuation, timeout: timer))
            }
            if eventLoop.inEventLoop { start() } else { eventLoop.execute(start) }
        }
    }

    /// Drops every kept element that matches (on the loop).
    func discard(where matches: (Element) -> Bool) {
        state.value.buffer.removeAll(where: matches)
    }
}
