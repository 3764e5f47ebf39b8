#if canImport(Glibc)
import Glibc
#endif

/// Gives the C library's free memory back to the system after a flood of connections or request bodies.
///
/// glibc's `malloc` keeps freed memory in its arenas for reuse: after 300 connections that each sent 60 KB, the
/// daemon's size would stay where the flood took it although it holds nothing. `malloc_trim(0)` returns the free
/// pages of every arena. It runs off the event loops, once per flood.
enum MemoryTrim {
    /// Connections open at the peak that make a flood.
    static let floodConnections = 256
    /// Body bytes held at the peak that make a flood.
    static let floodBytes = 16 * 1024 * 1024

    /// Whether a flood (a peak of connections or held bytes since the last trim) has drained: no body bytes are
    /// left, and at most an eighth of the peak's connections (or 16: the clients that stay, WebSockets among them).
    static func isAfterFlood(connections: Int, held: Int, peakConnections: Int, peakHeld: Int) -> Bool {
        guard peakConnections >= Self.floodConnections || peakHeld >= Self.floodBytes else { return false }
        return connections <= Self.drained(peakConnections) && held == 0
    }

    /// The connections left when a flood with `peakConnections` at its peak counts as drained.
    static func drained(_ peakConnections: Int) -> Int {
        max(Self.floodConnections / 16, peakConnections / 8)
    }

    /// How long after a flood has drained the memory is given back: the connections the registry has let go of
    /// are still being torn down on their event loops when the last of them leaves it.
    static let settle = Duration.seconds(1)

    /// Returns free memory to the system, a moment after the flood has drained, on a thread of its own (a trim of a
    /// large heap takes milliseconds).
    @Sendable static func release() {
        #if canImport(Glibc)
        guard let trim = Self.mallocTrim else { return }
        Task.detached(priority: .background) {
            try? await Task.sleep(for: Self.settle)
            _ = trim(0)
        }
        #endif
    }

    #if canImport(Glibc)
    /// glibc's `malloc_trim`, looked up at run time: `<malloc.h>` is not part of Swift's Glibc module, and another C
    /// library (musl) has none.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
    #endif
}
