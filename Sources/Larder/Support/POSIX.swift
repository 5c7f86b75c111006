import Foundation

/// The system calls the store makes, in one place: each failure becomes a ``LarderError`` (with
/// `ENOSPC` and `EDQUOT` as ``LarderError/diskFull``), each short or interrupted call is retried.
///
/// Calls whose failure is an expected answer (a name already taken, a lock someone else holds,
/// a file already gone) return `false` or `nil` instead of throwing; `errno` still says why.
enum POSIX {
  // MARK: descriptors

  /// Opens `path`; `mode` is used with `O_CREAT`, `operation` names the step in the error.
  /// - Throws: ``LarderError/io(operation:path:errno:)`` with the `errno` of the failure
  ///   (`EEXIST` with `O_EXCL`, `ELOOP` with `O_NOFOLLOW` on a symlink, …).
  static func open(_ path: String, _ flags: Int32, mode: mode_t = 0, operation: String = "open") throws -> Int32 {
    while true {
      let fd = Glibc.open(path, flags, mode)
      if fd >= 0 { return fd }
      if errno == EINTR { continue }
      throw LarderError.posix(operation, path)
    }
  }

  /// Closes a descriptor. A failed close is not retried (on Linux the descriptor is gone anyway).
  static func close(_ fd: Int32) { _ = Glibc.close(fd) }

  static func fsync(_ fd: Int32, path: String) throws {
    guard Glibc.fsync(fd) == 0 else { throw LarderError.posix("fsync", path) }
  }

  static func fchmod(_ fd: Int32, _ mode: mode_t, path: String) throws {
    guard Glibc.fchmod(fd, mode) == 0 else { throw LarderError.posix("chmod", path) }
  }

  static func fstat(_ fd: Int32, path: String) throws -> stat {
    var st = stat()
    guard Glibc.fstat(fd, &st) == 0 else { throw LarderError.posix("fstat", path) }
    return st
  }

  static func fileSize(_ fd: Int32, path: String) throws -> Int64 {
    Int64(try fstat(fd, path: path).st_size)
  }

  /// Allocates `length` bytes of real space to the file (not a sparse hole).
  static func allocate(_ fd: Int32, length: Int64, path: String) throws {
    // posix_fallocate returns the error instead of setting errno.
    let result = posix_fallocate(fd, 0, off_t(length))
    guard result == 0 else { throw LarderError.posix("fallocate", path, result) }
  }

  /// Bytes an unprivileged process can still allocate on the filesystem holding `path`.
  static func availableBytes(_ path: String) -> Int64? {
    // Unknown (nil) when the path cannot be opened: callers then keep no reserve rather than fail.
    guard let fd = try? open(path, O_RDONLY | O_CLOEXEC) else { return nil }
    defer { close(fd) }
    var st = statvfs()
    guard fstatvfs(fd, &st) == 0 else { return nil }
    return Int64(st.f_bavail) * Int64(st.f_frsize)
  }

  /// Takes the descriptor's exclusive `flock`, waiting for it.
  static func lock(_ fd: Int32) { _ = flock(fd, LOCK_EX) }

  /// Takes the descriptor's exclusive `flock` if free; false (with `errno`) if not.
  static func tryLock(_ fd: Int32) -> Bool { flock(fd, LOCK_EX | LOCK_NB) == 0 }

  static func unlock(_ fd: Int32) { _ = flock(fd, LOCK_UN) }

  /// Writes all of `buffer`, retrying short writes and interrupts.
  static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
    var offset = 0
    while offset < buffer.count {
      let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
      if n < 0 {
        if errno == EINTR { continue }
        throw LarderError.posix("write", path)
      }
      offset += n
    }
  }

  /// Writes all of `buffer` at `offset` (`pwrite`), retrying short writes and interrupts.
  static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64, path: String) throws {
    var done = 0
    while done < buffer.count {
      let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
      if n < 0 {
        if errno == EINTR { continue }
        throw LarderError.posix("write", path)
      }
      done += n
    }
  }

  /// Asks the kernel to start writing `count` bytes at `offset` to the disk now, without waiting
  /// (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`). A hint only: durability still comes from
  /// `fsync`, which then finds most of the file already written and waits for the tail alone, so
  /// the disk works while the rest of a body is still arriving instead of after it. Looked up at
  /// run time (Glibc's Swift module does not export it); without it this does nothing.
  static func startWriteback(_ fd: Int32, offset: Int64, count: Int) {
    guard let call = syncFileRange else { return }
    _ = call(fd, offset, Int64(count), 2 /* SYNC_FILE_RANGE_WRITE */)
  }

  /// Whether ``startWriteback(_:offset:count:)`` does anything on this system.
  static var canStartWriteback: Bool { syncFileRange != nil }

  private typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
  private static let syncFileRange: SyncFileRange? = {
    // nil is RTLD_DEFAULT: the symbol wherever the process has it (libc).
    guard let symbol = dlsym(nil, "sync_file_range") else { return nil }
    return unsafeBitCast(symbol, to: SyncFileRange.self)
  }()

  /// Reads up to `count` bytes at `offset`; fewer only at end of file.
  static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String) throws -> Int {
    var done = 0
    while done < buffer.count {
      let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
      if n < 0 {
        if errno == EINTR { continue }
        throw LarderError.posix("read", path)
      }
      if n == 0 { break }
      done += n
    }
    return done
  }

  // MARK: names

  /// Creates a directory if missing; true when it was created.
  @discardableResult
  static func makeDirectory(_ path: String, mode: mode_t = 0o755) throws -> Bool {
    if mkdir(path, mode) == 0 { return true }
    if errno == EEXIST {
      var st = stat()
      if stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return false }
      throw LarderError.io(operation: "mkdir", path: path, errno: ENOTDIR)
    }
    if errno == ENOENT {
      // Create missing parents, then retry.
      let parent = (path as NSString).deletingLastPathComponent
      if !parent.isEmpty && parent != path {
        try makeDirectory(parent, mode: mode)
        return try makeDirectory(path, mode: mode)
      }
    }
    throw LarderError.posix("mkdir", path)
  }

  static func fsyncDirectory(_ path: String) throws {
    let fd = try open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(fd) }
    try fsync(fd, path: path)
  }

  /// Gives `existing` a second name; false (with `errno`, e.g. `EEXIST`) when that fails.
  static func link(_ existing: String, _ new: String) -> Bool { Glibc.link(existing, new) == 0 }

  /// Removes a name; false (with `errno`, e.g. `ENOENT`) when that fails.
  @discardableResult
  static func unlink(_ path: String) -> Bool { Glibc.unlink(path) == 0 }

  /// Renames atomically; false (with `errno`) when that fails.
  @discardableResult
  static func rename(_ from: String, _ to: String) -> Bool { Glibc.rename(from, to) == 0 }

  @discardableResult
  static func chmod(_ path: String, _ mode: mode_t) -> Bool { Glibc.chmod(path, mode) == 0 }

  /// True if something (even a dangling symlink's target aside) exists at `path`.
  static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

  /// The entry itself (a symlink is not followed); nil (with `errno`) if it cannot be read.
  static func lstat(_ path: String) -> stat? {
    var st = stat()
    return Glibc.lstat(path, &st) == 0 ? st : nil
  }

  static func modificationTime(_ path: String) -> Date? {
    guard let st = lstat(path) else { return nil }
    return Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
  }

  /// Names in a directory, without `.` and `..`.
  static func listDirectory(_ path: String) -> [String] {
    // A directory that is missing or unreadable has nothing to recover or collect in it.
    (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
  }

  /// Names in a directory with whether each is a real directory (symlinks are not), without
  /// `.` and `..`; empty if it cannot be read.
  static func listDirectoryTypes(_ path: String) -> [(name: String, isDirectory: Bool)] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var out: [(name: String, isDirectory: Bool)] = []
    while let entry = readdir(dir) {
      let name = withUnsafePointer(to: &entry.pointee.d_name) {
        String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
      }
      if name == "." || name == ".." { continue }
      let isDirectory: Bool
      switch Int32(entry.pointee.d_type) {
      case Int32(DT_DIR): isDirectory = true
      case Int32(DT_UNKNOWN): isDirectory = lstat("\(path)/\(name)").map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false
      default: isDirectory = false
      }
      out.append((name, isDirectory))
    }
    return out
  }
}
