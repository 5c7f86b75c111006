import Foundation
import Larder
import LarderAuth
import LarderServer
import Testing

/// Token claims reach `request.auth.token` with their JSON types (RulesPolicy.ruleValue): an integer
/// stays an int, a fraction a float, an array a list, and a string is never read as a number.
@Suite struct TokenClaimRulesTests {
  static let rules = """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o/{all=**} {
        allow get: if request.auth.token.tier > 2 && request.auth.token.groups.hasAny(['a'])
          && request.auth.token.ratio == 1.5;
      }
    }
    """

  @Test func typedClaimsDecideAccess() throws {
    let file = try temporaryRulesFile(Self.rules)
    defer { try? FileManager.default.removeItem(at: file) }
    try withInProcessRulesService(rules: file) { s in
      // Seeded directly, so the object exists whatever the rules say about writes.
      _ = try s.service.larder.objects.put(bucket: "app", name: "f.txt", data: Data("claims".utf8))
      func get(_ claims: [String: JSONValue]) throws -> WireResponse {
        let token = ForgedJWT.hs256(ForgedJWT.claims(uid: "u", extra: claims), secret: s.service.secret)
        return try s.send(.get("/v0/b/app/o/f.txt?alt=media", [("Authorization", "Bearer \(token)")]))
      }
      let good: [String: JSONValue] = ["tier": 3, "groups": ["a", "z"], "ratio": 1.5]
      let allowed = try get(good)
      #expect(allowed.status == 200, "\(allowed.text)")
      #expect(allowed.text == "claims")
      for (label, claims) in [
        ("tier as a string", good.merging(["tier": "3"]) { $1 }),
        ("tier too low", good.merging(["tier": 2]) { $1 }),
        ("groups without a", good.merging(["groups": ["b"]]) { $1 }),
        ("groups as a string", good.merging(["groups": "a"]) { $1 }),
        ("ratio 1.25", good.merging(["ratio": 1.25]) { $1 }),
        ("no ratio", good.filter { $0.key != "ratio" }),
      ] {
        let denied = try get(claims)
        #expect(denied.status == 403, "\(label): \(denied.status) \(denied.text)")
        #expect(denied.error?["status"] as? String == "PERMISSION_DENIED", "\(label)")
      }
    }
  }
}
