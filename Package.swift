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
    .library(name: "LarderPostgres", targets: ["LarderPostgres"]),
    .library(name: "LarderS3Store", targets: ["LarderS3Store"]),
    .library(name: "LarderWebhooks", targets: ["LarderWebhooks"]),
    .library(name: "LarderCLI", targets: ["LarderCLI"]),
    .library(name: "LarderImages", targets: ["LarderImages"]),
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
    // Linux calls Swift's Glibc leaves out (epoll, eventfd, sendfile, accept4, prctl): the HTTP engine's.
    .systemLibrary(name: "CLinuxIO"),
    .systemLibrary(
      name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    // libvips is variadic: its shim.h holds inline C functions with the options fixed.
    .systemLibrary(
      name: "CVips", pkgConfig: "vips", providers: [.apt(["libvips-dev"])]),
    // RE2 is C++: a tiny C shim around it.
    .target(
      name: "CRE2",
      cxxSettings: [.unsafeFlags(["-std=c++17"])],
      linkerSettings: [.linkedLibrary("re2"), .linkedLibrary("stdc++")]),

    // One logger value over a handler protocol (swift-log's shape); no dependencies.
    .target(name: "LarderLogging"),

    // One Swift wrapper per C library.
    // CRC-32C with the CPU's instruction: a header only, nothing linked.
    .systemLibrary(name: "CCRC32C"),
    .target(name: "LarderCrypto", dependencies: ["CCrypto", "CCRC32C"]),
    // The store: SQLite, libmagic and libcrypto only. Other catalogs and blob stores are
    // backends in targets of their own, handed to it in `Larder.Configuration.backends`.
    .target(name: "Larder", dependencies: ["CSQLite", "CMagic", "LarderCrypto", "LarderLogging"]),
    // The PostgreSQL catalog (libpq): `StoreBackends.postgres`.
    .target(name: "LarderPostgres", dependencies: ["Larder", "CPostgres"]),
    // Blobs in an S3-compatible bucket (over LarderS3): `StoreBackends.s3`.
    .target(name: "LarderS3Store", dependencies: ["Larder", "LarderS3", "LarderCrypto"]),
    .target(name: "LarderRules", dependencies: ["CRE2", "LarderLogging"]),
    .target(name: "LarderAuth", dependencies: ["LarderCrypto"]),
    // Image variants (libvips): thumbnails and conversions cached as derived files of the store.
    .target(name: "LarderImages", dependencies: ["CVips", "Larder"]),
    // The HTTP layer (the epoll engine, requests, responses, router, metrics, access log): it
    // imports no storage module, so "HTTP knows nothing of storage" is checked by the compiler.
    .target(name: "LarderHTTP", dependencies: ["CLinuxIO", "LarderLogging"]),
    .target(
      name: "LarderServer",
      // No LarderPostgres, LarderS3Store or LarderS3: the program composes its backends
      // (`Options.backends`) and its webhook transport, so embedding the server links neither
      // libpq nor libcurl (scripts/embedded-app-check.sh).
      dependencies: [
        "LarderHTTP", "LarderLogging", "Larder", "LarderRules", "LarderAuth", "LarderCrypto", "LarderImages",
      ],
      // The web console's HTML, CSS and JS, compiled into the binary (ConsoleAssets).
      resources: [.embedInCode("Console/assets")]),
    // The events deliverer's webhooks over libcurl (LarderS3's OutboundHTTP), for programs that
    // compose the server with it (the CLI).
    .target(name: "LarderWebhooks", dependencies: ["LarderServer", "LarderS3"]),
    // The CLI's commands, as a library so that a test-only build of it can inject faults. It
    // composes the server with every backend and the webhook transport.
    .target(
      name: "LarderCLI",
      dependencies: [
        "Larder", "LarderServer", "LarderRules", "LarderAuth", "LarderCrypto", "LarderPostgres", "LarderS3Store",
        "LarderWebhooks", "LarderImages", "LarderClient",
      ]),
    .executableTarget(name: "larder", dependencies: ["LarderCLI"]),
    // Test only: `larder` that exits abruptly at the fault point named by `LARDER_CRASH_AT`
    // (crash tests run it as a real process). Production code reads no such variable.
    .executableTarget(
      name: "larder-crashing", dependencies: ["LarderCLI", "Larder"], path: "Tests/Executables/larder-crashing"),
    // Test and benchmark only: a second process committing models on a data directory, or timing
    // how soon such commits reach an observer (cross-process observation tests, `make bench`).
    .executableTarget(
      name: "larder-model-probe", dependencies: ["Larder", "LarderTestSupport"],
      path: "Tests/Executables/larder-model-probe"),
    // Benchmark only: catalog commits per second through the library (Benchmarks/catalog-commit/run.sh).
    .executableTarget(
      name: "larder-commit-bench", dependencies: ["Larder", "LarderPostgres"],
      path: "Benchmarks/catalog-commit", exclude: ["run.sh"]),

    // Test support shared by test targets (process spawning, openssl fixtures),
    // and an in-process driver for HTTP handlers (no socket).
    // It also holds `TestCatalog` (which catalog a run uses), hence Larder, and puts a
    // service's options on that catalog (`onTestStores()`), hence LarderServer.
    .target(
      name: "LarderTestSupport",
      dependencies: [
        "LarderHTTP", "Larder", "LarderPostgres", "LarderS3Store", "LarderImages", "LarderServer", "LarderWebhooks",
      ]),

    // S3-compatible blob storage over libcurl (which signs requests itself); CCurl stays inside.
    .target(name: "LarderS3", dependencies: ["CCurl", "LarderCrypto"]),

    // The Swift client: Foundation only, it stands alone.
    .target(name: "LarderClient"),

    .testTarget(name: "LarderCryptoTests", dependencies: ["LarderCrypto"]),
    .testTarget(name: "LarderTests", dependencies: ["Larder", "LarderCrypto", "LarderTestSupport"]),
    .testTarget(name: "LarderRulesTests", dependencies: ["LarderRules"]),
    .testTarget(name: "LarderImagesTests", dependencies: ["LarderImages", "Larder", "LarderTestSupport"]),
    .testTarget(name: "LarderAuthTests", dependencies: ["LarderAuth", "LarderCrypto", "LarderTestSupport"]),
    .testTarget(
      name: "LarderServerTests",
      dependencies: [
        "LarderServer", "LarderHTTP", "LarderLogging", "Larder", "LarderRules", "LarderAuth", "LarderCrypto",
        "LarderTestSupport", "LarderImages",
      ]),
    .testTarget(
      name: "LarderClientTests",
      dependencies: ["LarderClient", "LarderServer", "LarderHTTP", "Larder", "LarderTestSupport", "LarderImages"]),
    .testTarget(
      name: "LarderCLITests", dependencies: ["Larder", "LarderS3", "LarderS3Store", "LarderTestSupport", "LarderImages"]),
    .testTarget(
      name: "LarderS3Tests",
      dependencies: ["LarderS3", "LarderS3Store", "LarderPostgres", "Larder", "LarderCrypto", "LarderTestSupport"]),
  ]
)
