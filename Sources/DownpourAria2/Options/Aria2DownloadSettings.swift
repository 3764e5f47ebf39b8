import Downpour
import DownpourHLS
import Foundation

/// Per-download options by aria2's names, as an input file (`aria2c -i`) or aria2's RPC gives them, turned into
/// a ``DownloadRequest``.
///
/// ```swift
/// var options = Aria2DownloadSettings(directory: "downloads")
/// try options.apply(name: "out", value: "big.iso")
/// try options.apply(name: "split", value: "8")
/// let request = try options.request(uris: ["https://example.com/big.iso"])
/// ```
///
/// Names that aria2 has but Downpour does not are refused with a message naming them, never ignored. The options
/// and their values are those of the one table, ``Aria2Option/all``.
public struct Aria2DownloadSettings: Sendable, Hashable {
    /// The directory to save into (`dir`).
    public var directory: String
    /// The file name inside ``directory`` (`out`); the server's or the URL's name when `nil`.
    public var output: String?
    /// Everything else.
    public var configuration: DownloadConfiguration

    /// Keep the download in a saved session even once it completed or was removed (`force-save`).
    public var forceSave: Bool
    /// With a Metalink: the locations (country codes) whose URLs come first (`metalink-location`).
    public var metalinkLocations: [String]
    /// Ask proxies and caches for a fresh copy: `Cache-Control: no-cache` and `Pragma: no-cache` on every request
    /// (`http-no-cache`).
    public var noCache: Bool
    /// With an HLS playlist of several variants, the one to fetch (`media-video`).
    public var mediaVideo: HLSVideoChoice
    /// With an HLS variant whose audio is a rendition of its own, fetch it too (`media-audio`).
    public var mediaAudio: Bool
    /// With an HLS variant that names subtitles renditions, the ones to fetch as WebVTT files (`media-subtitles`).
    public var mediaSubtitles: HLSSubtitleChoice
    /// With a live HLS playlist, record it for at most this long (`media-record-time`); `nil`: until it ends.
    public var mediaRecordTime: Duration?

    public init(directory: String = ".", output: String? = nil, configuration: DownloadConfiguration = .init()) {
        self.directory = directory
        self.output = output
        self.configuration = configuration
        self.forceSave = false
        self.metalinkLocations = []
        self.noCache = false
        self.mediaVideo = .best
        self.mediaAudio = true
        self.mediaSubtitles = .none
        self.mediaRecordTime = nil
    }

    /// Applies one option of a download (``Aria2Option/Scope/download``; ``Aria2Option/all`` has them).
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for a name that is not a download's option or a bad value;
    ///   the message names the option and says what it takes.
    public mutating func apply(name: String, value: String) throws(DownloadError) {
        guard let option = Aria2Option.named(name) ?? Aria2Option.internalOptions.first(where: { $0.name == name }),
            option.scope == .download
        else {
            let names = Aria2Option.all.filter { $0.scope == .download }.map(\.name)
            throw .invalidRequest(
                "The option '\(name)' is not supported; the supported ones are " + names.joined(separator: ", ") + "."
            )
        }
        try option.apply(value, to: &self)
    }

    /// `metalink-location`'s country codes: `"de, fr"` is `["de", "fr"]`.
    public static func locations(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// A request for the file at `uris`: the first is the request's URL, the others its mirrors (as aria2 takes
    /// several URIs of one file).
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for no URL or a bad one.
    public func request(uris: [String]) throws(DownloadError) -> DownloadRequest {
        guard let first = uris.first else { throw .invalidRequest("A download needs a URL.") }
        var mirrors: [URL] = []
        for text in uris.dropFirst() {
            // Parsed and checked as the first one is.
            mirrors.append(try DownloadRequest(url: text).url)
        }
        let destination: DownloadRequest.Destination
        if let output {
            destination = .named(output, in: self.directory)
        } else {
            destination = .directory(self.directory)
        }
        var configuration = self.configuration
        if self.noCache {
            for (name, value) in [("Cache-Control", "no-cache"), ("Pragma", "no-cache")]
            where !configuration.headers.contains(where: { $0.name.lowercased() == name.lowercased() }) {
                configuration.headers.append(HTTPHeaderField(name: name, value: value))
            }
        }
        var request = try DownloadRequest(url: first, destination: destination, configuration: configuration)
        request.mirrors = mirrors
        return request
    }
}

extension Aria2DownloadSettings {
    /// What to fetch of an HLS playlist: `media-video`, `media-audio`, `media-subtitles`, `media-record-time`, and
    /// `-x` segments at once.
    public var playlistOptions: HLSDownload.Options {
        HLSDownload.Options(
            video: self.mediaVideo,
            audio: self.mediaAudio,
            subtitles: self.mediaSubtitles,
            concurrentSegments: max(1, self.configuration.connections),
            recordTime: self.mediaRecordTime
        )
    }
}
