import Foundation

/// A fresh directory under the system's temporary directory, removed by `remove()`.
struct ScratchDirectory {
    let path: String

    init() throws {
        self.path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("downpour-queue-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { self.path + "/" + name }

    /// The names in the directory, sorted, without the queue's state directory.
    func contents() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: self.path)) ?? []).filter { $0 != "state" }.sorted()
    }

    var stateDirectory: String { self.file("state") }

    func remove() {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}
