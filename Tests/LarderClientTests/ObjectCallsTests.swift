import Foundation
import LarderClient
import Testing

@Suite struct ObjectCallsTests {
  @Test func uploadThenDownloadReturnsTheExactBytesAndMetadata() async throws {
    try await withServer { _, client in
      let bytes = testBytes(100_003, seed: 7)
      let meta = try await client.upload(
        bytes, name: "users/u1/a.bin", contentType: "application/x-test", metadata: ["owner": "ada", "Kind": "raw"])
      #expect(meta.name == "users/u1/a.bin")
      #expect(meta.bucket == "app")
      #expect(meta.size == 100_003)
      #expect(meta.generation > 0)
      #expect(meta.metageneration == 1)
      #expect(meta.contentType == "application/x-test")
      #expect(meta.detectedContentType == "application/octet-stream")
      #expect(meta.contentEncoding == nil)
      #expect(meta.contentLanguage == nil)
      #expect(meta.metadata == ["owner": "ada", "kind": "raw"])  // header names arrive lower-cased
      #expect(meta.sha256.count == 64)
      #expect(meta.downloadTokens.count == 1)

      let downloaded = try await client.download(name: "users/u1/a.bin")
      #expect(downloaded == bytes)
      let again = try await client.metadata(name: "users/u1/a.bin")
      #expect(again == meta)
    }
  }

  @Test func namesWithReservedAndNonASCIICharactersRoundTrip() async throws {
    try await withServer { _, client in
      let names = ["a b/c?d#e%f&g=h+i.txt", "ünï/cødé/名前.txt", "x;y,z@!$'()*"]
      for (i, name) in names.enumerated() {
        let body = Data("body \(i)".utf8)
        let meta = try await client.upload(body, name: name)
        #expect(meta.name == name)
        #expect(try await client.download(name: name) == body)
        #expect(try await client.metadata(name: name).size == Int64(body.count))
      }
      #expect(try await client.list().items.map(\.name) == names.sorted())
    }
  }

  @Test func downloadOverMaxSizeThrowsTooLargeWithBothSizes() async throws {
    try await withServer { _, client in
      _ = try await client.upload(testBytes(5000), name: "big")
      await #expect(throws: LarderClientError.tooLarge(size: 5000, maxSize: 4999)) {
        try await client.download(name: "big", maxSize: 4999)
      }
      #expect(try await client.download(name: "big", maxSize: 5000) == testBytes(5000))
    }
  }

  @Test func rangeDownloadReturnsThoseBytesOnly() async throws {
    try await withServer { _, client in
      let bytes = testBytes(10_000, seed: 3)
      _ = try await client.upload(bytes, name: "r")
      #expect(try await client.download(name: "r", range: 10..<110) == bytes[10..<110])
      #expect(try await client.download(name: "r", range: 9_999..<10_000) == bytes[9_999..<10_000])
      // maxSize applies to the range, not the object.
      #expect(try await client.download(name: "r", maxSize: 100, range: 0..<100) == bytes[0..<100])
      await #expect(throws: LarderClientError.tooLarge(size: 101, maxSize: 100)) {
        try await client.download(name: "r", maxSize: 100, range: 0..<101)
      }
      await #expect(throws: LarderClientError.invalidArgument("the range 5..<5 is empty or negative")) {
        try await client.download(name: "r", range: 5..<5)
      }
    }
  }

  @Test func listFollowsPageTokensToTheEnd() async throws {
    try await withServer { _, client in
      let names = (0..<7).map { "p/item-\($0)" } + ["p/sub/deep", "q/other"]
      for name in names { _ = try await client.upload(Data(name.utf8), name: name) }

      let page = try await client.listPage(prefix: "p/", maxResults: 2)
      #expect(page.items.map(\.name) == ["p/item-0", "p/item-1"])
      #expect(page.nextPageToken != nil)

      let all = try await client.list(prefix: "p/", maxResults: 2)
      #expect(all.items.map(\.name) == names.filter { $0.hasPrefix("p/") }.sorted())
      // Items are {name, bucket} only, as Firebase lists them: no metadata, no tokens.
      #expect(all.items.allSatisfy { $0.bucket == "app" })

      let folders = try await client.list(prefix: "p/", delimiter: "/", maxResults: 3)
      #expect(folders.prefixes == ["p/sub/"])
      #expect(folders.items.map(\.name) == (0..<7).map { "p/item-\($0)" })

      let top = try await client.list(delimiter: "/")
      #expect(top.prefixes == ["p/", "q/"])
      #expect(top.items.isEmpty)
    }
  }

  @Test func deleteRemovesTheObject() async throws {
    try await withServer { _, client in
      _ = try await client.upload(Data("x".utf8), name: "gone")
      try await client.delete(name: "gone")
      do throws(LarderClientError) {
        _ = try await client.metadata(name: "gone")
        Issue.record("metadata of a deleted object answered")
      } catch {
        guard case .server(let e) = error else { Issue.record("unexpected \(error)"); return }
        #expect(e.code == 404)
        #expect(e.status == "NOT_FOUND")
      }
      #expect(try await client.list().items.isEmpty)
    }
  }
}
