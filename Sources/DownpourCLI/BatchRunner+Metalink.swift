import Downpour
import DownpourAria2
import Foundation

extension BatchRunner.Entry {
    /// The files of a Metalink document as batch entries: each from all its URLs (mirrors, best first: those of
    /// `options.metalinkLocations` first), with what the document says of it
    /// (``Metalink/File/downloadOptions(keepingName:keepingChecksum:)``, `options`' checksum winning) inside
    /// `options.directory`. The files themselves are not followed as Metalinks again (a document that lists itself
    /// would never end).
    ///
    /// `line` gives each file's line for messages (its place in `-M`'s document, or the input file's line of the
    /// entry that named the document); `origin` names the document when it was a URL of a batch.
    ///
    /// - Throws: ``DownloadError`` `invalidRequest`, its message starting with the file's name, for a file that
    ///   cannot be downloaded as the document describes it.
    static func metalinkFiles(
        of metalink: Metalink,
        options base: Aria2DownloadSettings,
        line: (Int) -> Int,
        origin: String? = nil
    ) throws(DownloadError) -> [BatchRunner.Entry] {
        var entries: [BatchRunner.Entry] = []
        for (index, file) in metalink.files.enumerated() {
            var options = base
            options.configuration.followsMetalink = false
            do throws(DownloadError) {
                let keepsChecksum = base.configuration.checksum != nil
                for (option, value) in file.downloadOptions(keepingName: false, keepingChecksum: keepsChecksum) {
                    try option.apply(value, to: &options)
                }
                let request = try options.request(uris: file.uris(preferring: base.metalinkLocations))
                try request.configuration.validate()
                var entry = BatchRunner.Entry(line: line(index), request: request)
                entry.origin = origin.map { "\($0), file \(file.name)" }
                entries.append(entry)
            } catch {
                throw DownloadError(code: error.code, message: "\(file.name): \(error.message)")
            }
        }
        return entries
    }

    /// The options this entry's request was made from, as far as its files would need them if it turns out to
    /// be a Metalink: its directory and configuration.
    var optionsForMetalinkFiles: Aria2DownloadSettings {
        let directory: String
        switch self.request.destination {
        case .directory(let path): directory = path
        case .named(_, let path): directory = path
        case .file(let path): directory = (path as NSString).deletingLastPathComponent
        }
        return Aria2DownloadSettings(
            directory: directory.isEmpty ? "." : directory,
            configuration: self.request.configuration
        )
    }
}
