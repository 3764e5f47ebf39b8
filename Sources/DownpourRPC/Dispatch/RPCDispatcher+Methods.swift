import Downpour
import DownpourQueue
import Foundation

extension RPCDispatcher {
    /// Runs a method whose token has been checked; `params` are those after the token.
    func run(_ method: RPCMethod, _ params: RPCParameters, effects: inout Effects) async throws(RPCError) -> JSONValue {
        switch method {
        case .addUri:
            let uris = try params.strings(at: 0, required: true) ?? []
            let options = try params.object(at: 1).map(OptionsStruct.options(from:)) ?? []
            let position = try params.position(at: 2)
            guard !uris.isEmpty else { throw RPCError.method("URI is not provided.") }
            let gid = try await Self.queue(nil) { () async throws(QueueError) in
                try await self.service.add(uris: uris, options: options, position: position)
            }
            return .string(gid.description)
        case .addMetalink:
            return try await self.addMetalink(params)
        case .remove, .forceRemove:
            let gid = try params.requiredString(at: 0)
            let removed = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.remove(gid, force: method == .forceRemove)
            }
            return .string(removed.description)
        case .pause, .forcePause:
            let gid = try params.requiredString(at: 0)
            let paused = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.pause(gid, force: method == .forcePause)
            }
            return .string(paused.description)
        case .pauseAll, .forcePauseAll:
            try await Self.queue(nil) { () async throws(QueueError) in
                try await self.service.pauseAll(force: method == .forcePauseAll)
            }
            return "OK"
        case .unpause:
            let gid = try params.requiredString(at: 0)
            let unpaused = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.unpause(gid)
            }
            return .string(unpaused.description)
        case .unpauseAll:
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.unpauseAll() }
            return "OK"
        case .changePosition:
            let gid = try params.requiredString(at: 0)
            let position = try params.requiredInteger(at: 1)
            let how = try params.requiredString(at: 2)
            guard let origin = PositionOrigin(rawValue: how) else { throw RPCError.method("Illegal argument.") }
            let index = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.changePosition(gid, by: Int(clamping: position), from: origin)
            }
            return .integer(Int64(index))
        case .changeUri:
            return try await self.changeURI(params)
        case .changeOption:
            let gid = try params.requiredString(at: 0)
            let options = OptionsStruct.options(from: try params.object(at: 1, required: true) ?? JSONObject())
            try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.changeOptions(gid, options)
            }
            return "OK"
        case .changeGlobalOption:
            let options = OptionsStruct.options(from: try params.object(at: 0, required: true) ?? JSONObject())
            try await Self.queue(nil) { () async throws(QueueError) in
                try await self.service.changeGlobalOptions(options)
            }
            return "OK"
        case .purgeDownloadResult:
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.purgeResults() }
            return "OK"
        case .removeDownloadResult:
            let gid = try params.requiredString(at: 0)
            try await Self.queue(gid) { () async throws(QueueError) in try await self.service.removeResult(gid) }
            return "OK"
        case .saveSession:
            // The queue itself is stored with every change; the session file is aria2's format of it.
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.saveSession() }
            return "OK"
        case .shutdown, .forceShutdown:
            effects.shutdown = (effects.shutdown ?? false) || method == .forceShutdown
            return "OK"
        case .multicall:
            return try await self.multicall(params, effects: &effects)
        default:
            return try await self.service.read { queue throws(RPCError) in try self.read(method, params, from: queue) }
        }
    }

    /// Runs a method that changes nothing: it reads `queue`, or nothing.
    func read(_ method: RPCMethod, _ params: RPCParameters, from queue: any QueueReader) throws(RPCError) -> JSONValue {
        switch method {
        case .addTorrent:
            throw RPCError.method("BitTorrent is not supported: Downpour downloads over HTTP and HTTPS only.")
        case .getPeers:
            let gid = try params.requiredString(at: 0)
            let status = try Self.status(of: gid, in: queue)
            if StatusStruct.isStopped(status.status) {
                throw RPCError.method("No peer data is available for GID#\(status.gid)")
            }
            return []
        case .tellStatus:
            let gid = try params.requiredString(at: 0)
            let keys = try params.strings(at: 1).map(Set.init)
            return StatusStruct.make(try Self.status(of: gid, in: queue), keys: keys)
        case .getUris:
            let gid = try params.requiredString(at: 0)
            let status = try Self.status(of: gid, in: queue)
            if StatusStruct.isStopped(status.status) {
                throw RPCError.method("No URI data is available for GID#\(status.gid)")
            }
            return .array(StatusStruct.uris(status))
        case .getFiles:
            let gid = try params.requiredString(at: 0)
            return StatusStruct.files(try Self.status(of: gid, in: queue))
        case .getServers:
            let gid = try params.requiredString(at: 0)
            let status = try Self.status(of: gid, in: queue)
            guard status.status == .active else {
                throw RPCError.method("No active download for GID#\(status.gid)")
            }
            return Self.servers(status)
        case .tellActive:
            let keys = try params.strings(at: 0).map(Set.init)
            return .array(queue.activeDownloads().map { StatusStruct.make($0, keys: keys) })
        case .tellWaiting, .tellStopped:
            let offset = try params.requiredInteger(at: 0)
            let num = try params.requiredInteger(at: 1)
            let keys = try params.strings(at: 2).map(Set.init)
            guard num >= 0 else {
                throw RPCError.method(
                    "The integer parameter at 1 has invalid value: the value must be greater than or equal to 0."
                )
            }
            guard num > 0 else { return [] }
            let stat = queue.globalStat()
            let waiting = method == .tellWaiting
            let page = Pagination(offset: offset, num: num, size: waiting ? stat.numWaiting : stat.numStopped)
            guard !page.range.isEmpty else { return [] }
            var entries = waiting ? queue.waitingDownloads(page.range) : queue.stoppedDownloads(page.range)
            if page.isReversed { entries.reverse() }
            return .array(entries.map { StatusStruct.make($0, keys: keys) })
        case .getOption:
            let gid = try params.requiredString(at: 0)
            let options = try Self.reading(gid) { () throws(QueueError) in try queue.options(of: gid) }
            return OptionsStruct.object(from: options)
        case .getGlobalOption:
            return OptionsStruct.object(from: queue.globalOptions().filter { $0.name != Aria2Option.rpcSecret.name })
        case .getVersion:
            return [
                "version": .string(Self.aria2Version),
                "enabledFeatures": .array(Self.enabledFeatures.map(JSONValue.string)),
            ]
        case .getSessionInfo:
            return ["sessionId": .string(self.sessionID)]
        case .getGlobalStat:
            return StatusStruct.globalStat(queue.globalStat())
        case .listMethods:
            return .array(RPCMethod.allCases.map { .string($0.rawValue) })
        case .listNotifications:
            return .array(RPCMethod.notificationNames.map(JSONValue.string))
        default:
            // The methods that change the queue (``RPCMethod/changesQueue``, which names every method):
            // ``RPCDispatcher/onlyReads(_:)`` keeps them away from a reader.
            throw RPCError.method("\(method.rawValue) changes the queue and cannot be answered from a read.")
        }
    }

    /// `aria2.changeUri(gid, fileIndex, delUris, addUris[, position])` → `[deleted, added]` as integers.
    private func changeURI(_ params: RPCParameters) async throws(RPCError) -> JSONValue {
        let gid = try params.requiredString(at: 0)
        let fileIndex = try params.requiredInteger(at: 1)
        let remove = try params.strings(at: 2, required: true) ?? []
        let add = try params.strings(at: 3, required: true) ?? []
        let position = try params.position(at: 4)
        guard fileIndex >= 1 else { throw RPCError.method("fileIndex must be greater than or equal to 1.") }
        // Resolve the GID first, so an unknown one is reported as such before the index is judged.
        _ = try await self.service.read { queue throws(RPCError) in try Self.status(of: gid, in: queue) }
        guard fileIndex == 1 else { throw RPCError.method("fileIndex is out of range") }
        let counts = try await Self.queue(gid) { () async throws(QueueError) in
            try await self.service.changeURIs(gid, remove: remove, add: add, position: position)
        }
        return [.integer(Int64(counts.removed)), .integer(Int64(counts.added))]
    }

    /// `system.multicall([{methodName, params}, ...])`: each result in a one-element array, each error as a
    /// bare `{code, message}`; each call checks its own token.
    private func multicall(_ params: RPCParameters, effects: inout Effects) async throws(RPCError) -> JSONValue {
        let calls = try params.array(at: 0, required: true) ?? []
        var results: [JSONValue] = []
        results.reserveCapacity(calls.count)
        var index = 0
        while index < calls.count {
            // A run of well-formed, authorized addUri calls goes to the queue as one batch: one stored change.
            var batch: [AddRequest] = []
            while index + batch.count < calls.count, let add = self.plainAdd(calls[index + batch.count]) {
                batch.append(add)
            }
            if !batch.isEmpty {
                for result in await self.service.add(batch: batch) {
                    switch result {
                    case .success(let gid): results.append(.array([.string(gid.description)]))
                    case .failure(let error): results.append(RPCError(error, gid: nil).json)
                    }
                }
                index += batch.count
                continue
            }
            let entry = calls[index]
            index += 1
            switch Self.multicallEntry(entry) {
            case .failure(let error):
                results.append(error.json)
            case .success(let (name, inner)):
                results.append(Self.multicallResult(await self.call(name, params: inner, effects: &effects)))
            }
        }
        return .array(results)
    }

    /// ``multicall(_:effects:)`` when its calls only read, from `queue`.
    func multicall(
        _ params: RPCParameters,
        reading queue: any QueueReader,
        effects: inout Effects
    ) throws(RPCError) -> JSONValue {
        let calls = try params.array(at: 0, required: true) ?? []
        return .array(
            calls.map { entry in
                switch Self.multicallEntry(entry) {
                case .failure(let error):
                    return error.json
                case .success(let (name, inner)):
                    return Self.multicallResult(self.call(name, params: inner, reading: queue, effects: &effects))
                }
            }
        )
    }

    /// A multicall entry's method name and parameters, or why it is refused.
    private static func multicallEntry(_ entry: JSONValue) -> Result<(String, [JSONValue]), RPCError> {
        guard case .object(let spec) = entry else { return .failure(.method("system.multicall expected struct.")) }
        guard case .string(let name)? = spec["methodName"] else { return .failure(.method("Missing methodName.")) }
        if name == RPCMethod.multicall.rawValue {
            return .failure(.method("Recursive system.multicall forbidden."))
        }
        return .success((name, spec["params"]?.arrayValue ?? []))
    }

    /// An entry's result in a multicall's answer: a one-element array, or a bare `{code, message}`.
    private static func multicallResult(_ outcome: Result<JSONValue, RPCError>) -> JSONValue {
        switch outcome {
        case .success(let result): return .array([result])
        case .failure(let error): return error.json
        }
    }

    /// The download a multicall entry adds, when it is an `aria2.addUri` call whose token passes and whose
    /// parameters are well-formed; `nil` sends it the usual way (which gives any error its usual words).
    private func plainAdd(_ call: JSONValue) -> AddRequest? {
        guard case .object(let spec) = call, spec["methodName"] == .string(RPCMethod.addUri.rawValue) else {
            return nil
        }
        var values = spec["params"]?.arrayValue ?? []
        var token: String?
        if case .string(let first)? = values.first, first.hasPrefix("token:") {
            token = String(first.dropFirst(6))
            values.removeFirst()
        }
        guard self.tokenCheck.authorizes(token) else { return nil }
        let params = RPCParameters(values: values)
        do throws(RPCError) {
            guard let uris = try params.strings(at: 0, required: true), !uris.isEmpty else { return nil }
            let options = try params.object(at: 1).map(OptionsStruct.options(from:)) ?? []
            let position = try params.position(at: 2)
            return AddRequest(uris: uris, options: options, position: position)
        } catch {
            return nil
        }
    }

    private static func status(of gid: String, in queue: any QueueReader) throws(RPCError) -> DownloadStatus {
        try Self.reading(gid) { () throws(QueueError) in try queue.status(of: gid) }
    }

    /// `aria2.getServers` for an active download: its one file, one server entry per open connection.
    static func servers(_ status: DownloadStatus) -> JSONValue {
        let uri = status.uris.first ?? ""
        let servers: [JSONValue] = status.connectionProgress.map { connection in
            [
                "uri": .string(uri),
                "currentUri": .string(uri),
                "downloadSpeed": StatusStruct.number(Self.wholeBytes(connection.bytesPerSecond)),
            ]
        }
        return [["index": "1", "servers": .array(servers)]]
    }

    private static func wholeBytes(_ rate: Double) -> Int64 {
        guard rate.isFinite, rate > 0 else { return 0 }
        return Int64(min(rate, 9e18))
    }

    /// Reads from the queue, turning its refusal into aria2's words.
    static func reading<T>(_ gid: String?, _ body: () throws(QueueError) -> T) throws(RPCError) -> T {
        do {
            return try body()
        } catch {
            throw RPCError(error, gid: gid)
        }
    }

    /// Runs a queue operation, turning its refusal into aria2's words.
    static func queue<T>(
        _ gid: String?,
        _ body: () async throws(QueueError) -> T
    ) async throws(RPCError) -> T {
        do {
            return try await body()
        } catch {
            throw RPCError(error, gid: gid)
        }
    }
}

extension RPCDispatcher {
    /// `aria2.addMetalink(metalink, options?, position?)`: one download per file of the document (base64), its
    /// URLs best first (those at a `metalink-location` first), `out` its name and `checksum` its strongest digest
    /// unless the options say otherwise, and its piece digests and size (``Aria2Options/internalNames``); the GIDs
    /// in document order.
    func addMetalink(_ params: RPCParameters) async throws(RPCError) -> JSONValue {
        let encoded = try params.requiredString(at: 0)
        let options = try params.object(at: 1).map(OptionsStruct.options(from:)) ?? []
        let position = try params.position(at: 2)
        guard let bytes = Base64.decode(Array(encoded.utf8)), !bytes.isEmpty else {
            throw RPCError.method("The Metalink is not valid base64.")
        }
        let metalink: Metalink
        do {
            metalink = try Metalink(parsing: Data(bytes))
        } catch {
            throw RPCError.method(error.message)
        }
        var gids: [JSONValue] = []
        for file in AddRequest.files(of: metalink, options: options, position: position) {
            let gid = try await Self.queue(nil) { () async throws(QueueError) in
                try await self.service.add(uris: file.uris, options: file.options, position: file.position)
            }
            gids.append(.string(gid.description))
        }
        return .array(gids)
    }
}
