import Foundation
import Testing

/// `--help` and the usage lines are generated from each command's option table: exact text for
/// a few commands, the same options in the usage line as in the table, and docs/cli.md saying
/// what the binary says.
@Suite struct HelpTests {
  @Test func statHelpIsExactlyItsTable() throws {
    let result = try CLI.larder(["stat", "--help"])
    #expect(result.status == 0)
    #expect(result.stderr == "")
    #expect(
      result.stdout == """
        usage: larder stat BUCKET/NAME [--json] [--server URL] [--key FILE] [--data DIR] [--catalog URL]
                           [--blobs URL] [--s3-credentials FILE]

        arguments:
          BUCKET/NAME            the object

        options:
          --json                 print the metadata as JSON (the Firebase shape; with --server, the GCS
                                 object resource)
          --server URL           a Larder server to act on over the GCS JSON API instead of the data
                                 directory (env LARDER_SERVER)
          --key FILE             with --server: a service-account key file (larder service-account create)
                                 to act as that account (env LARDER_KEY)
          --data DIR             the data directory (env LARDER_DATA; default ./data)
          --catalog URL          the catalog: postgres://user@host:port/db[?schema=name] shared by several
                                 nodes (default: SQLite in the data directory) (env LARDER_CATALOG)
          --blobs URL            where content lives: s3://BUCKET?endpoint=URL&region=R&path-style=1 shared
                                 by several nodes (default: the data directory) (env LARDER_BLOBS)
          --s3-credentials FILE  the S3 access key and secret (default: AWS_ACCESS_KEY_ID,
                                 AWS_SECRET_ACCESS_KEY) (env LARDER_S3_CREDENTIALS)
          -h, --help             show this help

        """)
  }

  @Test func rulesCheckHelpHasOnlyItsArgumentAndHelp() throws {
    let result = try CLI.larder(["rules", "check", "-h"])
    #expect(result.status == 0)
    #expect(
      result.stdout == """
        usage: larder rules check FILE

        arguments:
          FILE        the storage.rules file

        options:
          -h, --help  show this help

        """)
  }

  @Test func helpShowsAliasesRepeatableRequiredDefaultsAndEnvironment() throws {
    let lines: [(String, String)] = [
      ("get", "  -o, --output FILE      write here (through a temporary file) instead of standard output"),
      ("put", "  --metadata k=v         custom metadata (repeatable)"),
      (
        "put",
        "  --content-type TYPE    the declared type (default: the type libmagic detects in the content)"
      ),
      ("gc", "  --grace DURATION       release unreferenced files only once older than this (default 24h)"),
      ("token", "  --uid U                the token's subject (request.auth.uid) (required)"),
      ("token", "  --ttl DURATION         how long the token is valid (default 1h)"),
      ("serve", "  --host HOST                     the address to bind (env LARDER_HOST; default 127.0.0.1)"),
      (
        "serve",
        "                                  listening on http://HOST:PORT (env LARDER_PORT; default 8080)"
      ),
      ("serve", "                                  (env LARDER_ALLOW_ALL=1)"),
      // The exclusive set, from the table the parser checks (`serve` alone is "no access policy").
      ("serve", "One of --rules FILE and --allow-all is required."),
      ("serve", "usage: larder serve [--host HOST] [--port PORT] (--rules FILE | --allow-all)"),
      (
        "serve",
        "  --cors-origin ORIGIN            an origin browsers may call from; default: any (repeatable)"
      ),
      ("ls", "  -r, --recursive        list every name under the prefix instead of folding at '/'"),
    ]
    for (command, line) in lines {
      let result = try CLI.larder([command, "--help"])
      #expect(result.status == 0)
      #expect(
        result.stdoutLines.contains(line),
        "\(command) --help lacks \(line.debugDescription):\n\(result.stdout)")
    }
  }

  @Test(arguments: UsageTests.commands) func usageLineListsEveryOptionOfTheTable(_ command: String) throws {
    let result = try CLI.larder(command.split(separator: " ").map(String.init) + ["--help"])
    #expect(result.status == 0)
    let usage = Self.usage(of: result.stdout)
    // Every option row of the table (but -h, --help) appears in the usage line, in order.
    let rows = result.stdoutLines.drop { $0 != "options:" }.dropFirst()
      .filter { $0.hasPrefix("  -") && !$0.hasPrefix("  -h, --help") }
    #expect(!rows.isEmpty || command.hasPrefix("rules check"))
    var rest = Substring(usage)
    for row in rows {
      let long = row.split(separator: " ").first { $0.hasPrefix("--") }.map {
        String($0.filter { $0 != "," })
      }
      let name = try #require(long, "\(row)")
      let found = try #require(
        rest.range(of: name), "\(command): \(name) missing from, or out of order in \(usage)")
      rest = rest[found.upperBound...]
    }
    // Usage lines are wrapped at 100 columns, continuation lines under the first word.
    for line in result.stdout.split(separator: "\n") { #expect(line.count <= 100, "\(line)") }
  }

  /// docs/cli.md's first block is each command's usage line, so the documentation cannot drift
  /// from the binary: re-generate it with the commands' `--help` when an option changes.
  @Test func documentedCLIUsageMatchesTheUsageLines() throws {
    let page = try String(contentsOf: CLI.packageRoot.appendingPathComponent("docs/cli.md"), encoding: .utf8)
    let section = try #require(page.range(of: "# CLI\n\n```\n"))
    let end = try #require(page[section.upperBound...].range(of: "```"))
    var documented: [String] = []
    for line in page[section.upperBound..<end.lowerBound].split(separator: "\n") {
      if line.hasPrefix("larder ") {
        documented.append(String(line))
      } else {
        documented[documented.count - 1] += " " + line.trimmingCharacters(in: .whitespaces)
      }
    }
    var generated: [String] = []
    for command in UsageTests.commands {
      let result = try CLI.larder(command.split(separator: " ").map(String.init) + ["--help"])
      generated.append(String(Self.usage(of: result.stdout).dropFirst("usage: ".count)))
    }
    #expect(documented == generated)
  }

  /// The usage line of a help text, its continuation lines joined with single spaces.
  static func usage(of help: String) -> String {
    let block = help.components(separatedBy: "\n\n")[0]
    return block.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
  }
}
