#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Which boot of the machine this is: the same string for every process until the kernel starts again.
///
/// Bytes a process wrote to a file and never synced are still there for the next process of the same boot (the
/// kernel's page cache holds them, whatever killed the writer), and may be gone after a reboot. A journal written
/// without a sync (``JournalStore/saveUnsynced(_:)``) is trusted on the boot that wrote it only.
enum BootSession {
    /// This boot's id: Linux's `/proc/sys/kernel/random/boot_id`; `nil` where there is none (then every journal is
    /// synced before it is trusted).
    static let current: String? = {
        #if os(Linux)
        let descriptor = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { _ = SystemCall.close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let id = String(decoding: buffer[0..<count], as: UTF8.self).filter { !$0.isWhitespace }
        return id.isEmpty ? nil : id
        #else
        return nil
        #endif
    }()
}
