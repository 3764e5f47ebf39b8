import Downpour

/// Options in aria2's configuration-file format (`aria2c --conf-path FILE`): one `name=value` a line, names without
/// the leading `--`, `#` comments and blank lines, `\r\n` line ends and a UTF-8 byte order mark accepted.
///
/// ```
/// # ~/.aria2/aria2.conf
/// dir=/srv/downloads
/// continue=true
/// max-concurrent-downloads=3
/// on-download-complete=/usr/local/bin/notify-done
/// ```
///
/// ``checked()`` reads the options through the one table (``Aria2Option``): a name Downpour does not have is
/// returned apart (to be named in one notice and ignored, so that an aria2 user's file starts as it is), a bad value
/// is an error naming its line.
public struct ConfigurationFile: Sendable, Hashable {
    /// The options in file order, each with its line number; a name may repeat (`header`).
    public var options: [InputFile.Option]

    public init(options: [InputFile.Option]) {
        self.options = options
    }

    /// Parses the text of a configuration file.
    ///
    /// - Throws: ``InputFile/ParseError`` for a line that is neither blank, a comment nor `name=value`.
    public init(parsing text: String) throws(InputFile.ParseError) {
        var options: [InputFile.Option] = []
        var scalars = Substring(text).unicodeScalars
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        for (index, scalarLine) in scalars.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(scalarLine)
            if line.unicodeScalars.last == "\r" { line.unicodeScalars.removeLast() }
            let content = line.trimmingSpaces()
            if content.isEmpty || content.first == "#" { continue }
            guard let equals = content.firstIndex(of: "="), content.startIndex < equals else {
                throw InputFile.ParseError(
                    line: index + 1,
                    message: "\"\(content.prefix(60))\" is not an option: write one NAME=VALUE a line, such as "
                        + "\"dir=/srv/downloads\", or start the line with '#' for a comment."
                )
            }
            var name = content[..<equals].trimmingSpaces()
            if name.hasPrefix("--") { name = name.dropFirst(2) }
            let value = content[content.index(after: equals)...].trimmingSpaces()
            options.append(InputFile.Option(name: String(name), value: String(value), line: index + 1))
        }
        self.options = options
    }

    /// The file's options checked by the table: those Downpour has, with their values written as aria2 writes them,
    /// and the names of those it has not, in file order, each once.
    ///
    /// - Throws: ``DownloadError/Code/invalidRequest`` for the first bad value, its message starting with
    ///   `line N:`.
    public func checked() throws(DownloadError) -> (options: [(option: Aria2Option, value: String)], unknown: [String])
    {
        var known: [(option: Aria2Option, value: String)] = []
        var unknown: [String] = []
        for entry in self.options {
            guard let option = Aria2Option.named(entry.name) else {
                if !unknown.contains(entry.name) { unknown.append(entry.name) }
                continue
            }
            do {
                known.append((option, try option.checked(entry.value)))
            } catch {
                throw DownloadError(code: error.code, message: "line \(entry.line): \(error.message)")
            }
        }
        return (known, unknown)
    }
}
