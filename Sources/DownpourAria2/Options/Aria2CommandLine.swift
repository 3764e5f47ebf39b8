import Downpour

/// aria2's options on a command line, read as aria2c reads them, through the one table (``Aria2Option``):
/// `--NAME=VALUE` and `--NAME VALUE`, a flag alone for `true` (`--continue`, `-c`), a short name with its value
/// joined or apart (`-x8`, `-x=8`, `-x 8`), short flags together (`-qc`), and the table's aliases (`--insecure` is
/// `--check-certificate=false`). Every other word is an operand (a URL), and so is everything after `--`.
///
/// ```swift
/// let line = try Aria2CommandLine(parsing: ["-x8", "--continue", "https://example.com/a.iso"], for: .get)
/// line.options.map(\.option.name)   // ["max-connection-per-server", "continue"]
/// line.operands                     // ["https://example.com/a.iso"]
/// ```
///
/// Values are kept as given; ``Aria2Option/checked(_:)`` checks them.
public struct Aria2CommandLine: Sendable {
    /// The options in the order given, with their values as given.
    public var options: [(option: Aria2Option, value: String)]
    /// The words that are not options, in order.
    public var operands: [String]

    /// Reads `tokens`, the words after the command's name.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for a name the table lacks, an option `command` does not
    ///   take, an option without its value, or a value given to an alias that stands for one.
    public init(parsing tokens: [String], for command: Aria2Option.Commands) throws(DownloadError) {
        self.options = []
        self.operands = []
        var index = tokens.startIndex
        /// The next word as the value of `spelling`, which needs one.
        func value(for spelling: String) throws(DownloadError) -> String {
            guard index < tokens.endIndex else { throw .invalidRequest("The option '\(spelling)' needs a value.") }
            defer { index += 1 }
            return tokens[index]
        }
        /// The next word when it is `true` or `false` (aria2 takes `--continue false` too), else `true`.
        func flagValue() -> String {
            guard index < tokens.endIndex, ["true", "false"].contains(tokens[index].lowercased()) else { return "true" }
            defer { index += 1 }
            return tokens[index]
        }
        while index < tokens.endIndex {
            let token = tokens[index]
            index += 1
            if token == "--" {
                self.operands += tokens[index...]
                break
            }
            if token.hasPrefix("--") {
                let body = token.dropFirst(2)
                let equals = body.firstIndex(of: "=")
                let name = String(body[..<(equals ?? body.endIndex)])
                let given = equals.map { String(body[body.index(after: $0)...]) }
                let (option, alias) = try Self.option(named: name, for: command)
                if let fixed = alias?.value {
                    guard given == nil else {
                        throw .invalidRequest(
                            "The option '--\(name)' takes no value; it means --\(option.name)=\(fixed)."
                        )
                    }
                    self.options.append((option, fixed))
                } else if let given {
                    self.options.append((option, given))
                } else if option.value == .flag {
                    self.options.append((option, flagValue()))
                } else {
                    self.options.append((option, try value(for: "--\(name)")))
                }
            } else if token.hasPrefix("-"), token.count > 1 {
                var letters = Substring(token.dropFirst())
                while let letter = letters.first {
                    letters = letters.dropFirst()
                    let option = try Self.option(short: letter, for: command)
                    if option.value == .flag {
                        // `-qc`: flags together; `-c` alone may take `true` or `false` after it.
                        self.options.append((option, letters.isEmpty ? flagValue() : "true"))
                    } else {
                        // `-x8` or `-x 8`; `-x=8` too, as Downpour took it before (aria2c would read "=8").
                        let joined = letters.first == "=" ? letters.dropFirst() : letters
                        let value = letters.isEmpty ? try value(for: "-\(letter)") : String(joined)
                        self.options.append((option, value))
                        break
                    }
                }
            } else {
                self.operands.append(token)
            }
        }
    }

    /// The option of the long name `name`, and the alias it was named by (if it was).
    private static func option(
        named name: String,
        for command: Aria2Option.Commands
    ) throws(DownloadError) -> (Aria2Option, Aria2Option.Alias?) {
        if let option = Aria2Option.named(name) {
            return (try Self.taken(option, spelled: "--\(name)", by: command), nil)
        }
        for option in Aria2Option.all {
            if let alias = option.aliases.first(where: { $0.name == name }) {
                return (try Self.taken(option, spelled: "--\(name)", by: command), alias)
            }
        }
        throw .invalidRequest("Unknown option '--\(name)'.")
    }

    private static func option(
        short letter: Character,
        for command: Aria2Option.Commands
    ) throws(DownloadError)
        -> Aria2Option
    {
        guard let option = Aria2Option.all.first(where: { $0.short == letter }) else {
            throw .invalidRequest("Unknown option '-\(letter)'.")
        }
        return try Self.taken(option, spelled: "-\(letter)", by: command)
    }

    private static func taken(
        _ option: Aria2Option,
        spelled spelling: String,
        by command: Aria2Option.Commands
    ) throws(DownloadError) -> Aria2Option {
        guard option.commands.isSuperset(of: command), !command.isEmpty else {
            guard !option.commands.isEmpty else {
                throw .invalidRequest(
                    "The option '\(spelling)' is given with each download (an input file's entry, addUri), not on "
                        + "the command line."
                )
            }
            let (owner, this) =
                command == .get ? ("downpour daemon", "downpour get") : ("downpour get", "downpour daemon")
            throw .invalidRequest("The option '\(spelling)' is one of \(owner), not of \(this).")
        }
        return option
    }
}
