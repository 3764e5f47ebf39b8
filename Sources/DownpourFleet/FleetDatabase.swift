import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// Why the fleet's database refused or failed: a message that says what happened and what to do.
public struct FleetError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// Whether the database refused a download because its GID is taken (not a failure of the database).
    public var isGIDTaken: Bool

    public init(_ message: String, isGIDTaken: Bool = false) {
        self.message = message
        self.isGIDTaken = isGIDTaken
    }

    public var description: String { self.message }
}

/// Where a fleet's queue lives: `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE]` (`postgres://`
/// too). `sslmode` is `prefer` by default (TLS when the server offers it, its certificate verified), `require`, or
/// `disable`.
public struct FleetDatabaseURL: Sendable, Hashable, CustomStringConvertible {
    public enum TLSMode: String, Sendable, Hashable {
        case disable, prefer, require
    }

    public var user: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String
    public var tls: TLSMode

    /// Reads a URL; the error names what is wrong with it and what a good one looks like.
    public init(_ text: String) throws(FleetError) {
        let example = "postgresql://USER@HOST:PORT/DATABASE"
        var rest = Substring(text)
        guard let scheme = rest.range(of: "://"), ["postgresql", "postgres"].contains(rest[..<scheme.lowerBound])
        else {
            throw FleetError("'\(text)' is not a PostgreSQL URL: give \(example).")
        }
        rest = rest[scheme.upperBound...]
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let slash = rest.firstIndex(of: "/") else {
            throw FleetError("The URL \(Self.redacted(text)) names no database: give \(example).")
        }
        let database = Self.decoded(rest[rest.index(after: slash)...])
        rest = rest[..<slash]
        guard let at = rest.lastIndex(of: "@") else {
            throw FleetError("The URL \(Self.redacted(text)) names no user: give \(example).")
        }
        let credentials = rest[..<at]
        let address = rest[rest.index(after: at)...]
        if let colon = credentials.firstIndex(of: ":") {
            self.user = Self.decoded(credentials[..<colon])
            self.password = Self.decoded(credentials[credentials.index(after: colon)...])
        } else {
            self.user = Self.decoded(credentials)
            self.password = nil
        }
        var host = address
        var port = 5432
        if address.hasPrefix("[") {
            guard let close = address.firstIndex(of: "]") else {
                throw FleetError("The URL \(Self.redacted(text)) has an unclosed '[' in its host.")
            }
            host = address[address.index(after: address.startIndex)..<close]
            let after = address[address.index(after: close)...]
            if after.hasPrefix(":") {
                guard let number = Int(after.dropFirst()), (1...65535).contains(number) else {
                    throw FleetError("The port in \(Self.redacted(text)) is not a number from 1 to 65535.")
                }
                port = number
            }
        } else if let colon = address.lastIndex(of: ":") {
            host = address[..<colon]
            guard let number = Int(address[address.index(after: colon)...]), (1...65535).contains(number) else {
                throw FleetError("The port in \(Self.redacted(text)) is not a number from 1 to 65535.")
            }
            port = number
        }
        guard !self.user.isEmpty, !host.isEmpty, !database.isEmpty else {
            throw FleetError("The URL \(Self.redacted(text)) needs a user, a host and a database: give \(example).")
        }
        self.host = String(host)
        self.port = port
        self.database = database
        self.tls = .prefer
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0] == "sslmode" else {
                throw FleetError("The URL \(Self.redacted(text)) has '\(pair)': only sslmode is understood.")
            }
            guard let mode = TLSMode(rawValue: String(parts[1])) else {
                throw FleetError("sslmode is disable, prefer or require, not '\(parts[1])'.")
            }
            self.tls = mode
        }
    }

    /// The URL without its password, for messages and logs.
    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "postgresql://\(self.user)@\(host):\(self.port)/\(self.database)"
    }

    /// The client's configuration: this server, and TLS as ``tls`` says (certificates verified).
    public var configuration: PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch self.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(.makeClientConfiguration())
        case .require: tls = .require(.makeClientConfiguration())
        }
        return PostgresClient.Configuration(
            host: self.host,
            port: self.port,
            username: self.user,
            password: self.password,
            database: self.database,
            tls: tls
        )
    }

    private static func decoded(_ text: Substring) -> String {
        String(text).removingPercentEncoding ?? String(text)
    }

    private static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].lastIndex(of: "@") else {
            return text
        }
        let credentials = text[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }
}
