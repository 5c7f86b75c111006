import Foundation
import LarderTestSupport
import Testing

@testable import LarderS3

/// The multipart calls one by one, as a resumable upload spread over nodes will use them.
@Suite(.enabled(if: LoopbackS3.isAvailable))
struct MultipartTests {
  @Test func partsListedThenCompletedGiveTheExactObject() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let content = try s3.file(size: 5 << 20 + 3, seed: 11)
    let key = s3.key("assembled")
    let id = try s3.client.createMultipartUpload(key: key)
    #expect(!id.isEmpty)

    let one = try s3.client.uploadPart(
      key: key, uploadID: id, number: 1, body: .file(path: content.path, offset: 0, length: 5 << 20))
    // Another process resuming the upload sees what is there, sizes and ETags included.
    #expect(try s3.client.listParts(key: key, uploadID: id) == [one])
    let two = try s3.client.uploadPart(
      key: key, uploadID: id, number: 2, body: .bytes(Array(content.bytes[(5 << 20)...])))
    #expect(one == S3Part(number: 1, etag: md5Hex(Array(content.bytes[0..<(5 << 20)])), size: 5 << 20))
    #expect(two == S3Part(number: 2, etag: md5Hex(Array(content.bytes[(5 << 20)...])), size: 3))
    let listed = try s3.client.listParts(key: key, uploadID: id)
    #expect(listed == [one, two])
    #expect(try s3.client.head(key) == nil)  // nothing visible before completion

    let etag = try s3.client.completeMultipartUpload(key: key, uploadID: id, parts: listed)
    #expect(etag.hasSuffix("-2"))
    #expect(try s3.download(key).bytes == content.bytes)
    #expect(try s3.client.head(key)?.size == Int64(content.bytes.count))
  }

  @Test func abortedUploadLeavesNothing() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let key = s3.key("aborted")
    let id = try s3.client.createMultipartUpload(key: key)
    _ = try s3.client.uploadPart(key: key, uploadID: id, number: 1, body: .bytes([1, 2, 3]))
    try s3.client.abortMultipartUpload(key: key, uploadID: id)
    try s3.client.abortMultipartUpload(key: key, uploadID: id)  // again: already gone is fine
    #expect(try s3.client.head(key) == nil)
    let error = #expect(throws: S3Error.self) {
      try s3.client.completeMultipartUpload(
        key: key, uploadID: id, parts: [S3Part(number: 1, etag: md5Hex([1, 2, 3]), size: 3)])
    }
    #expect(error?.status == 404)
    #expect(error?.code == "NoSuchUpload")
  }

  @Test func partWithWrongHashIsRefused() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let key = s3.key("bad-part")
    let id = try s3.client.createMultipartUpload(key: key)
    defer { try? s3.client.abortMultipartUpload(key: key, uploadID: id) }
    let error = #expect(throws: S3Error.self) {
      try s3.client.uploadPart(
        key: key, uploadID: id, number: 1, body: .bytes([1, 2, 3]), sha256Hex: sha256Hex([4]))
    }
    #expect(error?.status == 400)
    #expect(error?.code == "BadDigest")
    #expect(error?.operation == "UploadPart")
    #expect(try s3.client.listParts(key: key, uploadID: id) == [])
  }

  @Test func vanishedFileIsALocalErrorAndStoresNothing() throws {
    var tuning = S3Client.Tuning()
    tuning.partSize = 5 << 20
    tuning.multipartThreshold = 5 << 20
    let s3 = try S3Fixture(tuning: tuning)
    defer { s3.cleanUp() }
    let content = try s3.file(size: 6 << 20, seed: 5)
    let key = s3.key("multipart-missing-file")
    unlink(content.path)
    let error = #expect(throws: S3Error.self) {
      try s3.client.putFile(atPath: content.path, key: key, sha256Hex: content.sha256)
    }
    #expect(error?.kind == .local)
    #expect(try s3.client.head(key) == nil)
  }
}
