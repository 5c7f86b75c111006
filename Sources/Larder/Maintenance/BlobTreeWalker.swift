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
  ///
  /// Anything the commit path never creates is reported as misplaced rather than skipped: a
  /// file or a non-hex directory where a fan-out directory belongs, a directory inside a leaf.
  func forEachLeaf(_ body: ([Entry]) throws -> Void) throws {
    for (first, firstIsDir) in Self.list(root) {
      let firstPath = "\(root)/\(first)"
      guard firstIsDir, Self.isHex(first, count: 2) else {
        try body([.misplaced(path: firstPath)])
        continue
      }
      for (second, secondIsDir) in Self.list(firstPath) {
        let secondPath = "\(firstPath)/\(second)"
        guard secondIsDir, Self.isHex(second, count: 2) else {
          try body([.misplaced(path: secondPath)])
          continue
        }
        var entries: [Entry] = []
        for (name, isDir) in Self.list(secondPath) {
          let path = "\(secondPath)/\(name)"
          if !isDir, Self.isHex(name, count: 64), name.hasPrefix(first + second) {
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
  /// at a time (one short read transaction per chunk, one range query per leaf directory). The
  /// caller must recheck under the write lock before acting: a commit may be linking a file now.
  func forEachUnreferenced(catalog: Catalog, chunk: Int = 4096, _ body: ([Entry]) throws -> Void) throws {
    var leaves: [[Entry]] = []
    var buffered = 0
    func flush() throws {
      let unreferenced = try catalog.read { db in
        var out: [Entry] = []
        for entries in leaves {
          var known: Set<String> = []
          let prefix = entries.lazy.compactMap { entry -> String? in
            if case .blob(let hex, _) = entry { return String(hex.prefix(4)) }
            return nil
          }.first
          if let prefix, let bounds = Self.range(ofLeaf: prefix) {
            let sql =
              bounds.upper == nil
              ? "SELECT sha256 FROM blobs WHERE sha256 >= ?"
              : "SELECT sha256 FROM blobs WHERE sha256 >= ? AND sha256 < ?"
            let arguments: [any SQLBindable] = [bounds.lower] + (bounds.upper.map { [$0] } ?? [])
            try db.forEachRow(sql, arguments) { row in
              if let digest = row.bytes("sha256") { known.insert(Hex.encode(digest)) }
            }
          }
          out.append(
            contentsOf: entries.filter { entry in
              guard case .blob(let hex, _) = entry else { return true }
              return !known.contains(hex)
            })
        }
        return out
      }
      leaves.removeAll(keepingCapacity: true)
      buffered = 0
      if !unreferenced.isEmpty { try body(unreferenced) }
    }
    try forEachLeaf { entries in
      leaves.append(entries)
      buffered += entries.count
      if buffered >= chunk { try flush() }
    }
    if !leaves.isEmpty { try flush() }
  }

  /// The digests a leaf `ab/cd` can hold: `>= abcd` and `< abce` (no upper bound for `ffff`).
  static func range(ofLeaf prefix: String) -> (lower: [UInt8], upper: [UInt8]?)? {
    guard let lower = Hex.decode(prefix), lower.count == 2 else { return nil }
    let value = Int(lower[0]) << 8 | Int(lower[1])
    guard value < 0xffff else { return (lower, nil) }
    return (lower, [UInt8((value + 1) >> 8), UInt8((value + 1) & 0xff)])
  }

  /// A stray found under the write lock.
  struct Stray {
    let entry: Entry
    let path: String
    let size: Int64
    /// False for a directory: only a human removes one.
    let removable: Bool
    let removed: Bool
    /// A regular file at a blob address: what a write that died between link and commit leaves.
    var isUncommittedBlob: Bool {
      guard case .blob = entry else { return false }
      return isRegularFile
    }
    let isRegularFile: Bool
  }

  /// Rechecks candidates from ``forEachUnreferenced(catalog:chunk:_:)`` under the write lock (a
  /// commit may have linked a file whose row was not yet visible) and, with `remove`, unlinks
  /// the strays there and then: no row names them, so nothing needs putting back after a crash.
  ///
  /// With `lock: false` the recheck runs on a reader (a dry run that must not wait on writers).
  static func settleStrays(_ candidates: [Entry], catalog: Catalog, remove: Bool, lock: Bool = true) throws
    -> [Stray]
  {
    func settle(_ db: Database) throws -> [Stray] {
      var strays: [Stray] = []
      for entry in candidates {
        let path: String
        switch entry {
        case .blob(let hex, let p):
          if try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [Hex.decode(hex) ?? []]) != nil { continue }
          path = p
        case .misplaced(let p): path = p
        }
        guard let st = POSIX.lstat(path) else { continue }  // gone meanwhile
        let removable = (st.st_mode & S_IFMT) != S_IFDIR
        let removed = remove && removable && POSIX.unlink(path)
        strays.append(
          Stray(
            entry: entry, path: path, size: Int64(st.st_size), removable: removable, removed: removed,
            isRegularFile: (st.st_mode & S_IFMT) == S_IFREG))
      }
      return strays
    }
    return lock ? try catalog.write(settle) : try catalog.read(settle)
  }

  /// Lower-case hex of exactly `count` digits.
  static func isHex(_ name: String, count: Int) -> Bool {
    name.utf8.count == count
      && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
  }

  /// Names in a directory with whether each is a real directory (symlinks are not).
  static func list(_ path: String) -> [(String, Bool)] {
    POSIX.listDirectoryTypes(path).map { ($0.name, $0.isDirectory) }
  }

  /// Size of the entry itself (a symlink is not followed), 0 if it is gone.
  static func size(of path: String) -> Int64 { sizeAndModified(of: path)?.size ?? 0 }

  /// Size and modification time of the entry itself (a symlink is not followed), in one
  /// `lstat`; nil if it is gone.
  static func sizeAndModified(of path: String) -> (size: Int64, modified: Date)? {
    guard let st = POSIX.lstat(path) else { return nil }
    let modified = Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    return (Int64(st.st_size), modified)
  }
}
