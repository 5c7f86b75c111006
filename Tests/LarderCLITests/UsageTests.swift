import Foundation
import Testing

/// Exit status 2 with an error line and the usage for every kind of bad usage; `--help` everywhere.
@Suite struct UsageTests {
  static let commands = [
    "serve", "put", "get", "ls", "stat", "rm", "cp", "gc", "verify", "catalog migrate", "catalog copy", "token",
    "rules check", "rules eval", "service-account create", "service-account list", "service-account revoke",
    "service-account token", "models export", "models import", "images warm",
    "backup", "backup list", "backup verify", "backup prune", "restore",
    "events subscribe", "events list", "events unsubscribe", "events pending", "events dead", "events replay",
  ]

  @Test func noArgumentsIsBadUsageWithTheCommandList() throws {
    let result = try CLI.larder([])
    #expect(result.status == 2)
    let text = result.stdout + result.stderr
    #expect(text.contains("usage: larder COMMAND [options]"))
    for c in Self.commands { #expect(text.contains("  \(c) "), "missing \(c)") }
  }

  @Test(arguments: ["--help", "-h", "help"]) func topLevelHelpSucceeds(_ flag: String) throws {
    let result = try CLI.larder([flag])
    #expect(result.status == 0)
    #expect(
      result.stdout.hasPrefix(
        "larder: self-hosted file and blob storage\n\nusage: larder COMMAND [options]\n"))
    for c in Self.commands { #expect(result.stdout.contains("\n  \(c) "), "missing \(c)") }
    #expect(result.stderr == "")
  }

  @Test(arguments: commands) func everyCommandHasHelp(_ command: String) throws {
    let words = command.split(separator: " ").map(String.init)
    for flag in ["--help", "-h"] {
      let result = try CLI.larder(words + [flag])
      #expect(result.status == 0, "\(command) \(flag): \(result)")
      #expect(result.stdout.hasPrefix("usage: larder \(command)"), "\(command) \(flag): \(result)")
      #expect(result.stderr == "")
    }
  }

  @Test func unknownCommand() throws {
    let result = try CLI.larder(["frobnicate", "x"])
    #expect(result.status == 2)
    #expect(result.stderrLines.first == "larder: error: unknown command 'frobnicate'; see 'larder --help'")
    #expect(result.stderr.contains("usage: larder COMMAND [options]"))
    #expect(result.stdout == "")
    // A group name with an unknown verb is unknown too.
    let rules = try CLI.larder(["rules", "frobnicate"])
    #expect(rules.status == 2)
    #expect(rules.stderrLines.first == "larder: error: unknown command 'rules'; see 'larder --help'")
  }

  /// (arguments, the error line, the command whose usage follows)
  static let badUsage: [([String], String, String)] = [
    (["ls", "--bogus"], "unknown option '--bogus'", "ls"),
    (["put", "--data", "/nonexistent-dir", "-x", "f", "b/n"], "unknown option '-x'", "put"),
    (["get"], "missing argument BUCKET/NAME", "get"),
    (["put", "only-one"], "missing argument BUCKET/NAME", "put"),
    (["stat"], "missing argument BUCKET/NAME", "stat"),
    (["rm"], "missing argument BUCKET/NAME", "rm"),
    (["stat", "b/n", "extra"], "unexpected argument 'extra'", "stat"),
    (["stat", "nobucket"], "'nobucket' is not BUCKET/NAME", "stat"),
    (["get", "/name"], "'/name' is not BUCKET/NAME", "get"),
    (["rm", "b/"], "'b/' is not BUCKET/NAME", "rm"),
    (["put", "f", "plain"], "'plain' is not BUCKET/NAME", "put"),
    (["get", "b/n", "--max-size", "lots"], "'lots' is not a size (e.g. 1024, 10MiB, 5GiB)", "get"),
    (["get", "b/n", "--max-size", "-5"], "'-5' is not a size (e.g. 1024, 10MiB, 5GiB)", "get"),
    (["get", "b/n", "--max-size", "99999999TiB"], "size '99999999TiB' is too large", "get"),
    (["get", "b/n", "--max-size"], "--max-size needs a value", "get"),
    (["put", "f", "b/n", "--metadata", "novalue"], "--metadata takes key=value, got 'novalue'", "put"),
    (["put", "f", "b/n", "--metadata", "=v"], "--metadata takes key=value, got '=v'", "put"),
    (["gc", "--grace", "soon"], "'soon' is not a duration (e.g. 30s, 15m, 24h)", "gc"),
    (["gc", "--grace", "9999999999999999d"], "duration '9999999999999999d' is too large", "gc"),
    (["gc", "--grace", "9223372036854775807h"], "duration '9223372036854775807h' is too large", "gc"),
    (["token", "--uid", "u", "--ttl", "9999999999999999d"], "duration '9999999999999999d' is too large", "token"),
    (["token", "--uid", "u", "--ttl", "36501d"], "--ttl must be at most 100 years (36500d)", "token"),
    (["token", "--uid", "u", "--ttl", "9223372036854775807"], "--ttl must be at most 100 years (36500d)", "token"),
    (["gc", "--grace", "9223372036854775807"], "--grace must be at most 100 years (36500d)", "gc"),
    (["gc", "--grace", "36501d"], "--grace must be at most 100 years (36500d)", "gc"),
    (["gc", "leftover"], "unexpected argument 'leftover'", "gc"),
    (["verify", "--fix"], "unknown option '--fix'", "verify"),
    (["token"], "--uid is required", "token"),
    (["token", "--uid", "u", "--claim", "x"], "--claim takes key=value, got 'x'", "token"),
    (["rules", "check"], "missing argument FILE", "rules check"),
    (["rules", "eval", "f", "--path", "/b/x/o/y"], "--op is required", "rules eval"),
    (["serve", "--allow-all", "--port", "70000"], "--port must be 0…65535", "serve"),
    (["serve", "--allow-all", "--upload-lease", "500ms"], "--upload-lease must be at least 1s", "serve"),
    (["serve", "--allow-all", "--upload-lease", "0"], "--upload-lease must be at least 1s", "serve"),
    (["serve", "--allow-all", "--upload-lease", "soon"], "'soon' is not a duration (e.g. 30s, 15m, 24h)", "serve"),
    (["ls", "--data", ""], "--data needs a directory", "ls"),
    (["serve", "--allow-all", "--image-transforms", "maybe"], "--image-transforms must be on or off", "serve"),
    (["serve", "--allow-all", "--image-max-pixels", "0"], "--image-max-pixels must be a positive integer", "serve"),
    (["serve", "--allow-all", "--image-max-pixels", "lots"], "--image-max-pixels must be a positive integer", "serve"),
    (["serve", "--allow-all", "--image-threads", "0"], "--image-threads must be 1…64", "serve"),
    (["serve", "--allow-all", "--image-threads", "65"], "--image-threads must be 1…64", "serve"),
    (["serve", "--allow-all", "--catalog-writers", "0"], "--catalog-writers must be 1…256", "serve"),
    (["serve", "--allow-all", "--catalog-writers", "257"], "--catalog-writers must be 1…256", "serve"),
    (["serve", "--allow-all", "--catalog-writers", "many"], "--catalog-writers must be 1…256", "serve"),
    (["serve", "--allow-all", "--port", "65536"], "--port must be 0…65535", "serve"),
    (["serve", "--allow-all", "--port", "-1"], "--port must be 0…65535", "serve"),
    (["serve", "--allow-all", "--threads", "0"], "--threads must be 1…256", "serve"),
    (["serve", "--allow-all", "--connection-timeout", "-1"], "--connection-timeout takes seconds", "serve"),
    (["serve", "--allow-all", "--connection-timeout", "30s"], "--connection-timeout takes seconds", "serve"),
    (["serve", "--allow-all", "--connection-limit", "0"], "--connection-limit must be 1…1000000", "serve"),
    (["serve", "--allow-all", "--connection-limit", "1000001"], "--connection-limit must be 1…1000000", "serve"),
    (["serve", "--allow-all", "--write-quota", "lots"], "'lots' is not a size (e.g. 1024, 10MiB, 5GiB)", "serve"),
    (["serve", "--allow-all", "--write-quota-period", "500ms"], "--write-quota-period must be at least 1s", "serve"),
    (["serve", "--allow-all", "--uploads-in-progress", "-1"], "--uploads-in-progress must be 0 (none) or more", "serve"),
    (
      ["serve", "--allow-all", "--per-ip-connection-limit", "-2"], "--per-ip-connection-limit must be 0 (none) or more",
      "serve"
    ),
    (
      ["serve", "--allow-all", "--image-max-source-size", "big"], "'big' is not a size (e.g. 1024, 10MiB, 5GiB)",
      "serve"
    ),
    (["serve", "--allow-all", "--image-cache-size", "-1"], "'-1' is not a size (e.g. 1024, 10MiB, 5GiB)", "serve"),
    (
      ["serve", "--allow-all", "--image-variants-per-source", "0"], "--image-variants-per-source must be 1…100000",
      "serve"
    ),
    (
      ["serve", "--allow-all", "--image-sizes", "64,,128"],
      "--image-sizes takes widths and heights 1…2500, comma-separated", "serve"
    ),
    (
      ["serve", "--allow-all", "--image-sizes", "64,2501"],
      "--image-sizes takes widths and heights 1…2500, comma-separated", "serve"
    ),
    (
      ["serve", "--allow-all", "--image-renders-per-client", "0"], "--image-renders-per-client must be 1…1024",
      "serve"
    ),
    (["serve", "--allow-all", "--event-delivery", "maybe"], "--event-delivery must be on or off", "serve"),
    (["serve", "--allow-all", "--event-timeout", "0s"], "--event-timeout must be more than 0", "serve"),
    (["serve", "--allow-all", "--event-timeout", "soon"], "'soon' is not a duration (e.g. 30s, 15m, 24h)", "serve"),
    (["serve", "--allow-all", "--event-retry-first", "0"], "--event-retry-first must be more than 0", "serve"),
    (
      ["serve", "--allow-all", "--event-retry-first", "1m", "--event-retry-max", "30s"],
      "--event-retry-max must be at least --event-retry-first", "serve"
    ),
    (["serve", "--allow-all", "--event-give-up", "-1h"], "'-1h' is not a duration (e.g. 30s, 15m, 24h)", "serve"),
    (["serve", "--allow-all", "--event-retention", "week"], "'week' is not a duration (e.g. 30s, 15m, 24h)", "serve"),
    (["serve", "--allow-all", "--console-buckets", " , "], "--console-buckets needs at least one bucket name", "serve"),
    (
      ["serve", "--allow-all", "--console-buckets", "app,Photos"],
      "--console-buckets: invalid bucket name 'Photos': only lower-case letters, digits, '.', '_' and '-' are allowed",
      "serve"
    ),
  ]

  @Test(arguments: 0..<badUsage.count) func badUsageExitsTwoWithErrorAndUsage(_ index: Int) throws {
    let (arguments, message, command) = Self.badUsage[index]
    let result = try CLI.larder(arguments)
    #expect(result.status == 2, "\(arguments): \(result)")
    #expect(result.stderrLines.first == "larder: error: \(message)", "\(arguments): \(result)")
    #expect(
      result.stderrLines.dropFirst().first?.hasPrefix("usage: larder \(command)") == true,
      "\(arguments): \(result)")
    #expect(result.stdout == "")
  }

  @Test func badUsageTouchesNoDataDirectory() throws {
    let box = try Sandbox()
    let result = try box.larder("put", "f", "nobucket")
    #expect(result.status == 2)
    #expect(!FileManager.default.fileExists(atPath: box.dataPath))
  }
}

/// Names the store refuses: exit 1 with one clear error line, nothing stored.
@Suite struct InvalidNameTests {
  /// (object path, the error line after `larder: error: `)
  static let cases: [(String, String)] = [
    ("bkt/a\u{01}b", "invalid object name 'a\\u{01}b': it contains a control character (U+1)"),
    ("bkt/line\nbreak", "invalid object name 'line\\nbreak': it contains a control character (U+A)"),
    ("bkt/x/../y", "invalid object name 'x/../y': '.' and '..' segments are not allowed"),
    ("bkt/../etc/passwd", "invalid object name '../etc/passwd': '.' and '..' segments are not allowed"),
    ("bkt/./y", "invalid object name './y': '.' and '..' segments are not allowed"),
    (
      "Bad_Bucket/y",
      "invalid bucket name 'Bad_Bucket': only lower-case letters, digits, '.', '_' and '-' are allowed"
    ),
    ("-b/y", "invalid bucket name '-b': it must start and end with a letter or digit"),
  ]

  @Test(arguments: 0..<cases.count) func invalidNameIsRefusedWithOneLine(_ index: Int) throws {
    let (object, message) = Self.cases[index]
    let box = try Sandbox()
    let src = try box.write("f", Array("content".utf8))
    let put = try box.larder(args: ["put", src, "--", object])
    #expect(put.status == 1, "\(object.debugDescription): \(put)")
    #expect(put.stderr == "larder: error: \(message)\n", "\(object.debugDescription): \(put)")
    #expect(put.stdout == "")
    let stat = try box.larder(args: ["stat", "--", object])
    #expect(stat.status == 1)
    #expect(stat.stderr == "larder: error: \(message)\n")
    let listing = try box.larder("ls", "--json")
    #expect(listing.status == 0)
    #expect((try listing.json() as? [Any])?.count == 0)
  }

  /// Invalid UTF-8 must not be repaired into U+FFFD and stored under another name.
  @Test func nonUTF8ArgumentIsRefused() throws {
    let box = try Sandbox()
    let src = try box.write("f", Array("content".utf8))
    let name: [UInt8] = Array("bkt/bad".utf8) + [0xFF] + Array("name".utf8)
    let put = try CLI.run(
      try CLI.binary(),
      rawArguments: [
        Array("put".utf8), Array("--data".utf8), Array(box.dataPath.utf8), Array(src.utf8), name,
      ])
    #expect(put.status == 2, "\(put)")
    #expect(
      put.stderr
        == "larder: error: argument 5 is not valid UTF-8 (names and paths must be UTF-8); see 'larder --help'\n"
    )
    #expect(put.stdout == "")
    #expect(!FileManager.default.fileExists(atPath: box.dataPath))
  }

  @Test func nameTooLongIsRefused() throws {
    let box = try Sandbox()
    let src = try box.write("f", [1, 2, 3])
    let name = String(repeating: "n", count: 1025)
    let put = try box.larder("put", src, "bkt/\(name)")
    #expect(put.status == 1)
    #expect(
      put.stderr
        == "larder: error: invalid object name '\(String(repeating: "n", count: 100))': it is longer than 1024 bytes\n"
    )
    let ok = try box.larder("put", src, "bkt/\(String(repeating: "n", count: 1024))")
    #expect(ok.status == 0, "\(ok)")
  }
}
