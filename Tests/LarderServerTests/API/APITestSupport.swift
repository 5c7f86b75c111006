import Foundation
import Larder
import LarderServer
import Synchronization

/// A live `LarderService` on 127.0.0.1:0 over a fresh temporary data directory.
///
/// ```swift
/// try withService { s in
///   let r = try s.send(.post("/v0/b/app/o?name=a", body: [1, 2, 3]))
/// }
/// ```
final class LiveService {
  let directory: URL
  let service: LarderService
  var port: Int { service.port }
  var base: String { "http://127.0.0.1:\(port)" }
  var tmpDirectory: URL { directory.appendingPathComponent("tmp") }
  var blobsDirectory: URL { directory.appendingPathComponent("blobs/sha256") }

  init(policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in }) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-api-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    options.http.accessLog = .disabled
    options.http.threadPoolSize = 2
    configure(&options)
    do {
      service = try LarderService(options: options)
      try service.start()
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
  }

  func close() {
    service.stop(timeout: .seconds(30))
    try? FileManager.default.removeItem(at: directory)
  }

  /// Sends one request on a new connection (with `Connection: close`) and reads the whole answer.
  func send(_ request: WireRequest) throws -> WireResponse {
    let connection = try WireConnection(port: port)
    try connection.send(request.bytes(closing: true))
    return try connection.readResponse(head: request.method == "HEAD")
  }

  /// Uploads `body` as `name` and returns the metadata JSON (expects 200).
  @discardableResult
  func upload(_ name: String, _ body: [UInt8], bucket: String = "app", headers: [(String, String)] = []) throws -> [String: Any] {
    let r = try send(.init("POST", "/v0/b/\(bucket)/o?name=\(enc(name))", headers: headers, body: body))
    guard r.status == 200, let json = r.json else { throw WireFailure.unexpected("upload \(name): \(r.status) \(r.text)") }
    return json
  }

  /// Files left in `tmp/` (uploads in flight or leaked).
  func tmpEntries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory.path)) ?? [] }

  /// Regular files under `blobs/sha256/`.
  func blobFiles() -> [String] {
    guard let e = FileManager.default.enumerator(atPath: blobsDirectory.path) else { return [] }
    var out: [String] = []
    while let p = e.nextObject() as? String {
      var isDir: ObjCBool = false
      if FileManager.default.fileExists(atPath: blobsDirectory.appendingPathComponent(p).path, isDirectory: &isDir), !isDir.boolValue {
        out.append(p)
      }
    }
    return out
  }
}

/// Runs `body` against a fresh live service and always stops it.
func withService<T>(
  policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in },
  _ body: (LiveService) throws -> T
) throws -> T {
  let s = try LiveService(policy: policy, configure: configure)
  defer { s.close() }
  return try body(s)
}

/// Percent-encodes one path segment or query value (everything but unreserved characters).
func enc(_ s: String) -> String { PercentEncoding.encodeComponent(s) }

/// Runs a program with `posix_spawn` (Foundation's `Process` crashed on EINTR under parallel
/// tests), stdout and stderr into files; returns the exit status and both outputs.
struct SpawnResult {
  var status: Int32
  var stdout: String
  var stderr: String
}

func spawnProgram(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws
  -> SpawnResult
{
  let stem = FileManager.default.temporaryDirectory.appendingPathComponent("larder-spawn-\(UUID().uuidString)").path
  let (outPath, errPath) = (stem + ".out", stem + ".err")
  defer {
    unlink(outPath)
    unlink(errPath)
  }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
  defer { for a in argv { free(a) } }
  var env = ProcessInfo.processInfo.environment
  for (k, v) in environment ?? [:] { env[k] = v }
  let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
  defer { for e in envp { free(e) } }
  var pid = pid_t()
  let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
  guard spawned == 0 else { throw WireFailure.unexpected("posix_spawn \(path): \(spawned)") }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 {
    guard errno == EINTR else { throw WireFailure.unexpected("waitpid: \(errno)") }
  }
  let exit: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
  let out = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
  let err = String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self)
  return SpawnResult(status: exit, stdout: out, stderr: err)
}
