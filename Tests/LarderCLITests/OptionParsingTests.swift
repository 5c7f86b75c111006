import Foundation
import Testing

/// How option values are read: a value that starts with `--` is missing unless given as
/// `--opt=--x`; `--opt=value` everywhere; environment fallback; unknown and repeated options.
/// Bad usage exits 2 with one error line and the usage, and touches no data directory.
@Suite struct OptionParsingTests {
  /// (arguments after `--data DIR`, the error line after `larder: error: `)
  static let missingValues: [([String], String)] = [
    (
      ["put", "f", "b/n", "--content-type", "--json"],
      "--content-type needs a value, not the option '--json' (write --content-type=--json to pass it as the value)"
    ),
    (
      ["put", "f", "b/n", "--metadata", "--", "x"],
      "--metadata needs a value, not the option '--' (write --metadata=-- to pass it as the value)"
    ),
    (
      ["get", "b/n", "--max-size", "--output", "x"],
      "--max-size needs a value, not the option '--output' (write --max-size=--output to pass it as the value)"
    ),
    (
      ["get", "b/n", "-o", "--max-size", "1"],
      "-o needs a value, not the option '--max-size' (write -o=--max-size to pass it as the value)"
    ),
    (
      ["gc", "--grace", "--json"],
      "--grace needs a value, not the option '--json' (write --grace=--json to pass it as the value)"
    ),
    (["gc", "--grace"], "--grace needs a value"),
    (
      ["token", "--uid", "--ttl", "1h"],
      "--uid needs a value, not the option '--ttl' (write --uid=--ttl to pass it as the value)"
    ),
    (
      ["serve", "--port", "--allow-all"],
      "--port needs a value, not the option '--allow-all' (write --port=--allow-all to pass it as the value)"
    ),
    (["token", "--uid", "u", "--claim"], "--claim needs a value"),
  ]

  @Test(arguments: 0..<missingValues.count) func valueStartingWithDashDashIsMissing(_ index: Int) throws {
    let (arguments, message) = Self.missingValues[index]
    try expectUsageError(arguments, message)
  }

  /// Exit status 2, the error, the usage line and the pointer to `--help` on standard error,
  /// nothing on standard output, and no data directory created.
  func expectUsageError(_ arguments: [String], _ message: String) throws {
    let box = try Sandbox()
    let result = try box.larder(args: arguments)
    #expect(result.status == 2, "\(arguments): \(result)")
    #expect(result.stderrLines.first == "larder: error: \(message)", "\(arguments): \(result)")
    #expect(
      result.stderrLines.dropFirst().first?.hasPrefix("usage: larder \(arguments[0]) ") == true, "\(result)")
    #expect(result.stderrLines.last == "see 'larder \(arguments[0]) --help'", "\(arguments): \(result)")
    #expect(result.stdout == "")
    #expect(!FileManager.default.fileExists(atPath: box.dataPath))
  }

  @Test func rulesEvalMissingValue() throws {
    let result = try CLI.larder(["rules", "eval", "f", "--op", "--path", "/b/x/o/y"])
    #expect(result.status == 2)
    #expect(
      result.stderrLines == [
        "larder: error: --op needs a value, not the option '--path' (write --op=--path to pass it as the value)",
        "usage: larder rules eval FILE --op OP --path /b/BUCKET/o/NAME [--uid U] [--size SIZE]",
        "                         [--content-type TYPE]",
        "see 'larder rules eval --help'",
      ])
  }

  /// `--opt=--x` passes a value that starts with `--`; a single dash starts a value as usual.
  @Test func equalsFormPassesAValueStartingWithDashDash() throws {
    let box = try Sandbox()
    let src = try box.write("f", Array("hello".utf8))
    let put = try box.larder("put", src, "bkt/n", "--content-type=--json", "--metadata=--k=-v", "--json")
    #expect(put.status == 0, "\(put)")
    let json = try put.jsonObject()
    #expect(json["contentType"] as? String == "--json")
    #expect(json["metadata"] as? [String: String] == ["--k": "-v"])
    #expect(json["detectedContentType"] as? String == "text/plain")
  }

  @Test func equalsFormWorksForEveryKindOfOption() throws {
    let box = try Sandbox()
    let src = try box.write("f", Array("twelve bytes".utf8))
    let put = try CLI.larder(["put", "--data=\(box.dataPath)", src, "bkt/n", "--max-size=12", "--metadata=a=1"])
    #expect(put.status == 0, "\(put)")
    #expect(put.stdout.hasPrefix("bkt/n  12 bytes  text/plain  sha256:"), "\(put)")
    let tooBig = try box.larder("put", src, "bkt/m", "--max-size=11")
    #expect(tooBig.status == 1, "\(tooBig)")
    let get = try box.larder("get", "bkt/n", "-o=\(box.path("short"))")
    #expect(get.status == 0, "\(get)")
    #expect(box.read("short") == Array("twelve bytes".utf8))
    let gc = try box.larder("gc", "--grace=0s", "--dry-run", "--json")
    #expect(gc.status == 0, "\(gc)")
    #expect(try gc.jsonObject()["filesReleased"] as? Int == 0)
    let empty = try box.larder("put", src, "bkt/e", "--content-type=")
    #expect(empty.status == 0, "\(empty)")
    let stat = try box.larder("stat", "bkt/e", "--json")
    #expect(try stat.jsonObject()["declaredContentType"] == nil)
  }

  @Test func environmentFillsInWhatTheCommandLineLeavesOut() throws {
    let box = try Sandbox()
    let other = try Sandbox()
    let src = try box.write("f", Array("env".utf8))
    // LARDER_DATA when --data is absent.
    let put = try CLI.larder(["put", src, "bkt/from-env"], environment: ["LARDER_DATA": box.dataPath])
    #expect(put.status == 0, "\(put)")
    #expect(try box.larder("get", "bkt/from-env").stdout == "env")
    // --data wins over LARDER_DATA.
    let explicit = try CLI.larder(
      ["put", "--data", other.dataPath, src, "bkt/explicit"], environment: ["LARDER_DATA": box.dataPath])
    #expect(explicit.status == 0, "\(explicit)")
    #expect(
      try other.larder("ls", "bkt", "--recursive").stdoutLines.map { $0.split(separator: "\t")[0] } == [
        "explicit"
      ])
    #expect(try box.larder("stat", "bkt/explicit").status == 1)
    // serve reads LARDER_PORT, LARDER_ALLOW_ALL (only "1" turns it on) and LARDER_RULES.
    let port = try CLI.larder(["serve", "--allow-all"], environment: ["LARDER_PORT": "70000"])
    #expect(port.stderrLines.first == "larder: error: --port must be 0…65535")
    #expect(port.status == 2)
    let both = try CLI.larder(["serve", "--rules", "r"], environment: ["LARDER_ALLOW_ALL": "1"])
    #expect(both.stderrLines.first == "larder: error: --rules and --allow-all exclude each other")
    let both2 = try CLI.larder(["serve", "--allow-all"], environment: ["LARDER_RULES": "r"])
    #expect(both2.stderrLines.first == "larder: error: --rules and --allow-all exclude each other")
    let notOne = try CLI.larder(["serve"], environment: ["LARDER_ALLOW_ALL": "yes"])
    #expect(notOne.stderrLines.first?.hasPrefix("larder: error: no access policy: ") == true, "\(notOne)")
    // An empty LARDER_DATA is an empty directory name, not the default.
    let empty = try CLI.larder(["ls"], environment: ["LARDER_DATA": ""])
    #expect(empty.status == 2)
    #expect(empty.stderrLines.first == "larder: error: --data needs a directory")
  }

  /// (arguments after `--data DIR`, the error line after `larder: error: `)
  static let refused: [([String], String)] = [
    (["ls", "--bogus=1"], "unknown option '--bogus'"),
    (["ls", "-x"], "unknown option '-x'"),
    (["stat", "b/n", "--json=yes"], "--json takes no value"),
    (
      ["put", "f", "b/n", "--content-type", "a", "--content-type", "b"], "--content-type given more than once"
    ),
    (["put", "f", "b/n", "--content-type=a", "--content-type=a"], "--content-type given more than once"),
    (["get", "b/n", "-o", "x", "--output", "y"], "-o/--output given more than once"),
    (["stat", "b/n", "--json", "--json"], "--json given more than once"),
    (["ls", "-r", "--recursive"], "-r/--recursive given more than once"),
    (["gc", "--grace", "1h", "--grace=2h"], "--grace given more than once"),
    (["serve", "--allow-all", "--port", "0", "--port", "1"], "--port given more than once"),
    (["ls", "b", "c"], "unexpected argument 'c'"),
    (["put"], "missing argument FILE"),
    (["put", "f", "--", "--json"], "'--json' is not BUCKET/NAME"),
  ]

  @Test(arguments: 0..<refused.count) func badOptionIsUsageError(_ index: Int) throws {
    let (arguments, message) = Self.refused[index]
    try expectUsageError(arguments, message)
  }

  /// `--data` given twice, through the sandbox's own `--data` and once more.
  @Test func dataGivenTwiceIsUsageError() throws {
    let box = try Sandbox()
    let result = try box.larder("ls", "--data", box.dataPath)
    #expect(result.status == 2)
    #expect(result.stderrLines.first == "larder: error: --data given more than once")
  }

  /// Repeatable options collect every value in order; the last of a key wins.
  @Test func repeatableOptionsCollectEveryValue() throws {
    let box = try Sandbox()
    let src = try box.write("f", [1])
    let put = try box.larder(
      "put", src, "bkt/n", "--metadata", "a=1", "--metadata=b=2", "--metadata", "a=3", "--json")
    #expect(put.status == 0, "\(put)")
    #expect(try put.jsonObject()["metadata"] as? [String: String] == ["a": "3", "b": "2"])
  }

  /// `--help` wins over every other problem on the line, even a missing value; after `--` it is a
  /// positional like any other.
  @Test func helpWinsOverBadUsage() throws {
    let result = try CLI.larder(["put", "--content-type", "--help", "--bogus"])
    #expect(result.status == 0)
    #expect(result.stdout.hasPrefix("usage: larder put FILE BUCKET/NAME "))
    #expect(result.stderr == "")
    let positional = try CLI.larder(["stat", "--", "--help"])
    #expect(positional.status == 2)
    #expect(positional.stderrLines.first == "larder: error: '--help' is not BUCKET/NAME")
  }
}
