import AsyncHTTPClient
import DownpourJSON
import DownpourTestSupport
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `downpour daemon` process started by a test: it listens on a port of its own choosing (`--rpc-listen-port
/// 0`), which is read from the first line it prints.
final class DaemonProcess: Sendable {
    let child: ChildProcess
    let port: Int
    let outputPath: String
    let errorPath: String

    private init(child: ChildProcess, port: Int, outputPath: String, errorPath: String) {
        self.child = child
        self.port = port
        self.outputPath = outputPath
        self.errorPath = errorPath
    }

    /// Starts `downpour daemon ARGUMENTS --rpc-listen-port 0` with its output in files under `logDirectory`, and
    /// waits (at most `limit`) for the line that says where it listens.
    static func start(
        _ arguments: [String],
        logDirectory: String,
        limit: Duration = .seconds(60)
    ) async throws -> DaemonProcess {
        let name = UUID().uuidString
        let outputPath = logDirectory + "/daemon-\(name).out"
        let errorPath = logDirectory + "/daemon-\(name).err"
        let child = try ChildProcess(
            executable: Binary.path,
            arguments: ["daemon", "--rpc-listen-port", "0"] + arguments,
            environment: Binary.environment(),
            standardOutput: outputPath,
            standardError: errorPath
        )

        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            if let port = Self.listeningPort(in: text) {
                return DaemonProcess(child: child, port: port, outputPath: outputPath, errorPath: errorPath)
            }
            if let status = child.exitStatus {
                let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
                throw DaemonTestError("the daemon exited with \(status) before listening: \(errors)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        await child.wait(limit: .zero)
        throw DaemonTestError("the daemon did not say where it listens within \(limit)")
    }

    /// The port in the daemon's `http://127.0.0.1:PORT/jsonrpc` line.
    static func listeningPort(in text: String) -> Int? {
        guard let range = text.range(of: "http://127.0.0.1:") else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isNumber }
        guard text[range.upperBound...].dropFirst(digits.count).hasPrefix("/jsonrpc") else { return nil }
        return Int(digits)
    }

    var url: String { "http://127.0.0.1:\(self.port)/jsonrpc" }

    var standardOutput: String { (try? String(contentsOfFile: self.outputPath, encoding: .utf8)) ?? "" }
    var standardError: String { (try? String(contentsOfFile: self.errorPath, encoding: .utf8)) ?? "" }

    /// `kill -9`: no chance to save anything.
    func kill9() async {
        self.child.signal(SIGKILL)
        _ = await self.waitForExit(limit: .seconds(30))
    }

    /// Sends `signal` and waits for the exit status (nil when still running after `limit`, then killed).
    func stop(signal: Int32 = SIGTERM, limit: Duration = .seconds(30)) async -> Int32? {
        self.child.signal(signal)
        return await self.waitForExit(limit: limit)
    }

    /// Waits for the process to end; nil when it is still running after `limit` (then it is killed).
    func waitForExit(limit: Duration) async -> Int32? {
        guard let status = await self.child.waitForExit(within: limit) else {
            await self.child.wait(limit: .zero)
            return nil
        }
        return status
    }
}

struct DaemonTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A small JSON-RPC client for tests, over AsyncHTTPClient; every value is Foundation JSON.
struct RPCClient: Sendable {
    let url: String
    let secret: String?
    let client: HTTPClient

    /// The raw answer: HTTP status and the decoded body.
    func post(_ body: Data) async throws -> (status: Int, body: Any) {
        var request = HTTPClientRequest(url: self.url)
        request.method = .POST
        request.body = .bytes(ByteBuffer(data: body))
        let response = try await self.client.execute(request, timeout: .seconds(30))
        var bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
        let data = bytes.readData(length: bytes.readableBytes) ?? Data()
        let json = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        return (Int(response.status.code), json)
    }

    /// Calls `method` (with the token first for `aria2.*`) and returns `result`, or throws the RPC error.
    func call(_ method: String, _ params: [Any] = []) async throws -> Any {
        var params = params
        if let secret, method.hasPrefix("aria2.") { params.insert("token:\(secret)", at: 0) }
        let body = try JSONSerialization.data(withJSONObject: [
            "jsonrpc": "2.0", "id": "t", "method": method, "params": params,
        ])
        let (_, json) = try await self.post(body)
        guard let object = json as? [String: Any] else { throw DaemonTestError("not an object: \(json)") }
        if let error = object["error"] as? [String: Any] {
            throw RPCCallError(code: error["code"] as? Int ?? 0, message: error["message"] as? String ?? "")
        }
        guard let result = object["result"] else { throw DaemonTestError("no result: \(object)") }
        return result
    }

    func string(_ method: String, _ params: [Any] = []) async throws -> String {
        let result = try await self.call(method, params)
        guard let text = result as? String else { throw DaemonTestError("\(method) gave \(result), not a string") }
        return text
    }

    func statuses(_ method: String, _ params: [Any] = []) async throws -> [[String: Any]] {
        let result = try await self.call(method, params)
        guard let list = result as? [[String: Any]] else { throw DaemonTestError("\(method) gave \(result)") }
        return list
    }
}

struct RPCCallError: Error, Equatable {
    var code: Int
    var message: String
}

/// Runs `body` with an HTTP client for the daemon's RPC, and shuts the client down afterwards, whether `body`
/// returns or throws.
func withHTTPClient<Result>(_ body: (HTTPClient) async throws -> Result) async throws -> Result {
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}
