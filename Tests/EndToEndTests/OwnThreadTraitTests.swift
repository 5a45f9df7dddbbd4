import Testing
import TestSupport

@Suite("Blocking tests leave the cooperative pool", .ownThread)
struct OwnThreadTraitTests {
    @Test func aSynchronousTestBodyRunsOnAThreadOfItsOwn() {
        #expect(ThreadTaskExecutor.isCurrent)
    }
}
