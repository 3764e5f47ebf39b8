import Downpour
import DownpourJSON
import DownpourQueue
import Foundation

/// The dashboard's push (`docs/dashboard.md`): a `downpour.onProgress` notification with the queue's totals, the
/// overall limit, a version that changes with the waiting and stopped lists, and every active download as
/// aria2's status struct plus its byte ranges on disk and each connection's remaining range; in a fleet, the
/// nodes too (`nodes`: name, address, speed, active count, whether it is up). Sent only to
/// WebSocket sessions that called `downpour.subscribe`, so aria2's clients never see it.
public enum ProgressPush {
    /// The notification's method name.
    public static let method = "downpour.onProgress"
    /// How often it is sent while a session listens (the page wants at least one a second).
    public static let interval: Duration = .milliseconds(500)

    /// The frame: `{"jsonrpc":"2.0","method":"downpour.onProgress","params":[{...}]}`.
    public static func frame(
        stat: GlobalStat,
        maximumOverallRate: Int64,
        queueVersion: Int,
        active: [DownloadStatus],
        nodes: [QueueNode] = []
    ) -> String {
        var payload = JSONObject()
        payload.append("globalStat", StatusStruct.globalStat(stat))
        payload.append("maxOverallDownloadLimit", StatusStruct.number(maximumOverallRate))
        payload.append("queueVersion", .string(String(queueVersion)))
        payload.append("active", .array(active.map(Self.entry)))
        if !nodes.isEmpty { payload.append("nodes", .array(nodes.map(Self.node))) }
        var writer = JSONWriter()
        writer.write(["jsonrpc": "2.0", "method": .string(Self.method), "params": [.object(payload)]])
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// One node of a fleet; numbers as strings, as aria2 writes them.
    static func node(_ node: QueueNode) -> JSONValue {
        [
            "name": .string(node.name),
            "address": .string(node.address),
            "downloadSpeed": StatusStruct.number(node.downloadSpeed),
            "numActive": StatusStruct.number(Int64(node.numActive)),
            "secondsSinceSeen": StatusStruct.number(Int64(node.secondsSinceSeen.rounded(.down))),
            "up": .string(node.isUp ? "true" : "false"),
        ]
    }

    /// One active download: aria2's struct, `ranges` (`[start, end)` on disk) and `connectionRanges`.
    static func entry(_ status: DownloadStatus) -> JSONValue {
        guard case .object(var object) = StatusStruct.make(status) else { return .null }
        object.append(
            "ranges",
            .array(status.completedRanges.map { .array([.integer($0.lowerBound), .integer($0.upperBound)]) })
        )
        object.append(
            "connectionRanges",
            .array(
                status.connectionProgress.compactMap { connection in
                    guard let range = connection.remainingRange else { return nil }
                    var entry = JSONObject([
                        .init(key: "id", value: .integer(Int64(connection.id))),
                        .init(key: "start", value: .integer(range.lowerBound)),
                        .init(key: "end", value: .integer(range.upperBound)),
                        .init(
                            key: "downloadSpeed",
                            value: StatusStruct.number(Int64(connection.bytesPerSecond.rounded()))
                        ),
                        .init(key: "restarts", value: .integer(Int64(connection.restarts))),
                    ])
                    // The mirror it fetches from, when the download has several URLs.
                    if status.uris.count > 1, let source = connection.source {
                        entry.append("source", .string(source.absoluteString))
                    }
                    return .object(entry)
                }
            )
        )
        return .object(object)
    }
}
