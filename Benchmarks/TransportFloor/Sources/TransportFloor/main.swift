import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Usage: TransportFloor LIST DIR plain|durable [N]
///
/// Fetches every URL of LIST (one a line), N at a time (default 16), with one AsyncHTTPClient on one loop per
/// core, and writes each body to DIR under the last part of its URL's path:
/// - plain: open, write, close, on the task that fetched it (what curl does: nothing reaches the disk before the
///   kernel's writeback);
/// - durable: on a thread pool, a file with no name (`O_TMPFILE`), written, `fdatasync`, then linked under its
///   name (what Downpour does for a file whose bytes are all in hand: the name appears only once the bytes are on
///   disk).
@main
enum TransportFloor {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 4, ["plain", "durable"].contains(arguments[3]) else {
            print("usage: TransportFloor LIST DIR plain|durable [N]")
            exit(2)
        }
        let urls = try String(contentsOfFile: arguments[1], encoding: .utf8).split(separator: "\n").map(String.init)
        let directory = arguments[2]
        let durable = arguments[3] == "durable"
        let slots = arguments.count > 4 ? Int(arguments[4]) ?? 16 : 16

        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = slots
        let client = HTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            configuration: configuration
        )
        let pool = NIOThreadPool(numberOfThreads: 8)
        pool.start()
        let start = ContinuousClock.now
        let failures = await withTaskGroup(of: Int.self) { group in
            for slot in 0..<slots {
                group.addTask {
                    var failures = 0
                    for index in stride(from: slot, to: urls.count, by: slots) {
                        do {
                            let response = try await client.execute(
                                HTTPClientRequest(url: urls[index]),
                                timeout: .seconds(60)
                            )
                            guard response.status == .ok else {
                                failures += 1
                                continue
                            }
                            let body = try await response.body.collect(upTo: 1 << 30)
                            let name = urls[index].split(separator: "/").last.map(String.init) ?? "f\(index)"
                            let path = "\(directory)/\(name)"
                            if durable {
                                try await pool.runIfActive { try writeDurably(body, to: path, directory: directory) }
                            } else {
                                try writePlainly(body, to: path)
                            }
                        } catch {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            var total = 0
            for await failures in group { total += failures }
            return total
        }
        let elapsed = ContinuousClock.now - start
        print("\(arguments[3]): \(urls.count - failures) of \(urls.count) in \(elapsed), \(slots) at a time")
        try await client.shutdown()
        try await pool.shutdownGracefully()
        if failures > 0 { exit(1) }
    }

    struct WriteFailed: Error {
        var call: String
        var errno: Int32
    }

    static func writePlainly(_ body: ByteBuffer, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw WriteFailed(call: "open", errno: errno) }
        defer { close(descriptor) }
        try write(body, to: descriptor)
    }

    static func writeDurably(_ body: ByteBuffer, to path: String, directory: String) throws {
        // O_TMPFILE is __O_TMPFILE | O_DIRECTORY; Glibc's macro is not imported.
        let descriptor = open(directory, 0o20_000_000 | O_DIRECTORY | O_RDWR | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw WriteFailed(call: "open", errno: errno) }
        defer { close(descriptor) }
        try write(body, to: descriptor)
        guard fdatasync(descriptor) == 0 else { throw WriteFailed(call: "fdatasync", errno: errno) }
        guard linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 else {
            throw WriteFailed(call: "linkat", errno: errno)
        }
    }

    static func write(_ body: ByteBuffer, to descriptor: Int32) throws {
        try body.withUnsafeReadableBytes { bytes in
            var done = 0
            while done < bytes.count {
                let count = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(done))
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw WriteFailed(call: "pwrite", errno: errno) }
                done += count
            }
        }
    }
}
