import Foundation
import Larder
import Testing

/// The line reader a bundle import streams through: lines split across reads, an empty line,
/// a last line without its newline, and the end.
@Suite struct ModelBundleLineTests {
  @Test func linesSplitAcrossReadsComeBackWhole() throws {
    let text = Data("{\"a\":1}\n\n{\"b\":\"two\"}\nlast".utf8)
    var offset = 0
    let reader = LineReader { _ in
      defer { offset = min(text.count, offset + 3) }
      return text.subdata(in: offset..<min(text.count, offset + 3))
    }
    var lines: [String] = []
    while let line = try reader.next() { lines.append(String(decoding: line, as: UTF8.self)) }
    #expect(lines == ["{\"a\":1}", "", "{\"b\":\"two\"}", "last"])
    #expect(reader.lineNumber == 4)
    #expect(try reader.next() == nil)
  }
}
