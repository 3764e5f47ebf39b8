import Testing

@testable import Downpour
@testable import DownpourAria2

/// The aria2 options Downpour answers but has no setting for: what counts as the same value, and the refusal.
@Suite struct Aria2FixedOptionTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var value: String
        var accepted: Bool
        var testDescription: String { "\(self.name)=\(self.value)" }
    }

    static let rows: [Row] = [
        Row(name: "file-allocation", value: "falloc", accepted: true),
        Row(name: "file-allocation", value: " FALLOC ", accepted: true),
        Row(name: "file-allocation", value: "prealloc", accepted: false),
        Row(name: "enable-mmap", value: "false", accepted: true),
        Row(name: "enable-mmap", value: "FALSE", accepted: true),
        Row(name: "enable-mmap", value: "true", accepted: false),
        Row(name: "disk-cache", value: "0", accepted: true),
        Row(name: "disk-cache", value: "0M", accepted: true),
        Row(name: "disk-cache", value: "16M", accepted: false),
        Row(name: "disk-cache", value: "lots", accepted: false),
        Row(name: "max-resume-failure-tries", value: "1", accepted: true),
        Row(name: "max-resume-failure-tries", value: "+1", accepted: true),
        Row(name: "max-resume-failure-tries", value: "3", accepted: false),
        Row(name: "no-file-allocation-limit", value: "65537", accepted: true),
        Row(name: "log-level", value: "NOTICE", accepted: true),
        Row(name: "log-level", value: "debug", accepted: false),
    ]

    @Test(arguments: rows)
    func sameValueOrRefused(_ row: Row) throws {
        let option = try #require(Aria2FixedOption.named(row.name))
        #expect(option.accepts(row.value) == row.accepted)
        let message = option.message(for: row.value)
        #expect(message.hasPrefix(Aria2FixedOption.messagePrefix + "'\(row.name)'"))
        #expect(message.contains(option.reason))
    }

    @Test("Names are unique, none is an option Downpour has, and every value is accepted as itself")
    func table() {
        let names = Aria2FixedOption.all.map(\.name)
        #expect(Set(names).count == names.count)
        for option in Aria2FixedOption.all {
            #expect(Aria2Option.named(option.name) == nil, "\(option.name) is in both tables")
            #expect(option.accepts(option.currentValue), "\(option.name)")
            #expect(!option.reason.isEmpty && option.reason.hasSuffix("."), "\(option.name)")
        }
    }
}
