import Foundation
import LarderCrypto

/// Walks `blobs/sha256/ab/cd/` one leaf directory at a time, so memory stays flat however many
/// blobs the store holds.
///
/// Every entry is classified: a file at its own address (name = 64 lower-case hex matching its
/// two parent directories) is a ``Entry/blob(hex:path:)``; anything else (a misnamed or
/// misplaced file, a symlink, a file at the wrong depth) is ``Entry/misplaced(path:)``, which
/// the commit path never creates.
struct BlobTreeWalker {
  enum Entry {
    case blob(hex: String, path: String)
    case misplaced(path: String)
  }

  let root: String

  /// Calls `body` with the entries of each leaf directory in turn.
  func forEachLeaf(_ body: ([Entry]) throws -> Void) throws {
    for (first, firstIsDir) in Self.list(root) {
      let firstPath = "\(root)/\(first)"
      guard firstIsDir, Self.isHex(first, count: 2) else {
        if !firstIsDir { try body([.misplaced(path: firstPath)]) }
        continue
      }
      for (second, secondIsDir) in Self.list(firstPath) {
        let secondPath = "\(firstPath)/\(second)"
        guard secondIsDir, Self.isHex(second, count: 2) else {
          if !secondIsDir { try body([.misplaced(path: secondPath)]) }
          continue
        }
        var entries: [Entry] = []
        for (name, isDir) in Self.list(secondPath) where !isDir {
          let path = "\(secondPath)/\(name)"
          if Self.isHex(name, count: 64), name.hasPrefix(first + second) {
            entries.append(.blob(hex: name, path: path))
          } else {
            entries.append(.misplaced(path: path))
          }
        }
        if !entries.isEmpty { try body(entries) }
      }
    }
  }

  /// Calls `body` with the entries that have no `blobs` row, checked on a reader a few thousand
  /// at a time (one short read transaction per chunk, not per directory). The caller must
  /// recheck under the write lock before acting: a commit may be linking a file right now.
  func forEachUnreferenced(catalog: Catalog, chunk: Int = 4096, _ body: ([Entry]) throws -> Void) throws {
    var buffer: [Entry] = []
    func flush() throws {
      let unreferenced = try catalog.read { db in
        try buffer.filter { entry in
          guard case .blob(let hex, _) = entry else { return true }
          return try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [Hex.decode(hex) ?? []]) == nil
        }
      }
      buffer.removeAll(keepingCapacity: true)
      if !unreferenced.isEmpty { try body(unreferenced) }
    }
    try forEachLeaf { entries in
      buffer.append(contentsOf: entries)
      if buffer.count >= chunk { try flush() }
    }
    if !buffer.isEmpty { try flush() }
  }

  /// Lower-case hex of exactly `count` digits.
  static func isHex(_ name: String, count: Int) -> Bool {
    name.utf8.count == count
      && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
  }

  /// Names in a directory with whether each is a real directory (symlinks are not).
  static func list(_ path: String) -> [(String, Bool)] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var out: [(String, Bool)] = []
    while let entry = readdir(dir) {
      let name = withUnsafePointer(to: &entry.pointee.d_name) {
        String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
      }
      if name == "." || name == ".." { continue }
      var isDir: Bool
      switch Int32(entry.pointee.d_type) {
      case Int32(DT_DIR): isDir = true
      case Int32(DT_UNKNOWN):
        var st = stat()
        isDir = lstat("\(path)/\(name)", &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
      default: isDir = false
      }
      out.append((name, isDir))
    }
    return out
  }

  /// Size of the entry itself (a symlink is not followed), 0 if it is gone.
  static func size(of path: String) -> Int64 {
    var st = stat()
    return lstat(path, &st) == 0 ? Int64(st.st_size) : 0
  }
}
