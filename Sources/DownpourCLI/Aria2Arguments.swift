import ArgumentParser
import Downpour
import DownpourAria2
import DownpourQueue
import Foundation

/// What `get` and `daemon` both take on their command line: aria2's options as aria2c takes them, read through the
/// one table (``Aria2Option``) by ``Aria2CommandLine`` (`-v` among them: a flag of ArgumentParser's own would take
/// a `v` out of `-ovideo.mkv`). Each command lists the table's options it takes in its `--help`.
struct Aria2Flags: ParsableArguments {
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp(
            "aria2's options as aria2c takes them (--NAME=VALUE, --NAME VALUE, -x 8, -x8, a flag alone for true), "
                + "listed below; for get, the URLs too.",
            valueName: "option|url"
        )
    )
    var words: [String] = []
}

/// The options in force for a command: the configuration file, then the command line over it (by name), checked
/// by the table and written as aria2 writes them back.
struct Aria2Arguments {
    /// The options by aria2's names, in the order given.
    var options: [QueueOption]
    /// The command line's words that are not options (get's URLs).
    var operands: [String] = []
    /// The names of the options given on the command line (not only in the file).
    var givenOnCommandLine: Set<String> = []

    init(options: [QueueOption], operands: [String] = [], givenOnCommandLine: Set<String> = []) {
        self.options = options
        self.operands = operands
        self.givenOnCommandLine = givenOnCommandLine
    }

    /// Reads `words` for `command`, and the configuration file beneath them: `--conf-path`, else
    /// `$XDG_CONFIG_HOME/downpour/downpour.conf` (or `~/.config/downpour/downpour.conf`) when it exists and
    /// `--no-conf` is not given.
    ///
    /// The file's options Downpour does not have are named in one notice on standard error and ignored, as are
    /// those of the other command (the daemon names them; `get` passes over a shared file's daemon options
    /// quietly, and its `input-file`: ``Aria2Option/fileCommands``). get's `out` is kept as given: on get's command line it is a path, as curl's `-o`.
    ///
    /// - Throws: `ValidationError` for an unknown option, a missing value or a bad one (a file's naming the file
    ///   and line).
    static func resolve(
        _ words: [String],
        for command: Aria2Option.Commands,
        reportingUnknown: Bool = true,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> Aria2Arguments {
        let line: Aria2CommandLine
        var given: [QueueOption] = []
        do {
            line = try Aria2CommandLine(parsing: words, for: command)
            for (option, value) in line.options {
                let kept = command == .get && option.name == Aria2Option.out.name ? value : try option.checked(value)
                given.append(QueueOption(name: option.name, value: kept))
            }
        } catch {
            throw ValidationError(error.message)
        }
        let commandLine = Aria2Arguments(options: given, operands: line.operands)
        let file = try Self.configurationFile(
            commandLine.value(.confPath),
            skippingDefault: commandLine.flag(.noConf),
            for: command,
            reportingUnknown: reportingUnknown,
            environment: environment
        )
        return Aria2Arguments(
            options: file.options.filter { option in !given.contains { $0.name == option.name } } + given,
            operands: line.operands,
            givenOnCommandLine: Set(given.map(\.name))
        )
    }

    /// The last value of `option`, else its default.
    func value(_ option: Aria2Option) -> String? {
        self.options.last { $0.name == option.name }?.value ?? option.defaultText
    }

    func flag(_ option: Aria2Option) -> Bool {
        self.value(option) == "true"
    }

    /// Whether any of `options` is given.
    func gives(_ options: Aria2Option...) -> Bool {
        self.options.contains { given in options.contains { $0.name == given.name } }
    }

    /// The options of these scopes.
    func options(in scopes: Set<Aria2Option.Scope>) -> [QueueOption] {
        self.options.filter { Aria2Option.named($0.name).map { scopes.contains($0.scope) } ?? false }
    }

    /// The options of a download (``Aria2Option/Scope/download``) applied to `base`, in order.
    ///
    /// - Throws: `ValidationError` naming the option, for a value the request cannot take.
    func applyingDownloadOptions(
        to base: Aria2DownloadSettings,
        except excluded: Set<String> = []
    ) throws -> Aria2DownloadSettings {
        var options = base
        for given in self.options(in: [.download]) where !excluded.contains(given.name) {
            do {
                try options.apply(name: given.name, value: given.value)
            } catch {
                throw ValidationError(error.message)
            }
        }
        return options
    }

    /// The configuration file's options that `command` takes.
    private static func configurationFile(
        _ path: String?,
        skippingDefault: Bool,
        for command: Aria2Option.Commands,
        reportingUnknown: Bool,
        environment: [String: String]
    ) throws -> Aria2Arguments {
        let file: String
        if let path {
            file = path
        } else {
            guard !skippingDefault else { return Aria2Arguments(options: []) }
            let home = environment["HOME"] ?? NSHomeDirectory()
            let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
            file = config + "/downpour/downpour.conf"
            guard FileManager.default.fileExists(atPath: file) else { return Aria2Arguments(options: []) }
        }
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw ValidationError("Cannot read the configuration file '\(file)': \(error.localizedDescription)")
        }
        let checked: (options: [(option: Aria2Option, value: String)], unknown: [String])
        do {
            checked = try ConfigurationFile(parsing: text).checked()
        } catch let error as InputFile.ParseError {
            throw ValidationError("\(file): \(error.description)")
        } catch let error as DownloadError {
            throw ValidationError("\(file): \(error.message)")
        }
        let taken = checked.options.filter { $0.option.fileCommands.isSuperset(of: command) }
        if reportingUnknown, !checked.unknown.isEmpty {
            writeError(
                "downpour: \(file): ignoring options Downpour does not have: "
                    + checked.unknown.joined(separator: ", ")
            )
        }
        // The daemon names the options only `get` uses (an aria2 daemon's file may count on them); `get` passes
        // over a shared file's daemon options quietly.
        var others: [String] = []
        for (option, _) in checked.options where !option.fileCommands.contains(command) && !others.contains(option.name)
        {
            others.append(option.name)
        }
        if reportingUnknown, command == .daemon, !others.isEmpty {
            writeError("downpour: \(file): ignoring options the daemon does not use: " + others.joined(separator: ", "))
        }
        return Aria2Arguments(options: taken.map { QueueOption(name: $0.option.name, value: $0.value) })
    }

    /// The table's options `command` takes, for its `--help`: one line each, with the default `base` gives (a
    /// download option's) or the table's.
    static func help(for command: Aria2Option.Commands, base: Aria2DownloadSettings) -> String {
        Aria2Option.all.filter { $0.commands.contains(command) }.map { option in
            var names = "--\(option.name)=<\(option.valueName)>"
            if let short = option.short { names = "-\(short), " + names }
            var notes: [String] = []
            if let value = option.defaultValue(in: base), !value.isEmpty {
                notes.append("default: \(value.replacingOccurrences(of: "\n", with: " "))")
            }
            for alias in option.aliases {
                notes.append("--\(alias.name)" + (alias.value.map { " for \($0)" } ?? " too"))
            }
            let shown = notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")"
            return "  \(names)\n" + Self.wrapped(option.help + shown, indent: 6)
        }.joined(separator: "\n")
    }

    /// `text` in lines of at most 76 characters, each indented: `--help` then leaves them as they are.
    private static func wrapped(_ text: String, indent: Int, width: Int = 76) -> String {
        let margin = String(repeating: " ", count: indent)
        var lines: [String] = []
        var line = margin
        for word in text.split(separator: " ") {
            if line.count > indent, line.count + 1 + word.count > width {
                lines.append(line)
                line = margin
            }
            line += (line.count > indent ? " " : "") + word
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}

/// The GID of an input file's entry that names none: the same for the same file, line and URIs (FNV-1a, 64 bits),
/// so that loading the file again at the next start finds the download already there.
enum InputGID {
    static func make(path: String, line: Int, uris: [String]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "\(path)\u{0}\(line)\u{0}\(uris.joined(separator: "\t"))".utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        if hash == 0 { hash = 1 }
        return Self.hex(hash)
    }

    /// A new GID for a download of `get` (its hooks' first argument).
    static func random() -> String {
        Self.hex(UInt64.random(in: 1...UInt64.max))
    }

    private static func hex(_ value: UInt64) -> String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
