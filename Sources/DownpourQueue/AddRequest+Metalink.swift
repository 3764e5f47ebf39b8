import Downpour
import Foundation

extension AddRequest {
    /// One download per file of `metalink`, as `aria2.addMetalink` adds them and as the queue adds the files of a
    /// Metalink URL: the file's URLs best first (those at a `metalink-location` of `options` first), `out` its
    /// name (unless `options` names the only file), `checksum` its strongest digest (unless `options` gives
    /// one), and its piece digests and size in options of Downpour's own (``Aria2Option/internalOptions``).
    /// `position` (when given) places the first; the others follow it. The requests are in document order.
    public static func files(of metalink: Metalink, options: [QueueOption], position: Int?) -> [AddRequest] {
        let out = Aria2Option.out.name
        let checksumName = Aria2Option.checksum.name
        let givesName = options.contains { $0.name == out } && metalink.files.count == 1
        let givesChecksum = options.contains { $0.name == checksumName }
        // aria2's metalink-location: URLs of these countries first.
        let locations = (options.last { $0.name == Aria2Option.metalinkLocation.name }?.value ?? "").split(
            separator: ","
        ).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        var requests: [AddRequest] = []
        for (offset, file) in metalink.files.enumerated() {
            var fileOptions = options
            if !givesName {
                fileOptions.removeAll { $0.name == out }
                fileOptions.append(QueueOption(name: out, value: file.name))
            }
            if !givesChecksum, let checksum = file.strongestChecksum {
                fileOptions.append(
                    QueueOption(name: checksumName, value: "\(checksum.algorithm.name)=\(checksum.digest)")
                )
            }
            // What the document says of the file's pieces and size, in options of Downpour's own.
            fileOptions.removeAll { option in Aria2Option.internalOptions.contains { $0.name == option.name } }
            if let pieces = file.pieces {
                fileOptions.append(QueueOption(name: Aria2Option.pieceChecksums.name, value: pieces.description))
            }
            if let size = file.size {
                fileOptions.append(QueueOption(name: Aria2Option.expectedLength.name, value: "\(size)"))
            }
            let uris = file.sources(preferring: locations).map(\.url.absoluteString)
            requests.append(AddRequest(uris: uris, options: fileOptions, position: position.map { $0 + offset }))
        }
        return requests
    }
}
