import LarderRules
import Testing

/// A broken rules file and the single diagnostic it must produce.
struct BrokenFile: Sendable, CustomTestStringConvertible {
  var source: String
  var line: Int
  var column: Int
  var message: String
  var testDescription: String { "\(line):\(column) \(message)" }
}

/// Parser diagnostics: exact `file:line:col`, message and caret.
struct DiagnosticTests {
  static let files: [BrokenFile] = [
    .init(
      source: "service firebase.storage {\n  match /b/{bucket}/o {\n    allow read: if true\n  }\n}\n",
      line: 4, column: 3, message: "expected ';' after the allow rule, found '}'"),
    .init(
      source: "service firebase.storage {\n  match /b/{bucket}/o {\n    allow reed;\n  }\n}\n",
      line: 3, column: 11,
      message: "unknown method 'reed' (expected read, write, get, list, create, update or delete)"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if 'abc;\n  }\n}\n",
      line: 3, column: 20, message: "unterminated string literal"),
    .init(
      source: "service cloud.firestore {\n}\n",
      line: 1, column: 9, message: "unsupported service 'cloud.firestore' (expected 'firebase.storage')"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o/{rest=**}/x {\n  }\n}\n",
      line: 2, column: 3,
      message: "recursive wildcard '{rest=**}' must be the last segment of a match path"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if # true;\n  }\n}\n",
      line: 3, column: 20, message: "unexpected character '#'"),
    .init(
      source:
        "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if 99999999999999999999 > 1;\n  }\n}\n",
      line: 3, column: 20, message: "integer literal '99999999999999999999' does not fit in 64 bits"),
    .init(
      source:
        "service firebase.storage {\n  function f() { return true; }\n  function f() { return false; }\n}\n",
      line: 3, column: 3, message: "function 'f' is already declared in this scope"),
    .init(
      source: "rules_version = '3';\nservice firebase.storage {}\n",
      line: 1, column: 17, message: "unsupported rules_version '3' (expected '1' or '2')"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read;\n",
      line: 4, column: 1, message: "expected '}' before end of file"),
    .init(
      source: "service firebase.storage {\n  allow read;\n}\n",
      line: 2, column: 3, message: "'allow' must be inside a 'match' block"),
    .init(
      source: "service firebase.storage {\n  match b/{b}/o { }\n}\n",
      line: 2, column: 9, message: "expected a path starting with '/' after 'match'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b/o { }\n}\n",
      line: 2, column: 14, message: "expected '}' to close the wildcard '{b'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if request.auth.;\n  }\n}\n",
      line: 3, column: 33, message: "expected a member name after '.', found ';'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    function f(a, a) { return a; }\n  }\n}\n",
      line: 3, column: 19, message: "duplicate parameter 'a'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    function f() { let x = 1; }\n  }\n}\n",
      line: 3, column: 31, message: "expected 'return' in function 'f', found '}'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if (true;\n  }\n}\n",
      line: 3, column: 25, message: "expected ')' to close the parenthesis, found ';'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if 'a\\q';\n  }\n}\n",
      line: 3, column: 22, message: "unknown escape sequence '\\q'"),
    .init(
      source: "service firebase.storage {\n  /* never closed\n",
      line: 2, column: 3, message: "unterminated block comment"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o {\n    allow read: if x is widget;\n  }\n}\n",
      line: 3, column: 22, message: "unknown type 'widget'"),
    .init(
      source: "service firebase.storage {\n  match /b/{b}/o/{b} { }\n}\n",
      line: 2, column: 3, message: "wildcard 'b' appears twice in one match path"),
  ]

  @Test(arguments: files)
  func brokenFileReportsLineAndColumn(_ file: BrokenFile) {
    #expect(throws: RulesDiagnostics.self) { try RuleSet.parse(file.source, fileName: "bad.rules") }
    do {
      _ = try RuleSet.parse(file.source, fileName: "bad.rules")
    } catch {
      #expect(error.diagnostics.count == 1)
      let d = error.diagnostics[0]
      #expect(d.fileName == "bad.rules")
      #expect(d.line == file.line)
      #expect(d.column == file.column)
      #expect(d.message == file.message)
    }
  }

  @Test func diagnosticRendersACaretUnderTheColumn() {
    do {
      _ = try RuleSet.parse(
        "service firebase.storage {\n  match /b/{bucket}/o {\n    allow read: if true\n  }\n}\n",
        fileName: "storage.rules")
      Issue.record("expected a diagnostic")
    } catch {
      #expect(
        error.description
          == "storage.rules:4:3: error: expected ';' after the allow rule, found '}'\n      }\n      ^")
    }
  }

  @Test func columnsCountUnicodeScalarsNotBytes() {
    do {
      _ = try RuleSet.parse("service firebase.storage { match /b/{b}/o { allow read: if 'é' == 'é' @; } }")
      Issue.record("expected a diagnostic")
    } catch {
      #expect(error.diagnostics[0].column == 71)
      #expect(error.diagnostics[0].snippet.hasSuffix("\n" + String(repeating: " ", count: 4 + 70) + "^"))
    }
  }

  @Test func validFilesParseWithoutDiagnostics() throws {
    let rules = try RuleSet.parse(
      """
      // comment
      rules_version = "2"; /* block
      comment */
      service firebase.storage {
        match /b/{bucket}/o {
          match /{all=**} { allow read, write: if false; }
        }
      }
      """)
    #expect(rules.version == 2)
    #expect(rules.fileName == "storage.rules")
  }
}
