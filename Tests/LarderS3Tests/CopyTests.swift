import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import LarderS3

/// Server-side copy against the real store: what a resumable upload completed to a temporary
/// key relies on to move the bytes to their content address.
@Suite(.enabled(if: LoopbackS3.isAvailable))
struct CopyTests {
  /// Parts of 5 MiB, copied in parts above 5 MiB: the UploadPartCopy path at test sizes.
  static var smallCopyThreshold: S3Client.Tuning {
    var tuning = S3Client.Tuning()
    tuning.partSize = 5 << 20
    tuning.multipartThreshold = 5 << 20
    tuning.copyMultipartThreshold = 5 << 20
    return tuning
  }

  /// S3's ETag of a multipart object: MD5 of the parts' MD5s, then `-N`.
  static func multipartETag(_ bytes: [UInt8], partSize: Int) -> String {
    let parts = stride(from: 0, to: bytes.count, by: partSize).map {
      Digest.hash(.md5, bytes[$0..<min($0 + partSize, bytes.count)])
    }
    return Hex.encode(Digest.hash(.md5, parts.flatMap { $0 })) + "-\(parts.count)"
  }

  @Test func smallObjectIsCopiedExactly() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    try s3.client.put(.bytes(bytes), key: s3.key("source"))
    let etag = try s3.client.copyObject(from: s3.key("source"), to: s3.key("copy"))
    #expect(etag == md5Hex(bytes))
    #expect(try s3.download(s3.key("copy")).bytes == bytes)
    #expect(
      try s3.client.head(s3.key("copy")) == S3ObjectHead(size: 1000, etag: md5Hex(bytes), contentRange: nil))
    #expect(try s3.download(s3.key("source")).bytes == bytes)  // the source stays
  }

  @Test func emptyObjectIsCopied() throws {
    let s3 = try S3Fixture(tuning: Self.smallCopyThreshold)
    defer { s3.cleanUp() }
    try s3.client.put(.bytes([]), key: s3.key("empty"))
    #expect(try s3.client.copyObject(from: s3.key("empty"), to: s3.key("empty-copy")) == md5Hex([]))
    #expect(try s3.client.head(s3.key("empty-copy"))?.size == 0)
  }

  @Test func objectMadeByAMultipartUploadIsCopiedExactly() throws {
    let s3 = try S3Fixture(
      tuning: {
        var tuning = Self.smallCopyThreshold
        tuning.copyMultipartThreshold = 5 << 30  // one CopyObject of a two-part source
        return tuning
      }())
    defer { s3.cleanUp() }
    let content = try s3.file(size: 6 << 20, seed: 21)
    try s3.client.putFile(atPath: content.path, key: s3.key("two-parts"), sha256Hex: content.sha256)
    #expect(
      try s3.client.head(s3.key("two-parts"))?.etag == Self.multipartETag(content.bytes, partSize: 5 << 20))

    let etag = try s3.client.copyObject(from: s3.key("two-parts"), to: s3.key("two-parts-copy"))
    #expect(!etag.isEmpty)
    #expect(try s3.client.head(s3.key("two-parts-copy"))?.size == 6 << 20)
    #expect(try s3.download(s3.key("two-parts-copy")).bytes == content.bytes)
  }

  @Test func largeObjectIsCopiedInParts() throws {
    let s3 = try S3Fixture(tuning: Self.smallCopyThreshold)
    defer { s3.cleanUp() }
    // 5 MiB + 5 MiB + 1 MiB + 5 bytes, itself stored in three parts.
    let content = try s3.file(size: 11 << 20 + 5, seed: 22)
    try s3.client.putFile(atPath: content.path, key: s3.key("large"), sha256Hex: content.sha256)

    let etag = try s3.client.copyObject(from: s3.key("large"), to: s3.key("large-copy"))
    // Three parts of the copy's own, each the MD5 of its range: the ranges were exact.
    #expect(etag == Self.multipartETag(content.bytes, partSize: 5 << 20))
    #expect(try s3.client.head(s3.key("large-copy"))?.size == Int64(11 << 20 + 5))
    #expect(try s3.download(s3.key("large-copy")).bytes == content.bytes)
  }

  @Test(arguments: [S3Client.PartCopy.serverSide, .throughClient])
  func eachWayOfCopyingPartsGivesTheExactObject(how: S3Client.PartCopy) throws {
    let s3 = try S3Fixture(tuning: Self.smallCopyThreshold)
    defer { s3.cleanUp() }
    let content = try s3.file(size: 10 << 20 + 1, seed: 24)
    try s3.client.putFile(atPath: content.path, key: s3.key("source"), sha256Hex: content.sha256)
    let size = Int64(content.bytes.count)

    if how == .serverSide && !CurlEasy.sortsSignedHeadersByName {
      // libcurl < 8.10 signs x-amz-copy-source-range before x-amz-copy-source: the store
      // refuses the signature, which is why copyObject goes through the client with it.
      let error = #expect(throws: S3Error.self) {
        try s3.client.copyInParts(from: s3.key("source"), size: size, to: s3.key("copy"), how: how)
      }
      #expect(error?.status == 403)
      #expect(error?.code == "SignatureDoesNotMatch")
      #expect(error?.operation == "UploadPartCopy")
      #expect(try s3.client.head(s3.key("copy")) == nil)
      return
    }
    let etag = try s3.client.copyInParts(from: s3.key("source"), size: size, to: s3.key("copy"), how: how)
    #expect(etag == Self.multipartETag(content.bytes, partSize: 5 << 20))
    #expect(try s3.download(s3.key("copy")).bytes == content.bytes)
  }

  @Test(arguments: [false, true])
  func missingSourceIsA404AndCreatesNothing(inParts: Bool) throws {
    let s3 = try S3Fixture(tuning: inParts ? Self.smallCopyThreshold : .init())
    defer { s3.cleanUp() }
    let error = #expect(throws: S3Error.self) {
      try s3.client.copyObject(from: s3.key("absent"), to: s3.key("absent-copy"))
    }
    #expect(error?.status == 404)
    #expect(error?.code == "NoSuchKey")
    #expect(error?.operation == "CopyObject")
    #expect(error?.key == s3.key("absent"))
    #expect(try s3.client.head(s3.key("absent-copy")) == nil)
  }

  @Test(arguments: [1000, 5 << 20 + 1])
  func keysWithSpacesAndUnicodeAreCopied(size: Int) throws {
    let s3 = try S3Fixture(tuning: Self.smallCopyThreshold)
    defer { s3.cleanUp() }
    let content = try s3.file(size: size, seed: 23)
    let source = s3.key("dir with space/a+b&c=d;e%20f?g#h é 漢字 🍞.bin")
    let target = s3.key("copies/ü ñ/x y~z!'(1)*.bin")
    try s3.client.putFile(atPath: content.path, key: source, sha256Hex: content.sha256)
    try s3.client.copyObject(from: source, to: target)
    #expect(try s3.download(target).bytes == content.bytes)
    var listed: [String] = []
    try s3.client.list(prefix: s3.prefix) { listed.append($0.key) }
    #expect(listed.sorted() == [target, source].sorted())
  }
}

/// The copy's failures a real store cannot be made to produce on cue, against a canned server.
struct CopyFailureTests {
  static func client(_ server: CannedHTTPServer, copyThreshold: Int64 = 5 << 30) -> S3Client {
    var tuning = S3Client.Tuning()
    tuning.copyMultipartThreshold = copyThreshold
    return RetryTests.client(server, tuning: tuning)
  }

  /// A HEAD answer for an object of `size` bytes (the canned server's Content-Length is its body's).
  static func head(size: Int) -> CannedHTTPServer.Response {
    .init(status: 200, headers: ["ETag: \"e\""], body: String(repeating: "x", count: size))
  }

  @Test func copyAnswering200WithAnErrorIsRetriedThenSucceeds() throws {
    let server = try CannedHTTPServer([
      Self.head(size: 3),
      .init(status: 200, body: "<Error><Code>InternalError</Code><Message>try again</Message></Error>"),
      .init(
        status: 200,
        body:
          "<CopyObjectResult><LastModified>2026-11-30T22:00:00.000Z</LastModified><ETag>\"abc\"</ETag></CopyObjectResult>"
      ),
    ])
    defer { server.stop() }
    #expect(try Self.client(server).copyObject(from: "s p", to: "t") == "abc")
    #expect(server.requests == ["HEAD /bucket/s%20p", "PUT /bucket/t", "PUT /bucket/t"])
  }

  @Test func copyAnswering200WithARefusalIsAnErrorAtOnce() throws {
    let server = try CannedHTTPServer([
      Self.head(size: 3),
      .init(status: 200, body: "<Error><Code>AccessDenied</Code><Message>no</Message></Error>"),
    ])
    defer { server.stop() }
    let error = #expect(throws: S3Error.self) { try Self.client(server).copyObject(from: "s", to: "t") }
    #expect(error?.status == 200)
    #expect(error?.code == "AccessDenied")
    #expect(error?.operation == "CopyObject")
    #expect(server.requests == ["HEAD /bucket/s", "PUT /bucket/t"])
  }

  @Test(arguments: [S3Client.PartCopy.serverSide, .throughClient])
  func failingPartAbortsTheCopy(how: S3Client.PartCopy) throws {
    let server = try CannedHTTPServer([
      .multipartStarted(key: "t", uploadID: "U1"),
      .init(status: 500), .init(status: 500), .init(status: 500),
      .init(status: 204),
    ])
    defer { server.stop() }
    let error = #expect(throws: S3Error.self) {
      try Self.client(server, copyThreshold: 10).copyInParts(from: "s", size: 20, to: "t", how: how)
    }
    #expect(error?.status == 500)
    let attempt = how == .serverSide ? "PUT /bucket/t?partNumber=1&uploadId=U1" : "GET /bucket/s"
    #expect(error?.operation == (how == .serverSide ? "UploadPartCopy" : "GetObject"))
    #expect(
      server.requests == [
        "POST /bucket/t?uploads=", attempt, attempt, attempt, "DELETE /bucket/t?uploadId=U1",
      ])
  }

  @Test func largeCopyHeadsTheSourceThenCopiesInParts() throws {
    let server = try CannedHTTPServer([
      Self.head(size: 20),
      .multipartStarted(key: "t", uploadID: "U1"),
      .init(status: 403, body: "<Error><Code>AccessDenied</Code><Message>no</Message></Error>"),
      .init(status: 204),
    ])
    defer { server.stop() }
    let error = #expect(throws: S3Error.self) {
      try Self.client(server, copyThreshold: 10).copyObject(from: "s", to: "t")
    }
    #expect(error?.code == "AccessDenied")
    let part =
      S3Client.PartCopy.available == .serverSide ? "PUT /bucket/t?partNumber=1&uploadId=U1" : "GET /bucket/s"
    #expect(
      server.requests == ["HEAD /bucket/s", "POST /bucket/t?uploads=", part, "DELETE /bucket/t?uploadId=U1"])
  }

  @Test func copySourceHeaderEncodesTheKeyAsAPath() throws {
    let client = S3Client(
      configuration: S3Configuration(bucket: "bucket", endpoint: "http://127.0.0.1:9"),
      credentials: S3Credentials(accessKeyID: "id", secretAccessKey: "secret"))
    #expect(client.copySourceHeader("a b/c+d%é") == "x-amz-copy-source: /bucket/a%20b/c%2Bd%25%C3%A9")
  }
}
