import Testing

@testable import DownpourHLS

/// ``WebVTTMerger`` as a table: segments in, one WebVTT file out.
@Suite struct WebVTTMergerTests {
    @Test("one header; the cues of every segment in order; a cue repeated across the boundary once")
    func joins() {
        let first = "WEBVTT\n\n1\n00:00:01.000 --> 00:00:02.000\nOne\n\n00:00:05.000 --> 00:00:07.000\nSpans\n"
        let second =
            "\u{FEFF}WEBVTT\r\n\r\n00:00:05.000 --> 00:00:07.000\r\nSpans\r\n\r\n00:00:08.000 --> 00:00:09.000\r\nTwo\r\n"
        #expect(
            WebVTTMerger.merge([first, second]) == """
                WEBVTT

                1
                00:00:01.000 --> 00:00:02.000
                One

                00:00:05.000 --> 00:00:07.000
                Spans

                00:00:08.000 --> 00:00:09.000
                Two

                """
        )
    }

    @Test("a segment whose X-TIMESTAMP-MAP differs has its cues moved onto the first one's clock")
    func timestampMaps() throws {
        let first = "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\n00:00:01.000 --> 00:00:02.000\nA\n"
        // 90,000 ticks later on the MPEG-2 clock, the same local zero: its cues come one second later.
        let second =
            "WEBVTT\nX-TIMESTAMP-MAP=LOCAL:00:00:00.000,MPEGTS:990000\n\n00:00:01.000 --> 00:00:02.500 line:0\nB\n"
        #expect(
            WebVTTMerger.merge([first, second]) == """
                WEBVTT
                X-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000

                00:00:01.000 --> 00:00:02.000
                A

                00:00:02.000 --> 00:00:03.500 line:0
                B

                """
        )
        // The 33-bit clock wrapped between the two: still one second later, not 26 hours earlier.
        let before = try #require(
            WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:8589924592,LOCAL:00:00:00.000")
        )
        let after = try #require(WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:80000,LOCAL:00:00:00.000"))
        #expect(WebVTTMerger.shift(from: after, to: before) == 1000)
        // A segment without a map is at MPEGTS:0, LOCAL:0 (RFC 8216, 3.5); 1 ms is rounded, not cut.
        let rounded = try #require(WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:89,LOCAL:00:00:00.000"))
        #expect(WebVTTMerger.shift(from: rounded, to: .zero) == 1)
        #expect(WebVTTMerger.shift(from: .zero, to: before) == 111)
    }

    @Test("what a hostile server sends is refused or bounded, never a crash")
    func hostile() {
        // Overflowing numbers, negative ticks, fields that are not two digits: no map, no time.
        #expect(WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:9999999999999:00:00.000") == nil)
        #expect(WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:-5,LOCAL:00:00:00.000") == nil)
        #expect(
            WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:99999999999999999999999,LOCAL:00:00.000") == nil
        )
        #expect(
            WebVTTMerger.TimestampMap(line: "X-TIMESTAMP-MAP=MPEGTS:9000000000000000000,LOCAL:00:00.000")?.mpegts
                == 3_800_301_568
        )  // 9,000,000,000,000,000,000 modulo 2^33
        #expect(WebVTTMerger.milliseconds("1:2:3.456") == nil)
        #expect(WebVTTMerger.milliseconds("+1:02.000") == nil)
        #expect(WebVTTMerger.milliseconds("99999999:00:00.000") == nil)
        let huge =
            "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:9000000000000000000,LOCAL:9999999:59:59.999\n\n"
            + "9999999:59:59.999 --> 9999999:59:59.999\nEnd\n"
        let merged = WebVTTMerger.merge(["WEBVTT\n\n00:01.000 --> 00:02.000\nA\n", huge, "garbage", ""])
        #expect(merged.hasPrefix("WEBVTT\n\n00:01.000 --> 00:02.000\nA\n"))
    }

    @Test("a cue identifier used by an earlier segment is dropped; tabs around the arrow are read")
    func identifiers() {
        let first = "WEBVTT\n\n1\n00:00:01.000 --> 00:00:02.000\nA\n"
        let second =
            "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:90000,LOCAL:00:00:00.000\n\n1\n00:00:01.000\t-->\t00:00:02.000\nB\n"
        #expect(
            WebVTTMerger.merge([first, second]) == """
                WEBVTT

                1
                00:00:01.000 --> 00:00:02.000
                A

                00:00:02.000 --> 00:00:03.000
                B

                """
        )
    }

    @Test("STYLE and NOTE blocks only from the first segment; times with hours, and long ones, read and written")
    func blocksAndTimes() {
        let first = "WEBVTT\n\nSTYLE\n::cue { color: yellow }\n\n00:59.000 --> 01:00:01.250\nLong\n"
        let second = "WEBVTT\n\nSTYLE\n::cue { color: red }\n\nNOTE a comment\n\n01:00:02.000 --> 01:00:03.000\nLater\n"
        let merged = WebVTTMerger.merge([first, second])
        #expect(merged.contains("color: yellow") && !merged.contains("color: red") && !merged.contains("NOTE"))
        #expect(merged.contains("00:59.000 --> 01:00:01.250\nLong") && merged.contains("01:00:02.000 --> 01:00:03.000"))
        #expect(WebVTTMerger.milliseconds("01:00:01.250") == 3_601_250)
        #expect(WebVTTMerger.milliseconds("00:61.000") == nil)
        #expect(WebVTTMerger.format(3_601_250) == "01:00:01.250")
        #expect(WebVTTMerger.move("00:00:01.000 --> 00:00:02.000", by: -2000) == "00:00:00.000 --> 00:00:00.000")
        #expect(WebVTTMerger.merge([]) == "WEBVTT\n")
    }

    @Test("--media-subtitles: none, all, or languages; en takes en-US")
    func choices() {
        #expect(HLSSubtitleChoice("none") == HLSSubtitleChoice.none)
        #expect(HLSSubtitleChoice("ALL") == .all)
        #expect(HLSSubtitleChoice("en, pt-BR") == .languages(["en", "pt-br"]))
        #expect(HLSSubtitleChoice("en;rm -rf") == nil)
        #expect(HLSSubtitleChoice("") == nil)
    }
}
