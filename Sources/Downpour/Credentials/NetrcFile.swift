/// A `.netrc` file: user names and passwords by host, as curl, wget and aria2 read them.
///
/// Tokens are separated by any whitespace, line breaks included. `machine NAME` starts the entry for a host and
/// `default` the entry for every other host; `login` and `password` set its user name and password, `account`
/// is read and ignored, and `macdef NAME` skips a macro definition up to the next blank line. A value may be
/// quoted as curl accepts it (`"with spaces"`, with `\"`, `\\`, `\n`, `\r` and `\t` escapes). A `#` where a
/// keyword is expected comments out the rest of the line. Anything else is passed over: a file that other
/// tools accept is never refused.
///
/// ```swift
/// let netrc = NetrcFile(parsing: "machine example.com login alice password secret")
/// netrc.credentials(forHost: "example.com")  // alice, secret
/// ```
public struct NetrcFile: Sendable, Hashable {
    /// One `machine` or `default` entry.
    public struct Entry: Sendable, Hashable {
        /// The host name; `nil` for the `default` entry.
        public var machine: String?
        public var login: String?
        public var password: String?

        public init(machine: String?, login: String? = nil, password: String? = nil) {
            self.machine = machine
            self.login = login
            self.password = password
        }
    }

    /// The entries in the file's order.
    public var entries: [Entry]

    public init(entries: [Entry]) {
        self.entries = entries
    }

    public init(parsing text: String) {
        var lexer = Lexer(bytes: Array(text.utf8))
        var entries: [Entry] = []
        while let token = lexer.next(keyword: true) {
            switch token.lowercased() {
            case "machine":
                guard let name = lexer.next(keyword: false) else { break }
                entries.append(Entry(machine: name))
            case "default":
                entries.append(Entry(machine: nil))
            case "login":
                let value = lexer.next(keyword: false)
                if !entries.isEmpty { entries[entries.count - 1].login = value }
            case "password":
                let value = lexer.next(keyword: false)
                if !entries.isEmpty { entries[entries.count - 1].password = value }
            case "account":
                _ = lexer.next(keyword: false)
            case "macdef":
                lexer.skipMacro()
            default:
                break
            }
        }
        self.entries = entries
    }

    /// The credentials of the first entry for `host` (compared without regard to case), else of the first
    /// `default` entry; `nil` when neither exists or the entry has neither login nor password.
    public func credentials(forHost host: String) -> Credentials? {
        let host = host.lowercased()
        let entry =
            self.entries.first { $0.machine?.lowercased() == host } ?? self.entries.first { $0.machine == nil }
        guard let entry, entry.login != nil || entry.password != nil else { return nil }
        return Credentials(user: entry.login ?? "", password: entry.password ?? "")
    }

    /// Splits the file into tokens.
    private struct Lexer {
        let bytes: [UInt8]
        var index = 0

        private static func isSpace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == 0x0B || byte == 0x0C
        }

        /// The next token; where a keyword is expected, `#` comments out the rest of the line.
        mutating func next(keyword: Bool) -> String? {
            while true {
                while self.index < self.bytes.count, Self.isSpace(self.bytes[self.index]) { self.index += 1 }
                guard self.index < self.bytes.count else { return nil }
                guard keyword, self.bytes[self.index] == UInt8(ascii: "#") else { break }
                self.skipLine()
            }
            if self.bytes[self.index] == UInt8(ascii: "\"") {
                return self.quoted()
            }
            let start = self.index
            while self.index < self.bytes.count, !Self.isSpace(self.bytes[self.index]) { self.index += 1 }
            return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        }

        /// A quoted token, from its opening quote to the closing one (or the end of the file).
        private mutating func quoted() -> String {
            self.index += 1
            var value: [UInt8] = []
            while self.index < self.bytes.count {
                let byte = self.bytes[self.index]
                self.index += 1
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\"), self.index < self.bytes.count {
                    let escaped = self.bytes[self.index]
                    self.index += 1
                    switch escaped {
                    case UInt8(ascii: "n"): value.append(0x0A)
                    case UInt8(ascii: "r"): value.append(0x0D)
                    case UInt8(ascii: "t"): value.append(0x09)
                    default: value.append(escaped)
                    }
                } else {
                    value.append(byte)
                }
            }
            return String(decoding: value, as: UTF8.self)
        }

        private mutating func skipLine() {
            while self.index < self.bytes.count, self.bytes[self.index] != 0x0A { self.index += 1 }
            if self.index < self.bytes.count { self.index += 1 }
        }

        /// Skips `macdef`'s name and body: the rest of its line, then every line up to a blank one.
        mutating func skipMacro() {
            self.skipLine()
            while self.index < self.bytes.count {
                let start = self.index
                self.skipLine()
                let line = self.bytes[start..<self.index]
                if line.allSatisfy(Self.isSpace) { return }
            }
        }
    }
}
