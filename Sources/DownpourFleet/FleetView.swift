import Downpour
import DownpourQueue

/// The fleet's queue at one moment, as aria2's reads show it (``QueueReader``): the database's rows, with the
/// downloads the reading node runs as they are now, and `node` naming where each active one runs.
///
/// The rows' part is made once a read of the database (``init(rows:globals:shaper:)``) and kept while it serves;
/// each read lays the node's own runs over it (``overlaid(_:node:)``), which costs what they number.
struct FleetView: QueueReader {
    var active: [DownloadStatus] = []
    var waiting: [DownloadStatus] = []
    var stopped: [DownloadStatus] = []
    var byGID: [DownloadID: DownloadStatus] = [:]
    /// This node's runs as they are now, over ``byGID``.
    var own: [DownloadID: DownloadStatus] = [:]
    var globals: [QueueOption]
    var shaper: OptionShaper
    var fleetNodes: [QueueNode]

    /// - Parameters:
    ///   - rows: The database's rows, in ``FleetQueue/rows()``'s order.
    ///   - nodes: The fleet's nodes (``FleetQueue/nodes(upWithin:)``).
    init(rows: [FleetQueue.Row], nodes: [QueueNode] = [], globals: [QueueOption], shaper: OptionShaper) {
        self.globals = globals
        self.shaper = shaper
        self.fleetNodes = nodes
        self.byGID.reserveCapacity(rows.count)
        for row in rows {
            let status = DownloadStatus(
                gid: row.gid,
                status: row.status,
                uris: row.entry.uris,
                options: row.entry.options,
                directory: shaper.directory(row.entry.options),
                path: row.path,
                totalLength: row.totalLength,
                completedLength: row.completedLength,
                downloadSpeed: row.status == .active ? row.downloadSpeed : 0,
                completedRanges: row.status == .complete && row.totalLength > 0 ? [0..<row.totalLength] : [],
                errorCode: row.errorCode,
                errorMessage: row.errorMessage,
                node: row.status == .active ? row.node : nil,
                audio: row.audio
            )
            switch row.status {
            case .active: self.active.append(status)
            case .waiting, .paused: self.waiting.append(status)
            case .complete, .error, .removed: self.stopped.append(status)
            }
            self.byGID[row.gid] = status
        }
    }

    /// This view with `local`, the active downloads of `node`'s manager, in place of what the rows say of them.
    func overlaid(_ local: [DownloadStatus], node: String) -> FleetView {
        var view = self
        for var status in local where self.byGID[status.gid].map({ $0.status == .active && $0.node == node }) ?? false {
            status.node = node
            view.own[status.gid] = status
        }
        if !view.own.isEmpty {
            view.active = self.active.map { view.own[$0.gid] ?? $0 }
        }
        return view
    }

    func status(of gid: String) throws(QueueError) -> DownloadStatus {
        let id = try self.resolve(gid)
        return self.own[id] ?? self.byGID[id]!
    }

    func activeDownloads() -> [DownloadStatus] { self.active }

    func waitingDownloads(_ range: Range<Int>) -> [DownloadStatus] {
        Array(self.waiting[range.clamped(to: self.waiting.indices)])
    }

    func stoppedDownloads(_ range: Range<Int>) -> [DownloadStatus] {
        Array(self.stopped[range.clamped(to: self.stopped.indices)])
    }

    func globalStat() -> GlobalStat {
        GlobalStat(
            downloadSpeed: self.active.reduce(0) { $0 + $1.downloadSpeed },
            numActive: self.active.count,
            numWaiting: self.waiting.count,
            numStopped: self.stopped.count,
            numStoppedTotal: self.stopped.count
        )
    }

    func options(of gid: String) throws(QueueError) -> [QueueOption] {
        self.shaper.optionsInEffect(try self.status(of: gid).options)
    }

    func globalOptions() -> [QueueOption] { self.globals }

    func nodes() -> [QueueNode] { self.fleetNodes }

    private func resolve(_ text: String) throws(QueueError) -> DownloadID {
        try DownloadQueue.resolve(text) { prefix in
            if prefix.utf8.count == 16, let gid = DownloadID(prefix) { return self.byGID[gid] == nil ? [] : [gid] }
            return Set(self.byGID.keys.filter { $0.description.hasPrefix(prefix) })
        }
    }
}
