import Foundation
import Larder
import LarderTestSupport
import Testing

/// CLI-test conveniences over LarderTestSupport's `RunResult`.
extension RunResult {
  var stdoutLines: [String] {
    stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLastEmpty()
  }
  var stderrLines: [String] {
    stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLastEmpty()
  }

  /// Parses standard output as JSON.
  func json() throws -> Any {
    try JSONSerialization.jsonObject(with: Data(stdoutBytes), options: [.fragmentsAllowed])
  }

  func jsonObject() throws -> [String: Any] {
    guard let object = try json() as? [String: Any] else {
      throw HarnessFailure("stdout is not a JSON object: \(stdout)")
    }
    return object
  }
}

extension Array where Element == String {
  fileprivate func dropLastEmpty() -> [String] { last == "" ? Array(dropLast()) : self }
}

/// Runs the built `larder` executable and other programs through LarderTestSupport's
/// `Subprocess` (`posix_spawn`), with no inherited LARDER_* variables.
enum CLI {
  /// The package root: …/Tests/LarderCLITests/CLISupport.swift → three levels up.
  static let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

  /// Where the `larder` binary was looked for, in order.
  static var candidates: [String] {
    var list: [String] = []
    if let explicit = ProcessInfo.processInfo.environment["LARDER_CLI_BINARY"], !explicit.isEmpty {
      list.append(explicit)
    }
    // Beside the test bundle: right for any --scratch-path (`swift build --build-tests` builds both).
    if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
      var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
      if dir.lastPathComponent == "MacOS" || dir.lastPathComponent == "Contents" {
        dir = dir.deletingLastPathComponent()
      }
      list.append(dir.appendingPathComponent("larder").path)
    }
    list.append(packageRoot.appendingPathComponent(".build/debug/larder").path)
    return list
  }

  /// The `larder` executable, or a failure naming every place looked at (never a silent skip).
  static let located: Result<String, HarnessFailure> = {
    for path in candidates where FileManager.default.isExecutableFile(atPath: path) {
      return .success(path)
    }
    return .failure(
      HarnessFailure(
        "the larder binary was not found (looked at \(candidates.joined(separator: ", "))); "
          + "build it first with `swift build --build-tests` (make test does)"))
  }()

  static func binary() throws -> String { try located.get() }

  /// Environment for children: ours minus every LARDER_* variable, plus the catalog and blobs
  /// this run's tests use for the data directory the arguments name (`LARDER_CATALOG`,
  /// `LARDER_BLOBS`: see `TestStore.processEnvironment(for:)`, so the CLI finds the stores the
  /// test made), plus `extra`.
  static func environment(_ extra: [String: String], arguments: [[UInt8]]) -> [String: String] {
    var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LARDER_") }
    if let data = dataDirectory(in: arguments.map { String(decoding: $0, as: UTF8.self) }) ?? extra["LARDER_DATA"],
      !data.isEmpty
    {
      for (k, v) in TestStore.processEnvironment(for: URL(fileURLWithPath: data)) { env[k] = v }
    }
    for (k, v) in extra { env[k] = v }
    return env
  }

  /// The value of `--data DIR` or `--data=DIR` (`catalog copy --from DIR` too), if given.
  private static func dataDirectory(in arguments: [String]) -> String? {
    for (index, argument) in arguments.enumerated() {
      for option in ["--data", "--from"] {
        if argument == option, index + 1 < arguments.count { return arguments[index + 1] }
        if argument.hasPrefix(option + "=") { return String(argument.dropFirst(option.count + 1)) }
      }
    }
    return nil
  }

  /// The executable for `larder` with `environment`: the test-only `larder-crashing` build
  /// beside it when the test names a crash point (`LARDER_CRASH_AT`), else `larder`.
  static func binary(for environment: [String: String]) throws -> String {
    let larder = try binary()
    guard environment["LARDER_CRASH_AT"] != nil else { return larder }
    return URL(fileURLWithPath: larder).deletingLastPathComponent().appendingPathComponent("larder-crashing").path
  }

  /// Starts `executable` with stdin from `stdinPath` (or /dev/null) and stdout/stderr into files.
  static func spawn(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    stdinPath: String? = nil,
    stdoutPath: String, stderrPath: String
  ) throws -> pid_t {
    try spawn(
      executable, rawArguments: arguments.map { Array($0.utf8) }, environment: environment,
      stdinPath: stdinPath,
      stdoutPath: stdoutPath, stderrPath: stderrPath)
  }

  /// Same, with arguments as raw bytes (which need not be UTF-8).
  static func spawn(
    _ executable: String, rawArguments arguments: [[UInt8]], environment: [String: String] = [:],
    stdinPath: String? = nil, stdoutPath: String, stderrPath: String
  ) throws -> pid_t {
    try Subprocess.spawn(
      executable, rawArguments: arguments, environment: Self.environment(environment, arguments: arguments), stdinPath: stdinPath,
      stdoutPath: stdoutPath, stderrPath: stderrPath)
  }

  /// Waits for `pid`, killing it (and failing) after `timeout` seconds. Returns the exit status,
  /// or 128 + signal.
  static func wait(_ pid: pid_t, timeout: Double = 120) throws -> Int32 {
    try Subprocess.wait(pid, timeout: timeout)
  }

  /// Runs a program to completion and captures its output.
  static func run(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: [UInt8]? = nil,
    timeout: Double = 120
  ) throws -> RunResult {
    try run(
      executable, rawArguments: arguments.map { Array($0.utf8) }, environment: environment, stdin: stdin,
      timeout: timeout)
  }

  /// Same, with arguments as raw bytes.
  static func run(
    _ executable: String, rawArguments arguments: [[UInt8]], environment: [String: String] = [:],
    stdin: [UInt8]? = nil, timeout: Double = 120
  ) throws -> RunResult {
    try Subprocess.run(
      executable, rawArguments: arguments, environment: Self.environment(environment, arguments: arguments), stdin: stdin,
      timeout: timeout)
  }

  /// Runs `larder arguments…`.
  static func larder(
    _ arguments: [String], environment: [String: String] = [:], stdin: [UInt8]? = nil
  ) throws -> RunResult {
    try run(try binary(for: environment), arguments, environment: environment, stdin: stdin)
  }

  /// `openssl dgst -sha256` of a file: an implementation independent of the code under test.
  static func opensslSHA256(_ path: String) throws -> String {
    let result = try run("/usr/bin/openssl", ["dgst", "-sha256", "-r", path])
    guard result.status == 0, let hex = result.stdout.split(separator: " ").first else {
      throw HarnessFailure("openssl dgst failed: \(result)")
    }
    return String(hex)
  }

  /// Base64 of `openssl dgst -md5 -binary`.
  static func opensslMD5Base64(_ path: String) throws -> String {
    let result = try run("/usr/bin/openssl", ["dgst", "-md5", "-binary", path])
    guard result.status == 0, result.stdoutBytes.count == 16 else {
      throw HarnessFailure("openssl md5 failed: \(result)")
    }
    return Data(result.stdoutBytes).base64EncodedString()
  }
}

/// A fresh temporary directory for one test, holding a data directory and scratch files.
final class Sandbox {
  let root: URL
  var data: URL { root.appendingPathComponent("data") }
  var dataPath: String { data.path }

  init() throws {
    root = FileManager.default.temporaryDirectory.appendingPathComponent("larder-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(at: root) }

  /// The variables that make a `larder` run by a script (not by ``larder(_:environment:stdin:)``,
  /// which adds them itself) open this run's store for the data directory.
  var storeEnvironment: [String: String] { TestStore.processEnvironment(for: data) }

  /// Path of a scratch file (outside the data directory).
  func path(_ name: String) -> String { root.appendingPathComponent(name).path }

  /// Writes a scratch file and returns its path.
  @discardableResult
  func write(_ name: String, _ bytes: [UInt8]) throws -> String {
    let p = path(name)
    guard FileManager.default.createFile(atPath: p, contents: Data(bytes)) else {
      throw HarnessFailure("cannot write \(p)")
    }
    return p
  }

  func read(_ name: String) -> [UInt8]? { FileManager.default.contents(atPath: path(name)).map(Array.init) }

  /// `larder COMMAND --data DATA ARGS…` (the option goes first, so a `--` in ARGS stays last).
  func larder(_ arguments: String..., environment: [String: String] = [:], stdin: [UInt8]? = nil) throws
    -> RunResult
  {
    try larder(args: arguments, environment: environment, stdin: stdin)
  }

  /// Same, as an array.
  func larder(args arguments: [String], environment: [String: String] = [:], stdin: [UInt8]? = nil) throws
    -> RunResult
  {
    let full = Array(arguments.prefix(1)) + ["--data", dataPath] + arguments.dropFirst()
    return try CLI.larder(full, environment: environment, stdin: stdin)
  }

  /// Stores `bytes` as `object` (BUCKET/NAME) through the CLI and requires success.
  @discardableResult
  func put(_ object: String, _ bytes: [UInt8], extra: [String] = []) throws -> RunResult {
    let file = try write("src-\(UUID().uuidString)", bytes)
    let result = try larder(args: ["put", file, object] + extra)
    guard result.status == 0 else { throw HarnessFailure("put \(object) failed: \(result)") }
    return result
  }

  /// Regular files under `data/<sub>` (relative paths, sorted).
  func files(under sub: String) -> [String] {
    let base = data.appendingPathComponent(sub).path
    guard let walker = FileManager.default.enumerator(atPath: base) else { return [] }
    var list: [String] = []
    while let item = walker.nextObject() as? String {
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: "\(base)/\(item)", isDirectory: &isDirectory),
        !isDirectory.boolValue
      {
        list.append(item)
      }
    }
    return list.sorted()
  }

  /// Hex digests of the blob files on disk (their names).
  var blobFileNames: [String] {
    files(under: "blobs").map { String($0.split(separator: "/").last ?? "") }.sorted()
  }

  /// Entries of `data/tmp` or `data/trash`.
  func entries(_ sub: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent(sub).path)) ?? [])
      .sorted()
  }

  /// Hex digests of the `blobs` rows.
  static func blobRows(_ larder: Larder) throws -> [String] {
    try larder.catalog.read { db in
      try db.rows("SELECT sha256 FROM blobs").compactMap { $0.bytes("sha256") }.map(hex)
    }.sorted()
  }

  static func count(_ larder: Larder, _ table: String) throws -> Int64 {
    try larder.catalog.read { db in try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1 }
  }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// Deterministic pseudo-random bytes (SplitMix64), so failures reproduce.
func pseudoRandomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
  var state = seed &+ 0x9E37_79B9_7F4A_7C15
  var out = [UInt8]()
  out.reserveCapacity(count)
  while out.count < count {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    withUnsafeBytes(of: z.littleEndian) { out.append(contentsOf: $0.prefix(count - out.count)) }
  }
  return out
}

/// A valid 1×1 PNG, which libmagic reports as image/png whatever the client claims.
let onePixelPNG: [UInt8] = Array(
  Data(
    base64Encoded:
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)
