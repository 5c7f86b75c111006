import Foundation
import LarderCrypto
import Synchronization

@testable import Larder

/// A data directory in the system temp folder, removed when released.
final class ScratchDirectory: Sendable {
  let url: URL

  init(_ label: String = "gc") {
    url = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-\(label)-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(at: url) }

  var path: String { url.path }
}

/// The failure the tests inject at a ``FaultPoint``.
struct InjectedFault: Error, Equatable {
  let point: FaultPoint
}

/// Test-side helpers over a store.
enum Fixture {
  static func sha256Hex(_ data: Data) -> String { Hex.encode(Digest.hash(.sha256, Array(data))) }

  /// `count` distinct small contents.
  static func contents(_ count: Int, tag: String) -> [Data] {
    (0..<count).map {
      Data("\(tag) content number \($0) ".utf8) + Data(repeating: UInt8($0 & 0xff), count: 100 + $0)
    }
  }

  /// Moves every file's creation back by `seconds`, so a grace period no longer protects it.
  static func age(_ larder: Larder, by seconds: Double) throws {
    try larder.catalog.write { db in
      try db.execute("UPDATE files SET created_at = created_at - ?", [Int64(seconds * 1000)])
    }
  }

  static func count(_ larder: Larder, _ table: String) throws -> Int {
    try larder.catalog.read { db in Int(try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1) }
  }

  static func blobPath(_ larder: Larder, _ data: Data) -> String {
    larder.blobs.path(forHex: sha256Hex(data))
  }

  /// The logical content of a store: every table's rows, and every file with its size, mode
  /// and hash (the SQLite files themselves excluded: WAL bookkeeping is not content).
  static func snapshot(_ larder: Larder) throws -> [String] {
    var lines: [String] = []
    try larder.catalog.read { db in
      for table in ["blobs", "files", "objects", "records", "attachments", "uploads"] {
        for row in try db.rows("SELECT * FROM \(table)") {
          lines.append("\(table): \(row.values)")
        }
      }
    }
    let root = larder.directory.path
    let enumerator = FileManager.default.enumerator(atPath: root)
    while let relative = enumerator?.nextObject() as? String {
      if relative.hasPrefix("larder.sqlite") { continue }
      var st = stat()
      lstat("\(root)/\(relative)", &st)
      var line = "\(relative) mode=\(String(st.st_mode, radix: 8))"
      if (st.st_mode & S_IFMT) == S_IFREG {
        let data = FileManager.default.contents(atPath: "\(root)/\(relative)") ?? Data()
        line += " size=\(st.st_size) sha256=\(sha256Hex(data))"
      }
      lines.append(line)
    }
    return lines.sorted()
  }

  /// Runs `body(i)` on `count` threads and waits for all of them.
  static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
      group.enter()
      let thread = Thread {
        body(i)
        group.leave()
      }
      thread.stackSize = 1 << 20
      thread.start()
    }
    group.wait()
  }

  /// Writes a temp file that looks abandoned (no writer holds its lock), aged `seconds`.
  static func plantTemp(_ larder: Larder, name: String, bytes: Int, age seconds: Double) throws {
    let path = "\(larder.blobs.tmpDirectory.path)/\(name)"
    try Data(repeating: 7, count: bytes).write(to: URL(fileURLWithPath: path))
    setAge(path, seconds)
  }

  static func setAge(_ path: String, _ seconds: Double) {
    let then = Date().addingTimeInterval(-seconds).timeIntervalSince1970
    var times = [
      timeval(tv_sec: Int(then), tv_usec: 0), timeval(tv_sec: Int(then), tv_usec: 0),
    ]
    utimes(path, &times)
  }
}

/// Counters shared between test threads.
final class Tally: Sendable {
  private let state = Mutex<[String: Int]>([:])
  private let problems = Mutex<[String]>([])

  func add(_ key: String, _ n: Int = 1) { state.withLock { $0[key, default: 0] += n } }
  subscript(_ key: String) -> Int { state.withLock { $0[key] ?? 0 } }
  func problem(_ text: String) { problems.withLock { $0.append(text) } }
  var allProblems: [String] { problems.withLock { $0 } }
}
