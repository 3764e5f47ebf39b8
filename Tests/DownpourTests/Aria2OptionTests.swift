import Downpour
import DownpourAria2
import Testing

@Suite("The option table, aria2's configuration file and its session file")
struct Aria2OptionTests {
    @Test("each option is in the table once, and every download option reads back what it applied")
    func tableIsConsistent() throws {
        let names = Aria2Option.all.map(\.name) + Aria2Option.internalOptions.map(\.name)
        #expect(Set(names).count == names.count)
        for option in Aria2Option.all {
            #expect(Aria2Option.named(option.name)?.name == option.name)
            #expect(!option.help.isEmpty, "\(option) has no help")
        }
        // A download option's default is the configuration's own, read back.
        let defaults = Aria2DownloadSettings(directory: "/d")
        #expect(Aria2Option.dir.defaultValue(in: defaults) == "/d")
        #expect(Aria2Option.split.defaultValue(in: defaults) == "4")
        #expect(Aria2Option.minSplitSize.defaultValue(in: defaults) == "1048576")
        #expect(Aria2Option.out.defaultValue(in: defaults) == nil)
        #expect(Aria2Option.maxConcurrentDownloads.defaultValue(in: defaults) == "5")
    }

    @Test("aria2's http-no-cache and auto-save-interval are honoured: the cache headers, the journal's interval")
    func honouredAria2Options() throws {
        var options = Aria2DownloadSettings(directory: "/d")
        #expect(Aria2Option.httpNoCache.defaultValue(in: options) == "false")
        #expect(Aria2Option.autoSaveInterval.defaultValue(in: options) == "1")
        try options.apply(name: "http-no-cache", value: "true")
        try options.apply(name: "auto-save-interval", value: "60")
        #expect(Aria2Option.httpNoCache.defaultValue(in: options) == "true")
        #expect(Aria2Option.autoSaveInterval.defaultValue(in: options) == "60")
        let request = try options.request(uris: ["http://example.com/f"])
        let headers = request.configuration.headers.map { "\($0.name): \($0.value)" }
        #expect(headers == ["Cache-Control: no-cache", "Pragma: no-cache"])
        #expect(request.configuration.journalInterval == .seconds(60))
        // A header of the user's own is not doubled.
        var own = Aria2DownloadSettings(directory: "/d")
        try own.apply(name: "header", value: "Cache-Control: max-age=0")
        try own.apply(name: "http-no-cache", value: "true")
        let names = try own.request(uris: ["http://example.com/f"]).configuration.headers.map(\.name)
        #expect(names == ["Cache-Control", "Pragma"])
    }

    @Test(
        "values are checked and written back as aria2 writes them",
        arguments: [
            ("split", "8", "8"), ("max-download-limit", "1M", "1048576"), ("max-download-limit", "0", "0"),
            ("min-split-size", "20M", "20971520"), ("continue", "TRUE", "true"), ("remote-time", "false", "false"),
            ("timeout", "60", "60"), ("retry-wait", "0.5", "0.5"), ("follow-metalink", "mem", "mem"),
            ("header", "X-A: 1", "X-A: 1"), ("max-concurrent-downloads", "3", "3"),
            ("rpc-listen-port", "6801", "6801"), ("save-session-interval", "60", "60"),
        ]
    )
    func checked(name: String, value: String, written: String) throws {
        let option = try #require(Aria2Option.named(name))
        #expect(try option.checked(value) == written)
    }

    @Test(
        "a bad value is refused with a message naming the option",
        arguments: [
            ("split", "0"), ("split", "many"), ("max-download-limit", "1X"), ("min-split-size", "100"),
            ("continue", "yes"), ("timeout", "-1"), ("header", "no colon"), ("header", "Host: x"),
            ("all-proxy", "ftp://x"), ("checksum", "sha-256=zz"), ("out", "../escape"), ("follow-metalink", "maybe"),
            ("max-concurrent-downloads", "0"), ("rpc-listen-port", "70000"), ("auto-save-interval", "0"),
            ("http-no-cache", "sometimes"),
        ]
    )
    func refused(name: String, value: String) throws {
        let option = try #require(Aria2Option.named(name))
        #expect {
            try option.checked(value)
        } throws: { error in
            (error as? DownloadError)?.code == .invalidRequest
                && (error as? DownloadError)?.message.contains("'\(name)'") == true
        }
    }

    @Test(
        "a configuration file: comments, blank lines, CRLF, a byte order mark; unknown names apart; bad values by line"
    )
    func configurationFile() throws {
        let text =
            "\u{FEFF}# aria2.conf\r\n\r\ndir=/srv/dl\r\n  continue = true\nbt-max-peers=55\n--split=8\n"
            + "header=A: 1\nheader=B: 2\ndisk-cache=32M\nbt-max-peers=10\nmax-download-limit=1M\n"
        let file = try ConfigurationFile(parsing: text)
        #expect(file.options.map(\.line) == [3, 4, 5, 6, 7, 8, 9, 10, 11])
        let checked = try file.checked()
        #expect(checked.unknown == ["bt-max-peers", "disk-cache"])
        #expect(
            checked.options.map(\.option.name) == [
                "dir", "continue", "split", "header", "header", "max-download-limit",
            ]
        )
        #expect(checked.options.map(\.value) == ["/srv/dl", "true", "8", "A: 1", "B: 2", "1048576"])

        #expect(throws: InputFile.ParseError.self) { try ConfigurationFile(parsing: "dir=/a\nnot an option\n") }
        #expect(throws: InputFile.ParseError.self) { try ConfigurationFile(parsing: "=value\n") }
        let bad = try ConfigurationFile(parsing: "dir=/a\n\nsplit=zero\n")
        #expect {
            try bad.checked()
        } throws: { error in
            (error as? DownloadError)?.message.hasPrefix("line 3: The option 'split'") == true
        }
    }

    @Test("a session file in aria2's form reads back as the same downloads")
    func sessionRoundTrip() throws {
        let entries = [
            SessionFile.Entry(
                uris: ["http://a.example/x.iso", "http://b.example/x.iso"],
                gid: "2089b05ecca3d829",
                isPaused: true,
                options: [("dir", "/srv"), ("header", "A: 1"), ("header", "B: 2"), ("pause", "true")]
            ),
            SessionFile.Entry(uris: ["http://c.example/y"], gid: "d2703803b52216d1", isPaused: false, options: []),
        ]
        let text = SessionFile.text(of: entries)
        #expect(
            text == "http://a.example/x.iso\thttp://b.example/x.iso\t\n gid=2089b05ecca3d829\n pause=true\n dir=/srv\n"
                + " header=A: 1\n header=B: 2\nhttp://c.example/y\t\n gid=d2703803b52216d1\n"
        )
        let read = try InputFile(parsing: text)
        #expect(read.entries.map(\.uris) == entries.map(\.uris))
        #expect(read.entries.map { $0.value("gid") } == ["2089b05ecca3d829", "d2703803b52216d1"])
        #expect(read.entries[0].value("pause") == "true")
        #expect(read.entries[0].values("header") == ["A: 1", "B: 2"])
    }
}
