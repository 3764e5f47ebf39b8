import Downpour
import DownpourAria2
import Foundation

extension AddRequest {
    /// One download per file of `metalink`, as `aria2.addMetalink` adds them and as the queue adds the files of a
    /// Metalink URL: the file's URLs best first (those at a `metalink-location` of `options` first), `out` its
    /// name (unless `options` names the only file), `checksum` its strongest digest (unless `options` gives
    /// one), and its piece digests and size in options of Downpour's own (``Aria2Option/internalOptions``).
    /// `position` (when given) places the first; the others follow it. The requests are in document order.
    public static func files(of metalink: Metalink, options: [QueueOption], position: Int?) -> [AddRequest] {
        let keepsName = options.contains { $0.name == Aria2Option.out.name } && metalink.files.count == 1
        let keepsChecksum = options.contains { $0.name == Aria2Option.checksum.name }
        let locations = Aria2DownloadSettings.locations(
            options.last { $0.name == Aria2Option.metalinkLocation.name }?.value
        )
        var requests: [AddRequest] = []
        for (offset, file) in metalink.files.enumerated() {
            let described = file.downloadOptions(keepingName: keepsName, keepingChecksum: keepsChecksum)
            // The document's word replaces an option of the same name (an `out` for several files).
            var fileOptions = options.filter { option in !described.contains { $0.option.name == option.name } }
            fileOptions += described.map { QueueOption(name: $0.option.name, value: $0.value) }
            requests.append(
                AddRequest(
                    uris: file.uris(preferring: locations),
                    options: fileOptions,
                    position: position.map { $0 + offset }
                )
            )
        }
        return requests
    }
}
