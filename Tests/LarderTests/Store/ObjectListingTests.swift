import Foundation
import LarderTestSupport
import Larder
import Testing

/// Listing with prefix, delimiter and paging, in name order, every entry exactly once.
@Suite struct ObjectListingTests {
  static let names = ["a/1", "a/2", "a/b/1", "b/1", "c"]

  private func store() throws -> Larder {
    let larder = try TestStore.temporary()
    // Insert out of order; listing must sort.
    for name in Self.names.reversed() {
      _ = try larder.objects.put(bucket: "list", name: name, data: Data(name.utf8))
    }
    _ = try larder.objects.put(bucket: "other", name: "a/1", data: Data("elsewhere".utf8))
    return larder
  }

  @Test func listsExactItemsAndPrefixes() throws {
    let larder = try store()
    let all = try larder.objects.list(bucket: "list")
    #expect(all.items.map(\.name) == Self.names)
    #expect(all.prefixes == [])
    #expect(all.nextPageToken == nil)
    #expect(all.items.map { String(decoding: try! larder.files.data(of: $0.file), as: UTF8.self) } == Self.names)

    let top = try larder.objects.list(bucket: "list", delimiter: "/")
    #expect(top.items.map(\.name) == ["c"])
    #expect(top.prefixes == ["a/", "b/"])
    #expect(top.nextPageToken == nil)

    let inA = try larder.objects.list(bucket: "list", prefix: "a/", delimiter: "/")
    #expect(inA.items.map(\.name) == ["a/1", "a/2"])
    #expect(inA.prefixes == ["a/b/"])

    let underA = try larder.objects.list(bucket: "list", prefix: "a/")
    #expect(underA.items.map(\.name) == ["a/1", "a/2", "a/b/1"])
    #expect(underA.prefixes == [])

    let partial = try larder.objects.list(bucket: "list", prefix: "a", delimiter: "/")
    #expect(partial.items.map(\.name) == [])
    #expect(partial.prefixes == ["a/"])

    let none = try larder.objects.list(bucket: "list", prefix: "zzz")
    #expect(none.items.isEmpty && none.prefixes.isEmpty && none.nextPageToken == nil)
    #expect(try larder.objects.list(bucket: "empty").items.isEmpty)
  }

  struct Case: Sendable, CustomTestStringConvertible {
    let prefix: String
    let delimiter: String?
    let expected: [String]
    var testDescription: String { "prefix '\(prefix)' delimiter \(delimiter ?? "none")" }
  }

  static let cases: [Case] = [
    Case(prefix: "", delimiter: nil, expected: names),
    Case(prefix: "", delimiter: "/", expected: ["a/", "b/", "c"]),
    Case(prefix: "a/", delimiter: "/", expected: ["a/1", "a/2", "a/b/"]),
    Case(prefix: "a/", delimiter: nil, expected: ["a/1", "a/2", "a/b/1"]),
  ]

  @Test(arguments: cases, 1...3)
  func pagingVisitsEveryEntryOnceInOrder(listing: Case, maxResults: Int) throws {
    let larder = try store()
    var visited: [String] = []
    var token: String?
    var pages = 0
    repeat {
      let page = try larder.objects.list(
        bucket: "list", prefix: listing.prefix, delimiter: listing.delimiter, maxResults: maxResults, pageToken: token)
      let entries = (page.items.map(\.name) + page.prefixes).sorted()
      #expect(entries.count <= maxResults)
      #expect(!entries.isEmpty)
      visited += entries
      token = page.nextPageToken
      pages += 1
    } while token != nil && pages < 20
    #expect(visited == listing.expected)
    #expect(pages == (listing.expected.count + maxResults - 1) / maxResults)
  }

  @Test func forgedOrMalformedArgumentsAreRefused() throws {
    let larder = try store()
    let forged = [
      "not base64 at all!", Data("zzz".utf8).base64EncodedString(), Data([0xff, 0xfe, 0xfd]).base64EncodedString(),
    ]
    for token in forged {
      let error = #expect(throws: LarderError.self) {
        try larder.objects.list(bucket: "list", prefix: "a/", pageToken: token)
      }
      #expect(errorCode(of: error) == "invalid-argument", "token \(token)")
    }
    for limit in [0, -1, 1001] {
      let error = #expect(throws: LarderError.self) { try larder.objects.list(bucket: "list", maxResults: limit) }
      #expect(errorCode(of: error) == "invalid-argument")
    }
    for delimiter in ["", String(repeating: "/", count: 17)] {
      let error = #expect(throws: LarderError.self) { try larder.objects.list(bucket: "list", delimiter: delimiter) }
      #expect(errorCode(of: error) == "invalid-argument")
    }
    let longPrefix = #expect(throws: LarderError.self) {
      try larder.objects.list(bucket: "list", prefix: String(repeating: "p", count: 1025))
    }
    #expect(errorCode(of: longPrefix) == "invalid-argument")
  }

  /// Prefixes match bytes, as Firebase's do: a name whose first character combines with the next
  /// scalar (a decomposed "á") still starts with the prefix "a".
  @Test func prefixMatchesBytesNotGraphemes() throws {
    let larder = try TestStore.temporary()
    let decomposed = "a\u{301}/x"
    _ = try larder.objects.put(bucket: "u", name: decomposed, data: Data("1".utf8))
    _ = try larder.objects.put(bucket: "u", name: "ab", data: Data("2".utf8))
    #expect(try larder.objects.list(bucket: "u", prefix: "a").items.map(\.name) == ["ab", decomposed])  // 0x62 < 0xCC: byte order
    let folded = try larder.objects.list(bucket: "u", prefix: "a", delimiter: "/")
    #expect(folded.prefixes == ["a\u{301}/"])
    #expect(folded.items.map(\.name) == ["ab"])
  }

  /// More than one scan batch (256 rows) under a folded prefix, then paging across it.
  @Test func largeFoldedPrefixIsSkippedWhole() throws {
    let larder = try TestStore.temporary()
    for i in 0..<300 {
      _ = try larder.objects.put(bucket: "many", name: String(format: "dir/%03d", i), data: Data("x".utf8))
    }
    _ = try larder.objects.put(bucket: "many", name: "file", data: Data("x".utf8))
    let top = try larder.objects.list(bucket: "many", delimiter: "/")
    #expect(top.prefixes == ["dir/"])
    #expect(top.items.map(\.name) == ["file"])
    var names: [String] = []
    var token: String?
    repeat {
      let page = try larder.objects.list(bucket: "many", prefix: "dir/", maxResults: 97, pageToken: token)
      names += page.items.map(\.name)
      token = page.nextPageToken
    } while token != nil
    #expect(names == (0..<300).map { String(format: "dir/%03d", $0) })
  }

  /// A filter that skips most rows spends a page's scan budget and answers a token placed after
  /// the last row examined; following the tokens sees every match exactly once (issue 37).
  @Test func aSpentScanBudgetAnswersATokenAndPagesMissNothing() throws {
    let larder = try TestStore.temporary()
    var names: [String] = []
    for k in 0..<240 { names.append("g/\(k / 40)/n\(1000 + k)\(k % 7 == 0 ? ".png" : ".txt")") }
    for name in names.shuffled() { _ = try larder.objects.put(bucket: "scan", name: name, data: Data(name.utf8)) }
    let expected = names.filter { $0.hasSuffix(".png") }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    for (delimiter, budget, maxResults) in [(String?.none, 7, 5), (nil, 1, 1000), (nil, 100, 2), ("/", 3, 1000)] {
      let range = ListingRange(glob: try NameGlob(delimiter == nil ? "g/**.png" : "g/*.png"))
      var seen: [String] = []
      var prefixes: [String] = []
      var token: String?
      var pages = 0
      repeat {
        let page = try larder.objects.list(
          bucket: "scan", prefix: "g/", delimiter: delimiter, maxResults: maxResults, pageToken: token, range: range,
          scanBudget: budget)
        #expect(page.items.count + page.prefixes.count <= maxResults)
        seen += page.items.map(\.name)
        prefixes += page.prefixes
        token = page.nextPageToken
        pages += 1
      } while token != nil && pages < 1000
      if delimiter == nil {
        #expect(seen == expected, "budget \(budget), maxResults \(maxResults)")
        #expect(pages >= 240 / budget, "the budget bounds each page")
      } else {
        #expect(seen == [])
        #expect(prefixes == (0..<6).map { "g/\($0)/" })
        #expect(pages >= 2)
      }
    }
  }
}
