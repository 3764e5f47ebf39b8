import Downpour
import DownpourJSON
import DownpourQueue

/// One of aria2's notifications, as pushed to WebSocket clients (§1.7 of the reference):
/// `{"jsonrpc":"2.0","method":"aria2.onDownloadStart","params":[{"gid":"2089b05ecca3d829"}]}`, with no `id`,
/// `result` or `error` key, since clients tell notifications from responses by those keys.
public struct RPCNotification: Sendable, Hashable {
    /// The method, e.g. `aria2.onDownloadStart`.
    public var method: String
    /// The download it is about.
    public var gid: DownloadID

    public init(method: String, gid: DownloadID) {
        self.method = method
        self.gid = gid
    }

    /// The notification aria2 sends for `event`; `nil` for the queue's changes aria2 does not announce (added,
    /// changed, results removed, options changed).
    public init?(_ event: QueueEvent) {
        switch event {
        case .started(let gid): self.init(method: "aria2.onDownloadStart", gid: gid)
        case .paused(let gid): self.init(method: "aria2.onDownloadPause", gid: gid)
        case .stopped(let gid): self.init(method: "aria2.onDownloadStop", gid: gid)
        case .completed(let gid): self.init(method: "aria2.onDownloadComplete", gid: gid)
        case .failed(let gid): self.init(method: "aria2.onDownloadError", gid: gid)
        case .added, .changed, .resultsRemoved, .optionsChanged: return nil
        }
    }

    /// The frame's text.
    public var json: [UInt8] {
        var writer = JSONWriter(reservingCapacity: 96)
        writer.writeASCII("{\"jsonrpc\":\"2.0\",\"method\":")
        writer.writeString(self.method)
        writer.writeASCII(",\"params\":[{\"gid\":\"")
        writer.writeRaw(self.gid.description.utf8)
        writer.writeASCII("\"}]}")
        return writer.bytes
    }
}
