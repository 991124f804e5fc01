// swift-tools-version:6.1
import PackageDescription

/// A to-do list hosted by navd's server library: the feature is declared here, navd knows
/// nothing of it. Depends on the navd package by path (a real app would use its URL).
let package = Package(
    name: "TodoServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "navd", path: "../.."),
    ],
    targets: [
        // The feature: plain models and, apart from them, their screens.
        // Effects await the models' async methods on the session's executor (see the README).
        .target(name: "Todo", dependencies: [.product(name: "NavigationCore", package: "navd")],
                swiftSettings: [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]),
        // Serves it over HTTP.
        .executableTarget(name: "todo-server", dependencies: ["Todo", .product(name: "NavServer", package: "navd")]),
        // Drives the served feature over HTTP on loopback.
        .testTarget(name: "TodoTests", dependencies: [
            "Todo", .product(name: "NavServer", package: "navd"), .product(name: "NavigationCore", package: "navd"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
