import Foundation
import Larder
import Testing

/// libmagic's exact answer for each kind of content apps upload, built here from bytes, so that a
/// change of ContentSniffer's flags or limits that alters detection fails (Benchmarks/magic has
/// the measurements behind the current configuration).
@Suite struct ContentSnifferAnswerTests {
  struct Case: Sendable, CustomTestStringConvertible {
    let kind: String
    let bytes: [UInt8]
    let expected: String
    var testDescription: String { "\(kind) (\(bytes.count) bytes)" }
  }

  static let cases: [Case] = [
    Case(kind: "PNG", bytes: SampleFiles.png, expected: "image/png"),
    Case(kind: "JPEG", bytes: SampleFiles.jpeg, expected: "image/jpeg"),
    Case(kind: "GIF", bytes: Made.gif, expected: "image/gif"),
    Case(kind: "PDF", bytes: SampleFiles.pdf, expected: "application/pdf"),
    Case(kind: "ZIP", bytes: SampleFiles.zip, expected: "application/zip"),
    Case(kind: "gzip", bytes: Made.gzip, expected: "application/gzip"),
    Case(kind: "tar", bytes: Made.tar, expected: "application/x-tar"),
    Case(kind: "ELF executable", bytes: Made.elf(type: 2), expected: "application/x-executable"),
    Case(kind: "ELF shared object", bytes: Made.elf(type: 3), expected: "application/x-sharedlib"),
    Case(kind: "WAV", bytes: Made.wav, expected: "audio/x-wav"),
    Case(kind: "SQLite", bytes: Made.sqlite, expected: "application/vnd.sqlite3"),
    Case(
      kind: "JSON", bytes: Made.text(#"{"name": "avatar", "sizes": [64, 128, 256], "public": true}\#n"#),
      expected: "application/json"),
    Case(
      kind: "CSV", bytes: Made.text("id,name,score\n1,ada,90\n2,grace,85\n3,alan,70\n4,edsger,95\n"),
      expected: "text/csv"),
    Case(kind: "plain text", bytes: Made.text("hello world\nthis is plain text\n"), expected: "text/plain"),
    Case(kind: "UTF-8 text", bytes: Made.text("Zoë’s café: naïve résumé — 東京\n"), expected: "text/plain"),
    Case(kind: "short text", bytes: Made.text("hi\n"), expected: "text/plain"),
    Case(kind: "HTML", bytes: SampleFiles.html, expected: "text/html"),
    Case(
      kind: "SVG",
      bytes: Made.text(
        #"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>\#n"#
      ),
      expected: "image/svg+xml"),
    Case(
      kind: "XML",
      bytes: Made.text(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<notes><note id=\"1\">hello</note></notes>\n"),
      expected: "text/xml"),
    Case(
      kind: "Python script", bytes: Made.text("#!/usr/bin/env python3\nimport sys\nprint(sys.argv)\n"),
      expected: "text/x-script.python"),
    Case(kind: "shell script", bytes: Made.text("#!/bin/sh\necho hello\n"), expected: "text/x-shellscript"),
    Case(kind: "random 4 KiB", bytes: Made.random(4096), expected: "application/octet-stream"),
    Case(kind: "random 64 KiB", bytes: Made.random(65536), expected: "application/octet-stream"),
    Case(kind: "zeros", bytes: [UInt8](repeating: 0, count: 4096), expected: "application/octet-stream"),
    Case(kind: "one byte", bytes: [0], expected: "application/octet-stream"),
    Case(kind: "empty", bytes: [], expected: "application/x-empty"),
  ]

  @Test(arguments: cases)
  func eachKindGetsItsExactType(_ c: Case) {
    #expect(ContentSniffer.shared.mimeType(of: c.bytes) == c.expected)
  }

  /// The regex window (libmagic's 8 KiB `MAGIC_PARAM_REGEX_MAX`) stays: at 2 KiB this script,
  /// its `import` after a 2.8 KB comment header, is `text/plain`.
  @Test func scriptAfterALongCommentHeaderIsStillAScript() {
    let header = String(
      repeating: "# Copyright notice line. All rights reserved. See LICENSE for details.\n", count: 40)
    let script = Made.text(header + "import os\nimport sys\n\ndef main():\n    print(os.getcwd())\n")
    #expect(script.count == 2897)
    #expect(ContentSniffer.shared.mimeType(of: script) == "text/x-script.python")
  }

  /// JSON is recognised only when the whole document is passed: `headLength` (64 KiB) bounds it.
  @Test func jsonUpToTheHeadLengthIsJSON() {
    let records = (0..<600).map { #"{"id": \#($0), "name": "user\#($0)", "tags": ["a", "b"], "ok": true}"# }
    let json = Made.text("[" + records.joined(separator: ", ") + "]")
    #expect(json.count > 32 * 1024 && json.count < ContentSniffer.headLength)
    #expect(ContentSniffer.shared.mimeType(of: json) == "application/json")
    // Cut at the head length, as a longer upload is sniffed, it is text.
    let longer = Made.text("[" + (records + records).joined(separator: ", ") + "]")
    #expect(longer.count > ContentSniffer.headLength)
    #expect(
      ContentSniffer.shared.mimeType(of: Array(longer.prefix(ContentSniffer.headLength))) == "text/plain")
  }

  /// Text tests see the first `textWindow` (16 KiB) bytes: a large HTML page is still HTML, and
  /// a binary byte inside the window still makes content binary.
  @Test func theTextWindowHoldsEveryTextTest() {
    let rows = (0..<1200).map { "<p>row \($0): the quick brown fox</p>\n" }.joined()
    let html = Made.text(
      "<!DOCTYPE html>\n<html><head><title>Report</title></head><body>\n" + rows + "</body></html>\n")
    #expect(html.count > 40 * 1024)
    #expect(ContentSniffer.shared.mimeType(of: html) == "text/html")
    let line = "the quick brown fox jumps over the lazy dog, larder keeps every blob\n"
    let text = Made.text(String(repeating: line, count: 400))
    let binaryInside = Array(text.prefix(8192)) + Made.random(8192) + Array(text.prefix(8192))
    #expect(ContentSniffer.shared.mimeType(of: binaryInside) == "application/octet-stream")
  }

  /// The one answer the 16 KiB text window changes (documented on `ContentSniffer.textWindow`):
  /// content that is text for its first 16 KiB and binary after is judged by those 16 KiB (here
  /// comma-separated lines, so `text/csv`); with libmagic's default 64 KiB it was
  /// `application/octet-stream`.
  @Test func contentThatTurnsBinaryAfterTheTextWindowIsJudgedByTheWindow() {
    #expect(ContentSniffer.textWindow == 16 * 1024)
    let line = "the quick brown fox jumps over the lazy dog, larder keeps every blob\n"
    let text = Array(Made.text(String(repeating: line, count: 400)).prefix(20480))
    #expect(ContentSniffer.shared.mimeType(of: text + Made.random(20480)) == "text/csv")
    let early = Array(text.prefix(12 * 1024)) + Made.random(20480)
    #expect(ContentSniffer.shared.mimeType(of: early) == "application/octet-stream")
  }
}

/// Small but real files built in code (ContentSniffingTests' `SampleFiles` has PNG, JPEG, PDF,
/// HTML and ZIP).
private enum Made {
  static func text(_ s: String) -> [UInt8] { Array(s.utf8) }

  static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8 & 0xff)] }
  static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xff) } }
  static func le64(_ v: Int) -> [UInt8] { (0..<8).map { UInt8(v >> (8 * $0) & 0xff) } }
  static func be16(_ v: Int) -> [UInt8] { le16(v).reversed() }
  static func be32(_ v: Int) -> [UInt8] { le32(v).reversed() }

  /// Deterministic bytes that look random to libmagic (xorshift64*).
  static func random(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var x = seed
    var out: [UInt8] = []
    out.reserveCapacity(count + 8)
    while out.count < count {
      x ^= x >> 12
      x ^= x << 25
      x ^= x >> 27
      let v = x &* 0x2545_F491_4F6C_DD1D
      out += (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) }
    }
    return Array(out.prefix(count))
  }

  /// A 1×1 GIF89a with a two-colour palette.
  static let gif: [UInt8] =
    Array("GIF89a".utf8) + le16(1) + le16(1) + [0x80, 0, 0] + [0, 0, 0, 255, 255, 255]
    + [0x2C] + le16(0) + le16(0) + le16(1) + le16(1) + [0] + [0x02, 0x02, 0x44, 0x01, 0x00] + [0x3B]

  /// gzip of "hello world\n" in one stored deflate block.
  static let gzip: [UInt8] = {
    let data = Array("hello world\n".utf8)
    return [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF, 1] + le16(data.count) + le16(data.count ^ 0xFFFF) + data
      + le32(Int(SampleFiles.crc32(data))) + le32(data.count)
  }()

  /// A POSIX ustar archive holding `notes.txt`.
  static let tar: [UInt8] = {
    let body = Array("hello tar\n".utf8)
    var header = [UInt8](repeating: 0, count: 512)
    func put(_ s: String, at offset: Int) {
      header.replaceSubrange(offset..<offset + s.utf8.count, with: s.utf8)
    }
    put("notes.txt", at: 0)
    put("0000644\0", at: 100)
    put("0000000\0", at: 108)
    put("0000000\0", at: 116)
    put(String(format: "%011o\0", body.count), at: 124)
    put("00000000000\0", at: 136)
    put("        ", at: 148)
    put("0", at: 156)
    put("ustar\0" + "00", at: 257)
    put(String(format: "%06o\0 ", header.reduce(0) { $0 + Int($1) }), at: 148)
    return header + body + [UInt8](repeating: 0, count: 512 - body.count + 1024)
  }()

  /// A 64-byte ELF64 x86-64 header: `type` 2 is an executable, 3 a shared object.
  static func elf(type: Int) -> [UInt8] {
    [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 8) + le16(type) + le16(62) + le32(1)
      + le64(type == 2 ? 0x40_1000 : 0x1000) + le64(0) + le64(0) + le32(0) + le16(64) + le16(56) + le16(0)
      + le16(64) + le16(0) + le16(0)
  }

  /// 50 ms of 8 kHz 16-bit mono silence.
  static let wav: [UInt8] = {
    let pcm = [UInt8](repeating: 0, count: 800)
    return Array("RIFF".utf8) + le32(36 + pcm.count) + Array("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(1)
      + le32(8000) + le32(16000) + le16(2) + le16(16) + Array("data".utf8) + le32(pcm.count) + pcm
  }()

  /// The 100-byte header of a one-page SQLite database, then the rest of the page.
  static let sqlite: [UInt8] = {
    var h = Array("SQLite format 3\0".utf8) + be16(4096) + [1, 1, 0, 64, 32, 32]
    for v in [1, 1, 0, 0, 1, 4, 0, 0, 0, 1, 0, 0] { h += be32(v) }
    h += [UInt8](repeating: 0, count: 20) + be32(1) + be32(3_042_000)
    return h + [UInt8](repeating: 0, count: 4096 - h.count)
  }()
}
