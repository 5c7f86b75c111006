import Foundation

extension POSIX {
  /// Makes everything written to the filesystem holding `path` durable, with one flush: a
  /// backup or restore writes its blobs unsynced and then calls this once, instead of one
  /// fsync (one journal commit) per blob, before it publishes the name that makes them count.
  /// Linux's `syncfs(2)`; `sync(2)` where it is missing.
  static func syncFilesystem(of path: String) throws {
    let fd = try open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(fd) }
    guard let syncfs = Self.syncfsFunction else {
      Glibc.sync()
      return
    }
    guard syncfs(fd) == 0 else { throw LarderError.posix("syncfs", path) }
  }

  /// glibc declares `syncfs` only under `_GNU_SOURCE`, which Swift's Glibc module does not
  /// define: looked up by name once.
  private static let syncfsFunction: (@convention(c) (Int32) -> Int32)? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "syncfs") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
  }()
}
