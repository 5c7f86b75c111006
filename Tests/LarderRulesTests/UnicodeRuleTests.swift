import Foundation
import LarderRules
import Testing

/// Strings in rules compare by their exact UTF-8 bytes, as Firebase's do: Swift's `==` would
/// call "K" and the Kelvin sign (U+212A), or NFC and NFD "é", equal (issue 37).
struct UnicodeRuleTests {
  static let kelvin = "\u{212A}"
  static let source = """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /users/{uid}/{path=**} {
          allow read, write: if request.auth != null && request.auth.uid == uid;
        }
        match /literal/K/{file} { allow read; }
        match /caf\u{E9}/{file} { allow read; }
        match /listed/{file} { allow read: if request.auth.uid in ['K', 'caf\u{E9}']; }
        match /keyed/{file} { allow read: if request.auth.token.roles['K'] == true; }
        match /ordered/{file} { allow read: if request.auth.uid <= 'K' && request.auth.uid >= 'K'; }
        match /all/{file} { allow read: if ['K'].hasAny([request.auth.uid]); }
      }
    }
    """

  func decide(_ op: RuleOperation, _ name: String, uid: String?, token: [String: RuleValue] = [:]) throws -> Bool {
    try RuleSet.parse(Self.source).evaluate(Fixtures.request(op, name, uid: uid, token: token)).allowed
  }

  @Test func uidsCompareByBytes() throws {
    #expect(try decide(.create, "users/K/a.txt", uid: "K"))
    #expect(try !decide(.create, "users/K/a.txt", uid: Self.kelvin), "a Kelvin-sign uid writes under K/")
    #expect(try !decide(.create, "users/\(Self.kelvin)/a.txt", uid: "K"))
    #expect(try !decide(.get, "users/caf\u{E9}/a.txt", uid: "cafe\u{301}"))
    #expect(try decide(.get, "users/cafe\u{301}/a.txt", uid: "cafe\u{301}"))
  }

  @Test func literalPathSegmentsMatchByBytes() throws {
    #expect(try decide(.get, "literal/K/a", uid: nil))
    #expect(try !decide(.get, "literal/\(Self.kelvin)/a", uid: nil))
    #expect(try decide(.get, "caf\u{E9}/a", uid: nil))
    #expect(try !decide(.get, "cafe\u{301}/a", uid: nil))
  }

  @Test func membershipKeysAndOrderCompareByBytes() throws {
    #expect(try decide(.get, "listed/a", uid: "K"))
    #expect(try !decide(.get, "listed/a", uid: Self.kelvin))
    #expect(try !decide(.get, "listed/a", uid: "cafe\u{301}"))
    #expect(try decide(.get, "keyed/a", uid: "x", token: ["roles": .map(["K": .bool(true)])]))
    #expect(try !decide(.get, "keyed/a", uid: "x", token: ["roles": .map([Self.kelvin: .bool(true)])]))
    #expect(try decide(.get, "ordered/a", uid: "K"))
    #expect(try !decide(.get, "ordered/a", uid: Self.kelvin))
    #expect(try decide(.get, "all/a", uid: "K"))
    #expect(try !decide(.get, "all/a", uid: Self.kelvin))
  }
}
