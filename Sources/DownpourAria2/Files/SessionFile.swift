/// Downloads written in aria2's session format (`aria2c --save-session FILE`), which `aria2c --input-file FILE`
/// and ``InputFile`` read back: each download's URIs, each followed by a TAB, on one line; below it, indented by one
/// space, `gid=`, `pause=true` when it is paused, and the options set on the download, one value a line.
///
/// ```
/// https://a.example/disk.iso<TAB>https://b.example/disk.iso<TAB>
///  gid=2089b05ecca3d829
///  pause=true
///  dir=/srv/downloads
/// ```
public enum SessionFile {
    /// One download of a session.
    public struct Entry: Sendable, Hashable {
        public var uris: [String]
        /// 16 hexadecimal digits.
        public var gid: String
        public var isPaused: Bool
        /// The download's own options by aria2's names, in order; a name may repeat (`header`).
        public var options: [(name: String, value: String)]

        public init(uris: [String], gid: String, isPaused: Bool, options: [(name: String, value: String)]) {
            self.uris = uris
            self.gid = gid
            self.isPaused = isPaused
            self.options = options
        }

        public static func == (lhs: Entry, rhs: Entry) -> Bool {
            lhs.uris == rhs.uris && lhs.gid == rhs.gid && lhs.isPaused == rhs.isPaused
                && lhs.options.map(\.name) == rhs.options.map(\.name)
                && lhs.options.map(\.value) == rhs.options.map(\.value)
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(self.uris)
            hasher.combine(self.gid)
        }
    }

    /// The text of a session of `entries`. An option whose value holds a line break is left out (it cannot be one
    /// line); `gid` and `pause` among the options are left out too, written from the entry's own fields.
    public static func text(of entries: [Entry]) -> String {
        var text = ""
        for entry in entries where !entry.uris.isEmpty {
            for uri in entry.uris where !uri.contains("\t") && !uri.contains("\n") {
                text += uri + "\t"
            }
            text += "\n gid=\(entry.gid)\n"
            if entry.isPaused { text += " pause=true\n" }
            for option in entry.options
            where option.name != Aria2Option.gid.name && option.name != Aria2Option.pause.name
                && !option.value.contains("\n") && !option.value.contains("\r")
            {
                text += " \(option.name)=\(option.value)\n"
            }
        }
        return text
    }
}

#if canImport(Glibc)
import Downpour
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension SessionFile {
    /// Writes `text` to `path` so that the file is either the old one or the new one, never half of each: into
    /// `PATH.tmp` (owner only: a session can hold credentials in headers), synced, then renamed over `path`.
    ///
    /// - Throws: ``DownloadError/Code/localIO`` naming the system call that failed.
    public static func write(_ text: String, to path: String) throws(DownloadError) {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .localIO("Cannot create '\(temporary)'", systemCall: "open", errno: errno)
        }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                let failure = errno
                close(descriptor)
                unlink(temporary)
                throw .localIO("Cannot write '\(temporary)'", systemCall: "write", errno: failure)
            }
            bytes = bytes.dropFirst(written)
        }
        guard fsync(descriptor) == 0 else {
            let failure = errno
            close(descriptor)
            unlink(temporary)
            throw .localIO("Cannot sync '\(temporary)'", systemCall: "fsync", errno: failure)
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw .localIO("Cannot rename '\(temporary)' to '\(path)'", systemCall: "rename", errno: failure)
        }
    }

    private static func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.write(descriptor, buffer, count)
        #elseif canImport(Musl)
        Musl.write(descriptor, buffer, count)
        #else
        Glibc.write(descriptor, buffer, count)
        #endif
    }
}
