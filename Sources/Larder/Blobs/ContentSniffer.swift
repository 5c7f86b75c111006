internal import CMagic
import Foundation
import LarderLogging

/// Finds the real MIME type of content from its first bytes, with libmagic.
///
/// libmagic handles are not thread-safe, so each call borrows one from a small pool.
/// ```swift
/// ContentSniffer.shared.mimeType(of: firstBytes)   // "image/png"
/// ```
public final class ContentSniffer: @unchecked Sendable {
  public static let shared = ContentSniffer()
  /// How many leading bytes are enough for libmagic to decide.
  public static let headLength = 64 * 1024

  private let lock = NSLock()
  private var idle: [MagicHandle] = []

  public init() {}

  /// The MIME type of content beginning with `head`; `application/octet-stream` when unknown.
  public func mimeType(of head: UnsafeRawBufferPointer) -> String {
    if head.isEmpty { return "application/x-empty" }
    let handle = borrow()
    defer { giveBack(handle) }
    return handle.mimeType(of: head) ?? "application/octet-stream"
  }

  public func mimeType(of head: [UInt8]) -> String {
    head.withUnsafeBytes { mimeType(of: $0) }
  }

  private func borrow() -> MagicHandle {
    lock.lock()
    if let h = idle.popLast() {
      lock.unlock()
      return h
    }
    lock.unlock()
    return MagicHandle()
  }

  private func giveBack(_ handle: MagicHandle) {
    lock.lock()
    defer { lock.unlock() }
    if idle.count < 16 { idle.append(handle) }
  }
}

/// One libmagic cookie, loaded with the system database.
final class MagicHandle {
  private let cookie: OpaquePointer?

  init() {
    cookie = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR | MAGIC_NO_CHECK_COMPRESS)
    if let cookie, magic_load(cookie, nil) != 0 {
      // Without a database every answer is "unknown"; that is safe (octet-stream) if not useful.
      Logger(label: "larder.store").error(
        "libmagic could not load its database: \(String(cString: magic_error(cookie)))")
    }
  }

  deinit { if let cookie { magic_close(cookie) } }

  func mimeType(of head: UnsafeRawBufferPointer) -> String? {
    guard let cookie, let base = head.baseAddress, let result = magic_buffer(cookie, base, head.count) else {
      return nil
    }
    let type = String(cString: result)
    return type.contains("/") ? type : nil
  }
}
