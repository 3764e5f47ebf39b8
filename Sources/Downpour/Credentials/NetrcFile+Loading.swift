import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension NetrcFile {
    /// What reading a `.netrc` file gave.
    enum Loaded: Equatable, Sendable {
        case file(NetrcFile)
        /// There is no such file: nothing to say.
        case missing
        /// The file exists but is not used; the reason is for a person.
        case refused(String)
    }

    /// Reads the file at `path`, refusing one that the group or others may read (a password file that others
    /// can read is a leak waiting to happen, and ftp refuses it too).
    static func load(path: String) -> Loaded {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { return .missing }
            return .refused("The netrc file '\(path)' cannot be read (\(describeErrno(code))); ignoring it.")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            return .refused("The netrc file '\(path)' cannot be read (\(describeErrno(errno))); ignoring it.")
        }
        if (status.st_mode & S_IFMT) != S_IFREG {
            return .refused("The netrc file '\(path)' is not a regular file; ignoring it.")
        }
        if status.st_mode & 0o077 != 0 {
            return .refused(
                "The netrc file '\(path)' is readable by others; ignoring it. Make it private (mode 600) to use it."
            )
        }
        do {
            let data = try handle.readToEnd() ?? Data()
            return .file(NetrcFile(parsing: String(decoding: data, as: UTF8.self)))
        } catch {
            return .refused("The netrc file '\(path)' cannot be read (\(error)); ignoring it.")
        }
    }
}
