import ArgumentParser
import Downpour
import DownpourAria2
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The options of credentials and cookies (`http-user`, `http-passwd`, `netrc-path`, `no-netrc`, `load-cookies`,
/// `save-cookies`): checked before anything starts, and the cookie jar saved at the end.
extension GetPlan {
    func validateCredentials(_ settings: Aria2Arguments) throws {
        if settings.gives(.httpPasswd) && !settings.gives(.httpUser) {
            throw ValidationError("--http-passwd needs --http-user.")
        }
        if let path = settings.value(.netrcPath) {
            guard !settings.flag(.noNetrc) else {
                throw ValidationError("Give either --netrc-path or --no-netrc, not both.")
            }
            guard access(path, R_OK) == 0, !Self.isDirectory(path) else {
                throw ValidationError("Cannot read the netrc file '\(path)' given with --netrc-path.")
            }
        }
        if let path = self.loadCookiesPath {
            let missingIsFine = path == self.saveCookiesPath && access(path, F_OK) != 0
            guard missingIsFine || (access(path, R_OK) == 0 && !Self.isDirectory(path)) else {
                throw ValidationError("Cannot read the cookie file '\(path)' given with --load-cookies.")
            }
        }
        if let path = self.saveCookiesPath, Self.isDirectory(path) {
            throw ValidationError("--save-cookies names a directory, '\(path)'; name a file.")
        }
    }

    /// Writes `jar` to `--save-cookies`, if given: to a temporary file beside it, mode 0600, then renamed over
    /// it. Returns `false` (after saying why) when that failed.
    func saveCookies(_ jar: CookieJar?) -> Bool {
        guard let path = self.saveCookiesPath, let jar else { return true }
        let temporary = path + ".downpour-\(getpid())"
        let data = Data(jar.netscapeFormat().utf8)
        unlink(temporary)  // A leftover of a crashed run with the same process ID.
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            writeError("downpour: cannot save the cookies to '\(path)': \(String(cString: strerror(errno))).")
            return false
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
        } catch {
            unlink(temporary)
            writeError("downpour: cannot save the cookies to '\(path)': \(error.localizedDescription).")
            return false
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            writeError("downpour: cannot save the cookies to '\(path)': \(reason).")
            return false
        }
        return true
    }

    private static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}

/// The cookies of every download of a batch, merged, for `--save-cookies`.
final class CookieCollector: Sendable {
    private let jar: NIOLockedValueBox<CookieJar?>

    init(_ jar: CookieJar?) {
        self.jar = NIOLockedValueBox(jar)
    }

    func add(_ other: CookieJar) {
        self.jar.withLockedValue { jar in
            var merged = jar ?? CookieJar()
            merged.merge(other)
            jar = merged
        }
    }

    var merged: CookieJar? {
        self.jar.withLockedValue { $0 }
    }
}
