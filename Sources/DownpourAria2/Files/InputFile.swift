import Downpour

/// A list of downloads in aria2's input-file format (what `aria2c -i FILE` reads).
///
/// Each line that does not start with whitespace is one download: one or more URIs separated by TAB characters,
/// all mirrors of the same file. The indented `name=value` lines below it are that download's options. Lines whose
/// first non-blank character is `#` are comments; blank lines are ignored. `\r\n` line ends and a UTF-8 byte order
/// mark are accepted.
///
/// ```
/// # nightly images
/// https://a.example/disk.iso<TAB>https://b.example/disk.iso
///   out=disk.iso
///   header=Authorization: Bearer abc
///   header=X-Trace: 1
/// https://example.com/notes.txt
/// ```
///
/// The parser does not decide which option names are valid: it keeps every option, in file order and with its line
/// number, so the caller can check them and point at the line of a bad one.
public struct InputFile: Sendable, Hashable {
    /// One indented `name=value` line.
    public struct Option: Sendable, Hashable {
        /// The text before the first `=`, without surrounding spaces.
        public var name: String
        /// The text after the first `=`, without surrounding spaces; may be empty.
        public var value: String
        /// The 1-based line number in the file.
        public var line: Int

        public init(name: String, value: String, line: Int) {
            self.name = name
            self.value = value
            self.line = line
        }
    }

    /// One download: its URIs and the options written below them.
    public struct Entry: Sendable, Hashable {
        /// Mirrors of one file, in the order written; at least one.
        public var uris: [String]
        /// The options, in file order; a name may repeat (several `header` lines, for example).
        public var options: [Option]
        /// The 1-based line number of the URI line.
        public var line: Int

        public init(uris: [String], options: [Option] = [], line: Int) {
            self.uris = uris
            self.options = options
            self.line = line
        }

        /// The values of option `name`, in order; names are compared exactly.
        public func values(_ name: String) -> [String] {
            self.options.filter { $0.name == name }.map(\.value)
        }

        /// The last value of option `name`, or `nil` when the entry has no such option.
        public func value(_ name: String) -> String? {
            self.options.last { $0.name == name }?.value
        }
    }

    /// The downloads, in file order.
    public var entries: [Entry]

    public init(entries: [Entry]) {
        self.entries = entries
    }

    /// Parses the text of an input file.
    ///
    /// ```swift
    /// let file = try InputFile(parsing: "https://example.com/a.iso\n  out=b.iso\n")
    /// file.entries[0].uris           // ["https://example.com/a.iso"]
    /// file.entries[0].value("out")   // "b.iso"
    /// ```
    ///
    /// - Throws: `InputFile.ParseError` for the first line that cannot be read: an indented option line before any
    ///   URI line, an option line without `=`, or one with nothing before the `=`.
    public init(parsing text: String) throws(InputFile.ParseError) {
        var entries: [Entry] = []
        var scalars = Substring(text).unicodeScalars
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        let lines = scalars.split(separator: "\n", omittingEmptySubsequences: false)
        for (index, scalarLine) in lines.enumerated() {
            let lineNumber = index + 1
            var line = Substring(scalarLine)
            if line.unicodeScalars.last == "\r" { line.unicodeScalars.removeLast() }
            let content = line.trimmingSpaces()
            if content.isEmpty || content.first == "#" { continue }

            guard let first = line.unicodeScalars.first, first == " " || first == "\t" else {
                let uris = content.split(separator: "\t").map { String($0.trimmingSpaces()) }.filter { !$0.isEmpty }
                entries.append(Entry(uris: uris, line: lineNumber))
                continue
            }
            guard !entries.isEmpty else {
                throw ParseError(
                    line: lineNumber,
                    message: "This indented line is an option, but no URI line comes before it. Write the URI on an "
                        + "unindented line first, and indent only its name=value options below it."
                )
            }
            guard let equals = content.firstIndex(of: "=") else {
                throw ParseError(
                    line: lineNumber,
                    message: "The indented line \"\(Self.excerpt(content))\" has no '='. Indented lines are options "
                        + "of the URI above, written as name=value (such as \"  out=file.iso\"); a URI must start "
                        + "at the beginning of its line."
                )
            }
            let name = content[..<equals].trimmingSpaces()
            guard !name.isEmpty else {
                throw ParseError(
                    line: lineNumber,
                    message: "This option has no name before '='. Write it as name=value, such as \"  out=file.iso\"."
                )
            }
            let value = content[content.index(after: equals)...].trimmingSpaces()
            entries[entries.count - 1].options.append(
                Option(name: String(name), value: String(value), line: lineNumber)
            )
        }
        self.entries = entries
    }

    /// The start of a line, short enough to quote in a message.
    private static func excerpt(_ text: Substring) -> String {
        let limit = 60
        guard text.count > limit else { return String(text) }
        return String(text.prefix(limit)) + "…"
    }
}

extension InputFile {
    /// A line of an input file that cannot be read.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The 1-based line number.
        public var line: Int
        /// What is wrong and what to write instead.
        public var message: String

        public init(line: Int, message: String) {
            self.line = line
            self.message = message
        }

        /// `line N: message`.
        public var description: String {
            "line \(self.line): \(self.message)"
        }
    }
}
