import Foundation

/// What tells one version of the file at `path` from the next: its inode, modification time and size; `nil` when
/// there is no file.
///
/// A file replaced by a rename, as a resume journal is on every save, gets a new stamp. Tests wait for stamps to
/// change to know that a save has happened, instead of waiting for a time to pass.
public func fileStamp(atPath path: String) -> String? {
    guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
    let inode = attributes[.systemFileNumber].map { "\($0)" } ?? "?"
    let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
    let size = attributes[.size].map { "\($0)" } ?? "?"
    return "\(inode) \(modified) \(size)"
}
