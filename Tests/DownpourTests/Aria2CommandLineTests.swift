import Downpour
import DownpourAria2
import DownpourHLS
import Testing

@Suite("aria2's options on a command line, read through the table")
struct Aria2CommandLineTests {
    /// The options of a parse as `name=value` words, and its operands.
    static func read(_ words: [String], for command: Aria2Option.Commands = .get) throws -> ([String], [String]) {
        let line = try Aria2CommandLine(parsing: words, for: command)
        return (line.options.map { "\($0.option.name)=\($0.value)" }, line.operands)
    }

    @Test(
        "the forms aria2c takes",
        arguments: [
            (["--split=8", "URL"], ["split=8"], ["URL"]),
            (["--split", "8", "URL"], ["split=8"], ["URL"]),
            (["-s", "8"], ["split=8"], []),
            (["-x8", "URL"], ["max-connection-per-server=8"], ["URL"]),
            (["--continue", "URL"], ["continue=true"], ["URL"]),
            (["--continue=false"], ["continue=false"], []),
            (["--continue", "false", "URL"], ["continue=false"], ["URL"]),
            (["-c"], ["continue=true"], []),
            (["-qc", "URL"], ["quiet=true", "continue=true"], ["URL"]),
            (["-qx", "4"], ["quiet=true", "max-connection-per-server=4"], []),
            (["-qv", "URL"], ["quiet=true", "verbose=true"], ["URL"]),
            (["-ovideo.mkv", "-o=a.bin", "-d/home/v"], ["out=video.mkv", "out=a.bin", "dir=/home/v"], []),
            (["--header", "A: 1", "-H", "B: 2"], ["header=A: 1", "header=B: 2"], []),
            (["--out=a=b.bin"], ["out=a=b.bin"], []),
            (["URL1", "--dir", "/d", "URL2"], ["dir=/d"], ["URL1", "URL2"]),
            (["-", "-i", "-"], ["input-file=-"], ["-"]),
            (["--", "--split=8", "-x"], [], ["--split=8", "-x"]),
        ] as [([String], [String], [String])]
    )
    func forms(words: [String], options: [String], operands: [String]) throws {
        let (read, rest) = try Self.read(words)
        #expect(read == options)
        #expect(rest == operands)
    }

    @Test(
        "Downpour's earlier spellings are aliases of the table's options",
        arguments: [
            (["--connections", "8"], "max-connection-per-server=8"),
            (["--overwrite"], "allow-overwrite=true"),
            (["--insecure"], "check-certificate=false"),
            (["--no-resume"], "continue=false"),
            (["--lowest-speed", "10K"], "lowest-speed-limit=10K"),
            (["--output", "a.bin"], "out=a.bin"),
        ]
    )
    func aliases(words: [String], option: String) throws {
        #expect(try Self.read(words).0 == [option])
    }

    @Test(
        "a mistake is an error that names the option",
        arguments: [
            (["--bogus"], "Unknown option '--bogus'"),
            (["-Z"], "Unknown option '-Z'"),
            (["--split"], "'--split' needs a value"),
            (["-x"], "'-x' needs a value"),
            (["--insecure=true"], "'--insecure' takes no value"),
            (["--rpc-secret=s"], "one of downpour daemon, not of downpour get"),
            (["--gid=0123456789abcdef"], "given with each download"),
            (["--save-cookies=c.txt"], nil),
        ] as [([String], String?)]
    )
    func mistakes(words: [String], message: String?) throws {
        // `save-cookies` is get's: fine for get, refused by the daemon.
        let command: Aria2Option.Commands = message == nil ? .daemon : .get
        let error = #expect(throws: DownloadError.self) { try Aria2CommandLine(parsing: words, for: command) }
        #expect(error?.code == .invalidRequest)
        #expect(
            error?.message.contains(message ?? "one of downpour get, not of downpour daemon") == true,
            "\(error?.message ?? "")"
        )
    }

    @Test("every HLS option is on both command lines, and in the settings it sets", arguments: [true, false])
    func hlsOptions(daemon: Bool) throws {
        let words = [
            "--media=hls", "--media-video=720p", "--media-audio=none", "--media-subtitles=en,de",
            "--media-record-time=90", "URL",
        ]
        let line = try Aria2CommandLine(parsing: words, for: daemon ? .daemon : .get)
        #expect(
            line.options.map(\.option.name) == words.dropLast().map { String($0.dropFirst(2).prefix { $0 != "=" }) }
        )
        var settings = Aria2DownloadSettings()
        for parsed in line.options { try parsed.option.apply(parsed.value, to: &settings) }
        let playlist = settings.playlistOptions
        #expect(playlist.video == HLSVideoChoice("720p") && !playlist.audio)
        #expect(playlist.subtitles == .languages(["en", "de"]) && playlist.recordTime == .seconds(90))
    }

    @Test("every name on the command line (long, alias, short) belongs to one option")
    func namesAreUnique() {
        let names = Aria2Option.commandLineNames
        #expect(Set(names).count == names.count, "\(names.filter { name in names.filter { $0 == name }.count > 1 })")
        // Each command takes the download options (the HLS ones too); the server's are the daemon's, the cookie
        // files get's.
        for option in Aria2Option.all where option.scope == .download {
            #expect(option.commands == .both, "\(option)")
        }
        #expect(Aria2Option.rpcListenPort.commands == .daemon)
        #expect(Aria2Option.loadCookies.commands == .get)
        #expect(Aria2Option.gid.commands.isEmpty)
    }
}
