internal import CMagic
import Foundation
import LarderLogging

/// Finds the real MIME type of content from its first bytes, with libmagic.
///
/// libmagic handles are not thread-safe, so each call borrows one from a small pool.
/// ```swift
/// ContentSniffer.shared.mimeType(of: firstBytes)   // "image/png"
/// ```
///
/// What a call costs (Debian's libmagic 5.44, CPU per `magic_buffer` on the 65 generated files of
/// `Benchmarks/magic/run.sh`; Benchmarks/magic/README.md has the tables): known binary formats
/// 1–50 µs (PNG, JPEG, GIF, PDF, SQLite, tar, ELF, JSON, CSV), 100–300 µs (ZIP, Office, audio,
/// video), content libmagic does not know 270–450 µs (random bytes, zeros, an app's records),
/// and text 0.2–4 ms, growing with its length up to about 8 KiB (1 KiB ≈ 1.3 ms, 4 KiB 2–3.3 ms):
/// the text pass runs about 70 regexes and 240 searches of the database over it (glibc `regexec`
/// and libmagic's `file_strncmp` are two thirds of a text call). That cost is the database's, and
/// no flag lowers it without changing answers:
/// - `MAGIC_NO_CHECK_TEXT` halves the corpus's CPU but answers `application/octet-stream` for all
///   text (plain, HTML, XML, scripts); `MAGIC_NO_CHECK_SOFT` (−86 %) loses every binary format.
/// - `MAGIC_NO_CHECK_JSON`, `_CSV`, `_ENCODING`, `_TAR` change answers (JSON, CSV, and without the
///   encoding pass HTML and XML, become `text/plain`; tar becomes `x-ustar`) and save nothing:
///   JSON and CSV cost 25 % more, falling through to the text pass.
/// - `MAGIC_NO_CHECK_ELF`, `_APPTYPE`, `_TOKENS`, `_CDF` save nothing measurable: the ELF pass
///   needs a file descriptor (`magic_buffer` has none), the OS/2 one is not built on Linux, tokens
///   are ignored since 5.x, the CDF pass gives up after 8 bytes (and keeps old Office files' types).
/// - A shorter `headLength` changes answers: JSON is `application/json` only when the whole
///   document is passed (at 16 KiB a 38 KB JSON file becomes `text/plain`).
/// - `MAGIC_PARAM_REGEX_MAX` below its 8 KiB changes answers for real files: at 2 KiB a Python
///   script whose `import` follows a 2.8 KB comment header is `text/plain`.
///
/// The one setting changed is `MAGIC_PARAM_ENCODING_MAX`, to `textWindow`.
public final class ContentSniffer: @unchecked Sendable {
  public static let shared = ContentSniffer()
  /// How many leading bytes are enough for libmagic to decide. JSON is recognised only when the
  /// whole document is passed, so this bounds the largest file sniffed as `application/json`.
  public static let headLength = 64 * 1024
  /// How many leading bytes libmagic reads to decide whether content is text, and in which its
  /// text tests look (`MAGIC_PARAM_ENCODING_MAX`, libmagic's default 64 KiB).
  ///
  /// Every text test that opens one of the database's text checks reaches at most 8 KiB past its
  /// offset (searches are bounded at 8 KiB, regexes by `MAGIC_PARAM_REGEX_MAX`, 8 KiB), so 16 KiB
  /// holds each whole; only REXX, MSX BASIC, VCF and PCB netlist tests search farther. Against
  /// the default: content of no known format whose first 16 KiB are text and which turns binary
  /// between 16 and 64 KiB gets a text type (`text/plain`, or `text/csv` for comma-separated
  /// lines) instead of `application/octet-stream`; neither is active content. The rest of the
  /// corpus is answered identically, and per call (default → 16 KiB): 64 KiB of JPEG 48 → 22 µs,
  /// of random bytes 397 → 321 µs, CSV (56 KB) 89 → 30 µs, HTML (38 KB) 644 → 496 µs, a 40 KB log
  /// 2.3 → 2.0 ms. Content under 16 KiB, such as a 4 KiB upload, costs the same either way.
  public static let textWindow = 16 * 1024

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
    // MIME type only; no decompression (it would fork or inflate what a client sent).
    cookie = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR | MAGIC_NO_CHECK_COMPRESS)
    guard let cookie else { return }
    if magic_load(cookie, nil) != 0 {
      // Without a database every answer is "unknown"; that is safe (octet-stream) if not useful.
      Logger(label: "larder.store").error(
        "libmagic could not load its database: \(String(cString: magic_error(cookie)))")
    }
    var window = ContentSniffer.textWindow
    if magic_setparam(cookie, MAGIC_PARAM_ENCODING_MAX, &window) != 0 {
      // Only dearer for large text, never a different answer than libmagic's default.
      Logger(label: "larder.store").error("libmagic refused MAGIC_PARAM_ENCODING_MAX=\(window)")
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
