#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A mark a finished file carries, as the extended attribute `user.downpour.mark`, so that a later run of the
/// same download knows the file at its name as its own (``DownloadRequest/finishMark``).
///
/// A caller that records a download's completion after the file has taken its name (the daemon's queue) can be
/// killed between the two; when it runs the download again, the file is in the way and is neither a `.part`
/// nor described by a journal. The mark is set on the `.part` file before it is synced and renamed, so it is
/// exactly as durable as the name, costs no write of its own, and no file of anyone else's carries it. A file
/// system without user attributes takes no mark: such a file is in the way, as before.
enum FinishMark {
    static let attribute = "user.downpour.mark"

    /// Marks the open file; `false` when the file system takes no mark.
    @discardableResult
    static func set(_ mark: String, descriptor: Int32) -> Bool {
        let bytes = Array(mark.utf8)
        #if os(Linux) && canImport(Glibc)
        guard let fsetxattr = Self.fsetxattr else { return false }
        return bytes.withUnsafeBytes { fsetxattr(descriptor, Self.attribute, $0.baseAddress, $0.count, 0) } == 0
        #elseif canImport(Darwin)
        return bytes.withUnsafeBytes { fsetxattr(descriptor, Self.attribute, $0.baseAddress, $0.count, 0, 0) } == 0
        #else
        return false
        #endif
    }

    /// The mark of the file at `path`; `nil` when it has none (or the file system takes none).
    static func mark(of path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 256)
        #if os(Linux) && canImport(Glibc)
        guard let getxattr = Self.getxattr else { return nil }
        let count = buffer.withUnsafeMutableBytes { getxattr(path, Self.attribute, $0.baseAddress, $0.count) }
        #elseif canImport(Darwin)
        let count = buffer.withUnsafeMutableBytes { getxattr(path, Self.attribute, $0.baseAddress, $0.count, 0, 0) }
        #else
        let count = -1
        #endif
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    #if os(Linux) && canImport(Glibc)
    // Looked up at run time: the Swift overlay of the C library does not import <sys/xattr.h>.
    private typealias SetAttribute =
        @convention(c) (Int32, UnsafePointer<CChar>?, UnsafeRawPointer?, Int, Int32) -> Int32
    private typealias GetAttribute =
        @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeMutableRawPointer?, Int) -> Int

    private static let fsetxattr: SetAttribute? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "fsetxattr") else { return nil }
        return unsafeBitCast(symbol, to: SetAttribute.self)
    }()

    private static let getxattr: GetAttribute? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "getxattr") else { return nil }
        return unsafeBitCast(symbol, to: GetAttribute.self)
    }()
    #endif
}
