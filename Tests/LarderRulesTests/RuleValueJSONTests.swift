import Foundation
import LarderRules
import Testing

/// JWT claims decoded by Foundation become the expected rule values.
struct RuleValueJSONTests {
  @Test func jsonClaimsConvertToRuleValues() throws {
    let json = #"{"b":true,"f":false,"i":1,"d":1.5,"e":2.0,"n":null,"s":"x","l":[1,"a"],"m":{"k":[]}}"#
    let object = try JSONSerialization.jsonObject(with: Data(json.utf8))
    #expect(
      RuleValue(jsonObject: object)
        == .map([
          "b": .bool(true), "f": .bool(false), "i": .int(1), "d": .float(1.5), "e": .float(2.0), "n": .null,
          "s": .string("x"), "l": .list([.int(1), .string("a")]), "m": .map(["k": .list([])]),
        ]))
  }

  @Test func swiftValuesConvertToo() {
    #expect(RuleValue(jsonObject: true) == .bool(true))
    #expect(RuleValue(jsonObject: 7) == .int(7))
    #expect(RuleValue(jsonObject: 2.5) == .float(2.5))
    #expect(RuleValue(jsonObject: Date()) == nil)
  }

  @Test func claimsDriveTokenConditions() throws {
    let claims =
      try JSONSerialization.jsonObject(with: Data(#"{"admin":true,"tier":3}"#.utf8)) as? [String: Any] ?? [:]
    let token = claims.compactMapValues(RuleValue.init(jsonObject:))
    let rules = try RuleSet.parse(
      "service firebase.storage { match /b/{b}/o/{f} { allow get: if request.auth.token.admin == true && request.auth.token.tier > 2; } }"
    )
    let request = RuleRequest(
      operation: .get, bucket: "b", objectName: "x", auth: RuleAuth(uid: "u", token: token))
    #expect(rules.evaluate(request).allowed == true)
  }
}
