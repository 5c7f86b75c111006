// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "Larder",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "Larder", targets: ["Larder"]),
    .library(name: "LarderHTTP", targets: ["LarderHTTP"]),
    .library(name: "LarderServer", targets: ["LarderServer"]),
    .library(name: "LarderRules", targets: ["LarderRules"]),
    .library(name: "LarderAuth", targets: ["LarderAuth"]),
    .library(name: "LarderClient", targets: ["LarderClient"]),
    .library(name: "LarderS3", targets: ["LarderS3"]),
    .executable(name: "larder", targets: ["larder"]),
  ],
  targets: [
    // C libraries: a module map and a shim header each, nothing else.
    .systemLibrary(
      name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(
      name: "CMagic", pkgConfig: "libmagic", providers: [.apt(["libmagic-dev"])]),
    .systemLibrary(
      name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
    .systemLibrary(
      name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
    .systemLibrary(
      name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
    .systemLibrary(
      name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    // RE2 is C++: a tiny C shim around it.
    .target(
      name: "CRE2",
      cxxSettings: [.unsafeFlags(["-std=c++17"])],
      linkerSettings: [.linkedLibrary("re2"), .linkedLibrary("stdc++")]),

    // One logger value over a handler protocol (swift-log's shape); no dependencies.
    .target(name: "LarderLogging"),

    // One Swift wrapper per C library.
    .target(name: "LarderCrypto", dependencies: ["CCrypto"]),
    .target(name: "Larder", dependencies: ["CSQLite", "CPostgres", "CMagic", "LarderCrypto", "LarderLogging", "LarderS3"]),
    .target(name: "LarderRules", dependencies: ["CRE2"]),
    .target(name: "LarderAuth", dependencies: ["LarderCrypto"]),
    // The HTTP layer (libmicrohttpd, requests, responses, router, metrics, access log): it
    // imports no storage module, so "HTTP knows nothing of storage" is checked by the compiler.
    .target(name: "LarderHTTP", dependencies: ["CMicroHTTPD", "LarderLogging"]),
    .target(
      name: "LarderServer",
      dependencies: ["LarderHTTP", "LarderLogging", "Larder", "LarderRules", "LarderAuth", "LarderCrypto"]),
    .executableTarget(
      name: "larder", dependencies: ["Larder", "LarderServer", "LarderRules", "LarderAuth"]),

    // Test support shared by test targets (process spawning, openssl fixtures),
    // and an in-process driver for HTTP handlers (no socket).
    // It also holds `TestCatalog` (which catalog a run uses), hence Larder.
    .target(name: "LarderTestSupport", dependencies: ["LarderHTTP", "Larder"]),

    // S3-compatible blob storage over libcurl (which signs requests itself); CCurl stays inside.
    .target(name: "LarderS3", dependencies: ["CCurl", "LarderCrypto"]),

    // The Swift client: Foundation only, it stands alone.
    .target(name: "LarderClient"),

    .testTarget(name: "LarderCryptoTests", dependencies: ["LarderCrypto"]),
    .testTarget(name: "LarderTests", dependencies: ["Larder", "LarderCrypto", "LarderTestSupport"]),
    .testTarget(name: "LarderRulesTests", dependencies: ["LarderRules"]),
    .testTarget(name: "LarderAuthTests", dependencies: ["LarderAuth", "LarderCrypto", "LarderTestSupport"]),
    .testTarget(
      name: "LarderServerTests",
      dependencies: [
        "LarderServer", "LarderHTTP", "LarderLogging", "Larder", "LarderRules", "LarderAuth", "LarderCrypto",
        "LarderTestSupport",
      ]),
    .testTarget(name: "LarderClientTests", dependencies: ["LarderClient", "LarderServer", "LarderHTTP", "Larder"]),
    .testTarget(name: "LarderCLITests", dependencies: ["Larder", "LarderTestSupport"]),
    .testTarget(name: "LarderS3Tests", dependencies: ["LarderS3", "Larder", "LarderCrypto", "LarderTestSupport"]),
  ]
)
