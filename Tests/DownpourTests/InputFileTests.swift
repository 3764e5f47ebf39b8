import Testing

@testable import Downpour
@testable import DownpourAria2

@Suite("aria2 input files")
struct InputFileTests {
    @Test("a realistic file: comments, blank lines, CRLF, BOM, mirrors, options, repeated headers")
    func realisticFile() throws {
        let lines = [
            "\u{FEFF}# Downloads for tonight",  // 1
            "",  // 2
            "https://a.example/disk.iso\thttps://b.example/disk.iso\t  https://c.example/disk.iso  ",  // 3
            "  dir=/srv/images",  // 4
            "\tout = disk-1.2.iso ",  // 5
            "  header=Authorization: Bearer abc=def",  // 6
            "    # an indented comment",  // 7
            "  header=X-Trace: 1",  // 8
            "  checksum=sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  // 9
            "   \t  ",  // 10
            "  referer=",  // 11
            "#https://commented.example/out.bin",  // 12
            "https://example.com/notes.txt\t \t\thttps://mirror.example/notes.txt\t",  // 13
            "   ",  // 14
        ]
        let text = lines.joined(separator: "\r\n") + "\r\n"
        let file = try InputFile(parsing: text)

        #expect(file.entries.count == 2)
        let disk = try #require(file.entries.first)
        #expect(disk.line == 3)
        #expect(
            disk.uris == ["https://a.example/disk.iso", "https://b.example/disk.iso", "https://c.example/disk.iso"]
        )
        #expect(
            disk.options == [
                .init(name: "dir", value: "/srv/images", line: 4),
                .init(name: "out", value: "disk-1.2.iso", line: 5),
                .init(name: "header", value: "Authorization: Bearer abc=def", line: 6),
                .init(name: "header", value: "X-Trace: 1", line: 8),
                .init(
                    name: "checksum",
                    value: "sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                    line: 9
                ),
                .init(name: "referer", value: "", line: 11),
            ]
        )
        #expect(disk.values("header") == ["Authorization: Bearer abc=def", "X-Trace: 1"])
        #expect(disk.value("header") == "X-Trace: 1")
        #expect(disk.value("out") == "disk-1.2.iso")
        #expect(disk.value("referer") == "")
        #expect(disk.value("Out") == nil, "names are compared exactly")
        #expect(disk.values("split") == [])

        let notes = file.entries[1]
        #expect(notes.uris == ["https://example.com/notes.txt", "https://mirror.example/notes.txt"])
        #expect(notes.options == [])
        #expect(notes.line == 13)
    }

    @Test("line endings, a BOM and empty input")
    func lineEndings() throws {
        let expected = InputFile(entries: [
            .init(uris: ["http://x/a"], options: [.init(name: "out", value: "a", line: 2)], line: 1),
            .init(uris: ["http://x/b"], line: 3),
        ])
        #expect(try InputFile(parsing: "http://x/a\n  out=a\nhttp://x/b") == expected)
        #expect(try InputFile(parsing: "http://x/a\r\n  out=a\r\nhttp://x/b\r\n") == expected)
        #expect(try InputFile(parsing: "\u{FEFF}http://x/a\r\n\tout=a\nhttp://x/b\n") == expected)
        #expect(try InputFile(parsing: "").entries == [])
        #expect(try InputFile(parsing: "\u{FEFF}").entries == [])
        #expect(try InputFile(parsing: "# only a comment\r\n\r\n  \t\r\n").entries == [])
    }

    @Test("an option line before any URI line is an error naming its line")
    func optionBeforeEntry() {
        let error = #expect(throws: InputFile.ParseError.self) {
            try InputFile(parsing: "# header comment\r\n\r\n  out=file.iso\r\nhttp://x/a\r\n")
        }
        #expect(error?.line == 3)
        #expect(error?.description.hasPrefix("line 3: ") == true)
        #expect(error?.message.contains("URI") == true)
    }

    @Test("an option line without '=' is an error naming its line")
    func optionWithoutEquals() {
        let error = #expect(throws: InputFile.ParseError.self) {
            try InputFile(parsing: "http://x/a\n  out=a\n\n  https://mirror.example/a\n")
        }
        #expect(error?.line == 4)
        #expect(error?.description.hasPrefix("line 4: ") == true)
        #expect(error?.message.contains("https://mirror.example/a") == true, "quotes the line")
        #expect(error?.message.contains("name=value") == true, "says what to write instead")
    }

    @Test("an option line with an empty name is an error naming its line")
    func optionWithEmptyName() {
        let error = #expect(throws: InputFile.ParseError.self) {
            try InputFile(parsing: "\u{FEFF}http://x/a\r\n\t out=a\r\n# c\r\n  \t= value\r\n")
        }
        #expect(error?.line == 4)
        #expect(error?.description.hasPrefix("line 4: ") == true)
        #expect(error?.message.contains("name=value") == true)
    }

    @Test("the first bad line is the one reported")
    func firstErrorWins() {
        let error = #expect(throws: InputFile.ParseError.self) {
            try InputFile(parsing: "http://x/a\n  =a\n  b\n")
        }
        #expect(error == InputFile.ParseError(line: 2, message: error?.message ?? ""))
    }
}
