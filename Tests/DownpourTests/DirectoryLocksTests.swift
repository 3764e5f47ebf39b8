import Testing

@testable import Downpour

@Suite("Directory locks", .timeLimit(.minutes(10)))
struct DirectoryLocksTests {
    @Test("a file, its .part and its journal share their directory's lock")
    func sameDirectory() {
        let stripe = DirectoryLocks.stripe(for: "/data/downloads/a.iso")
        for path in ["/data/downloads/a.iso.part", "/data/downloads/a.iso.part.downpour.tmp", "/data/downloads/b"] {
            #expect(DirectoryLocks.stripe(for: path) == stripe, "\(path)")
        }
        #expect(DirectoryLocks.stripe(for: "a.iso") == DirectoryLocks.stripe(for: "b.iso.part"))
    }

    @Test("directories spread over the locks")
    func spread() {
        let stripes = Set((0..<64).map { DirectoryLocks.stripe(for: "/data/d\($0)/file.bin") })
        #expect(stripes.count >= 12, "\(stripes.sorted())")
    }

    @Test("the lock is held while the body runs and given back after a throw")
    func heldAndReleased() {
        struct Failed: Error {}
        #expect(throws: Failed.self) {
            try DirectoryLocks.withLock(around: "/x/y") { () throws(Failed) in throw Failed() }
        }
        // Taken again at once: a lock the throw had kept would hang here.
        #expect(DirectoryLocks.withLock(around: "/x/z") { 7 } == 7)
    }
}
