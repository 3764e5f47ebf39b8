import Downpour
import DownpourAria2
import DownpourHLS
import Foundation

/// The options: the defaults, the global options clients changed and a download's own, resolved through the table
/// (``OptionResolver`` over ``Aria2Option``) for a request or a read; the checks of a global option.
extension DownloadManager {
    static func effectiveGlobals(_ defaults: [QueueOption], _ overrides: [QueueOption]) -> [QueueOption] {
        let overridden = Set(overrides.map(\.name))
        return defaults.filter { !overridden.contains($0.name) } + overrides
    }

    /// The request for a download: the defaults, then the global options, then its own; the path its last run
    /// resolved, if any, so that a new run continues the same `.part` (or, for an HLS playlist, the same segments).
    func makeRequest(for download: QueuedDownload) throws(QueueError) -> DownloadRequest {
        try self.makeRun(for: download).request
    }

    /// ``makeRequest(for:)``, and what to fetch should the URL answer with an HLS playlist.
    func makeRun(
        for download: QueuedDownload
    ) throws(QueueError) -> (
        request: DownloadRequest, playlist: HLSDownload.Options
    ) {
        let options = try self.resolver.requestOptions(download.entry.options)
        return (try self.makeRequest(for: download, options: options), options.playlistOptions)
    }

    private func makeRequest(
        for download: QueuedDownload,
        options: Aria2DownloadSettings
    ) throws(QueueError) -> DownloadRequest {
        do {
            // Every URI of the entry: the first is the request's URL, the others its mirrors.
            var request = try options.request(uris: download.entry.uris)
            // The files of a Metalink are not followed again (a document that lists itself would never end).
            if download.entry.following != nil { request.configuration.followsMetalink = false }
            // The finished file carries the GID: a run started again after a kill between the rename and the
            // stored completion takes the file as its own, complete, instead of as another file in the way.
            request.finishMark = download.entry.gid.description
            if let path = download.path {
                let url = URL(fileURLWithPath: path)
                request.destination = .named(url.lastPathComponent, in: url.deletingLastPathComponent().path)
                request.configuration.resume = true
            }
            return request
        } catch {
            throw QueueError(.invalidRequest, message: error.message)
        }
    }

    /// Checks that `download` can run with its options and URIs as they are now, as its run will ask for them
    /// (``makeRequest(for:)``): every option resolved through the table, every URI parsed. Nothing is kept.
    ///
    /// - Throws: ``QueueError`` `invalidRequest`, naming the option whose value is bad.
    func check(_ download: QueuedDownload) throws(QueueError) {
        _ = try self.makeRequest(for: download)
    }

    /// The defaults, the global options and the table, for a request or a read.
    var resolver: OptionResolver {
        OptionResolver(
            base: Aria2DownloadSettings(directory: self.defaults.directory, configuration: self.defaults.configuration),
            globals: self.effectiveGlobals
        )
    }

    static func checkURI(_ uri: String) throws(QueueError) {
        do {
            _ = try DownloadRequest(url: uri)
        } catch {
            throw QueueError(.invalidRequest, message: error.message)
        }
    }

    /// Checks a global option by the table; a name the table does not have is left for the caller to ignore.
    func validateGlobal(_ option: QueueOption) throws(QueueError) {
        guard let known = Aria2Option.named(option.name) else { return }
        do {
            _ = try known.checked(option.value)
        } catch {
            throw QueueError(.invalidRequest, message: error.message, option: option.name)
        }
    }

    func setOverallLimit(_ value: String) throws(QueueError) {
        guard let rate = ByteCount.parse(value), rate >= 0 else {
            throw QueueError(
                .invalidRequest,
                message: "The option '\(Aria2Option.maxOverallDownloadLimit)' takes a rate such as 0, 512K or 10M, "
                    + "not '\(value)'.",
                option: Aria2Option.maxOverallDownloadLimit.name
            )
        }
        var configuration = self.downloader.configuration
        configuration.maximumOverallRate = rate == 0 ? nil : rate
        do {
            try self.downloader.setConfiguration(configuration)
        } catch {
            throw QueueError(.invalidRequest, message: error.message, option: Aria2Option.maxOverallDownloadLimit.name)
        }
    }

    static func lastValue(_ option: Aria2Option, in options: [QueueOption]) -> String? {
        options.last { $0.name == option.name }?.value
    }
}
