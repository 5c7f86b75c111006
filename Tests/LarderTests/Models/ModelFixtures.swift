import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// Model types and helpers shared by the model tests.
struct Profile: Codable, Sendable, Equatable {
  var bio: String
  var header: File?
}

enum Media: Codable, Sendable, Equatable {
  case none
  case image(File)
  case gallery(title: String, files: [File])
}

/// A `File` in every position discovery must handle.
struct Gallery: Model, Equatable {
  var id: String
  var name: String
  var avatar: File?
  var album: [File] = []
  var profile = Profile(bio: "", header: nil)
  var byName: [String: File] = [:]
  var media: Media = .none
  var grid: [[File]] = []
  var maybeMany: [File?] = []
}

struct Person: Model, Equatable {
  var id: String
  var name: String
  var age: Int
  var city: String?
  var tags: [String] = []
  var active = true
  static let indexes = [ModelIndex("age"), ModelIndex("city", "name")]
}

struct Reading: Model, Equatable {
  var id: String
  var sensor: String
  var value: Int
  static let indexes = [ModelIndex("sensor"), ModelIndex("value")]
}

struct Note: Model, Equatable {
  static let modelType = "note"
  var id: String
  var text: String
  var attachment: File?
}

/// A deterministic generator (SplitMix64) for randomised tests.
struct SeededGenerator: RandomNumberGenerator {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// One attachments row, compared as a set member.
struct AttachmentRow: Hashable, CustomStringConvertible {
  let type: String
  let id: String
  let property: String
  let fileID: String
  var description: String { "\(type)/\(id).\(property)=\(fileID)" }
}

extension Larder {
  /// Every row of the attachments table (positions checked separately).
  func attachmentRows() throws -> Set<AttachmentRow> {
    try catalog.read { db in
      Set(
        try db.rows("SELECT record_type, record_id, property, file_id FROM attachments").map {
          AttachmentRow(
            type: $0.string("record_type")!, id: $0.string("record_id")!, property: $0.string("property")!,
            fileID: $0.string("file_id")!)
        })
    }
  }

  func recordCount() throws -> Int {
    try catalog.read { db in Int(try db.row("SELECT count(*) AS n FROM records")!.int("n")!) }
  }

  /// Files that no object and no attachment references.
  func unreferencedFileIDs() throws -> Set<String> {
    try catalog.read { db in
      Set(
        try db.rows(
          """
          SELECT id FROM files f
          WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.file_id = f.id)
            AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.file_id = f.id)
          """
        ).map { $0.string("id")! })
    }
  }

  func foreignKeyProblems() throws -> Int {
    try catalog.read { db in try TestCatalog.foreignKeyViolations(db) }
  }
}

/// Collects observation changes from any thread, for tests to wait on.
final class ChangeLog<T: Model>: Sendable {
  private let changes = Mutex<[ModelChange<T>]>([])

  func append(_ change: ModelChange<T>) { changes.withLock { $0.append(change) } }

  var all: [ModelChange<T>] { changes.withLock { $0 } }

  /// Waits until at least `count` changes arrived; returns them (fewer only after `seconds`,
  /// which then fails the test through the caller's count check).
  func wait(forCount count: Int, seconds: Double = 60) async -> [ModelChange<T>] {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
      let current = all
      if current.count >= count { return current }
      try? await Task.sleep(for: .milliseconds(2))
    }
    return all
  }

  /// Feeds the log from an asynchronous sequence in a task of its own.
  func consume(_ stream: AsyncStream<ModelChange<T>>) -> Task<Void, Never> {
    Task {
      for await change in stream { self.append(change) }
    }
  }
}

/// Polls `condition` for up to `seconds`; true once it holds.
func eventually(seconds: Double = 60, _ condition: () throws -> Bool) async rethrows -> Bool {
  let deadline = ContinuousClock.now + .seconds(seconds)
  while ContinuousClock.now < deadline {
    if try condition() { return true }
    try? await Task.sleep(for: .milliseconds(5))
  }
  return try condition()
}
