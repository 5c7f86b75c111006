import Foundation

/// Why a `multipart/related` upload body was refused (always a 400: nothing is stored).
struct MultipartError: Error, Equatable, CustomStringConvertible {
  let message: String
  init(_ message: String) { self.message = message }
  var description: String { message }
}

/// What a multipart upload says before its content: the JSON part and the content part's header.
struct MultipartMetadataPart {
  var json: [UInt8]
  /// The content part's own `Content-Type`, if it had one.
  var contentPartType: String?
  /// Where the content starts in the body.
  var contentOffset: Int64
  /// The bytes the wrapper adds after the content (the closing delimiter, in the body's line break).
  var closingLength: Int64
}

/// A streaming parser of the two-part `multipart/related` body the Firebase SDKs upload with:
/// a JSON metadata part, then the content part.
///
/// ```
/// --B\r\nContent-Type: application/json; charset=utf-8\r\n\r\n{JSON}\r\n--B\r\n
/// Content-Type: image/png\r\n\r\n<bytes>\r\n--B--
/// ```
/// The line break is CRLF, or LF alone throughout when the opening line ends in LF (as GCS
/// accepts, and as some Python clients write: `--B\nContent-Type: …\n\n{JSON}\n--B\n…\n--B--`).
/// The opening decides for the whole body: a body that mixes them is refused.
/// Bytes are fed as they arrive, split anywhere. The JSON part is collected up to
/// `metadataLimit`; content bytes are handed on as they come, except for a tail that could be
/// the start of the closing delimiter `\r\n--B`, which is held back until the next bytes decide.
/// So memory stays flat whatever the content's size (at most one delimiter is held).
///
/// Strict on shape, because a body misread is an object overwritten with the wrong bytes:
/// exactly two parts, JSON first, the closing delimiter last (an optional line break after it), no
/// preamble, no boundary inside the content. Since a boundary never contains CR or LF, the
/// delimiter's line break byte that starts it occurs nowhere else in it, so a failed partial
/// match never hides another start: no backtracking is needed.
struct MultipartRelatedParser {
  /// Header block of one part; the SDK sends one short `Content-Type` line.
  static let headerLimit = 8 * 1024

  private enum State {
    /// Matching the first `--B`; `matched` bytes of it seen.
    case opening(matched: Int)
    /// After the first `--B`: its line break (CRLF or LF) sets the body's; `sawCR` after a CR.
    case openingLineBreak(sawCR: Bool)
    /// Reading a part's header block.
    case headers(part: Int, buffer: [UInt8])
    /// Inside a part's body; `held` bytes of the delimiter matched at the end of what was seen.
    case body(part: Int, held: Int)
    /// Just after a delimiter: `\r\n` (another part) or `--` (the end).
    case afterDelimiter(part: Int, seen: [UInt8])
    /// After the closing delimiter: only one optional CRLF may follow.
    case epilogue(seen: Int)
    case failed
  }

  private let opening: [UInt8]
  private let boundaryBytes: [UInt8]
  /// The body's line break, `\r\n` or `\n`: the opening line's.
  private var lineBreak: [UInt8] = [13, 10]
  /// Line break + `--` + boundary.
  private var delimiter: [UInt8]
  private let metadataLimit: Int
  private var state: State = .opening(matched: 0)
  private var json: [UInt8] = []

  /// The JSON metadata part, once complete.
  private(set) var metadata: [UInt8]?
  /// The content part's own `Content-Type` header, if it had one.
  private(set) var contentPartType: String?
  /// Content bytes handed on so far.
  private(set) var contentBytes: Int64 = 0
  /// Bytes of the body fed before this call.
  private var consumed: Int64 = 0
  /// Where the content starts in the body (known once `metadataReady` runs).
  private(set) var contentOffset: Int64 = 0
  /// The bytes the wrapper adds after the content: the closing delimiter (known exactly once
  /// the opening line is in).
  var closingLength: Int64 { Int64(delimiter.count + 2) }

  /// - Throws: ``MultipartError`` when the boundary is not one RFC 2046 allows (1–70 of its
  ///   characters, not ending in a space): a boundary with CR could never be found reliably.
  init(boundary: String, metadataLimit: Int = 64 * 1024) throws {
    let allowed = Set(Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ".utf8))
    let bytes = Array(boundary.utf8)
    guard (1...70).contains(bytes.count), bytes.allSatisfy(allowed.contains), bytes.last != 0x20 else {
      throw MultipartError("the multipart boundary must be 1 to 70 characters of those RFC 2046 allows")
    }
    opening = Array("--".utf8) + bytes
    boundaryBytes = bytes
    delimiter = [13, 10, 45, 45] + bytes
    self.metadataLimit = metadataLimit
  }

  /// The boundary parameter of a `multipart/related` Content-Type, unquoted.
  /// - Throws: ``MultipartError`` when the type is not `multipart/related` or has no boundary.
  static func boundary(fromContentType contentType: String?) throws -> String {
    guard let contentType else { throw MultipartError("Content-Type: multipart/related; boundary=… is required") }
    var parts = contentType.split(separator: ";", omittingEmptySubsequences: false)
    let type = parts.removeFirst().trimmingCharacters(in: .whitespaces).lowercased()
    guard type == "multipart/related" else {
      throw MultipartError("a multipart upload's Content-Type must be multipart/related, not '\(type.prefix(60))'")
    }
    for parameter in parts {
      let pair = parameter.split(separator: "=", maxSplits: 1)
      guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
      var value = pair[1].trimmingCharacters(in: .whitespaces)
      if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
      guard !value.isEmpty else { break }
      return value
    }
    throw MultipartError("the multipart Content-Type has no boundary parameter")
  }

  /// Feeds the next bytes. `metadataReady` runs once with the JSON part, when the content
  /// part's headers are in (``contentPartType`` and ``contentOffset`` are then known), before
  /// any content byte; `content` then receives the content part's bytes in order.
  /// - Throws: ``MultipartError``, or what the closures throw; the parser is then failed.
  mutating func feed(
    _ chunk: UnsafeRawBufferPointer, metadataReady: (MultipartMetadataPart) throws -> Void,
    content: (UnsafeRawBufferPointer) throws -> Void
  ) throws {
    do {
      try step(chunk, metadataReady: metadataReady, content: content)
      consumed += Int64(chunk.count)
    } catch {
      state = .failed
      throw error
    }
  }

  /// The body has ended.
  /// - Throws: ``MultipartError`` unless the closing delimiter was the last thing seen.
  mutating func finish() throws {
    switch state {
    case .epilogue(let seen) where seen == 0 || seen == lineBreak.count: return
    case .epilogue: throw MultipartError("trailing bytes after the closing multipart delimiter")
    case .failed: throw MultipartError("the multipart body was already refused")
    case .opening, .openingLineBreak:
      throw MultipartError("the multipart body is empty or does not start with its boundary")
    case .headers(let part, _), .body(let part, _), .afterDelimiter(let part, _):
      throw MultipartError(
        part == 0
          ? "the multipart body ends inside the metadata part; the content part is missing"
          : "the multipart body ends before its closing delimiter")
    }
  }

  private mutating func step(
    _ chunk: UnsafeRawBufferPointer, metadataReady: (MultipartMetadataPart) throws -> Void,
    content: (UnsafeRawBufferPointer) throws -> Void
  ) throws {
    var i = 0
    let n = chunk.count
    while i < n {
      switch state {
      case .failed:
        throw MultipartError("the multipart body was already refused")

      case .opening(var matched):
        while i < n && matched < opening.count {
          guard chunk[i] == opening[matched] else {
            throw MultipartError("the multipart body must start with --boundary CRLF (or LF)")
          }
          matched += 1
          i += 1
        }
        state = matched == opening.count ? .openingLineBreak(sawCR: false) : .opening(matched: matched)

      case .openingLineBreak(let sawCR):
        let byte = chunk[i]
        i += 1
        if byte == 13 && !sawCR {
          state = .openingLineBreak(sawCR: true)
        } else if byte == 10 {
          lineBreak = sawCR ? [13, 10] : [10]
          delimiter = lineBreak + [45, 45] + boundaryBytes
          state = .headers(part: 0, buffer: [])
        } else {
          throw MultipartError("the multipart body must start with --boundary CRLF (or LF)")
        }

      case .headers(let part, var buffer):
        var done = false
        while i < n && !done {
          buffer.append(chunk[i])
          i += 1
          if buffer.count > Self.headerLimit { throw MultipartError("a multipart part's headers are too long") }
          done =
            buffer == lineBreak || buffer.suffix(2 * lineBreak.count).elementsEqual(lineBreak + lineBreak)
        }
        guard done else {
          state = .headers(part: part, buffer: buffer)
          break
        }
        try acceptHeaders(buffer, part: part)
        state = .body(part: part, held: 0)
        if part == 1 {
          contentOffset = consumed + Int64(i)
          try metadataReady(
            MultipartMetadataPart(
              json: metadata!, contentPartType: contentPartType, contentOffset: contentOffset,
              closingLength: closingLength))
        }

      case .body(let part, var held):
        // Continue a delimiter match begun at the end of the previous bytes.
        if held > 0 {
          while i < n && held < delimiter.count && chunk[i] == delimiter[held] {
            held += 1
            i += 1
          }
          if held == delimiter.count {
            state = .afterDelimiter(part: part, seen: [])
            break
          }
          if i == n {
            state = .body(part: part, held: held)
            break
          }
          // Not a delimiter: the held bytes were data after all (and cannot hide another start).
          let prefix = Array(delimiter[0..<held])
          try prefix.withUnsafeBytes { try take($0, part: part, content) }
          held = 0
        }
        // Scan for the next line break's first byte; what lies before it is data.
        var start = i
        var found = false
        while i < n {
          guard let cr = memchr(chunk.baseAddress! + i, Int32(delimiter[0]), n - i) else {
            i = n
            break
          }
          let at = chunk.baseAddress!.distance(to: UnsafeRawPointer(cr))
          var k = 0
          while at + k < n && k < delimiter.count && chunk[at + k] == delimiter[k] { k += 1 }
          if k == delimiter.count {
            try take(UnsafeRawBufferPointer(rebasing: chunk[start..<at]), part: part, content)
            i = at + k
            start = i
            found = true
            break
          }
          if at + k == n {
            // The chunk ends inside a possible delimiter: hold those bytes back.
            try take(UnsafeRawBufferPointer(rebasing: chunk[start..<at]), part: part, content)
            i = n
            start = n
            held = k
            break
          }
          i = at + 1
        }
        if found {
          state = .afterDelimiter(part: part, seen: [])
          break
        }
        if start < n { try take(UnsafeRawBufferPointer(rebasing: chunk[start..<n]), part: part, content) }
        state = .body(part: part, held: held)

      case .afterDelimiter(let part, var seen):
        while i < n && seen != lineBreak && seen.count < 2 {
          seen.append(chunk[i])
          i += 1
        }
        guard seen == lineBreak || seen.count == 2 else {
          state = .afterDelimiter(part: part, seen: seen)
          break
        }
        if part == 0 {
          guard seen == lineBreak else {
            throw MultipartError(
              seen == [45, 45]
                ? "the multipart body has no content part after the metadata"
                : mixedLineBreaks(seen) ?? "the boundary appears inside the metadata part")
          }
          metadata = json
          json = []
          state = .headers(part: 1, buffer: [])
        } else {
          guard seen == [45, 45] else {
            throw MultipartError(
              seen == lineBreak
                ? "the multipart body has more than two parts"
                : mixedLineBreaks(seen) ?? "the boundary appears inside the content; choose another boundary")
          }
          state = .epilogue(seen: 0)
        }

      case .epilogue(var seen):
        while i < n {
          guard seen < lineBreak.count, chunk[i] == lineBreak[seen] else {
            throw MultipartError("trailing bytes after the closing multipart delimiter")
          }
          seen += 1
          i += 1
        }
        state = .epilogue(seen: seen)
      }
    }
  }

  /// The refusal of a CRLF delimiter line in a body that opened with LF alone.
  private func mixedLineBreaks(_ seen: [UInt8]) -> String? {
    lineBreak == [10] && seen == [13, 10]
      ? "the multipart body mixes LF and CRLF line breaks; use one of them throughout" : nil
  }

  private mutating func take(
    _ bytes: UnsafeRawBufferPointer, part: Int, _ content: (UnsafeRawBufferPointer) throws -> Void
  ) throws {
    guard !bytes.isEmpty else { return }
    if part == 0 {
      guard json.count + bytes.count <= metadataLimit else {
        throw MultipartError("the metadata part is larger than \(metadataLimit) bytes")
      }
      json.append(contentsOf: bytes)
    } else {
      contentBytes += Int64(bytes.count)
      try content(bytes)
    }
  }

  /// Checks a part's header block: the first part must be JSON; no part may be transfer-encoded.
  private mutating func acceptHeaders(_ block: [UInt8], part: Int) throws {
    var type: String?
    let lines = String(decoding: block, as: UTF8.self).components(
      separatedBy: lineBreak == [10] ? "\n" : "\r\n")
    for line in lines where !line.isEmpty {
      guard let colon = line.firstIndex(of: ":") else {
        throw MultipartError("a multipart part has a malformed header line")
      }
      let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
      let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
      switch name {
      case "content-type": type = value
      case "content-transfer-encoding":
        guard ["binary", "8bit", "7bit"].contains(value.lowercased()) else {
          throw MultipartError("Content-Transfer-Encoding '\(value.prefix(40))' is not supported; send binary")
        }
      default: break
      }
    }
    if part == 0 {
      let media = type?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
      guard media == "application/json" else {
        throw MultipartError("the first multipart part must be the JSON metadata (Content-Type: application/json)")
      }
    } else {
      contentPartType = type
    }
  }
}
