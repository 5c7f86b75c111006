// swift-tools-version:6.0
// An app outside the Larder package that embeds the HTTP server (the `LarderServer` product) on
// the embedded store: it must build and link without libpq or libcurl
// (scripts/embedded-app-check.sh).
import PackageDescription

let package = Package(
  name: "EmbeddedServer",
  platforms: [.macOS(.v15)],
  dependencies: [.package(name: "Larder", path: "../..")],
  targets: [
    .executableTarget(
      name: "EmbeddedServer",
      dependencies: [.product(name: "LarderServer", package: "Larder"), .product(name: "Larder", package: "Larder")])
  ]
)
