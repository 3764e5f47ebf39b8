import NIOCore
import Testing

@testable import DownpourRPC

/// The limit on guessing the secret, over an injected clock.
@Suite struct GuessLimitTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func at(_ milliseconds: Int64) -> NIODeadline { Self.start + .milliseconds(milliseconds) }

    @Test("A peer that never failed, or failed less than the burst, is checked at once")
    func withinTheBurst() {
        var limit = GuessLimit(burst: 3, interval: .seconds(1))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(0))
        limit.failed("a", at: Self.at(0))
        limit.failed("a", at: Self.at(0))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(0))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(0))
    }

    @Test("At the burst, a peer's requests take turns one interval apart, the right token's too; a burst of turns")
    func takesTurns() {
        var limit = GuessLimit(burst: 3, interval: .seconds(1))
        for _ in 0..<3 { limit.failed("a", at: Self.at(0)) }
        // Many requests at once: one per second, in the order they came, at most three waiting; the rest none.
        let turns = (0..<5).map { _ in limit.turn(of: "a", at: Self.at(10)) }
        #expect(turns == [Self.at(10), Self.at(1010), Self.at(2010), nil, nil])
        // A peer that stopped failing is below the burst again an interval later: checked at once.
        #expect(limit.turn(of: "a", at: Self.at(1020)) == Self.at(1020))
        // Another address is not slowed.
        #expect(limit.turn(of: "b", at: Self.at(10)) == Self.at(10))
    }

    @Test("A batch's wrong tokens count one each")
    func batchesCountEachGuess() {
        var limit = GuessLimit(burst: 10, interval: .seconds(1))
        limit.failed("a", count: 9, at: Self.at(0))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(0))
        limit.failed("a", count: 1, at: Self.at(0))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(0))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(1000))
    }

    @Test("Failures drain one per interval: a peer that stops guessing is served at once again")
    func drains() throws {
        var limit = GuessLimit(burst: 3, interval: .seconds(1))
        for _ in 0..<3 { limit.failed("a", at: Self.at(0)) }
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(0))
        #expect(limit.turn(of: "a", at: Self.at(0)) == Self.at(1000))
        // 1.5 s later the level is 1.5, below the burst.
        #expect(limit.turn(of: "a", at: Self.at(1500)) == Self.at(1500))
        // A peer that keeps failing once a turn stays slowed.
        var busy = GuessLimit(burst: 2, interval: .seconds(1))
        var now = Self.at(0)
        for _ in 0..<2 { busy.failed("p", at: now) }
        for _ in 0..<5 {
            let next = busy.turn(of: "p", at: now)
            let turn = try #require(next)
            #expect(turn >= now)
            busy.failed("p", at: turn)
            now = turn
        }
        let last = busy.turn(of: "p", at: now)
        #expect(last.map { $0 > now } ?? true)
    }

    @Test("Peers are forgotten once drained when too many are tracked")
    func boundedPeers() {
        var limit = GuessLimit(burst: 2, interval: .milliseconds(10))
        for index in 0..<GuessLimit.maximumPeers { limit.failed("p\(index)", at: Self.at(0)) }
        #expect(limit.trackedPeers == GuessLimit.maximumPeers)
        limit.failed("late", at: Self.at(1000))
        #expect(limit.trackedPeers == 1)
        // Still over with none drained: the quietest go.
        var full = GuessLimit(burst: 2, interval: .seconds(100))
        for index in 0...GuessLimit.maximumPeers { full.failed("p\(index)", at: Self.at(0)) }
        #expect(full.trackedPeers == GuessLimit.maximumPeers)
    }

    @Test("A peer is its address, whatever the port")
    func peerIsTheAddress() throws {
        let one = try SocketAddress(ipAddress: "127.0.0.1", port: 40000)
        let two = try SocketAddress(ipAddress: "127.0.0.1", port: 40001)
        #expect(TokenGuessLimiter.peer(of: one) == TokenGuessLimiter.peer(of: two))
        #expect(
            TokenGuessLimiter.peer(of: try SocketAddress(ipAddress: "::1", port: 1)) != TokenGuessLimiter.peer(of: one)
        )
        // An IPv6 peer is its /64: one host may hold all of it.
        let v6 = try ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:3::1", "::1"].map {
            TokenGuessLimiter.peer(of: try SocketAddress(ipAddress: $0, port: 443))
        }
        #expect(v6 == ["2001:db8:1:2::/64", "2001:db8:1:2::/64", "2001:db8:1:3::/64", "0:0:0:0::/64"])
    }
}
