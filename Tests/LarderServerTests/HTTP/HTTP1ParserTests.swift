import Foundation
import Testing

@testable import LarderHTTP

private func parse(_ text: String, maxHeaderBytes: Int = 16 * 1024) -> (RequestHeadParser, RequestHeadParser.Outcome)
{
  var parser = RequestHeadParser()
  parser.maxHeaderBytes = maxHeaderBytes
  var bytes = Array(text.utf8)
  let outcome = bytes.withUnsafeMutableBytes { parser.parse($0) }
  return (parser, outcome)
}

private func slice(_ text: String, _ range: Range<Int>) -> String {
  String(decoding: Array(text.utf8)[range], as: UTF8.self)
}

/// Decodes `input` fed `step` bytes at a time; returns the content and the bytes consumed.
private func decodeChunked(_ input: [UInt8], step: Int) throws -> ([UInt8], Int) {
  var decoder = ChunkedDecoder()
  var content: [UInt8] = []
  var offset = 0
  while offset < input.count && !decoder.isDone {
    let end = min(input.count, offset + step)
    offset += try input[offset..<end].withUnsafeBytes { buffer in
      try decoder.decode(buffer) { content.append(contentsOf: $0) }
    }
  }
  return (content, offset)
}

@Suite struct RequestHeadParserTests {
  @Test func aHeadIsFoundByOffsetsWithTrailingWhitespaceTrimmed() {
    let text = "\r\nPUT /o/a%2Fb?x=1 HTTP/1.1\r\nHost: example\r\nX-Empty:\r\nX-Pad: \t v a \t\r\n\r\nBODY"
    let (p, outcome) = parse(text)
    #expect(outcome == .complete(length: text.utf8.count - 4))
    #expect(slice(text, p.method) == "PUT")
    #expect(slice(text, p.target) == "/o/a%2Fb?x=1")
    #expect(p.minorVersion == 1)
    #expect(p.fields.map { slice(text, $0.name) } == ["Host", "X-Empty", "X-Pad"])
    #expect(p.fields.map { slice(text, $0.value) } == ["example", "", "v a"])
  }

  @Test func aNulInAFieldValueBecomesASpace() {
    var bytes = Array("GET / HTTP/1.1\r\nX-A: a\u{0}b\r\n\r\n".utf8)
    var parser = RequestHeadParser()
    #expect(bytes.withUnsafeMutableBytes { parser.parse($0) } == .complete(length: bytes.count))
    #expect(String(decoding: bytes[parser.fields[0].value], as: UTF8.self) == "a b")
  }

  @Test func byteByByteArrivalGivesTheSameHeadAsOneRead() {
    let text = "GET /hello HTTP/1.0\r\nA: 1\r\nB: two\r\n\r\n"
    let bytes = Array(text.utf8)
    var parser = RequestHeadParser()
    var outcomes: [RequestHeadParser.Outcome] = []
    for end in 1...bytes.count {
      var prefix = Array(bytes[0..<end])
      outcomes.append(prefix.withUnsafeMutableBytes { parser.parse($0) })
    }
    #expect(outcomes.dropLast().allSatisfy { $0 == .incomplete })
    #expect(outcomes.last == .complete(length: bytes.count))
    #expect(parser.minorVersion == 0)
    #expect(parser.fields.map { slice(text, $0.value) } == ["1", "two"])
  }

  @Test func whatRFC9112LetsAServerRefuseIsRefused() {
    let cases: [(String, HTTPRequestError)] = [
      ("GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n folded\r\n\r\n", .malformedHead("obsolete line folding")),
      ("GET / HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n", .malformedHead("a CR not followed by LF")),
      ("GET / HTTP/1.1\nHost: x\n\n", .malformedHead("a line ends in LF without CR")),
      ("GET / HTTP/1.1\r\nHost : x\r\n\r\n", .malformedHead("malformed header field")),
      ("GET / HTTP/1.1\r\n: x\r\n\r\n", .malformedHead("malformed header field")),
      ("GET  / HTTP/1.1\r\n\r\n", .malformedHead("malformed request line")),
      ("GET /a b HTTP/1.1\r\n\r\n", .malformedHead("malformed HTTP version")),
      ("G(T / HTTP/1.1\r\n\r\n", .malformedHead("malformed request line")),
      ("GET / HTTP/1.1 \r\n\r\n", .malformedHead("malformed HTTP version")),
      ("GET / HTTP/2.0\r\n\r\n", .unsupportedVersion),
      ("GET / HTTP/1.2\r\n\r\n", .unsupportedVersion),
    ]
    for (text, error) in cases {
      #expect(parse(text).1 == .failed(error), "\(text.debugDescription)")
      #expect(HTTPRequestError.malformedHead("").status == 400)
    }
    #expect(HTTPRequestError.unsupportedVersion.status == 505)
  }

  @Test func oversizeHeadsAre431AndLongRequestLines414BeforeTheirEnd() {
    let big = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 2000)
    #expect(parse(big, maxHeaderBytes: 1024).1 == .failed(.headersTooLarge(limit: 1024)))
    let many = "GET / HTTP/1.1\r\n" + String(repeating: "A: 1\r\n", count: 201) + "\r\n"
    #expect(parse(many).1 == .failed(.headersTooLarge(limit: 16 * 1024)))
    let long = "GET /" + String(repeating: "a", count: 17 * 1024)
    #expect(parse(long).1 == .failed(.targetTooLong(limit: 16 * 1024)))
    #expect(HTTPRequestError.targetTooLong(limit: 1).status == 414)
    #expect(HTTPRequestError.headersTooLarge(limit: 1).status == 431)
  }
}

@Suite struct ChunkedDecoderTests {
  @Test func chunksDecodeAtAnySplitAndStopAtTheBodysEnd() throws {
    let body = "5\r\nhello\r\n6;name=\"v\" ; x\r\n world\r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n"
    let input = Array((body + "GET / HTTP/1.1\r\n").utf8)
    for step in [1, 2, 3, 7, 64, 4096] {
      let (content, consumed) = try decodeChunked(input, step: step)
      #expect(String(decoding: content, as: UTF8.self) == "hello world0123456789", "step \(step)")
      #expect(consumed == body.utf8.count, "step \(step)")
    }
  }

  @Test func brokenFramingIsRefusedWithItsStatus() {
    let cases: [(String, HTTPRequestError)] = [
      ("zz\r\n", .invalidChunk("chunk size is not hexadecimal")),
      ("-5\r\nhello\r\n", .invalidChunk("chunk size is not hexadecimal")),
      ("0x5\r\nhello\r\n", .invalidChunk("chunk size is not hexadecimal")),
      ("\r\n", .invalidChunk("chunk size is not hexadecimal")),
      ("fffffffffffffffff\r\n", .invalidChunk("chunk size too large")),
      ("5\nhello\r\n", .invalidChunk("a chunk size line not ended by CRLF")),
      ("5\r\nhello!\r\n", .invalidChunk("chunk data longer than its size")),
      ("5\r\nhello\rX", .invalidChunk("chunk data not ended by CRLF")),
      ("5;a=\u{1}\r\n", .invalidChunk("a control character in a chunk extension")),
      ("5;" + String(repeating: "e", count: 5000) + "\r\n", .chunkExtensionTooLong(limit: 4096)),
      ("0\r\nX: a\rb\r\n\r\n", .invalidChunk("a trailer line not ended by CRLF")),
      ("0\r\n" + String(repeating: "T: 0123456789\r\n", count: 2000) + "\r\n", .headersTooLarge(limit: 16 * 1024)),
    ]
    for (text, error) in cases {
      #expect(throws: error, "\(text.prefix(40).debugDescription)") {
        _ = try decodeChunked(Array(text.utf8), step: 4096)
      }
    }
    #expect(HTTPRequestError.chunkExtensionTooLong(limit: 1).status == 413)
    #expect(HTTPRequestError.invalidChunk("").status == 400)
  }
}
