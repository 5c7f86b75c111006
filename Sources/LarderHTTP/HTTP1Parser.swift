/// A strict RFC 9112 request-head parser over a connection's input buffer.
///
/// It records where each part lies (offsets into the buffer) instead of copying: a head of
/// any number of fields costs no allocation here (the field array is reused between requests).
/// Parsing resumes where it stopped when more bytes arrive, so a head trickling in byte by byte
/// is scanned once. Everything RFC 9112 lets a server refuse and that a proxy in front could read
/// differently is refused (§2.2 bare CR, §5.1 whitespace before the colon, §5.2 obs-fold, bare LF
/// as a line end), so no request is ever framed two ways.
struct RequestHeadParser {
  struct Field {
    var name: Range<Int>
    var value: Range<Int>
  }

  enum Outcome: Equatable {
    /// More bytes are needed.
    case incomplete
    /// The head ends at `length` bytes from the start of the buffer (its blank line included).
    case complete(length: Int)
    case failed(HTTPRequestError)
  }

  /// Longest request line (method, target, version); longer is 414.
  var maxRequestLine = 16 * 1024
  /// Largest header block (the request line excluded), and most fields; more is 431.
  var maxHeaderBytes = 16 * 1024
  var maxFields = 200

  private(set) var method: Range<Int> = 0..<0
  private(set) var target: Range<Int> = 0..<0
  /// 0 for HTTP/1.0, 1 for HTTP/1.1.
  private(set) var minorVersion = 1
  private(set) var fields: [Field] = []

  /// Where scanning resumes; where the current line starts; where the request line starts
  /// (after empty lines a client may send between requests, §2.2).
  private var position = 0
  private var lineStart = 0
  private var headStart = 0
  private var fieldsStart = 0
  private var sawRequestLine = false

  init() { fields.reserveCapacity(32) }

  /// Starts over for the next request (the buffer was compacted to start at its first byte).
  mutating func reset() {
    position = 0
    lineStart = 0
    headStart = 0
    fieldsStart = 0
    sawRequestLine = false
    fields.removeAll(keepingCapacity: true)
  }

  /// Scans `buffer` (the whole input so far, from the request's first byte) from where the
  /// previous call stopped. A NUL in a field value is replaced with SP in place.
  mutating func parse(_ buffer: UnsafeMutableRawBufferPointer) -> Outcome {
    let bytes = buffer.bindMemory(to: UInt8.self)
    while position < bytes.count {
      let byte = bytes[position]
      if byte == 0x0A {
        // A line end must be CRLF: a bare LF is read as a line end by some parsers and not others.
        return .failed(.malformedHead("a line ends in LF without CR"))
      }
      if byte != 0x0D {
        position += 1
        if let limit = overLimit() { return .failed(limit) }
        continue
      }
      guard position + 1 < bytes.count else { return .incomplete }
      guard bytes[position + 1] == 0x0A else { return .failed(.malformedHead("a CR not followed by LF")) }
      let line = lineStart..<position
      position += 2
      lineStart = position
      if !sawRequestLine {
        if line.isEmpty {
          // Empty lines before the request line are skipped (§2.2), a few at most.
          headStart = position
          if headStart > 8 { return .failed(.malformedHead("empty lines before the request line")) }
          continue
        }
        if let error = requestLine(bytes, line) { return .failed(error) }
        sawRequestLine = true
        fieldsStart = position
        continue
      }
      if line.isEmpty { return .complete(length: position) }
      if let error = field(bytes, line) { return .failed(error) }
    }
    return .incomplete
  }

  private func overLimit() -> HTTPRequestError? {
    if !sawRequestLine {
      return position - headStart > maxRequestLine ? .targetTooLong(limit: maxRequestLine) : nil
    }
    return position - fieldsStart > maxHeaderBytes ? .headersTooLarge(limit: maxHeaderBytes) : nil
  }

  private mutating func requestLine(_ b: UnsafeMutableBufferPointer<UInt8>, _ line: Range<Int>) -> HTTPRequestError? {
    // method SP request-target SP HTTP-version, single spaces (§3).
    var i = line.lowerBound
    while i < line.upperBound, Self.isTokenByte(b[i]) { i += 1 }
    guard i > line.lowerBound, i < line.upperBound, b[i] == 0x20 else {
      return .malformedHead("malformed request line")
    }
    method = line.lowerBound..<i
    i += 1
    let targetStart = i
    while i < line.upperBound, b[i] > 0x20, b[i] < 0x7F { i += 1 }
    guard i > targetStart, i < line.upperBound, b[i] == 0x20 else {
      return .malformedHead("malformed request line")
    }
    target = targetStart..<i
    i += 1
    guard line.upperBound - i == 8, b[i] == 0x48, b[i + 1] == 0x54, b[i + 2] == 0x54, b[i + 3] == 0x50,
      b[i + 4] == 0x2F, b[i + 6] == 0x2E, Self.isDigit(b[i + 5]), Self.isDigit(b[i + 7])
    else { return .malformedHead("malformed HTTP version") }
    guard b[i + 5] == 0x31, b[i + 7] == 0x30 || b[i + 7] == 0x31 else { return .unsupportedVersion }
    minorVersion = b[i + 7] == 0x31 ? 1 : 0
    return nil
  }

  private mutating func field(_ b: UnsafeMutableBufferPointer<UInt8>, _ line: Range<Int>) -> HTTPRequestError? {
    let first = b[line.lowerBound]
    if first == 0x20 || first == 0x09 { return .malformedHead("obsolete line folding") }
    var i = line.lowerBound
    while i < line.upperBound, Self.isTokenByte(b[i]) { i += 1 }
    // A name must be a token followed at once by the colon: `Host : x` is refused (§5.1).
    guard i > line.lowerBound, i < line.upperBound, b[i] == 0x3A else {
      return .malformedHead("malformed header field")
    }
    let name = line.lowerBound..<i
    i += 1
    while i < line.upperBound, b[i] == 0x20 || b[i] == 0x09 { i += 1 }
    var end = line.upperBound
    while end > i, b[end - 1] == 0x20 || b[end - 1] == 0x09 { end -= 1 }
    // CR and LF never get here (a lone CR was refused above); a NUL becomes SP, the other choice
    // RFC 9110 §5.5 gives; other control bytes are kept, as §5.5 allows, for the handler to judge.
    for j in i..<end where b[j] == 0 { b[j] = 0x20 }
    guard fields.count < maxFields else { return .headersTooLarge(limit: maxHeaderBytes) }
    fields.append(Field(name: name, value: i..<end))
    return nil
  }

  static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

  /// tchar (RFC 9110 §5.6.2).
  static func isTokenByte(_ c: UInt8) -> Bool { tokenTable[Int(c)] }

  private static let tokenTable: [Bool] = (0..<256).map { c in
    switch UInt8(c) {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
      UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
      UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      true
    default: false
    }
  }
}

/// Decodes a chunked body (RFC 9112 §7.1) incrementally, with every field bounded: a chunk
/// size of at most 16 hex digits that fits in 63 bits, extensions of at most
/// `maxExtensionBytes` per chunk line, trailers of at most `maxTrailerBytes` (read and dropped).
struct ChunkedDecoder {
  enum State: Equatable {
    case size(digits: Int, value: Int64)
    /// After the digits: optional whitespace and extensions up to the CR.
    case extensions(bytes: Int, value: Int64)
    case sizeLF(value: Int64)
    case data(remaining: Int64)
    case dataCR
    case dataLF
    case trailer(lineBytes: Int)
    case trailerLF(lineWasEmpty: Bool)
    case done
  }

  var maxExtensionBytes = 4096
  var maxTrailerBytes = 16 * 1024
  private(set) var state = State.size(digits: 0, value: 0)
  private var trailerBytes = 0

  var isDone: Bool { state == .done }

  /// Decodes from `input`, handing each run of content to `emit`.
  /// - Returns: the bytes of `input` consumed (less than all once the body ended: the rest is
  ///   the next request's).
  mutating func decode(
    _ input: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void
  ) throws(HTTPRequestError) -> Int {
    let b = input.bindMemory(to: UInt8.self)
    var i = 0
    while i < b.count {
      let c = b[i]
      switch state {
      case .size(let digits, let value):
        if let d = PercentEncoding.hexValue(c) {
          guard digits < 15 else { throw .invalidChunk("chunk size too large") }
          state = .size(digits: digits + 1, value: value << 4 | Int64(d))
          i += 1
          continue
        }
        if c == 0x0A { throw .invalidChunk("a chunk size line not ended by CRLF") }
        guard digits > 0 else { throw .invalidChunk("chunk size is not hexadecimal") }
        if c == 0x0D {
          state = .sizeLF(value: value)
        } else if c == 0x3B || c == 0x20 || c == 0x09 {
          state = .extensions(bytes: 1, value: value)
        } else {
          throw .invalidChunk("chunk size is not hexadecimal")
        }
        i += 1
      case .extensions(let bytes, let value):
        if c == 0x0D {
          state = .sizeLF(value: value)
        } else {
          if c == 0x0A { throw .invalidChunk("a chunk size line not ended by CRLF") }
          guard (c >= 0x20 && c != 0x7F) || c == 0x09 else {
            throw .invalidChunk("a control character in a chunk extension")
          }
          guard bytes < maxExtensionBytes else { throw .chunkExtensionTooLong(limit: maxExtensionBytes) }
          state = .extensions(bytes: bytes + 1, value: value)
        }
        i += 1
      case .sizeLF(let value):
        guard c == 0x0A else { throw .invalidChunk("a chunk size line not ended by CRLF") }
        state = value == 0 ? .trailer(lineBytes: 0) : .data(remaining: value)
        i += 1
      case .data(let remaining):
        let n = Int(min(remaining, Int64(b.count - i)))
        emit(UnsafeRawBufferPointer(rebasing: input[i..<(i + n)]))
        i += n
        state = remaining == Int64(n) ? .dataCR : .data(remaining: remaining - Int64(n))
      case .dataCR:
        guard c == 0x0D else { throw .invalidChunk("chunk data longer than its size") }
        state = .dataLF
        i += 1
      case .dataLF:
        guard c == 0x0A else { throw .invalidChunk("chunk data not ended by CRLF") }
        state = .size(digits: 0, value: 0)
        i += 1
      case .trailer(let lineBytes):
        if c == 0x0D {
          state = .trailerLF(lineWasEmpty: lineBytes == 0)
        } else {
          guard c != 0x0A, (c >= 0x20 && c != 0x7F) || c == 0x09 else {
            throw .invalidChunk("a malformed trailer field")
          }
          trailerBytes += 1
          guard trailerBytes <= maxTrailerBytes else { throw .headersTooLarge(limit: maxTrailerBytes) }
          state = .trailer(lineBytes: lineBytes + 1)
        }
        i += 1
      case .trailerLF(let lineWasEmpty):
        guard c == 0x0A else { throw .invalidChunk("a trailer line not ended by CRLF") }
        i += 1
        if lineWasEmpty {
          state = .done
          return i
        }
        state = .trailer(lineBytes: 0)
      case .done:
        return i
      }
    }
    return i
  }
}
