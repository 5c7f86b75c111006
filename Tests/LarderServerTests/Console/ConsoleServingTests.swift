import Foundation
import LarderServer
import Testing

/// The web console's static files, through the service's own route table (in process).
@Suite struct ConsoleServingTests {
  private func get(_ s: InProcessService, _ path: String) throws -> WireResponse {
    try s.send(.init("GET", path))
  }

  @Test func rootRedirectsToTheConsole() throws {
    try withInProcessService { s in
      let root = try get(s, "/")
      #expect(root.status == 302)
      #expect(root["Location"] == "/console/")
      let bare = try get(s, "/console")
      #expect(bare.status == 301)
      #expect(bare["Location"] == "/console/")
    }
  }

  @Test func indexIsNotCachedLongAndCarriesAStrictPolicy() throws {
    try withInProcessService { s in
      let index = try get(s, "/console/")
      #expect(index.status == 200)
      #expect(index["Content-Type"] == "text/html; charset=utf-8")
      #expect(index["Cache-Control"] == "no-cache")
      let csp = try #require(index["Content-Security-Policy"])
      #expect(csp.contains("default-src 'none'"))
      #expect(csp.contains("script-src 'self';"))
      #expect(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"))
      #expect(csp.contains("frame-ancestors 'none'"))
      #expect(index["X-Content-Type-Options"] == "nosniff")
      // No inline script: every <script> names a file.
      #expect(!index.text.contains("<script>"))
    }
  }

  @Test func assetsHaveContentHashedNamesAndAreCachedForAYear() throws {
    try withInProcessService { s in
      let index = try get(s, "/console/").text
      let assets = ConsoleAssets.embedded
      for source in ["console.css", "console.js", "api.js"] {
        let hashed = try #require(assets.hashedName(of: source))
        #expect(hashed.wholeMatch(of: /[a-z]+\.[0-9a-f]{12}\.(js|css)/) != nil, "\(hashed)")
        let r = try get(s, "/console/\(hashed)")
        #expect(r.status == 200)
        #expect(r["Cache-Control"] == "public, max-age=31536000, immutable")
        #expect(r["Content-Security-Policy"] != nil)
        #expect(r["Content-Type"]?.hasPrefix(source.hasSuffix(".js") ? "text/javascript" : "text/css") == true)
        // Nothing refers to a file by its unhashed name.
        #expect(!index.contains("\"./\(source)\""))
      }
      #expect(index.contains("./\(try #require(assets.hashedName(of: "console.js")))"))
      // console.js loads api.js by its hashed name, so console.js's hash covers api.js's.
      let js = try get(s, "/console/\(try #require(assets.hashedName(of: "console.js")))").text
      #expect(js.contains("./\(try #require(assets.hashedName(of: "api.js")))"))
    }
  }

  @Test func changedContentChangesTheName() {
    let a = ConsoleAssets(files: [("x.js", Array("1".utf8))], index: [])
    let b = ConsoleAssets(files: [("x.js", Array("2".utf8))], index: [])
    #expect(a.hashedName(of: "x.js") != b.hashedName(of: "x.js"))
  }

  @Test func unknownAssetIsAJSON404() throws {
    try withInProcessService { s in
      for path in ["/console/console.js", "/console/nope.000000000000.js", "/console/index.html"] {
        let r = try get(s, path)
        #expect(r.status == 404, "\(path)")
        #expect(r.error?["status"] as? String == "NOT_FOUND", "\(path)")
      }
    }
  }

  @Test func traversalAttemptsAreRefused() throws {
    try withInProcessService { s in
      for path in [
        "/console/..%2F..%2Fetc%2Fpasswd", "/console/%2E%2E%2FPackage.swift", "/console/../Package.swift",
        "/console/assets%2Fconsole.css", "/console/..", "/console/%00",
      ] {
        let r = try get(s, path)
        #expect(r.status == 404 || r.status == 400, "\(path): \(r.status)")
        #expect(!r.text.contains("root:") && !r.text.contains("PackageDescription"), "\(path)")
      }
    }
  }
}
