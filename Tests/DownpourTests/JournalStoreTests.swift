import DownpourTestSupport
import Foundation
import Testing

@testable import Downpour

/// ``JournalStore`` as a table: what is on disk before, the steps taken, what `load()` says and which files are
/// left. Real files in a scratch directory; nothing is timed.
@Suite("JournalStore")
struct JournalStoreTests {
    static let journal = ResumeJournal(
        sourceURL: "https://example.com/a.iso",
        finalURL: "https://example.com/a.iso",
        length: 1_000,
        etag: "\"v1\"",
        lastModified: nil,
        done: ByteRangeSet([0..<400])
    )
    static let newer = ResumeJournal(
        sourceURL: "https://example.com/a.iso",
        finalURL: "https://example.com/a.iso",
        length: 1_000,
        etag: "\"v1\"",
        lastModified: nil,
        done: ByteRangeSet([0..<900])
    )

    /// What is in the directory before the steps.
    enum Before: Sendable, CustomStringConvertible {
        case nothing
        case journal(ResumeJournal)
        /// A journal, and the temporary file a crash in the middle of a save left beside it.
        case journalAndLeftover(ResumeJournal)
        case garbage
        /// A directory where the journal should be.
        case directory

        var description: String {
            switch self {
            case .nothing: "nothing"
            case .journal: "a journal"
            case .journalAndLeftover: "a journal and a crash's .tmp"
            case .garbage: "garbage"
            case .directory: "a directory"
            }
        }
    }

    enum Step: Sendable, CustomStringConvertible {
        case load
        case save(ResumeJournal)
        case remove
        /// Another writer puts a journal there behind this store's back.
        case writtenElsewhere(ResumeJournal)

        var description: String {
            switch self {
            case .load: "load"
            case .save: "save"
            case .remove: "remove"
            case .writtenElsewhere: "written elsewhere"
            }
        }
    }

    /// What the last `load()` of the steps found.
    enum Found: Equatable, Sendable {
        case missing
        case loaded(ResumeJournal)
        /// Unreadable, with a reason that contains this.
        case unreadable(String)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let before: Before
        let steps: [Step]
        let found: Found
        /// The journal's files left afterwards (`.downpour`, `.downpour.tmp`).
        let left: [String]
        let note: String

        var testDescription: String { "\(self.note): \(self.before), then \(self.steps)" }
    }

    static let rows: [Row] = [
        Row(before: .nothing, steps: [.load], found: .missing, left: [], note: "no journal"),
        Row(before: .journal(journal), steps: [.load], found: .loaded(journal), left: [".downpour"], note: "read"),
        Row(
            before: .nothing,
            steps: [.save(journal), .load],
            found: .loaded(journal),
            left: [".downpour"],
            note: "a save is read back"
        ),
        Row(
            before: .journal(journal),
            steps: [.save(newer), .load],
            found: .loaded(newer),
            left: [".downpour"],
            note: "a save replaces the journal"
        ),
        Row(
            before: .journalAndLeftover(journal),
            steps: [.load],
            found: .loaded(journal),
            left: [".downpour", ".downpour.tmp"],
            note: "a crash's leftover is not read"
        ),
        Row(
            before: .journalAndLeftover(journal),
            steps: [.save(newer), .load],
            found: .loaded(newer),
            left: [".downpour"],
            note: "the next save takes the leftover's place"
        ),
        Row(
            before: .journalAndLeftover(journal),
            steps: [.remove, .load],
            found: .missing,
            left: [],
            note: "remove takes the leftover too"
        ),
        Row(
            before: .garbage,
            steps: [.load],
            found: .unreadable("not a Downpour journal"),
            left: [".downpour"],
            note: "garbage is unreadable, and left for the caller to judge"
        ),
        Row(
            before: .directory,
            steps: [.load],
            found: .unreadable("cannot read it"),
            left: [".downpour"],
            note: "a directory in the way"
        ),
        Row(
            before: .nothing,
            steps: [.load, .writtenElsewhere(journal), .remove, .load],
            found: .loaded(journal),
            left: [".downpour"],
            note: "once a load found none, remove does not look (the store's own saves are the only ones)"
        ),
        Row(
            before: .nothing,
            steps: [.load, .save(journal), .remove, .load],
            found: .missing,
            left: [],
            note: "a save makes remove look again"
        ),
    ]

    @Test("load, save and remove", arguments: rows)
    func table(_ row: Row) throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let partPath = directory.file("a.iso.part")
        // The synced journal alone: the unsynced one has its own test below.
        let store = JournalStore(partPath: partPath, bootID: nil)
        switch row.before {
        case .nothing:
            break
        case .journal(let journal):
            try Data(journal.encode()).write(to: URL(fileURLWithPath: store.path))
        case .journalAndLeftover(let journal):
            try Data(journal.encode()).write(to: URL(fileURLWithPath: store.path))
            try Data("downpour-journal 1 half".utf8).write(to: URL(fileURLWithPath: store.path + ".tmp"))
        case .garbage:
            try Data("not a journal at all".utf8).write(to: URL(fileURLWithPath: store.path))
        case .directory:
            try FileManager.default.createDirectory(atPath: store.path, withIntermediateDirectories: false)
        }
        let file = try OutputFile.openLocked(at: partPath)
        defer { file.close() }
        var found: Found?
        for step in row.steps {
            switch step {
            case .load:
                switch store.load() {
                case .missing: found = .missing
                case .loaded(let journal): found = .loaded(journal)
                case .unreadable(let reason): found = .unreadable(reason)
                }
            case .save(let journal):
                try store.save(journal, syncing: file)
            case .remove:
                store.remove()
            case .writtenElsewhere(let journal):
                try Data(journal.encode()).write(to: URL(fileURLWithPath: store.path))
            }
        }
        switch (row.found, found) {
        case (.unreadable(let expected), .unreadable(let reason)):
            #expect(reason.contains(expected), "\(reason)")
        default:
            #expect(found == row.found)
        }
        let left = directory.contents().filter { $0 != "a.iso.part" }.map { String($0.dropFirst("a.iso.part".count)) }
        #expect(left == row.left)
    }

    @Test("the unsynced journal: trusted in the boot that wrote it, never older than the synced one, removed with it")
    func unsynced() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let partPath = directory.file("a.iso.part")
        let store = JournalStore(partPath: partPath, bootID: "boot-a")
        let file = try OutputFile.openLocked(at: partPath)
        defer { file.close() }
        func left() -> [String] {
            directory.contents().filter { $0 != "a.iso.part" }.map { String($0.dropFirst("a.iso.part".count)) }
        }
        func loaded(_ store: JournalStore) -> ResumeJournal? {
            if case .loaded(let journal) = store.load() { return journal }
            return nil
        }

        // Written alone (a run killed before its first sync): trusted in this boot, passed over after a reboot.
        try store.saveUnsynced(Self.journal)
        #expect(left() == [".downpour.unsynced"])
        #expect(loaded(store) == Self.journal)
        #expect(loaded(JournalStore(partPath: partPath, bootID: "boot-b")) == nil)
        #expect(loaded(JournalStore(partPath: partPath, bootID: nil)) == nil)

        // A synced save removes the unsynced one: never older than the synced, and a pause leaves one journal.
        try store.save(Self.journal, syncing: file)
        #expect(left() == [".downpour"])
        #expect(loaded(store) == Self.journal)
        try store.saveUnsynced(Self.newer)
        #expect(left() == [".downpour", ".downpour.unsynced"])
        #expect(loaded(store) == Self.newer)
        #expect(loaded(JournalStore(partPath: partPath, bootID: "boot-b")) == Self.journal)

        // A synced journal written behind this store's back (a run without a boot id, an older Downpour) takes
        // the place of the unsynced one, which followed the synced journal before it.
        var other = Self.journal
        other.done = [[0, 500]]
        try Data(other.encode()).write(to: URL(fileURLWithPath: store.path))
        #expect(left() == [".downpour", ".downpour.unsynced"])
        #expect(loaded(JournalStore(partPath: partPath, bootID: "boot-a")) == other)

        try store.save(Self.journal, syncing: file)
        try store.saveUnsynced(Self.newer)
        try store.save(Self.journal, syncing: file)
        #expect(loaded(store) == Self.journal, "the synced save took the place of the unsynced one")
        #expect(store.records(Self.journal.doneRanges))
        #expect(!store.records(Self.newer.doneRanges))
        try store.saveUnsynced(Self.journal)
        #expect(left() == [".downpour"], "the ranges the synced journal has are not written again unsynced")
        try store.saveUnsynced(Self.newer)
        #expect(store.records(Self.newer.doneRanges))

        // A synced save that fails (here its temporary file cannot be made; a full disk alike) leaves the
        // unsynced journal, the newer record, in place: removing it first would have freed the room the save
        // then takes.
        try FileManager.default.createDirectory(atPath: store.path + ".tmp", withIntermediateDirectories: false)
        #expect(throws: DownloadError.self) { try store.save(Self.newer, syncing: file) }
        try FileManager.default.removeItem(atPath: store.path + ".tmp")
        #expect(left() == [".downpour", ".downpour.unsynced"])
        #expect(loaded(store) == Self.newer)

        // A damaged unsynced journal is passed over for the synced one.
        try Data("downpour-journal 1 half".utf8).write(to: URL(fileURLWithPath: store.unsyncedPath))
        #expect(loaded(store) == Self.journal)

        store.remove()
        #expect(left() == [])
        #expect(PartialFiles.paths(forDestination: directory.file("a.iso")).contains(store.unsyncedPath))
    }
}
