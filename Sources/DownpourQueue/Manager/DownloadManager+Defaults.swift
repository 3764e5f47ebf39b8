import Downpour

extension DownloadManager {
    /// What new downloads and the queue start from, before any option a client sets.
    public struct Defaults: Sendable {
        /// Where files go when a download names no `dir`.
        public var directory: String
        /// The configuration every request starts from; per-download options by aria2's names are applied on
        /// top (global ones first, then the download's own). By default it follows Metalinks, as aria2 does
        /// (`follow-metalink=true`): a URL that is a Metalink document adds a download per file it lists.
        public var configuration: DownloadConfiguration
        /// Global options by aria2's names: per-download defaults (`split`, `max-connection-per-server`,
        /// `header`, ...) and the queue's own (`max-concurrent-downloads`, `max-download-result`,
        /// `max-overall-download-limit`). Options changed with ``DownloadManager/changeGlobalOptions(_:)`` are
        /// stored and override these.
        public var options: [QueueOption]

        public init(
            directory: String = ".",
            configuration: DownloadConfiguration = Defaults.configuration,
            options: [QueueOption] = []
        ) {
            self.directory = directory
            self.configuration = configuration
            self.options = options
        }

        /// A ``DownloadConfiguration`` with its defaults, but following Metalinks as aria2 does, and HLS playlists
        /// as `get` does (`media=auto`).
        public static var configuration: DownloadConfiguration {
            var configuration = DownloadConfiguration()
            configuration.followsMetalink = true
            configuration.followsPlaylists = true
            return configuration
        }
    }
}
