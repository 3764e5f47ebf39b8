import DownpourTestSupport
import Foundation
import Testing

@testable import Downpour

/// ``AssembledFile``: written from its start, synced, then named; a write permit withdrawn during the sync stops it
/// before the name.
@Suite struct AssembledFileTests {
    @Test("longer than the writeback chunk, in parts: named whole, with its mark")
    func writtenWhole() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let content = makeTestContent(count: Int(AssembledFile.writebackChunk) * 2 + 12_345, seed: 91)
        let file = try AssembledFile(locking: directory.file("out.ts.part"))
        for start in stride(from: 0, to: content.count, by: 1 << 20) {
            try file.append(content[start..<min(start + (1 << 20), content.count)])
        }
        #expect(file.count == Int64(content.count))
        try file.commit(to: directory.file("out.ts"), replacing: false, mark: "00000000000000aa hls")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.file("out.ts")))) == content)
        #expect(AssembledFile.committed(directory.file("out.ts"), mark: "00000000000000aa hls") == Int64(content.count))
        #expect(directory.contents() == ["out.ts"])
    }

    @Test("the permit withdrawn while it synced: not named, the .part left whole for the next writer")
    func stoppedBeforeTheName() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let file = try AssembledFile(locking: directory.file("out.ts.part"))
        try file.append(Array("whole video".utf8))
        #expect {
            try file.commit(to: directory.file("out.ts"), replacing: false) { () throws(DownloadError) in
                throw .superseded
            }
        } throws: {
            ($0 as? DownloadError)?.code == .superseded
        }
        file.close()
        #expect(directory.contents() == ["out.ts.part"])
        #expect(FileManager.default.contents(atPath: directory.file("out.ts.part")) == Data("whole video".utf8))
    }
}
