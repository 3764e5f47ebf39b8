import Foundation

/// A fresh directory under the system's temporary directory, removed by ``remove()``.
public struct ScratchDirectory: Sendable {
    public let path: String

    public init() throws {
        self.path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("downpour-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    /// The path of `name` in the directory.
    public func file(_ name: String) -> String { self.path + "/" + name }

    /// The names in the directory, sorted, without a queue's state directory (``stateDirectory``).
    public func contents() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: self.path)) ?? []).filter { $0 != "state" }.sorted()
    }

    /// `state` in the directory: where a queue's store goes in the tests.
    public var stateDirectory: String { self.file("state") }

    public func remove() {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}
