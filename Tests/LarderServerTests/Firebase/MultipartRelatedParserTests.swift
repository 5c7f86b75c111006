import Foundation
import Testing

@testable import LarderServer

/// The streaming `multipart/related` parser, fed every way a socket may split a body.
@Suite struct MultipartRelatedParserTests {
  static let boundary = "0123456789012345"

  /// A body shaped exactly as the Firebase JS SDK builds it.
  static func body(json: String = #"{"name":"a.txt","contentType":"text/plain"}"#, content: [UInt8], boundary: String = boundary)
    -> [UInt8]
  {
    Array("--\(boundary)\r\nContent-Type: application/json; charset=utf-8\r\n\r\n\(json)\r\n--\(boundary)\r\nContent-Type: text/plain\r\n\r\n".utf8)
      + content + Array("\r\n--\(boundary)--".utf8)
  }

  struct Outcome: Equatable {
    var json: [UInt8]?
    var contentType: String?
    var contentOffset: Int64?
    var content: [UInt8] = []
    var error: String?
  }

  /// Feeds `body` cut at `cuts` (sorted offsets) and collects what the parser handed on.
  static func parse(_ body: [UInt8], cuts: [Int], boundary: String = boundary, metadataLimit: Int = 64 * 1024)
    -> Outcome
  {
    var out = Outcome()
    do {
      var parser = try MultipartRelatedParser(boundary: boundary, metadataLimit: metadataLimit)
      var start = 0
      for end in cuts + [body.count] where end >= start {
        try body[start..<end].withUnsafeBytes { chunk in
          try parser.feed(
            chunk,
            metadataReady: { part in
              #expect(out.json == nil, "metadataReady ran twice")
              out.json = part.json
              out.contentType = part.contentPartType
              out.contentOffset = part.contentOffset
            },
            content: { bytes in
              #expect(out.json != nil, "content before metadata")
              out.content += Array(bytes)
            })
        }
        start = end
      }
      try parser.finish()
    } catch let error as MultipartError {
      out.error = error.message
    } catch {
      out.error = "\(error)"
    }
    return out
  }

  /// Content that keeps almost-delimiters: CRs, `\r\n--`, the boundary minus its last byte.
  static let trickyContent: [UInt8] =
    Array("\r\r\n\r\n-\r\n--\r\n--012345678901234\r\n--012345678901234X\r\n-x".utf8) + [0, 13] + Array("end\r".utf8)

  @Test func sdkBodyParsesIntoJSONAndExactContent() {
    let content = Array("hello, world".utf8)
    let body = Self.body(content: content)
    let out = Self.parse(body, cuts: [])
    #expect(out.error == nil)
    #expect(out.json == Array(#"{"name":"a.txt","contentType":"text/plain"}"#.utf8))
    #expect(out.contentType == "text/plain")
    #expect(out.content == content)
    #expect(out.contentOffset == Int64(body.count - content.count - (Self.boundary.count + 6)))
  }

  @Test func everySingleSplitPointGivesTheSameResult() {
    let body = Self.body(content: Self.trickyContent)
    let whole = Self.parse(body, cuts: [])
    #expect(whole.error == nil)
    #expect(whole.content == Self.trickyContent)
    for cut in 0...body.count {
      #expect(Self.parse(body, cuts: [cut]) == whole, "cut at \(cut)")
    }
    for first in stride(from: 0, through: body.count, by: 3) {
      for second in stride(from: first, through: body.count, by: 7) {
        #expect(Self.parse(body, cuts: [first, second]) == whole, "cuts at \(first), \(second)")
      }
    }
  }

  @Test func byteByByteFeedingGivesTheSameResult() {
    let body = Self.body(content: Self.trickyContent)
    let out = Self.parse(body, cuts: Array(0...body.count))
    #expect(out.error == nil)
    #expect(out.content == Self.trickyContent)
  }

  @Test func randomSplitsOfRandomContentAreExact() {
    var rng = SystemRandomNumberGenerator()
    for round in 0..<200 {
      // Content from a small alphabet full of delimiter bytes, so near-matches are frequent.
      let alphabet = Array("\r\n-0123456789".utf8)
      let content = (0..<Int.random(in: 0...600, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
      // Skip the rare content that holds the real delimiter: that is refused (tested below).
      let delimiter = Array("\r\n--\(Self.boundary)".utf8)
      if (content + Array("\r\n".utf8)).windows(delimiter.count).contains(where: { $0.elementsEqual(delimiter) }) {
        continue
      }
      let body = Self.body(content: content)
      let cuts = (0..<Int.random(in: 0...20, using: &rng)).map { _ in Int.random(in: 0...body.count, using: &rng) }.sorted()
      let out = Self.parse(body, cuts: cuts)
      #expect(out.error == nil, "round \(round): \(out.error ?? "")")
      #expect(out.content == content, "round \(round), cuts \(cuts)")
    }
  }

  @Test func heldBackBytesNeverExceedOneDelimiter() throws {
    let content = [UInt8](repeating: 0x41, count: 100_000) + Array("\r\n--0123".utf8)
    let body = Self.body(content: content)
    var parser = try MultipartRelatedParser(boundary: Self.boundary)
    var handed = 0
    var fed = 0
    let delimiter = 4 + Self.boundary.utf8.count
    for start in stride(from: 0, to: body.count, by: 4096) {
      let end = min(body.count, start + 4096)
      try body[start..<end].withUnsafeBytes { chunk in
        try parser.feed(chunk, metadataReady: { _ in }, content: { handed += $0.count })
      }
      fed = end
      let contentStart = body.count - content.count - (Self.boundary.count + 6)
      if fed > contentStart {
        // Everything of the content seen so far was handed on, except at most a delimiter's worth.
        let seen = min(fed - contentStart, content.count)
        #expect(seen - handed <= delimiter, "after \(fed) bytes: \(seen - handed) held")
      }
    }
    try parser.finish()
    #expect(handed == content.count)
  }

  @Test func emptyContentAndOneCRLFAfterTheEndAreAccepted() {
    let empty = Self.parse(Self.body(content: []), cuts: [])
    #expect(empty.error == nil)
    #expect(empty.content == [])
    let crlf = Self.parse(Self.body(content: Array("x".utf8)) + [13, 10], cuts: [])
    #expect(crlf.error == nil)
    #expect(crlf.content == Array("x".utf8))
  }

  @Test func malformedBodiesAreRefusedWithAReason() {
    let b = Self.boundary
    let json = #"{"name":"a.txt"}"#
    let cases: [(String, [UInt8], String)] = [
      ("empty body", [], "empty"),
      ("preamble", Array("hello\r\n".utf8) + Self.body(content: [1]), "must start with"),
      ("other boundary", Self.body(content: [1], boundary: "abcdef"), "must start with"),
      ("content part first", Array("--\(b)\r\nContent-Type: text/plain\r\n\r\nxx\r\n--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)--".utf8), "JSON metadata"),
      ("metadata only", Array("--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)--".utf8), "no content part"),
      ("three parts", Array("--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)\r\n\r\nxx\r\n--\(b)\r\n\r\nyy\r\n--\(b)--".utf8), "more than two parts"),
      ("trailing garbage", Self.body(content: [1]) + Array("junk".utf8), "trailing"),
      ("CRLF then garbage", Self.body(content: [1]) + Array("\r\nx".utf8), "trailing"),
      ("no closing delimiter", Array(Self.body(content: [1]).dropLast(b.count + 4)), "before its closing delimiter"),
      ("cut inside the metadata", Array(Self.body(content: [1]).prefix(60)), "inside the metadata"),
      ("boundary inside the content", Self.body(content: Array("a\r\n--\(b)zz".utf8)), "inside the content"),
      ("base64 content", Array("--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--\(b)--".utf8), "Content-Transfer-Encoding"),
      ("header line without colon", Array("--\(b)\r\nnonsense\r\n\r\n\(json)\r\n--\(b)\r\n\r\nx\r\n--\(b)--".utf8), "malformed header"),
    ]
    for (label, body, reason) in cases {
      for cuts in [[], [body.count / 2], Array(0...body.count)] {
        let out = Self.parse(body, cuts: cuts)
        #expect(out.error?.contains(reason) == true, "\(label) (\(cuts.count) cuts): \(out.error ?? "accepted")")
      }
    }
  }

  @Test func metadataPartHasACap() {
    let big = "{\"name\":\"" + String(repeating: "x", count: 2000) + "\"}"
    let out = Self.parse(Self.body(json: big, content: [1]), cuts: [100, 1000], metadataLimit: 1024)
    #expect(out.error == "the metadata part is larger than 1024 bytes")
    #expect(out.content == [])
    let headers = Array("--\(Self.boundary)\r\nX-Pad: \(String(repeating: "p", count: 9000))\r\n\r\n".utf8)
    #expect(Self.parse(headers, cuts: []).error == "a multipart part's headers are too long")
  }

  /// A body with every line break LF alone, as some Python clients write it.
  static func lfBody(json: String = #"{"name":"a.txt"}"#, content: [UInt8], boundary: String = boundary) -> [UInt8] {
    Array("--\(boundary)\nContent-Type: application/json; charset=UTF-8\n\n\(json)\n--\(boundary)\nContent-Type: text/plain\n\n".utf8)
      + content + Array("\n--\(boundary)--".utf8)
  }

  @Test func bareLFBodiesAreParsedWithTheContentExact() {
    let b = Self.boundary
    let content = Array("one\ntwo\r\nthree\r\r\n\n--x\n--\(b.dropLast())\n-\r".utf8) + [0, 255, 10, 13]
    let body = Self.lfBody(content: content)
    for cuts in [[], [body.count / 2], Array(0...body.count)] {
      let out = Self.parse(body, cuts: cuts)
      #expect(out.error == nil, "\(cuts.count) cuts: \(out.error ?? "")")
      #expect(out.json == Array(#"{"name":"a.txt"}"#.utf8))
      #expect(out.contentType == "text/plain")
      #expect(out.content == content)
      #expect(out.contentOffset == Int64(body.count - content.count - b.count - 5))
    }
    // An empty content, and one LF after the closing delimiter (not a CRLF).
    #expect(Self.parse(Self.lfBody(content: []), cuts: []).content == [])
    #expect(Self.parse(Self.lfBody(content: [7]) + [10], cuts: []).error == nil)
    #expect(Self.parse(Self.lfBody(content: [7]) + [13, 10], cuts: []).error?.contains("trailing") == true)
  }

  @Test func aBodyThatMixesLineBreaksIsRefusedWithAReason() {
    let b = Self.boundary
    let json = #"{"name":"a.txt"}"#
    let cases: [(String, String, String)] = [
      ("LF opening, CRLF delimiters", "--\(b)\nContent-Type: application/json\n\n\(json)\r\n--\(b)\r\n\r\nx\r\n--\(b)--", "mixes LF and CRLF"),
      ("LF, CRLF closing delimiter", "--\(b)\nContent-Type: application/json\n\n\(json)\n--\(b)\n\nx\r\n--\(b)\r\n", "mixes LF and CRLF"),
      ("LF opening, CRLF headers", "--\(b)\nContent-Type: application/json\r\n\r\n\(json)\n--\(b)\n\nx\n--\(b)--", "malformed header"),
      ("CRLF opening, LF delimiters", "--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\n--\(b)\n\nx\n--\(b)--", "inside the metadata"),
      ("CR alone", "--\(b)\rContent-Type: application/json\r\r\(json)", "must start with"),
      ("LF boundary inside the content", "--\(b)\nContent-Type: application/json\n\n\(json)\n--\(b)\n\na\n--\(b)zz\n--\(b)--", "inside the content"),
      ("LF three parts", "--\(b)\nContent-Type: application/json\n\n\(json)\n--\(b)\n\nx\n--\(b)\n\ny\n--\(b)--", "more than two parts"),
    ]
    for (label, text, reason) in cases {
      let body = Array(text.utf8)
      for cuts in [[], [body.count / 2], Array(0...body.count)] {
        let out = Self.parse(body, cuts: cuts)
        #expect(out.error?.contains(reason) == true, "\(label) (\(cuts.count) cuts): \(out.error ?? "accepted")")
      }
    }
  }

  @Test func boundaryComesFromTheContentType() throws {
    #expect(try MultipartRelatedParser.boundary(fromContentType: "multipart/related; boundary=123abc") == "123abc")
    #expect(try MultipartRelatedParser.boundary(fromContentType: "Multipart/Related;boundary=\"a b\"") == "a b")
    #expect(throws: MultipartError.self) { try MultipartRelatedParser.boundary(fromContentType: nil) }
    #expect(throws: MultipartError.self) { try MultipartRelatedParser.boundary(fromContentType: "multipart/related") }
    #expect(throws: MultipartError.self) { try MultipartRelatedParser.boundary(fromContentType: "multipart/related; boundary=") }
    #expect(throws: MultipartError.self) { try MultipartRelatedParser.boundary(fromContentType: "multipart/form-data; boundary=x") }
    #expect(throws: MultipartError.self) { _ = try MultipartRelatedParser(boundary: "bad\rboundary") }
    #expect(throws: MultipartError.self) { _ = try MultipartRelatedParser(boundary: String(repeating: "a", count: 71)) }
    #expect(throws: MultipartError.self) { _ = try MultipartRelatedParser(boundary: "trailing ") }
  }
}

extension Array {
  /// Every run of `size` consecutive elements.
  fileprivate func windows(_ size: Int) -> [ArraySlice<Element>] {
    guard count >= size else { return [] }
    return (0...(count - size)).map { self[$0..<($0 + size)] }
  }
}
