import AsyncHTTPClient
import DownpourTestSupport
import Foundation
import Testing

/// `downpour daemon` as aria2: `aria2.addUri` of a `.meta4` URL downloads the document's files, and `tellStatus`
/// links the downloads (`followedBy`, `following`), also after a restart.
@Suite("The daemon and Metalink URLs", .timeLimit(.minutes(10)))
struct DaemonMetalinkTests {
    static let content = MetalinkCLITests.content

    /// Asks `tellStatus` until the download has stopped; returns its status.
    static func waitUntilStopped(_ rpc: RPCClient, _ gid: String) async throws -> [String: Any] {
        try await eventually("\(gid) to stop") { () async throws -> [String: Any]? in
            let status = try await rpc.call("aria2.tellStatus", [gid]) as? [String: Any] ?? [:]
            guard let state = status["status"] as? String, ["complete", "error", "removed"].contains(state) else {
                return nil
            }
            return status
        }
    }

    @Test("addUri of a .meta4 URL: complete, followedBy its file's GID, which names it in following")
    func addUriOfAMetalink() async throws {
        let files = try await RangeTestServer.start(content: Self.content)
        let documents = try await RangeTestServer.start(
            content: Array(MetalinkCLITests.document(url: files.url("/file.bin")).utf8)
        )
        let scratch = try Scratch()
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { scratch.remove() }
        let downloads = scratch.file("downloads")
        let arguments = ["--state-dir", scratch.file("state"), "-d", downloads, "-x", "1"]
        do {
            var daemon = try await DaemonProcess.start(arguments, logDirectory: scratch.path)
            var rpc = RPCClient(url: daemon.url, secret: nil, client: client)
            let gid = try await rpc.string("aria2.addUri", [[documents.url("/release.meta4")]])
            let document = try await Self.waitUntilStopped(rpc, gid)
            #expect(document["status"] as? String == "complete", "\(document)")
            let followers = try #require(document["followedBy"] as? [String], "\(document)")
            try #require(followers.count == 1)
            let file = try await Self.waitUntilStopped(rpc, followers[0])
            #expect(file["status"] as? String == "complete", "\(file)")
            #expect(file["following"] as? String == gid, "\(file)")
            #expect(file["followedBy"] == nil && document["following"] == nil)
            #expect(try sha256Hex(ofFileAt: downloads + "/file.bin") == sha256Hex(Self.content))
            #expect(try FileManager.default.contentsOfDirectory(atPath: downloads) == ["file.bin"])
            #expect(await daemon.stop() == 0, "\(daemon.standardError)")

            // The links are stored: a new process shows them.
            daemon = try await DaemonProcess.start(arguments, logDirectory: scratch.path)
            rpc = RPCClient(url: daemon.url, secret: nil, client: client)
            let again = try await rpc.call("aria2.tellStatus", [gid, ["followedBy"]]) as? [String: Any]
            #expect(again?["followedBy"] as? [String] == followers)
            let fileAgain = try await rpc.call("aria2.tellStatus", [followers[0], ["following"]]) as? [String: Any]
            #expect(fileAgain?["following"] as? String == gid)
            #expect(await daemon.stop() == 0, "\(daemon.standardError)")
        } catch {
            try? await client.shutdown()
            try? await files.shutdown()
            try? await documents.shutdown()
            throw error
        }
        try await client.shutdown()
        try await files.shutdown()
        try await documents.shutdown()
    }
}
