import Foundation
import LarderTestSupport
import Testing

/// Runs the documentation's tested curl examples (README.md, the docs/ pages that carry them, and
/// interop/readme/EXAMPLES.md) against a live `larder serve`, so the documentation cannot drift
/// from the server.
@Suite struct ReadmeExamplesTests {
  /// The documents whose `<!-- readme-test -->` blocks are run, each against its own server.
  static let documents = ["README.md", "docs/http-api.md"]

  /// The package root, found from this file's path (Tests/LarderServerTests/API/…).
  static let root = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  /// The `larder` built next to this test bundle (whatever the scratch path), else `.build/debug/larder`.
  static let binary: URL = {
    let exe = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "")
    var dir = exe.deletingLastPathComponent()
    while dir.path != "/" && dir.pathExtension == "xctest" || dir.lastPathComponent == "MacOS" { dir.deleteLastPathComponent() }
    for candidate in [dir.appendingPathComponent("larder"), dir.deletingLastPathComponent().appendingPathComponent("larder")]
    where FileManager.default.isExecutableFile(atPath: candidate.path) {
      return candidate
    }
    return root.appendingPathComponent(".build/debug/larder")
  }()
  static let script = root.appendingPathComponent("interop/readme/run_examples.sh")

  static func hasMarkedBlock(_ file: URL) -> Bool {
    guard let text = try? String(contentsOf: file, encoding: .utf8) else { return false }
    let lines = text.components(separatedBy: "\n")
    return zip(lines, lines.dropFirst()).contains { $0.0 == "<!-- readme-test -->" && $0.1.hasPrefix("```sh") }
  }

  static var canRun: Bool { FileManager.default.isExecutableFile(atPath: binary.path) }

  /// `bash run_examples.sh FILE` against the built binary (a generous timeout: it starts servers).
  func runExamples(_ file: URL) throws -> RunResult {
    var environment = ProcessInfo.processInfo.environment
    environment["LARDER_BIN"] = Self.binary.path
    return try Subprocess.run("/bin/bash", [Self.script.path, file.path], environment: environment, timeout: 600)
  }

  func run(_ relative: String) throws {
    let file = Self.root.appendingPathComponent(relative)
    // A file that lost its marked blocks would otherwise pass without running anything.
    try #require(Self.hasMarkedBlock(file), "\(relative) has no <!-- readme-test --> sh block")
    let r = try runExamples(file)
    #expect(r.status == 0, "run_examples \(relative) exited \(r.status)\n\(r.stdout)\n\(r.stderr)")
    #expect(r.stdout.contains("passed against http://127.0.0.1:"), "\(r.stdout)")
  }

  @Test(.enabled(if: ReadmeExamplesTests.canRun, "needs .build/debug/larder"), arguments: documents)
  func documentedExamples(_ document: String) throws {
    try run(document)
  }

  /// Every Markdown file of README.md and docs/ with a marked block is in ``documents``, so a
  /// block moved to another page is not silently left unrun.
  @Test func everyDocumentWithMarkedBlocksIsRun() throws {
    var marked = Self.hasMarkedBlock(Self.root.appendingPathComponent("README.md")) ? ["README.md"] : []
    let docs = Self.root.appendingPathComponent("docs")
    let enumerator = try #require(FileManager.default.enumerator(atPath: docs.path))
    for case let path as String in enumerator
    where path.hasSuffix(".md") && Self.hasMarkedBlock(docs.appendingPathComponent(path)) {
      marked.append("docs/" + path)
    }
    #expect(marked.sorted() == Self.documents.sorted())
  }

  @Test(.enabled(if: ReadmeExamplesTests.canRun, "needs .build/debug/larder")) func proposedExamples() throws {
    try run("interop/readme/EXAMPLES.md")
  }

  /// Every relative link of README.md and docs/ reaches a file, and its `#fragment` a heading
  /// there (`scripts/check-doc-links.py`), so moving a section cannot strand the links to it.
  @Test func relativeLinksResolve() throws {
    let script = Self.root.appendingPathComponent("scripts/check-doc-links.py")
    let r = try Subprocess.run("/usr/bin/python3", [script.path, Self.root.path])
    #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
    #expect(r.stdout.contains(" 0 broken"), "\(r.stdout)")
  }

  /// The runner itself: a failing block fails the run, unmarked blocks are not run.
  @Test(.enabled(if: ReadmeExamplesTests.canRun, "needs .build/debug/larder")) func runnerFailsOnAFailingBlock() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("larder-readme-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let good = dir.appendingPathComponent("good.md")
    try """
      ```sh
      exit 7
      ```
      <!-- readme-test -->
      ```sh
      test "$(curl -sS "$LARDER/healthz")" = '{"status":"ok"}'
      ```
      """.write(to: good, atomically: true, encoding: .utf8)
    let ok = try runExamples(good)
    #expect(ok.status == 0, "\(ok.stdout)\(ok.stderr)")
    #expect(ok.stdout.contains("run_examples: 1 block(s) of good.md passed"))
    let bad = dir.appendingPathComponent("bad.md")
    try """
      <!-- readme-test -->
      ```sh
      false | cat
      echo never
      ```
      """.write(to: bad, atomically: true, encoding: .utf8)
    let failed = try runExamples(bad)
    #expect(failed.status == 1)
    #expect(failed.stderr.contains("block 1 of"))
    #expect(!failed.stderr.contains("> never"))
  }
}
