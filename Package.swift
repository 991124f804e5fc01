// swift-tools-version:6.1
import PackageDescription

/// Every target runs in Swift 6 language mode. Async functions that are not isolated run on
/// their caller's executor, so a model's async action stays on its session's executor.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let package = Package(
    name: "navd",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // The navigation core: state encoding, screen declarations, the engine. Declare and test features with it.
        .library(name: "NavigationCore", targets: ["NavigationCore"]),
        // The server around it: host your own features (a `FeatureCatalog`) over HTTP with a `ServerConfiguration`.
        .library(name: "NavServer", targets: ["NavServer"]),
        .executable(name: "navd", targets: ["navd"]),
        .executable(name: "navd-bench", targets: ["navd-bench"]),
        .library(name: "NavigationClient", targets: ["NavigationClient"]),
    ],
    targets: [
        // Navigation core: state encoding, slots, the navigation tree and the reconciler. No HTTP, no features.
        .target(name: "NavigationCore", swiftSettings: swiftSettings),
        // Where sessions live between processes: the storage seam and its records. No engine, no HTTP.
        .target(name: "SessionStorage", dependencies: ["COpenSSL"], swiftSettings: swiftSettings),
        // The system's OpenSSL libcrypto (SHA-256 for tokens at rest).
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Sessions in an embedded SQLite database: WAL, synchronous commits, one group-committing writer.
        .target(name: "SQLiteStorage", dependencies: ["SessionStorage", "CSQLite"], swiftSettings: swiftSettings),
        // Sessions in PostgreSQL, for several nodes: synchronous commits, one group-committing writer.
        .target(name: "PostgresStorage", dependencies: ["SessionStorage", "CLibPQ"], swiftSettings: swiftSettings),
        // The system's libpq (the PostgreSQL client library).
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev", "libssl-dev"])]),
        // The system's SQLite (libsqlite3).
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // The hosted features: plain observable models and, apart from them, their screens.
        .target(name: "Features", dependencies: ["NavigationCore", "CCurl"], swiftSettings: swiftSettings),
        // The system's libcurl: the fact service's HTTP client.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // HTTP/1.1 and server-sent events on non-blocking sockets. Knows nothing of navigation.
        .target(name: "HTTP", dependencies: ["CNavdSystem"], swiftSettings: swiftSettings),
        // Linux system calls the Glibc module leaves out (epoll, eventfd, accept4), from the system headers.
        .target(name: "CNavdSystem"),
        // The browser inspector, the JavaScript client module and the API's OpenAPI document
        // (a link to the repository's openapi.yaml), embedded into the binary at build time.
        .target(name: "WebClient", resources: [
            .embedInCode("Resources/navd-client.js"),
            .embedInCode("Resources/index.html"),
            .embedInCode("Resources/inspector.js"),
            .embedInCode("Resources/inspector.css"),
            .embedInCode("Resources/openapi.yaml"),
        ], swiftSettings: swiftSettings),
        // Sessions, routes, configuration and metrics: wires the core and its caller's features to HTTP.
        .target(name: "NavServer", dependencies: ["NavigationCore", "HTTP", "WebClient", "SessionStorage", "SQLiteStorage", "PostgresStorage", "CGlibcMalloc"], swiftSettings: swiftSettings),
        // glibc's malloc.h (mallopt, malloc_trim) and sys/auxv.h (getauxval): empty elsewhere.
        .systemLibrary(name: "CGlibcMalloc", path: "Sources/CGlibcMalloc"),
        // The Swift client an app imports: the event stream, a live mirror of the tree, the API's calls. Depends on no other target.
        .target(name: "NavigationClient", swiftSettings: swiftSettings),
        // Loopback stubs shared by the test targets; never part of a product.
        .target(name: "TestSupport", dependencies: ["NavigationCore", "Features", "HTTP"], swiftSettings: swiftSettings),
        // The demo features on NavServer's public API, with their flags: what navd and the tests host.
        .target(name: "DemoHost", dependencies: ["NavServer", "Features", "NavigationCore"], swiftSettings: swiftSettings),
        .executableTarget(name: "navd", dependencies: ["DemoHost", "NavServer"], swiftSettings: swiftSettings),
        .executableTarget(name: "navd-bench", dependencies: ["NavigationCore", "Features"], swiftSettings: swiftSettings),
        .testTarget(name: "NavigationCoreTests", dependencies: ["NavigationCore"], swiftSettings: swiftSettings),
        .testTarget(name: "FeaturesTests", dependencies: ["Features", "NavigationCore", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "SessionStorageTests", dependencies: ["SessionStorage", "SQLiteStorage", "PostgresStorage", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "NavigationClientTests", dependencies: ["NavigationClient", "NavServer", "DemoHost", "SQLiteStorage", "SessionStorage", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "NavServerTests", dependencies: ["NavServer", "DemoHost", "Features", "NavigationCore", "HTTP", "SessionStorage", "TestSupport", "WebClient"], swiftSettings: swiftSettings),
    ],
    swiftLanguageModes: [.v6]
)
