import HeadUnitWire
import Testing

@testable import HeadUnitCore

/// The metadata stream is state, not a log (PROTOCOL.md section 19.5; ARCHITECTURE.md, "Observers").
@Suite struct ClusterFeedTests {
    func state(title: String, elapsed: Double = 0) -> HUMetadataState {
        var state = ClusterFeed().state
        state.nowPlaying.title = title
        state.nowPlaying.elapsedSeconds = elapsed
        return state
    }

    @Test func aChangeNamesOnlyTheSectionsThatChangedAndBumpsTheVersionOnce() {
        var feed = ClusterFeed()
        #expect(feed.update(to: feed.state).isEmpty)
        #expect(feed.version == 0)
        var new = state(title: "Song")
        new.display.contentStyle = .light
        #expect(feed.update(to: new) == [.nowPlaying, .display])
        #expect(feed.version == 1)
        let change = feed.update(sections: [.nowPlaying])
        #expect(change.version == 1)
        #expect(!change.full)
        #expect(change.state.hasNowPlaying && !change.state.hasGuidance && !change.state.hasDisplay)
        #expect(change.state.nowPlaying.title == "Song")
    }

    @Test func aNewSubscriberGetsAFullSnapshotFirst() {
        var feed = ClusterFeed()
        feed.update(to: state(title: "Song"))
        _ = feed.take()
        feed.subscribe(7)
        feed.subscribe(7)
        let taken = feed.take()
        #expect(taken.snapshots == [7])
        #expect(taken.changed.isEmpty)
        let snapshot = feed.snapshot
        #expect(snapshot.full)
        #expect(snapshot.state.hasGuidance && snapshot.state.hasManeuvers && snapshot.state.hasTripEstimates && snapshot.state.hasAlert
            && snapshot.state.hasNowPlaying && snapshot.state.hasDisplay && snapshot.state.hasPreviews && snapshot.state.hasCluster)
        #expect(snapshot.state.nowPlaying.title == "Song")
    }

    @Test func aStalledSubscriberSeesTheLatestValuesNotAQueue() {
        var feed = ClusterFeed()
        var fast = ClusterSubscription()
        var stalled = ClusterSubscription()
        #expect(fast.offer(.all) == .sendShared)
        #expect(stalled.offer(.all) == .sendShared)
        // The fast one's frames go out at once; the stalled one's first frame never does.
        _ = fast.written()
        var sharedFrames = 0
        for second in 1...10_000 {
            var new = feed.state
            new.nowPlaying.elapsedSeconds = Double(second)
            if second % 100 == 0 { new.guidance.state = second % 200 == 0 ? .active : .paused }
            let changed = feed.update(to: new)
            if fast.offer(changed) == .sendShared { sharedFrames += 1 }
            #expect(fast.written() == nil)
            #expect(stalled.offer(changed) == .deferred)
        }
        #expect(sharedFrames == 10_000)
        // However many changes, the stalled subscriber holds a set of sections, not frames.
        #expect(stalled.behind == [.nowPlaying, .guidance])
        // When it reads again it gets one frame with the newest values.
        let catchUp = stalled.written()
        #expect(catchUp == [.nowPlaying, .guidance])
        let frame = feed.update(sections: catchUp!)
        #expect(frame.state.nowPlaying.elapsedSeconds == 10_000)
        #expect(frame.version == feed.version)
        #expect(stalled.inFlight)
        #expect(stalled.written() == nil)
        #expect(!stalled.inFlight)
    }

    @Test func unsubscribedPeersGetNothing() {
        var feed = ClusterFeed()
        feed.subscribe(1)
        feed.unsubscribe(1)
        #expect(feed.take().snapshots.isEmpty)
        #expect(feed.subscribers.isEmpty)
    }
}
