import Foundation
import Testing

/// What issue 33 asks the code to stop asking: which catalog it is (`isShared`), whether a
/// re-read is local (`rereadIsLocal`), whether a backend publishes inside the transaction
/// (`publishesInsideTransaction`), whether blobs are in S3 (`BlobLocation.isS3`). The engine or
/// the content store answers instead; test support may still say which store a run uses.
struct OneSeamTests {
  static let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

  @Test func noSourceAsksWhichCatalogOrBlobStoreItHas() throws {
    let sources = Self.packageRoot.appendingPathComponent("Sources")
    let banned = try Regex(#"\b(isShared|rereadIsLocal|publishesInsideTransaction|isS3)\b"#)
    var found: [String] = []
    let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
    while let url = files?.nextObject() as? URL {
      guard url.pathExtension == "swift", !url.path.contains("/Sources/LarderTestSupport/") else { continue }
      let text = try String(contentsOf: url, encoding: .utf8)
      for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
      where line.contains(banned) {
        found.append("\(url.path.dropFirst(sources.path.count + 1)):\(number + 1): \(line)")
      }
    }
    #expect(found == [])
    #expect(FileManager.default.fileExists(atPath: sources.appendingPathComponent("Larder").path))
  }
}
