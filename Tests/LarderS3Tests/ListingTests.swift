import Foundation
import LarderTestSupport
import Testing

@testable import LarderS3

/// ListObjectsV2 with a prefix, page by page through continuation tokens.
@Suite(.enabled(if: LoopbackS3.isAvailable))
struct ListingTests {
  @Test func listingFollowsContinuationTokensAcrossPages() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let names = ["sha256/00/aa/1", "sha256/00/aa/2", "sha256/11/bb/3", "sha256/22/cc/4", "sha256/ff/ff/5"]
    for (i, name) in names.enumerated() {
      try s3.client.put(.bytes([UInt8](repeating: UInt8(i), count: i + 1)), key: s3.key(name))
    }
    try s3.client.put(.bytes([9]), key: s3.key("other/outside-the-prefix"))

    let first = try s3.client.listPage(prefix: s3.key("sha256/"), maxKeys: 2)
    #expect(first.objects.map(\.key) == names[0..<2].map(s3.key))
    #expect(first.objects.map(\.size) == [1, 2])
    #expect(first.objects[0].etag == md5Hex([0]))
    let token = try #require(first.continuationToken)
    let second = try s3.client.listPage(prefix: s3.key("sha256/"), continuationToken: token, maxKeys: 2)
    #expect(second.objects.map(\.key) == names[2..<4].map(s3.key))
    let secondToken = try #require(second.continuationToken)
    let third = try s3.client.listPage(prefix: s3.key("sha256/"), continuationToken: secondToken, maxKeys: 2)
    #expect(third.objects.map(\.key) == [s3.key(names[4])])
    #expect(third.continuationToken == nil)

    var all: [S3ObjectSummary] = []
    try s3.client.list(prefix: s3.key("sha256/"), pageSize: 2) { all.append($0) }
    #expect(all.map(\.key) == names.map(s3.key))
    #expect(all.map(\.size) == [1, 2, 3, 4, 5])
  }

  @Test func emptyPrefixListsNothing() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let page = try s3.client.listPage(prefix: s3.key("nothing/"))
    #expect(page.objects.isEmpty)
    #expect(page.continuationToken == nil)
  }
}
