import Foundation
import LarderRules
import Testing

/// One condition evaluated as `allow update` on `users/alice/photo.png`, signed in as alice.
struct ExpressionCase: Sendable, CustomTestStringConvertible {
  var condition: String
  var allowed: Bool
  var testDescription: String { "\(condition) -> \(allowed)" }

  init(_ condition: String, _ allowed: Bool) {
    self.condition = condition
    self.allowed = allowed
  }
}

/// Every expression construct, evaluated through the full path-matching pipeline.
struct ExpressionRuleTests {
  static let cases: [ExpressionCase] = [
    // literals, auth and wildcards
    .init("true", true),
    .init("false", false),
    .init("request.auth != null", true),
    .init("request.auth.uid == uid", true),
    .init("request.auth.uid == 'bob'", false),
    .init("request.auth.token.admin == true", true),
    .init("request.auth.token.email.matches('.*@example[.]com')", true),
    .init("bucket == 'bkt' && file == 'photo.png'", true),
    // runtime errors deny, and && / || absorb them like Firebase
    .init("request.auth.token.missing == true", false),
    .init("request.auth.token.missing == true || true", true),
    .init("true || request.auth.token.missing", true),
    .init("false && request.auth.token.missing", false),
    .init("request.auth.token.missing && true", false),
    .init("!(request.auth.token.missing == 1)", false),
    .init("undefinedVariable == 1", false),
    .init("math == 1", false),
    .init("request.resource.size.size() == 1", false),
    .init("5", false),
    .init("request.resource.size", false),
    // request.resource (incoming) and resource (stored)
    .init("request.resource.size < 5 * 1024 * 1024", true),
    .init("request.resource.size == 2048", true),
    .init("request.resource.contentType.matches('image/.*')", true),
    .init("request.resource.contentType.matches('image')", false),
    .init("resource.contentType == 'image/jpeg'", true),
    .init("resource.size + request.resource.size == 3048", true),
    .init("request.resource.metadata.owner == request.auth.uid", true),
    .init("request.resource.metadata['owner'] == 'alice'", true),
    .init("resource.metadata.owner == 'alice'", false),
    .init("resource.sha256 == null", true),
    .init("request.resource.sha256 == 'deadbeef'", true),
    // Larder's detectedContentType sits beside the declared contentType.
    .init("request.resource.detectedContentType == 'image/webp'", true),
    .init("request.resource.detectedContentType == request.resource.contentType", false),
    .init("resource.detectedContentType == 'image/jpeg'", true),
    .init("request.resource.md5Hash.size() == 3", true),
    .init("request.resource.name == 'users/alice/photo.png'", true),
    .init("request.resource.bucket == bucket", true),
    .init("resource.generation == 3 && resource.metageneration == 2", true),
    .init("request.path == '/b/bkt/o/users/alice/photo.png'", true),
    .init("string(request.path) == 'b/bkt/o/users/alice/photo.png'", true),
    .init("request.path[4] == 'alice' && request.path.size() == 6", true),
    // arithmetic and comparison
    .init("1 + 2 * 3 == 7", true),
    .init("(1 + 2) * 3 == 9", true),
    .init("7 / 2 == 3", true),
    .init("7 % 3 == 1", true),
    .init("-7 / 2 == -3", true),
    .init("-(3) == 0 - 3", true),
    .init("7.0 / 2 == 3.5", true),
    .init("0.5 + 1e1 == 10.5", true),
    .init("1 == 1.0", true),
    .init("1 / 0 == 0", false),
    .init("9223372036854775807 + 1 > 0", false),
    .init("'a' + 'b' == 'ab'", true),
    .init("'abc' < 'abd'", true),
    .init("2 >= 2 && 3 > 2 && 1 <= 1 && 0 < 1", true),
    .init("1 != 2", true),
    .init("1 == '1'", false),
    .init("1 < 'a'", false),
    .init("null == null", true),
    .init("!false", true),
    .init("!!true", true),
    .init("[1] + [2] == [1, 2]", true),
    .init("[1, [2, 3]] == [1, [2, 3]]", true),
    .init("{'x': 1} != {'x': 2}", true),
    // in, ternary
    .init("'b' in ['a', 'b']", true),
    .init("'c' in ['a', 'b']", false),
    .init("'admin' in request.auth.token", true),
    .init("'root' in request.auth.token", false),
    .init("1 in [1.0, 2]", true),
    .init("request.resource.size > 100 ? true : false", true),
    .init("uid == 'alice' ? request.resource.size > 1000000 : true", false),
    // lists and maps
    .init("[1, 2, 3].size() == 3", true),
    .init("{'a': 1, 'b': 2}.keys() == ['a', 'b']", true),
    .init("{'a': 1, 'b': 2}.values() == [1, 2]", true),
    .init("{'a': 1}.size() == 1", true),
    .init("['a', 'b', 'c'].hasAll(['a', 'c'])", true),
    .init("['a', 'b'].hasAll(['a', 'z'])", false),
    .init("['a', 'b'].hasAny(['z', 'b'])", true),
    .init("['a', 'b'].hasAny([])", false),
    .init("['a', 'b'].hasOnly(['a', 'b', 'c'])", true),
    .init("['a', 'd'].hasOnly(['a', 'b'])", false),
    .init("request.auth.token.groups.hasAny(['ops'])", true),
    .init("request.resource.metadata.keys().hasOnly(['owner', 'label'])", true),
    .init("{'a': 1}.get('b', 7) == 7", true),
    .init("{'a': {'b': 2}}.get(['a', 'b'], 0) == 2", true),
    .init("{'a': 1}['a'] == 1", true),
    .init("[10, 20][1] == 20", true),
    .init("[10, 20][2] == 20", false),
    .init("{'a': [1, {'b': 'c'}]}['a'][1].b == 'c'", true),
    .init("['x', 'y'].join('-') == 'x-y'", true),
    // strings
    .init("'Hello'.lower() == 'hello'", true),
    .init("'Hello'.upper() == 'HELLO'", true),
    .init("'  x  '.trim() == 'x'", true),
    .init("'a/b/c'.split('/') == ['a', 'b', 'c']", true),
    .init("'a1b22c'.split('[0-9]+') == ['a', 'b', 'c']", true),
    .init("'photo.png'.replace('[.]png$', '.jpg') == 'photo.jpg'", true),
    .init("'h\\u00e9llo'.size() == 5", true),
    .init("'it\\'s' == \"it's\"", true),
    .init("'a\\nb'.size() == 3", true),
    .init("'x'.matches('(')", false),
    .init("'ab'.matches('a|b')", false),
    .init("'b'.matches('a|b')", true),
    // types
    .init("resource.size is int && request.resource.contentType is string", true),
    .init("1.5 is float && 1 is number && null is null && [1] is list && {} is map", true),
    .init("request.time is timestamp && request.path is path && 1 is string", false),
    // timestamps and durations
    .init("request.time > timestamp.date(2024, 1, 1)", true),
    .init("request.time < timestamp.date(2024, 3, 15)", false),
    .init("request.time.year() == 2024 && request.time.month() == 3 && request.time.day() == 15", true),
    .init("request.time.hours() == 12 && request.time.minutes() == 30 && request.time.seconds() == 45", true),
    .init("request.time.toMillis() == 1710505845000", true),
    .init("request.time.date() == timestamp.date(2024, 3, 15)", true),
    .init("request.time.dayOfWeek() == 5 && request.time.dayOfYear() == 75", true),
    .init("timestamp.date(2024, 3, 15) + duration.value(12, 'h') < request.time", true),
    .init("request.time - duration.value(1, 'd') > timestamp.date(2024, 3, 14)", true),
    .init("request.time - resource.timeCreated > duration.value(30, 'd')", true),
    .init("request.time < resource.timeCreated + duration.value(7, 'd')", false),
    .init("duration.value(90, 's') == duration.time(0, 1, 30, 0)", true),
    .init("duration.value(1, 'm').seconds() == 60", true),
    .init("timestamp.date(2024, 2, 30) == request.time", false),
    .init("timestamp.value(1710505845000) == request.time", true),
    .init("duration.value(1, 'fortnight') > duration.value(1, 's')", false),
    // math and conversions
    .init("math.abs(-3) == 3 && math.abs(-2.5) == 2.5", true),
    .init("math.ceil(1.2) == 2 && math.floor(1.8) == 1 && math.round(2.5) == 3", true),
    .init("math.min(3, 1, 2) == 1 && math.max([4, 9, 2]) == 9", true),
    .init("int('42') + 1 == 43 && int(3.9) == 3", true),
    .init("float(1) == 1.0 && float('2.5') == 2.5", true),
    .init(
      "string(42) == '42' && string(true) == 'true' && string(null) == 'null' && string(1.0) == '1.0'", true),
    .init("int('x') == 0", false),
  ]

  static func rules(_ condition: String) -> String {
    """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /users/{uid}/{file} {
          allow update: if \(condition);
        }
      }
    }
    """
  }

  @Test(arguments: cases)
  func conditionDecidesAccess(_ c: ExpressionCase) throws {
    let rules = try RuleSet.parse(Self.rules(c.condition))
    let request = RuleRequest(
      operation: .update, bucket: "bkt", objectName: "users/alice/photo.png", auth: Fixtures.alice,
      time: Fixtures.now,
      resource: Fixtures.object("users/alice/photo.png", size: 1000, contentType: "image/jpeg"),
      requestResource: Fixtures.object(
        "users/alice/photo.png", size: 2048, contentType: "image/png", detectedContentType: "image/webp",
        metadata: ["owner": "alice"], sha256: "deadbeef"))
    let decision = rules.evaluate(request)
    #expect(decision.allowed == c.allowed, "\(decision.reason)")
    #expect(decision.rule == (c.allowed ? "storage.rules:5:7" : nil))
  }

  @Test func anUnknownDetectedTypeIsNull() throws {
    let incoming = RuleResource(name: "users/alice/x", bucket: "bkt", size: 1, contentType: "image/png")
    #expect(incoming.detectedContentType == nil)
    for (condition, allowed) in [
      ("request.resource.detectedContentType == null", true),
      // A method call on null fails, and a failing condition is false: unknown never passes as an image.
      ("request.resource.detectedContentType.matches('image/.*')", false),
    ] {
      let decision = try RuleSet.parse(Self.rules(condition)).evaluate(
        RuleRequest(
          operation: .update, bucket: "bkt", objectName: "users/alice/x", auth: Fixtures.alice, time: Fixtures.now,
          resource: incoming, requestResource: incoming))
      #expect(decision.allowed == allowed, "\(condition): \(decision.reason)")
    }
  }
}
