import Downpour
import DownpourAria2
import Foundation

/// What a download's options and the queue's are, layer over layer: the defaults (the daemon's configuration), the
/// global options, a download's own. A pure value over the option table (``Aria2Option/all``), made for one read or
/// one request.
///
/// A download's own option shadows the global one of the same name, as in aria2 (a download's `header` replaces the
/// global `header` lines, it does not add to them).
struct OptionResolver: Sendable {
    /// The request options every download starts from, before any option by name.
    var base: Aria2DownloadSettings
    /// The global options, the daemon's defaults with the clients' changes over them.
    var globals: [QueueOption]

    /// `own` over ``globals``: by name, the download's values replace the global ones.
    func effective(_ own: [QueueOption]) -> [QueueOption] {
        let names = Set(own.map(\.name))
        return self.globals.filter { !names.contains($0.name) } + own
    }

    /// The request options of a download with options `own`: ``base``, then its effective download options.
    ///
    /// - Throws: ``QueueError`` `invalidRequest` naming the option with a bad value.
    func requestOptions(_ own: [QueueOption]) throws(QueueError) -> Aria2DownloadSettings {
        var options = self.base
        for option in self.effective(own) {
            guard let known = Self.requestOption(option.name) else { continue }
            do {
                try known.apply(option.value, to: &options)
            } catch {
                throw QueueError(.invalidRequest, message: error.message, option: option.name)
            }
        }
        return options
    }

    /// What `aria2.getOption` answers for a download with options `own`: every download option Downpour has that
    /// aria2 has too, with the download's value, else the global one, else the default, written as aria2 writes it;
    /// then the download options Downpour only answers (``Aria2FixedOption``), with what it does.
    func downloadOptions(_ own: [QueueOption]) -> [QueueOption] {
        let effective = self.effective(own)
        var answer: [QueueOption] = []
        for option in Aria2Option.all where option.scope == .download && option.isAria2s {
            answer += Self.values(of: option, in: effective) ?? Self.defaults(of: option, in: self.base)
        }
        for fixed in Aria2FixedOption.all where fixed.scope == .download {
            answer.append(QueueOption(name: fixed.name, value: fixed.currentValue))
        }
        return answer
    }

    /// What `aria2.getGlobalOption` answers: every option with a value, defaults included, but the secret; the
    /// queue's own as `queue` has them; then every option Downpour only answers (``Aria2FixedOption``).
    func globalOptions(queue: DownloadQueue, overallLimit: Int64?) -> [QueueOption] {
        var answer: [QueueOption] = []
        for option in Aria2Option.all where option.isAria2s && option.name != Aria2Option.rpcSecret.name {
            switch option.scope {
            case .placement:
                continue
            case .download, .startup:
                answer += Self.values(of: option, in: self.globals) ?? Self.defaults(of: option, in: self.base)
            case .queue:
                let value: String?
                switch option.name {
                case Aria2Option.maxConcurrentDownloads.name: value = "\(queue.maxConcurrentDownloads)"
                case Aria2Option.maxDownloadResult.name: value = "\(queue.maxDownloadResult)"
                case Aria2Option.maxOverallDownloadLimit.name: value = "\(overallLimit ?? 0)"
                default: value = Self.values(of: option, in: self.globals)?.last?.value ?? option.defaultText
                }
                if let value { answer.append(QueueOption(name: option.name, value: value)) }
            }
        }
        for fixed in Aria2FixedOption.all {
            answer.append(QueueOption(name: fixed.name, value: fixed.currentValue))
        }
        let answered = Set(answer.map(\.name))
        for (name, value) in Self.unsetStartupAnswers() where !answered.contains(name) {
            answer.append(QueueOption(name: name, value: value))
        }
        return answer
    }

    /// What aria2c answers for options of the process that nobody set, with Downpour's truth: the configuration
    /// file it would read (`conf-path`, as aria2 names its default even when absent), `no-conf`, the `.netrc` a
    /// `netrc-path` names (the daemon reads none: `no-netrc`), the certificates trusted without a `ca-certificate`.
    static func unsetStartupAnswers(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        fileExists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }
    ) -> [(String, String)] {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        let bundles = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"]
        return [
            (Aria2Option.confPath.name, config + "/downpour/downpour.conf"),
            (Aria2Option.noConf.name, "false"),
            (Aria2Option.netrcPath.name, home + "/.netrc"),
            (Aria2Option.caCertificate.name, bundles.first(where: fileExists) ?? ""),
        ]
    }

    /// The option of a download's request named `name` (the table's and Downpour's own), or `nil`: also for one
    /// only `downpour get` has (the HLS options, until the daemon fetches playlists), which the daemon ignores as
    /// aria2 ignores a name it does not know.
    static func requestOption(_ name: String) -> Aria2Option? {
        if let option = Aria2Option.named(name) {
            return option.scope == .download && option.commands.contains(.daemon) ? option : nil
        }
        return Aria2Option.internalOptions.first { $0.name == name }
    }

    /// `option`'s values in `options`, checked and written as aria2 writes them; a list's values joined one a line,
    /// as aria2 answers `header`. `nil` when `options` does not set it.
    private static func values(of option: Aria2Option, in options: [QueueOption]) -> [QueueOption]? {
        let values = options.filter { $0.name == option.name }.map { (try? option.checked($0.value)) ?? $0.value }
        guard let last = values.last else { return nil }
        if case .list = option.value {
            return [QueueOption(name: option.name, value: values.map { $0 + "\n" }.joined())]
        }
        return [QueueOption(name: option.name, value: last)]
    }

    private static func defaults(of option: Aria2Option, in base: Aria2DownloadSettings) -> [QueueOption] {
        option.defaultValue(in: base).map { [QueueOption(name: option.name, value: $0)] } ?? []
    }
}
