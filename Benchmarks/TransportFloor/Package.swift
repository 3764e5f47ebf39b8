// swift-tools-version:6.1
import PackageDescription

// What 1,000 small downloads cost with Downpour's transport and nothing else: AsyncHTTPClient fetching a list of
// URLs, N at a time, and writing each body the way curl does or the way Downpour does. Not part of Downpour's
// package; see Benchmarks/README.md ("The transport's floor").
let package = Package(
    name: "TransportFloor",
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
    ],
    targets: [
        .executableTarget(
            name: "TransportFloor",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        )
    ]
)
