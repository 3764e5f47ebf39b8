import ArgumentParser
import Downpour
import DownpourQueue
import Foundation

/// aria2's options given on the command line the way aria2c takes them (`--split=8`, `--split 8`, `--continue`,
/// `--continue=false`), read through the one table (``Aria2Option``), and the configuration file beneath them.
struct Aria2Arguments {
    /// The options by aria2's names, in the order given; values checked and written as aria2 writes them.
    var options: [QueueOption]

    /// Reads `tokens` (what the command did not know itself).
    ///
    /// - Throws: `ValidationError` for an unknown option, a missing value or a bad one.
    init(parsing tokens: [String]) throws {
        var options: [QueueOption] = []
        var index = 0
        while index < tokens.count {
            let token = tokens[index]
            index += 1
            guard token.hasPrefix("--"), token.count > 2 else {
                throw ValidationError("Unexpected argument '\(token)'.")
            }
            let body = token.dropFirst(2)
            let name: String
            var value: String?
            if let equals = body.firstIndex(of: "=") {
                name = String(body[..<equals])
                value = String(body[body.index(after: equals)...])
            } else {
                name = String(body)
            }
            guard let option = Aria2Option.named(name), option.scope != .placement else {
                throw ValidationError("Unknown option '--\(name)'. See 'downpour daemon --help' for the options.")
            }
            if value == nil {
                if case .flag = option.value {
                    // A flag alone is `true`, as in aria2; `--continue false` is read as aria2 reads it too.
                    if index < tokens.count, ["true", "false"].contains(tokens[index].lowercased()) {
                        value = tokens[index]
                        index += 1
                    } else {
                        value = "true"
                    }
                } else {
                    guard index < tokens.count else { throw ValidationError("Missing value for '--\(name)'.") }
                    value = tokens[index]
                    index += 1
                }
            }
            options.append(try Self.checked(option, value ?? ""))
        }
        self.options = options
    }

    init(options: [QueueOption]) {
        self.options = options
    }

    /// `value` of `option` checked by the table, as aria2 writes it back; a usage error when it is bad.
    static func checked(_ option: Aria2Option, _ value: String) throws -> QueueOption {
        do {
            return QueueOption(name: option.name, value: try option.checked(value))
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// `over` laid over these: by name, its values replace these ones (the command line over the file).
    func overlaid(with over: [QueueOption]) -> Aria2Arguments {
        let names = Set(over.map(\.name))
        return Aria2Arguments(options: self.options.filter { !names.contains($0.name) } + over)
    }

    /// The last value of `option`, else its default.
    func value(_ option: Aria2Option) -> String? {
        self.options.last { $0.name == option.name }?.value ?? option.defaultText
    }

    func flag(_ option: Aria2Option) -> Bool {
        self.value(option) == "true"
    }

    /// The options of these scopes.
    func options(in scopes: Set<Aria2Option.Scope>) -> [QueueOption] {
        self.options.filter { Aria2Option.named($0.name).map { scopes.contains($0.scope) } ?? false }
    }

    /// The configuration file: `--conf-path`, else `$XDG_CONFIG_HOME/downpour/downpour.conf` (or
    /// `~/.config/downpour/downpour.conf`) when it exists, else none. Options Downpour does not have are named in
    /// one notice on standard error and ignored; a bad value is an error naming the file and line.
    static func configurationFile(
        _ path: String?,
        reportingUnknown: Bool = true,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> Aria2Arguments {
        let file: String
        if let path {
            file = path
        } else {
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
        do {
            let checked = try ConfigurationFile(parsing: text).checked()
            if reportingUnknown, !checked.unknown.isEmpty {
                writeError(
                    "downpour: \(file): ignoring options Downpour does not have: "
                        + checked.unknown.joined(separator: ", ")
                )
            }
            return Aria2Arguments(options: checked.options.map { QueueOption(name: $0.option.name, value: $0.value) })
        } catch let error as InputFile.ParseError {
            throw ValidationError("\(file): \(error.description)")
        } catch let error as DownloadError {
            throw ValidationError("\(file): \(error.message)")
        }
    }

    /// The table's options of `scopes` for `--help`: one line each.
    static func help(for scopes: Set<Aria2Option.Scope>) -> String {
        Aria2Option.all.filter { scopes.contains($0.scope) }.map { option in
            let shown = option.defaultText.map { " (default: \($0))" } ?? ""
            return "  --\(option.name)=<\(option.valueName)>  \(option.help)\(shown)"
        }.joined(separator: "\n")
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
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
