import Downpour
import DownpourAria2
import DownpourJSON
import DownpourQueue
import Foundation

extension RPCDispatcher {
    /// Runs a call: a read from the queue, a change, or a multicall's calls in order.
    func run(_ call: RPCCall, effects: inout Effects) async -> Result<JSONValue, RPCError> {
        do throws(RPCError) {
            switch call {
            case .read(let read):
                return .success(
                    try await self.service.read { queue throws(RPCError) in try self.read(read, from: queue) }
                )
            case .write(let write):
                return .success(try await self.run(write, effects: &effects))
            case .multicall(let entries):
                return .success(await self.multicall(entries, effects: &effects))
            }
        } catch {
            return .failure(error)
        }
    }

    /// ``run(_:effects:)`` for a call that only reads (``RPCCall/onlyReads``), from `queue`.
    func answer(_ call: RPCCall, reading queue: any QueueReader, effects: inout Effects) -> Result<JSONValue, RPCError>
    {
        do throws(RPCError) {
            switch call {
            case .read(let read):
                return .success(try self.read(read, from: queue))
            case .write:
                // ``RPCCall/onlyReads`` keeps a change away from a reader.
                throw RPCError.method("This call changes the queue and cannot be answered from a read.")
            case .multicall(let entries):
                return .success(
                    .array(
                        entries.map { entry in
                            Self.multicallResult(
                                entry.flatMap { self.answer($0, reading: queue, effects: &effects) },
                                effects: &effects
                            )
                        }
                    )
                )
            }
        } catch {
            return .failure(error)
        }
    }

    /// Runs a call that changes the queue (or stops the daemon).
    func run(_ call: WriteCall, effects: inout Effects) async throws(RPCError) -> JSONValue {
        switch call {
        case .addUri(let add):
            let gid = try await Self.queue(nil) { () async throws(QueueError) in
                try await self.service.add(uris: add.uris, options: add.options, position: add.position)
            }
            return .string(gid.description)
        case .addMetalink(let files):
            var gids: [JSONValue] = []
            for file in files {
                let gid = try await Self.queue(nil) { () async throws(QueueError) in
                    try await self.service.add(uris: file.uris, options: file.options, position: file.position)
                }
                gids.append(.string(gid.description))
            }
            return .array(gids)
        case .remove(let gid, let force):
            let removed = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.remove(gid, force: force)
            }
            return .string(removed.description)
        case .pause(let gid, let force):
            let paused = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.pause(gid, force: force)
            }
            return .string(paused.description)
        case .pauseAll(let force):
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.pauseAll(force: force) }
            return "OK"
        case .unpause(let gid):
            let unpaused = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.unpause(gid)
            }
            return .string(unpaused.description)
        case .unpauseAll:
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.unpauseAll() }
            return "OK"
        case .changePosition(let gid, let offset, let origin):
            let index = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.changePosition(gid, by: offset, from: origin)
            }
            return .integer(Int64(index))
        case .changeURIs(let gid, let fileIndex, let remove, let add, let position):
            // Resolve the GID first, so an unknown one is reported as such before the index is judged.
            _ = try await self.service.read { queue throws(RPCError) in try Self.status(of: gid, in: queue) }
            guard fileIndex == 1 else { throw RPCError.method("fileIndex is out of range") }
            let counts = try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.changeURIs(gid, remove: remove, add: add, position: position)
            }
            return [.integer(Int64(counts.removed)), .integer(Int64(counts.added))]
        case .changeOptions(let gid, let options):
            try await Self.queue(gid) { () async throws(QueueError) in
                try await self.service.changeOptions(gid, options)
            }
            return "OK"
        case .changeGlobalOptions(let options):
            try await Self.queue(nil) { () async throws(QueueError) in
                try await self.service.changeGlobalOptions(options)
            }
            return "OK"
        case .purgeResults:
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.purgeResults() }
            return "OK"
        case .removeResult(let gid):
            try await Self.queue(gid) { () async throws(QueueError) in try await self.service.removeResult(gid) }
            return "OK"
        case .saveSession:
            // The queue itself is stored with every change; the session file is aria2's format of it.
            try await Self.queue(nil) { () async throws(QueueError) in try await self.service.saveSession() }
            return "OK"
        case .shutdown(let force):
            effects.shutdown = (effects.shutdown ?? false) || force
            return "OK"
        }
    }

    /// Runs a call that changes nothing: it reads `queue`, or nothing.
    func read(_ call: ReadCall, from queue: any QueueReader) throws(RPCError) -> JSONValue {
        switch call {
        case .getPeers(let gid):
            let status = try Self.status(of: gid, in: queue)
            if StatusStruct.isStopped(status.status) {
                throw RPCError.method("No peer data is available for GID#\(status.gid)")
            }
            return []
        case .tellStatus(let gid, let keys):
            return StatusStruct.make(try Self.status(of: gid, in: queue), keys: keys)
        case .getURIs(let gid):
            let status = try Self.status(of: gid, in: queue)
            if StatusStruct.isStopped(status.status) {
                throw RPCError.method("No URI data is available for GID#\(status.gid)")
            }
            return .array(StatusStruct.uris(status))
        case .getFiles(let gid):
            return StatusStruct.files(try Self.status(of: gid, in: queue))
        case .getServers(let gid):
            let status = try Self.status(of: gid, in: queue)
            guard status.status == .active else {
                throw RPCError.method("No active download for GID#\(status.gid)")
            }
            return Self.servers(status)
        case .tellActive(let keys):
            return .array(queue.activeDownloads().map { StatusStruct.make($0, keys: keys) })
        case .tellWaiting(let page):
            return Self.page(page, waiting: true, of: queue)
        case .tellStopped(let page):
            return Self.page(page, waiting: false, of: queue)
        case .getOption(let gid):
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
        }
    }

    /// `tellWaiting` or `tellStopped`: the window of the waiting or stopped downloads aria2's pagination names.
    private static func page(_ page: ReadCall.Page, waiting: Bool, of queue: any QueueReader) -> JSONValue {
        guard page.num > 0 else { return [] }
        let stat = queue.globalStat()
        let window = Pagination(offset: page.offset, num: page.num, size: waiting ? stat.numWaiting : stat.numStopped)
        guard !window.range.isEmpty else { return [] }
        var entries = waiting ? queue.waitingDownloads(window.range) : queue.stoppedDownloads(window.range)
        if window.isReversed { entries.reverse() }
        return .array(entries.map { StatusStruct.make($0, keys: page.keys) })
    }

    /// `system.multicall([{methodName, params}, ...])`: each result in a one-element array, each error as a
    /// bare `{code, message}`; each call checked its own token. A run of `aria2.addUri` calls goes to the queue as
    /// one batch: one stored change.
    private func multicall(_ entries: [Result<RPCCall, RPCError>], effects: inout Effects) async -> JSONValue {
        var results: [JSONValue] = []
        results.reserveCapacity(entries.count)
        var index = 0
        while index < entries.count {
            var batch: [AddRequest] = []
            while index + batch.count < entries.count,
                case .success(.write(.addUri(let add))) = entries[index + batch.count]
            {
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
            let outcome: Result<JSONValue, RPCError>
            switch entries[index] {
            case .success(let call): outcome = await self.run(call, effects: &effects)
            case .failure(let error): outcome = .failure(error)
            }
            results.append(Self.multicallResult(outcome, effects: &effects))
            index += 1
        }
        return .array(results)
    }

    /// An entry's result in a multicall's answer: a one-element array, or a bare `{code, message}`.
    private static func multicallResult(_ outcome: Result<JSONValue, RPCError>, effects: inout Effects) -> JSONValue {
        switch outcome {
        case .success(let result):
            return .array([result])
        case .failure(let error):
            if error == .unauthorized { effects.unauthorizedCalls += 1 }
            return error.json
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
