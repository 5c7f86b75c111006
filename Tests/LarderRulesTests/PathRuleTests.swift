import Foundation
import LarderRules
import Testing

/// A request against a fixed rules file and the expected decision.
struct PathCase: Sendable, CustomTestStringConvertible {
  var op: RuleOperation
  var name: String
  var uid: String?
  var token: [String: RuleValue] = [:]
  var size: Int64 = 1024
  var contentType: String = "image/png"
  /// nil: the same as `contentType`.
  var detectedContentType: String?
  var ownerMetadata: String?
  var allowed: Bool
  var rule: String?

  var testDescription: String { "\(op.rawValue) \(name) as \(uid ?? "anonymous") -> \(allowed)" }
}

/// Path matching, wildcards, methods and OR semantics, mostly from the Firebase docs examples.
struct PathRuleTests {
  static let source = """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        // Firebase docs: anyone reads images, writes must be small images.
        match /images/{imageId} {
          allow read;
          allow write: if request.resource.size < 5 * 1024 * 1024
                       && request.resource.contentType.matches('image/.*');
        }
        // Firebase docs: user-private files.
        match /users/{userId}/{allPaths=**} {
          allow read, write: if request.auth != null && request.auth.uid == userId;
        }
        // Granular methods.
        match /files/{fileName} {
          allow get: if true;
          allow list: if false;
          allow delete: if resource.metadata.owner == request.auth.uid;
        }
        // Custom claims (Firebase docs: group-private files).
        match /team/{team}/docs/{doc} {
          allow read: if request.auth.token.team == team;
        }
        // Two matches for the same path: OR semantics.
        match /shared/{file} {
          allow read: if false;
        }
        match /shared/{name} {
          allow read: if name.size() < 10;
        }
        // Nested match blocks and multi-segment literal paths.
        match /a/b {
          match /c/{x} {
            allow create: if x == 'd';
          }
        }
      }
      match /b/special-bucket/o/{all=**} {
        allow list;
      }
    }
    """

  static let cases: [PathCase] = [
    .init(op: .get, name: "images/cat.png", allowed: true, rule: "storage.rules:6:7"),
    .init(op: .list, name: "images/cat.png", allowed: true, rule: "storage.rules:6:7"),
    .init(op: .get, name: "images/a/b.png", allowed: false),
    .init(op: .get, name: "images", allowed: false),
    .init(op: .create, name: "images/cat.png", allowed: true, rule: "storage.rules:7:7"),
    .init(op: .update, name: "images/cat.png", uid: "u1", allowed: true, rule: "storage.rules:7:7"),
    .init(op: .create, name: "images/cat.png", size: 6 << 20, allowed: false),
    .init(op: .create, name: "images/cat.png", size: 5 << 20, allowed: false),
    .init(op: .create, name: "images/cat.png", size: (5 << 20) - 1, allowed: true, rule: "storage.rules:7:7"),
    .init(op: .create, name: "images/cat.png", contentType: "text/plain", allowed: false),
    .init(op: .create, name: "images/cat.png", contentType: "xximage/png", allowed: false),
    .init(op: .delete, name: "images/cat.png", allowed: false),
    .init(op: .get, name: "users/u1/notes.txt", allowed: false),
    .init(op: .get, name: "users/u1/notes.txt", uid: "u1", allowed: true, rule: "storage.rules:12:7"),
    .init(op: .get, name: "users/u1/notes.txt", uid: "u2", allowed: false),
    .init(op: .create, name: "users/u1/a/b/c/d.txt", uid: "u1", allowed: true, rule: "storage.rules:12:7"),
    .init(op: .delete, name: "users/u1/a/b/c/d.txt", uid: "u1", allowed: true, rule: "storage.rules:12:7"),
    .init(op: .update, name: "users/u1/a.txt", uid: "u2", allowed: false),
    .init(op: .list, name: "users/u1", uid: "u1", allowed: true, rule: "storage.rules:12:7"),
    .init(op: .list, name: "users/u1/", uid: "u1", allowed: true, rule: "storage.rules:12:7"),
    .init(op: .list, name: "users", uid: "u1", allowed: false),
    .init(op: .get, name: "USERS/u1/notes.txt", uid: "u1", allowed: false),
    .init(op: .get, name: "files/report.pdf", allowed: true, rule: "storage.rules:16:7"),
    .init(op: .list, name: "files/report.pdf", allowed: false),
    .init(op: .create, name: "files/report.pdf", uid: "u1", allowed: false),
    .init(
      op: .delete, name: "files/report.pdf", uid: "u1", ownerMetadata: "u1", allowed: true,
      rule: "storage.rules:18:7"),
    .init(op: .delete, name: "files/report.pdf", uid: "u2", ownerMetadata: "u1", allowed: false),
    .init(op: .delete, name: "files/report.pdf", ownerMetadata: "u1", allowed: false),
    .init(op: .delete, name: "files/report.pdf", uid: "u1", allowed: false),
    .init(
      op: .get, name: "team/red/docs/plan", uid: "u1", token: ["team": .string("red")], allowed: true,
      rule: "storage.rules:22:7"),
    .init(op: .get, name: "team/red/docs/plan", uid: "u1", token: ["team": .string("blue")], allowed: false),
    .init(op: .get, name: "team/red/docs/plan", uid: "u1", allowed: false),
    .init(op: .get, name: "team/red/docs/plan", allowed: false),
    .init(op: .get, name: "shared/short", allowed: true, rule: "storage.rules:29:7"),
    .init(op: .get, name: "shared/much-too-long-name", allowed: false),
    .init(op: .create, name: "a/b/c/d", allowed: true, rule: "storage.rules:34:9"),
    .init(op: .create, name: "a/b/c/e", allowed: false),
    .init(op: .create, name: "a/b", allowed: false),
    .init(op: .get, name: "other/file.txt", uid: "u1", allowed: false),
    .init(op: .get, name: "", uid: "u1", allowed: false),
  ]

  @Test(arguments: cases)
  func pathAndOperationDecideAccess(_ c: PathCase) throws {
    let rules = try RuleSet.parse(Self.source)
    var request = Fixtures.request(
      c.op, c.name, uid: c.uid, token: c.token, size: c.size, contentType: c.contentType)
    if let owner = c.ownerMetadata {
      request.resource = Fixtures.object(c.name, metadata: ["owner": owner])
    }
    let decision = rules.evaluate(request)
    #expect(decision.allowed == c.allowed, "\(decision.reason)")
    #expect(decision.rule == c.rule)
  }

  @Test func bucketLiteralRestrictsToThatBucket() throws {
    let rules = try RuleSet.parse(Self.source)
    var request = RuleRequest(operation: .list, bucket: "special-bucket", objectName: "x/y")
    #expect(rules.evaluate(request).rule == "storage.rules:39:5")
    request.bucket = "other-bucket"
    #expect(rules.evaluate(request).allowed == false)
  }

  @Test func denialExplainsEachFailedCondition() throws {
    let rules = try RuleSet.parse(Self.source)
    let decision = rules.evaluate(Fixtures.request(.get, "team/red/docs/plan"))
    #expect(decision.allowed == false)
    #expect(
      decision.reason
        == "denied 'get' on /b/bkt/o/team/red/docs/plan: storage.rules:22:7: error at storage.rules:22:34: cannot read 'token' of null"
    )
    let none = rules.evaluate(Fixtures.request(.get, "nowhere/x"))
    #expect(none.reason == "no allow rule for 'get' matches /b/bkt/o/nowhere/x")
  }

  @Test func versionOneRecursiveWildcardNeedsOneSegment() throws {
    let v1 = try RuleSet.parse(
      "service firebase.storage { match /b/{b}/o { match /users/{uid}/{rest=**} { allow list; } } }")
    #expect(v1.version == 1)
    #expect(v1.evaluate(RuleRequest(operation: .list, bucket: "x", objectName: "users/u1")).allowed == false)
    #expect(v1.evaluate(RuleRequest(operation: .list, bucket: "x", objectName: "users/u1/a")).allowed == true)
  }

  @Test func recursiveWildcardBindsAPath() throws {
    let rules = try RuleSet.parse(
      """
      rules_version = '2';
      service firebase.storage { match /b/{b}/o { match /docs/{rest=**} {
        allow get: if rest == 'x/y/z' && rest.size() == 3 && rest[1] == 'y' && string(rest) == 'x/y/z';
      } } }
      """)
    #expect(
      rules.evaluate(RuleRequest(operation: .get, bucket: "x", objectName: "docs/x/y/z")).allowed == true)
    #expect(
      rules.evaluate(RuleRequest(operation: .get, bucket: "x", objectName: "docs/x/y")).allowed == false)
  }
}
