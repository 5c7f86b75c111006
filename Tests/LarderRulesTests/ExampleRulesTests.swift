import Foundation
import LarderRules
import Testing

/// `storage.rules.example` parses and behaves as its comments say.
struct ExampleRulesTests {
  static let exampleURL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("storage.rules.example")

  static func rules() throws -> RuleSet {
    try RuleSet.parse(String(contentsOf: exampleURL, encoding: .utf8), fileName: "storage.rules.example")
  }

  static let mib: Int64 = 1 << 20

  static let cases: [PathCase] = [
    // users/{uid}/**: owner only
    .init(op: .create, name: "users/u1/notes.txt", allowed: false),
    .init(
      op: .create, name: "users/u1/notes.txt", uid: "u1", allowed: true, rule: "storage.rules.example:27:7"),
    .init(
      op: .get, name: "users/u1/deep/er/notes.txt", uid: "u1", allowed: true,
      rule: "storage.rules.example:27:7"),
    .init(op: .list, name: "users/u1/", uid: "u1", allowed: true, rule: "storage.rules.example:27:7"),
    .init(
      op: .delete, name: "users/u1/notes.txt", uid: "u1", allowed: true, rule: "storage.rules.example:27:7"),
    .init(op: .get, name: "users/u1/notes.txt", uid: "u2", allowed: false),
    .init(op: .update, name: "users/u1/notes.txt", uid: "u2", allowed: false),
    .init(op: .get, name: "users/u1/notes.txt", allowed: false),
    // public/**: anyone reads, owners write their own subfolder, up to 10 MiB
    .init(op: .get, name: "public/readme.txt", allowed: true, rule: "storage.rules.example:35:7"),
    .init(op: .list, name: "public/", allowed: true, rule: "storage.rules.example:35:7"),
    .init(op: .get, name: "public/u1/a/b.txt", allowed: true, rule: "storage.rules.example:35:7"),
    .init(op: .create, name: "public/u1/a.txt", allowed: false),
    .init(op: .create, name: "public/u1/a.txt", uid: "u1", allowed: true, rule: "storage.rules.example:38:7"),
    .init(
      op: .create, name: "public/u1/a.txt", uid: "u1", size: 10 * mib, allowed: true,
      rule: "storage.rules.example:38:7"),
    .init(op: .create, name: "public/u1/a.txt", uid: "u1", size: 10 * mib + 1, allowed: false),
    .init(op: .create, name: "public/u2/a.txt", uid: "u1", allowed: false),
    .init(op: .create, name: "public/readme.txt", uid: "u1", allowed: false),
    .init(op: .delete, name: "public/u1/a.txt", uid: "u1", allowed: true, rule: "storage.rules.example:39:7"),
    .init(op: .delete, name: "public/u1/a.txt", uid: "u2", allowed: false),
    // images/{uid}/**: images only, up to 5 MiB, owner writes, signed-in users read
    .init(
      op: .create, name: "images/u1/cat.png", uid: "u1", size: mib, allowed: true,
      rule: "storage.rules.example:47:7"),
    .init(
      op: .create, name: "images/u1/cat.png", uid: "u1", size: 5 * mib, allowed: true,
      rule: "storage.rules.example:47:7"),
    .init(op: .create, name: "images/u1/cat.png", uid: "u1", size: 5 * mib + 1, allowed: false),
    .init(op: .create, name: "images/u1/cat.png", uid: "u1", contentType: "text/plain", allowed: false),
    // Declared and detected types must both be images: text declared as a PNG is refused, and so
    // is a PNG declared as something else; a PNG declared as a JPEG is still an image.
    .init(
      op: .create, name: "images/u1/cat.png", uid: "u1", contentType: "image/png", detectedContentType: "text/plain",
      allowed: false),
    .init(
      op: .update, name: "images/u1/cat.png", uid: "u1", contentType: "image/png", detectedContentType: "text/html",
      allowed: false),
    .init(
      op: .create, name: "images/u1/cat.png", uid: "u1", contentType: "application/octet-stream",
      detectedContentType: "image/png", allowed: false),
    .init(
      op: .create, name: "images/u1/cat.png", uid: "u1", contentType: "image/jpeg", detectedContentType: "image/png",
      allowed: true, rule: "storage.rules.example:47:7"),
    .init(op: .update, name: "images/u1/cat.png", uid: "u2", allowed: false),
    .init(op: .create, name: "images/u1/cat.png", allowed: false),
    .init(op: .get, name: "images/u1/cat.png", uid: "u2", allowed: true, rule: "storage.rules.example:46:7"),
    .init(op: .get, name: "images/u1/cat.png", allowed: false),
    .init(
      op: .delete, name: "images/u1/cat.png", uid: "u1", allowed: true, rule: "storage.rules.example:51:7"),
    // everything else is denied
    .init(op: .get, name: "other/file.txt", uid: "u1", allowed: false),
    .init(op: .create, name: "top-level.txt", uid: "u1", allowed: false),
    .init(op: .list, name: "", uid: "u1", allowed: false),
  ]

  @Test(arguments: cases)
  func exampleBehavesAsCommented(_ c: PathCase) throws {
    let decision = try Self.rules().evaluate(
      Fixtures.request(
        c.op, c.name, uid: c.uid, size: c.size, contentType: c.contentType, detectedContentType: c.detectedContentType))
    #expect(decision.allowed == c.allowed, "\(decision.reason)")
    #expect(decision.rule == c.rule)
  }

  @Test func exampleIsVersionTwo() throws {
    #expect(try Self.rules().version == 2)
  }
}
