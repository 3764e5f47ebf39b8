import Downpour
import DownpourJSON
import DownpourQueue
import Foundation

/// One call of a request, read once: its token taken off and checked, its method found, its parameters checked
/// and typed (aria2's `checkParam` words for a bad one). What is left is to run it: a ``ReadCall`` reads the queue
/// (``RPCDispatcher/read(_:from:)``), a ``WriteCall`` changes it (``RPCDispatcher/run(_:effects:)``); both
/// switches are exhaustive, so a new method cannot compile into the wrong one.
enum RPCCall: Sendable {
    case read(ReadCall)
    case write(WriteCall)
    /// `system.multicall`: each entry a call of its own, or why it is refused.
    case multicall([Result<RPCCall, RPCError>])

    /// Whether running the call changes nothing: reads, and multicalls of reads (a refused entry changes nothing).
    var onlyReads: Bool {
        switch self {
        case .read: true
        case .write: false
        case .multicall(let entries): entries.allSatisfy { (try? $0.get())?.onlyReads ?? true }
        }
    }

    /// Whether the call passed a token check (with a secret set, every call that needs a token and was read):
    /// `system.listMethods` and `listNotifications` need none; a multicall proves it by an entry that did.
    var provesToken: Bool {
        switch self {
        case .read(.listMethods), .read(.listNotifications): false
        case .read, .write: true
        case .multicall(let entries): entries.contains { (try? $0.get())?.provesToken ?? false }
        }
    }

    /// Reads a call of `name` with `params` (the token, if any, still first).
    ///
    /// - Throws: ``RPCError/unauthorized`` for a wrong or missing token (before anything else, as aria2 does:
    ///   `system.*` methods need none), then a method's error for an unknown method or a bad parameter.
    init(_ name: String, params: [JSONValue], tokenCheck: TokenCheck, nested: Bool = false) throws(RPCError) {
        let (token, values) = TokenCheck.split(params)
        let method = RPCMethod(rawValue: name)
        if method?.needsToken ?? true, !tokenCheck.authorizes(token) { throw .unauthorized }
        if name == RPCDispatcher.subscribeMethod {
            throw .method("\(name) works only on the WebSocket at /jsonrpc, where the progress is pushed.")
        }
        guard let method else { throw .method("No such method: \(name)") }
        self = try Self.parse(method, RPCParameters(values: values), tokenCheck: tokenCheck)
    }

    /// The call of `method` with `params` (after the token): one case per method, no default.
    private static func parse(
        _ method: RPCMethod,
        _ params: RPCParameters,
        tokenCheck: TokenCheck
    ) throws(RPCError) -> RPCCall {
        switch method {
        // Calls that change the queue.
        case .addUri:
            let uris = try params.strings(at: 0, required: true) ?? []
            let options =
                try params.object(at: 1).map { object throws(RPCError) in try OptionsStruct.options(from: object) }
                ?? []
            let position = try params.position(at: 2)
            guard !uris.isEmpty else { throw .method("URI is not provided.") }
            return .write(.addUri(AddRequest(uris: uris, options: options, position: position)))
        case .addMetalink:
            return .write(try .addMetalink(params))
        case .remove, .forceRemove:
            return .write(.remove(gid: try params.requiredString(at: 0), force: method == .forceRemove))
        case .pause, .forcePause:
            return .write(.pause(gid: try params.requiredString(at: 0), force: method == .forcePause))
        case .pauseAll, .forcePauseAll:
            return .write(.pauseAll(force: method == .forcePauseAll))
        case .unpause:
            return .write(.unpause(gid: try params.requiredString(at: 0)))
        case .unpauseAll:
            return .write(.unpauseAll)
        case .changePosition:
            return .write(try Self.changePosition(params))
        case .changeUri:
            return .write(try Self.changeURIs(params))
        case .changeOption:
            let gid = try params.requiredString(at: 0)
            let options = try OptionsStruct.options(from: try params.object(at: 1, required: true) ?? JSONObject())
            return .write(.changeOptions(gid: gid, options))
        case .changeGlobalOption:
            return .write(
                .changeGlobalOptions(
                    try OptionsStruct.options(from: try params.object(at: 0, required: true) ?? JSONObject())
                )
            )
        case .purgeDownloadResult:
            return .write(.purgeResults)
        case .removeDownloadResult:
            return .write(.removeResult(gid: try params.requiredString(at: 0)))
        case .saveSession:
            return .write(.saveSession)
        case .shutdown, .forceShutdown:
            return .write(.shutdown(force: method == .forceShutdown))
        case .multicall:
            let entries = try params.array(at: 0, required: true) ?? []
            return .multicall(entries.map { Self.multicallEntry($0, tokenCheck: tokenCheck) })

        // Calls that read.
        case .addTorrent:
            throw .method("BitTorrent is not supported: Downpour downloads over HTTP and HTTPS only.")
        case .getPeers:
            return .read(.getPeers(gid: try params.requiredString(at: 0)))
        case .tellStatus:
            let gid = try params.requiredString(at: 0)
            return .read(.tellStatus(gid: gid, keys: try params.strings(at: 1).map(Set.init)))
        case .getUris:
            return .read(.getURIs(gid: try params.requiredString(at: 0)))
        case .getFiles:
            return .read(.getFiles(gid: try params.requiredString(at: 0)))
        case .getServers:
            return .read(.getServers(gid: try params.requiredString(at: 0)))
        case .tellActive:
            return .read(.tellActive(keys: try params.strings(at: 0).map(Set.init)))
        case .tellWaiting, .tellStopped:
            let page = try Self.page(params)
            return .read(method == .tellWaiting ? .tellWaiting(page) : .tellStopped(page))
        case .getOption:
            return .read(.getOption(gid: try params.requiredString(at: 0)))
        case .getGlobalOption:
            return .read(.getGlobalOption)
        case .getVersion:
            return .read(.getVersion)
        case .getSessionInfo:
            return .read(.getSessionInfo)
        case .getGlobalStat:
            return .read(.getGlobalStat)
        case .listMethods:
            return .read(.listMethods)
        case .listNotifications:
            return .read(.listNotifications)
        }
    }

    /// `changePosition(gid, pos, how)`.
    private static func changePosition(_ params: RPCParameters) throws(RPCError) -> WriteCall {
        let gid = try params.requiredString(at: 0)
        let position = try params.requiredInteger(at: 1)
        let how = try params.requiredString(at: 2)
        guard let origin = PositionOrigin(rawValue: how) else { throw .method("Illegal argument.") }
        return .changePosition(gid: gid, by: Int(clamping: position), from: origin)
    }

    /// `changeUri(gid, fileIndex, delUris, addUris[, position])`.
    private static func changeURIs(_ params: RPCParameters) throws(RPCError) -> WriteCall {
        let gid = try params.requiredString(at: 0)
        let fileIndex = try params.requiredInteger(at: 1)
        let remove = try params.strings(at: 2, required: true) ?? []
        let add = try params.strings(at: 3, required: true) ?? []
        let position = try params.position(at: 4)
        guard fileIndex >= 1 else { throw .method("fileIndex must be greater than or equal to 1.") }
        return .changeURIs(gid: gid, fileIndex: fileIndex, remove: remove, add: add, position: position)
    }

    /// The page of `tellWaiting` and `tellStopped`: `(offset, num[, keys])`.
    private static func page(_ params: RPCParameters) throws(RPCError) -> ReadCall.Page {
        let offset = try params.requiredInteger(at: 0)
        let num = try params.requiredInteger(at: 1)
        let keys = try params.strings(at: 2).map(Set.init)
        guard num >= 0 else {
            throw .method("The integer parameter at 1 has invalid value: the value must be greater than or equal to 0.")
        }
        return ReadCall.Page(offset: offset, num: num, keys: keys)
    }

    /// A multicall entry `{"methodName": ..., "params": [...]}` as a call, or why it is refused; a multicall in a
    /// multicall is refused.
    private static func multicallEntry(_ entry: JSONValue, tokenCheck: TokenCheck) -> Result<RPCCall, RPCError> {
        guard case .object(let spec) = entry else { return .failure(.method("system.multicall expected struct.")) }
        guard case .string(let name)? = spec["methodName"] else { return .failure(.method("Missing methodName.")) }
        if name == RPCMethod.multicall.rawValue {
            return .failure(.method("Recursive system.multicall forbidden."))
        }
        do throws(RPCError) {
            return .success(try RPCCall(name, params: spec["params"]?.arrayValue ?? [], tokenCheck: tokenCheck))
        } catch {
            return .failure(error)
        }
    }
}

/// A call that only reads the queue, or nothing.
enum ReadCall: Sendable {
    /// `tellWaiting` and `tellStopped`'s window: aria2's `offset` (negative counts from the end), `num` ≥ 0.
    struct Page: Sendable {
        var offset: Int64
        var num: Int64
        var keys: Set<String>?
    }

    case getPeers(gid: String)
    case tellStatus(gid: String, keys: Set<String>?)
    case getURIs(gid: String)
    case getFiles(gid: String)
    case getServers(gid: String)
    case tellActive(keys: Set<String>?)
    case tellWaiting(Page)
    case tellStopped(Page)
    case getOption(gid: String)
    case getGlobalOption
    case getVersion
    case getSessionInfo
    case getGlobalStat
    case listMethods
    case listNotifications
}

/// A call that changes the queue, or stops the daemon.
enum WriteCall: Sendable {
    case addUri(AddRequest)
    /// `addMetalink`: the downloads of the document's files, in its order.
    case addMetalink([AddRequest])
    case remove(gid: String, force: Bool)
    case pause(gid: String, force: Bool)
    case pauseAll(force: Bool)
    case unpause(gid: String)
    case unpauseAll
    case changePosition(gid: String, by: Int, from: PositionOrigin)
    case changeURIs(gid: String, fileIndex: Int64, remove: [String], add: [String], position: Int?)
    case changeOptions(gid: String, [QueueOption])
    case changeGlobalOptions([QueueOption])
    case purgeResults
    case removeResult(gid: String)
    case saveSession
    case shutdown(force: Bool)

    /// `aria2.addMetalink(metalink, options?, position?)`: one download per file of the document (base64), as
    /// ``AddRequest/files(of:options:position:)`` makes them.
    static func addMetalink(_ params: RPCParameters) throws(RPCError) -> WriteCall {
        let encoded = try params.requiredString(at: 0)
        let options =
            try params.object(at: 1).map { object throws(RPCError) in try OptionsStruct.options(from: object) } ?? []
        let position = try params.position(at: 2)
        guard let bytes = Base64.decode(Array(encoded.utf8)), !bytes.isEmpty else {
            throw .method("The Metalink is not valid base64.")
        }
        let metalink: Metalink
        do {
            metalink = try Metalink(parsing: Data(bytes))
        } catch {
            throw .method(error.message)
        }
        return .addMetalink(AddRequest.files(of: metalink, options: options, position: position))
    }
}
