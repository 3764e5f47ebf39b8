/// The methods of aria2's JSON-RPC interface, in the order `system.listMethods` gives them
/// (`RpcMethodFactory.cc`).
enum RPCMethod: String, CaseIterable, Sendable {
    case addUri = "aria2.addUri"
    case addTorrent = "aria2.addTorrent"
    case getPeers = "aria2.getPeers"
    case addMetalink = "aria2.addMetalink"
    case remove = "aria2.remove"
    case pause = "aria2.pause"
    case forcePause = "aria2.forcePause"
    case pauseAll = "aria2.pauseAll"
    case forcePauseAll = "aria2.forcePauseAll"
    case unpause = "aria2.unpause"
    case unpauseAll = "aria2.unpauseAll"
    case forceRemove = "aria2.forceRemove"
    case changePosition = "aria2.changePosition"
    case tellStatus = "aria2.tellStatus"
    case getUris = "aria2.getUris"
    case getFiles = "aria2.getFiles"
    case getServers = "aria2.getServers"
    case tellActive = "aria2.tellActive"
    case tellWaiting = "aria2.tellWaiting"
    case tellStopped = "aria2.tellStopped"
    case getOption = "aria2.getOption"
    case changeUri = "aria2.changeUri"
    case changeOption = "aria2.changeOption"
    case getGlobalOption = "aria2.getGlobalOption"
    case changeGlobalOption = "aria2.changeGlobalOption"
    case purgeDownloadResult = "aria2.purgeDownloadResult"
    case removeDownloadResult = "aria2.removeDownloadResult"
    case getVersion = "aria2.getVersion"
    case getSessionInfo = "aria2.getSessionInfo"
    case shutdown = "aria2.shutdown"
    case forceShutdown = "aria2.forceShutdown"
    case getGlobalStat = "aria2.getGlobalStat"
    case saveSession = "aria2.saveSession"
    case multicall = "system.multicall"
    case listMethods = "system.listMethods"
    case listNotifications = "system.listNotifications"

    /// `system.*` methods need no token (a token given is ignored).
    var needsToken: Bool {
        switch self {
        case .multicall, .listMethods, .listNotifications: return false
        default: return true
        }
    }

    /// What `system.listNotifications` answers (aria2's six, though Downpour never sends the BitTorrent one).
    static let notificationNames: [String] = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError", "aria2.onBtDownloadComplete",
    ]
}
