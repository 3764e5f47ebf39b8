import Downpour

extension Metalink.File {
    /// What the document says of this file, as the table's options of the download that fetches it: `out` its
    /// name, `checksum` its strongest digest, and its piece digests and size in options of Downpour's own
    /// (``Aria2Option/internalOptions``). The daemon's queue stores them with the download; `get` applies them.
    ///
    /// - Parameters:
    ///   - keepingName: the download names its file itself (an `out` given for a document of one file).
    ///   - keepingChecksum: the download gives its own `checksum`, which wins over the document's.
    public func downloadOptions(keepingName: Bool, keepingChecksum: Bool) -> [(option: Aria2Option, value: String)] {
        var options: [(option: Aria2Option, value: String)] = []
        if !keepingName { options.append((.out, self.name)) }
        if !keepingChecksum, let checksum = self.strongestChecksum { options.append((.checksum, checksum.description)) }
        if let pieces = self.pieces { options.append((.pieceChecksums, pieces.description)) }
        if let size = self.size { options.append((.expectedLength, "\(size)")) }
        return options
    }

    /// The file's URLs, best first (those at one of `locations`, country codes, first): the first is the download's
    /// URL, the others its mirrors.
    public func uris(preferring locations: [String]) -> [String] {
        self.sources(preferring: locations).map(\.url.absoluteString)
    }
}
