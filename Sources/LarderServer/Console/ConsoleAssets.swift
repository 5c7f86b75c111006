import Foundation
import LarderCrypto

/// The web console's files, embedded in the binary (SwiftPM `embedInCode`, `assets/`), each
/// served under a content-hashed name (`console.3f2a9c1d7b04.js`) so it can be cached for a year.
///
/// References between files (`./api.js` in `console.js`, `./console.css` in `index.html`) are
/// rewritten to the hashed names once, at start-up, leaves first, so a file's hash covers the
/// names of what it loads. `index.html` is the one file served under its own name, never cached
/// long.
/// ```swift
/// let assets = ConsoleAssets.embedded
/// assets.file(named: assets.hashedName(of: "console.js")!)?.contentType  // text/javascript…
/// ```
public struct ConsoleAssets: Sendable {
  public struct Asset: Sendable {
    public let name: String
    public let contentType: String
    public let bytes: [UInt8]
  }

  /// The index page (references already rewritten).
  public let index: [UInt8]
  private let byHashedName: [String: Asset]
  private let hashedNames: [String: String]

  /// The console as built into this binary.
  public static let embedded = ConsoleAssets(
    files: [
      ("console.css", PackageResources.console_css),
      ("api.js", PackageResources.api_js),
      ("console.js", PackageResources.console_js),
    ],
    index: PackageResources.index_html)

  /// `files` in dependency order: each may reference (as `./name`) only files before it.
  public init(files: [(name: String, bytes: [UInt8])], index: [UInt8]) {
    var hashed: [String: String] = [:]
    var assets: [String: Asset] = [:]
    for (name, bytes) in files {
      let text = Self.rewrite(String(decoding: bytes, as: UTF8.self), hashed)
      let content = Array(text.utf8)
      let digest = String(Hex.encode(Digest.hash(.sha256, content)).prefix(12))
      let dot = name.lastIndex(of: ".") ?? name.endIndex
      let hashedName = "\(name[..<dot]).\(digest)\(name[dot...])"
      hashed[name] = hashedName
      assets[hashedName] = Asset(name: hashedName, contentType: Self.contentType(of: name), bytes: content)
    }
    self.index = Array(Self.rewrite(String(decoding: index, as: UTF8.self), hashed).utf8)
    byHashedName = assets
    hashedNames = hashed
  }

  /// The asset served under `hashedName`, nil for any other name (so no name is ever a path).
  public func file(named hashedName: String) -> Asset? { byHashedName[hashedName] }

  /// The name `source` is served under.
  public func hashedName(of source: String) -> String? { hashedNames[source] }

  private static func rewrite(_ text: String, _ hashed: [String: String]) -> String {
    var text = text
    for (name, hashedName) in hashed { text = text.replacingOccurrences(of: "./\(name)", with: "./\(hashedName)") }
    return text
  }

  private static func contentType(of name: String) -> String {
    if name.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
    if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
    return "application/octet-stream"
  }
}
