import Foundation
import NIOHTTP1

/// The mirrors of a transfer: which one each connection fetches from, their redirects, checks and drops.
extension TransferState {
    /// The mirror connection `id` fetches from now: the one it had while that one lives, else the live one with
    /// the fewest connections.
    mutating func assignMirror(connection id: Int) -> Source {
        let index = self.mirrors.assign(connection: id)
        if self.connections[id]?.mirror != index {
            // Another server: how near the last one was says nothing of it.
            self.connections[id]?.quickestFirstBytes = nil
            self.connections[id]?.quickestHead = nil
        }
        self.connections[id, default: Connection()].mirror = index
        return Source(
            index: index,
            url: self.mirrors.mirrors[index].fetchURL,
            remote: self.mirrors.remoteFile(for: index, file: self.remoteFile),
            hasMirrors: self.mirrors.hasMirrors
        )
    }

    /// Moves mirror `index`'s requests to `location` (see ``MirrorSet/redirect(_:from:to:limit:)``); its connections
    /// then time their first bytes anew. Returns why it cannot follow, as a sentence; `nil` when it moved.
    mutating func redirectMirror(_ index: Int, from requested: URL, to location: URL, limit: Int) -> String? {
        let failure = self.mirrors.redirect(index, from: requested, to: location, limit: limit)
        if failure == nil {
            for id in self.connections.keys where self.connections[id]?.mirror == index {
                self.connections[id]?.quickestFirstBytes = nil
                self.connections[id]?.quickestHead = nil
            }
        }
        return failure
    }

    /// Checks a `206` from mirror `index` for `asked` against what that mirror must match (the file's length, its
    /// own validators once known), and records its validators when it is the mirror's first checked response.
    mutating func checkPartial(_ headers: HTTPHeaders, asked: Range<Int64>, mirror index: Int) -> AttemptFailure? {
        let remote = self.mirrors.remoteFile(for: index, file: self.remoteFile)
        if index != self.mirrors.primary, let length = remote.length,
            let total = headers.value("Content-Range").flatMap({ ContentRange($0) })?.completeLength,
            total != length
        {
            return .fatal(
                DownloadError(
                    code: .remoteChanged,
                    message: "it serves a file of \(total) bytes, not \(length) as "
                        + "\(self.mirrors.mirrors[self.mirrors.primary].url.absoluteString) does."
                )
            )
        }
        do throws(AttemptFailure) {
            try ResponseValidator.checkPartial(headers, asked: asked, remote: remote)
        } catch {
            return error
        }
        self.mirrors.recordChecked(index, etag: headers.value("ETag"), lastModified: headers.value("Last-Modified"))
        return nil
    }

    /// Drops mirror `index` for `reason`, unless it is the last one in use. `dropped` is `true` when it is
    /// dropped (now or earlier); `notice` names it when it was dropped now.
    mutating func dropMirror(_ index: Int, because reason: String) -> (dropped: Bool, notice: String?) {
        guard self.mirrors.mirrors[index].isLive else { return (true, nil) }
        guard self.mirrors.drop(index, because: reason) else { return (false, nil) }
        return (true, self.dropNotice(index, reason: reason))
    }

    /// Drops the mirrors that wrote any byte of `range` in this run, each with `reason`, except the last one in
    /// use: their URLs, and a notice for each.
    mutating func dropMirrors(thatWrote range: Range<Int64>, reason: String) -> (urls: [URL], notices: [String]) {
        var dropped: [URL] = []
        var notices: [String] = []
        // One at a time, so that each notice counts the URLs left after it.
        for index in self.mirrors.writers(of: range) where self.mirrors.mirrors[index].isLive {
            guard self.mirrors.drop(index, because: reason) else { continue }
            dropped.append(self.mirrors.mirrors[index].url)
            notices.append(self.dropNotice(index, reason: reason))
        }
        return (dropped, notices)
    }

    private func dropNotice(_ index: Int, reason: String) -> String {
        let left = self.mirrors.liveCount
        return "Dropped the mirror \(MirrorSet.key(self.mirrors.mirrors[index].url)): \(reason) \(left) URL"
            + (left == 1 ? "" : "s") + " left."
    }
}
