import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns the first SIGINT or SIGTERM into a graceful stop and the second into an immediate exit.
final class InterruptionHandler {
    private let sources: [any DispatchSourceSignal]
    private let count = NIOLockedValueBox(0)

    init(onFirst: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "downpour.signals")
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            sources.append(source)
        }
        self.sources = sources
        for source in sources {
            source.setEventHandler { [count] in
                let seen = count.withLockedValue { value in
                    value += 1
                    return value
                }
                if seen == 1 {
                    onFirst()
                } else {
                    writeError("\ndownpour: stopped at once; run the same command again to resume.")
                    // At once: `exit` runs the atexit handlers while the other threads go on, and the graceful stop
                    // could still end and report meanwhile.
                    _exit(130)
                }
            }
            source.resume()
        }
    }

    func stop() {
        for source in self.sources { source.cancel() }
    }
}
