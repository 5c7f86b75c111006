import Foundation

/// A failure of the test harness itself (binary missing, spawn failed, timeout), as opposed to
/// a failure of the code under test.
public struct HarnessFailure: Error, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}

/// What one run of a process produced.
public struct RunResult: CustomStringConvertible, Sendable {
  /// The exit status, or 128 + signal number when killed by a signal.
  public var status: Int32
  public var stdoutBytes: [UInt8]
  public var stderrBytes: [UInt8]
  public var stdout: String { String(decoding: stdoutBytes, as: UTF8.self) }
  public var stderr: String { String(decoding: stderrBytes, as: UTF8.self) }

  public init(status: Int32, stdoutBytes: [UInt8], stderrBytes: [UInt8]) {
    self.status = status
    self.stdoutBytes = stdoutBytes
    self.stderrBytes = stderrBytes
  }

  public var description: String {
    "status \(status)\n--- stdout\n\(stdout.prefix(4000))\n--- stderr\n\(stderr.prefix(4000))"
  }
}

/// Runs programs for tests with `posix_spawn`, stdin/stdout/stderr through files.
///
/// Foundation's `Process` was seen to crash on EINTR (its SIGCHLD handling) when tests run in
/// parallel on Linux, so every test target spawns through here instead.
///
/// ```swift
/// let r = try Subprocess.run("/usr/bin/openssl", ["version"])
/// #expect(r.status == 0)
/// ```
public enum Subprocess {
  /// Starts `executable` (also its `argv[0]`) with stdin from `stdinPath` (or /dev/null) and
  /// stdout/stderr into files; `environment` is the child's whole environment.
  ///
  /// - Throws: `HarnessFailure` when `posix_spawn` fails.
  public static func spawn(
    _ executable: String, _ arguments: [String],
    environment: [String: String] = ProcessInfo.processInfo.environment,
    stdinPath: String? = nil, stdoutPath: String, stderrPath: String
  ) throws -> pid_t {
    try spawn(
      executable, rawArguments: arguments.map { Array($0.utf8) }, environment: environment,
      stdinPath: stdinPath, stdoutPath: stdoutPath, stderrPath: stderrPath)
  }

  /// Same, with arguments as raw bytes (which need not be UTF-8).
  public static func spawn(
    _ executable: String, rawArguments arguments: [[UInt8]],
    environment: [String: String] = ProcessInfo.processInfo.environment,
    stdinPath: String? = nil, stdoutPath: String, stderrPath: String
  ) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdinPath ?? "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv: [UnsafeMutablePointer<CChar>?] =
      ([Array(executable.utf8)] + arguments).map { bytes in
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
        for (i, b) in bytes.enumerated() { p[i] = CChar(bitPattern: b) }
        p[bytes.count] = 0
        return p
      } + [nil]
    defer { for a in argv { a?.deallocate() } }
    let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for e in envp { free(e) } }
    var pid = pid_t()
    let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
    guard spawned == 0 else {
      throw HarnessFailure("posix_spawn \(executable): \(String(cString: strerror(spawned)))")
    }
    return pid
  }

  /// Waits for `pid`, killing it (and failing) after `timeout` seconds. Returns the exit status,
  /// or 128 + signal.
  ///
  /// - Throws: `HarnessFailure` on a `waitpid` error or the timeout.
  public static func wait(_ pid: pid_t, timeout: Double = 120) throws -> Int32 {
    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32 = 0
    var delay: useconds_t = 500
    while true {
      let r = waitpid(pid, &status, WNOHANG)
      if r == pid { break }
      if r < 0 && errno != EINTR {
        throw HarnessFailure("waitpid \(pid): \(String(cString: strerror(errno)))")
      }
      if Date() > deadline {
        kill(pid, SIGKILL)
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        throw HarnessFailure("process \(pid) did not finish within \(Int(timeout)) s; killed")
      }
      usleep(delay)
      delay = min(delay * 2, 20_000)
    }
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
  }

  /// Runs a program to completion and captures its output (`stdin`: bytes for its standard input,
  /// else /dev/null).
  ///
  /// - Throws: `HarnessFailure` when it cannot be started or outlives `timeout`.
  public static func run(
    _ executable: String, _ arguments: [String],
    environment: [String: String] = ProcessInfo.processInfo.environment,
    stdin: [UInt8]? = nil, timeout: Double = 120
  ) throws -> RunResult {
    try run(
      executable, rawArguments: arguments.map { Array($0.utf8) }, environment: environment, stdin: stdin,
      timeout: timeout)
  }

  /// Same, with arguments as raw bytes.
  public static func run(
    _ executable: String, rawArguments arguments: [[UInt8]],
    environment: [String: String] = ProcessInfo.processInfo.environment,
    stdin: [UInt8]? = nil, timeout: Double = 120
  ) throws -> RunResult {
    let stem = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-spawn-\(UUID().uuidString)"
    ).path
    let (inPath, outPath, errPath) = (stem + ".in", stem + ".out", stem + ".err")
    defer { for p in [inPath, outPath, errPath] { unlink(p) } }
    if let stdin {
      guard FileManager.default.createFile(atPath: inPath, contents: Data(stdin)) else {
        throw HarnessFailure("cannot write \(inPath)")
      }
    }
    let pid = try spawn(
      executable, rawArguments: arguments, environment: environment, stdinPath: stdin == nil ? nil : inPath,
      stdoutPath: outPath, stderrPath: errPath)
    let status = try wait(pid, timeout: timeout)
    let out = FileManager.default.contents(atPath: outPath) ?? Data()
    let err = FileManager.default.contents(atPath: errPath) ?? Data()
    return RunResult(status: status, stdoutBytes: Array(out), stderrBytes: Array(err))
  }
}
