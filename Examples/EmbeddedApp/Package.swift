// swift-tools-version:6.0
// An app outside the Larder package that uses the embedded store only (SQLite and files in a
// data directory): it must build and link without libpq or libcurl (scripts/embedded-app-check.sh).
import PackageDescription

let package = Package(
  name: "EmbeddedApp",
  platforms: [.macOS(.v15)],
  dependencies: [.package(name: "Larder", path: "../..")],
  targets: [
    .executableTarget(name: "EmbeddedApp", dependencies: [.product(name: "Larder", package: "Larder")])
  ]
)
