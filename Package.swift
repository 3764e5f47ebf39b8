// swift-tools-version:6.1
import PackageDescription

#if os(Linux)
import Glibc
#endif

let upcomingFeatures: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The `downpour` binary's link on Linux, in release builds. Only the executable has these flags: SwiftPM refuses
/// unsafe flags in a product that another package depends on, and the libraries have none.
/// - `-static-stdlib`: Swift's runtime and Foundation are linked into the binary instead of loaded as a dozen shared
///   libraries, so the loader maps and relocates one image and the linker drops the code nothing reaches. A 1 GiB
///   `get` peaks about 3 MB lower, and 1,000 small files finish sooner (`Benchmarks/RESULTS.md`). The modules are
///   compiled against the shared libraries' interfaces, so the static archives those name only inside the
///   toolchain (Foundation's C parts, its ICU, libxml2 for FoundationXML) are listed here; lld, part of every Swift
///   toolchain for Linux, finds them in any order.
/// - Where the C library can load packed relative relocations (`DT_RELR`, glibc 2.36 and later), lld packs them:
///   the loader reads 0.4 MB of relocation records instead of 1.6 MB.
/// - `--no-export-dynamic` takes back the `-export-dynamic` the toolchain's static-stdlib arguments add: nothing
///   looks a symbol of the binary up by name (its `dlsym` calls find the C library's), and exporting all 54,000
///   put 3.3 MiB of the loader's symbol tables in every run: a 1 GiB `get -x 8` peaked at 32.6–33.4 MiB, now
///   29.9–30.0 MiB (`Benchmarks/RESULTS.md`, stop 56).
let releaseLink: [LinkerSetting] = {
    #if os(Linux)
    var flags = ["-static-stdlib", "-use-ld=lld", "-Xlinker", "--no-export-dynamic"]
    flags += [
        "_CFXMLInterface", "xml2", "CoreFoundation", "FoundationInternationalization", "_FoundationICU",
        "_FoundationCShims", "_FoundationCollections", "swiftSynchronization", "swiftDispatch", "dispatch",
        "BlocksRuntime",
    ].map { "-l" + $0 }
    // "glibc 2.36"; nothing with another C library.
    var buffer = [CChar](repeating: 0, count: 64)
    if confstr(Int32(_CS_GNU_LIBC_VERSION), &buffer, buffer.count) > 0 {
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let version = name.split(separator: " ").last.map { $0.split(separator: ".").compactMap { Int($0) } } ?? []
        if version.count >= 2, (version[0], version[1]) >= (2, 36) {
            flags += ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
        }
    }
    return [.unsafeFlags(flags, .when(platforms: [.linux], configuration: .release))]
    #else
    return []
    #endif
}()

let package = Package(
    name: "Downpour",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "Downpour", targets: ["Downpour"]),
        .library(name: "DownpourAria2", targets: ["DownpourAria2"]),
        .library(name: "DownpourHLS", targets: ["DownpourHLS"]),
        .library(name: "DownpourQueue", targets: ["DownpourQueue"]),
        .library(name: "DownpourRPC", targets: ["DownpourRPC"]),
        .library(name: "DownpourFleet", targets: ["DownpourFleet"]),
        .library(name: "DownpourTestSupport", targets: ["DownpourTestSupport"]),
        .executable(name: "downpour", targets: ["DownpourCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .target(
            name: "Downpour",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: upcomingFeatures
        ),
        // Video over HLS: playlists as values, the decryption of segments (AES-128-CBC from swift-crypto's
        // _CryptoExtras, built anyway for PostgresNIO) and the download of a playlist's segments as one file. A
        // module of its own, so the library's build does not wait for _CryptoExtras.
        .target(
            name: "DownpourHLS",
            dependencies: [
                "Downpour",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcomingFeatures
        ),
        // aria2's options, command line and files (input, configuration, session) over the library: what the
        // daemon, its queue and the CLI share; the engine never uses them.
        .target(
            name: "DownpourAria2",
            dependencies: ["Downpour", "DownpourHLS"],
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "DownpourJSON",
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "DownpourQueue",
            dependencies: [
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "Downpour", "DownpourAria2", "DownpourHLS", "DownpourJSON",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcomingFeatures
        ),
        // Several daemons on one queue in PostgreSQL: the queue's SQL (claims, leases, fencing). Nothing else
        // depends on PostgreSQL.
        .target(
            name: "DownpourFleet",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourQueue",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "DownpourRPC",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourJSON", "DownpourQueue",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [
                // Compiled into the binary, so that a copied `downpour` serves its page with no files beside it.
                // The page loads `app.js` as an ES module; it imports the others (`docs/dashboard.md`).
                .embedInCode("Resources/dashboard/index.html"),
                .embedInCode("Resources/dashboard/style.css"),
                .embedInCode("Resources/dashboard/app.js"),
                .embedInCode("Resources/dashboard/actions.js"),
                .embedInCode("Resources/dashboard/connection.js"),
                .embedInCode("Resources/dashboard/format.js"),
                .embedInCode("Resources/dashboard/forms.js"),
                .embedInCode("Resources/dashboard/graph.js"),
                .embedInCode("Resources/dashboard/render.js"),
                .embedInCode("Resources/dashboard/rpc.js"),
                .embedInCode("Resources/dashboard/view.js"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .executableTarget(
            name: "DownpourCLI",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourQueue", "DownpourRPC", "DownpourSpawn", "DownpourFleet",
                "DownpourHLS",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcomingFeatures,
            linkerSettings: releaseLink
        ),
        .target(
            name: "DownpourSpawn",
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "DownpourTestSupport",
            dependencies: [
                "Downpour", "DownpourSpawn",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "DownpourTests",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourHLS", "DownpourTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "DownpourIntegrationTests",
            dependencies: [
                "Downpour", "DownpourTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "DownpourQueueTests",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourHLS", "DownpourQueue", "DownpourTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "DownpourFleetTests",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourQueue", "DownpourFleet", "DownpourTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "DownpourRPCTests",
            dependencies: [
                "Downpour", "DownpourAria2", "DownpourJSON", "DownpourQueue", "DownpourRPC", "DownpourTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "DownpourCLITests",
            dependencies: [
                "DownpourCLI", "DownpourJSON",
                "DownpourTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: upcomingFeatures
        ),
    ]
)
