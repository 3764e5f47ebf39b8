import Logging

/// Writes the lines `StreamLogHandler` writes, in its format, but joins a logger's metadata into text only for a
/// line it writes. `StreamLogHandler` formats its metadata each time a key is set, and the daemon sets one on every
/// run (`gid`), as AsyncHTTPClient does on every request, while at its default level (`notice`) nearly none of
/// those loggers writes a line: 10,000 dead links added at once spent 3% of the daemon's CPU on metadata text
/// nobody read.
struct LineLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    private var lines: StreamLogHandler

    /// A handler whose lines `lines` writes; its own metadata and provider are not used (the metadata comes with
    /// each line).
    init(lines: StreamLogHandler, metadataProvider: Logger.MetadataProvider?) {
        var lines = lines
        lines.metadata = [:]
        lines.metadataProvider = nil
        self.lines = lines
        self.metadataProvider = metadataProvider
    }

    /// Lines to standard error, as `StreamLogHandler.standardError(label:)` writes them.
    static func standardError(label: String) -> LineLogHandler {
        LineLogHandler(
            lines: StreamLogHandler.standardError(label: label, metadataProvider: nil),
            metadataProvider: LoggingSystem.metadataProvider
        )
    }

    var logLevel: Logger.Level {
        get { self.lines.logLevel }
        set { self.lines.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // StreamLogHandler's order: the handler's metadata, then the provider's, then the line's, each winning
        // over the one before.
        var merged = self.metadata
        if let provided = self.metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, provided in provided }
        }
        var event = event
        if let explicit = event.metadata, !explicit.isEmpty {
            merged.merge(explicit) { _, explicit in explicit }
        }
        event.metadata = merged.isEmpty ? nil : merged
        self.lines.log(event: event)
    }
}
