import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import LarderS3

/// PUT, HEAD, GET and DELETE of whole objects against a real S3 API (OpenStack Swift on loopback).
@Suite(.enabled(if: LoopbackS3.isAvailable))
struct ObjectRoundTripTests {
  @Test(arguments: [0, 1, 5 << 20 - 1, 5 << 20, 5 << 20 + 1])
  func singlePutReturnsExactBytes(size: Int) throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let content = try s3.file(size: size, seed: UInt64(size) + 7)
    let key = s3.key("object-\(size)")

    let etag = try s3.client.putFile(atPath: content.path, key: key, sha256Hex: content.sha256)
    #expect(etag == md5Hex(content.bytes))
    #expect(try s3.client.head(key) == S3ObjectHead(size: Int64(size), etag: md5Hex(content.bytes)))
    let (bytes, largestChunk) = try s3.download(key)
    #expect(bytes.count == size)
    #expect(sha256Hex(bytes) == content.sha256)
    #expect(bytes == content.bytes)
    #expect(largestChunk <= 256 << 10)  // streamed in libcurl's buffer, never the whole object
  }

  @Test func largeFileGoesUpInPartsAndComesBackExact() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let size = 40 << 20
    let content = try s3.file(size: size, seed: 40)
    let key = s3.key("forty-mib")

    let etag = try s3.client.putFile(atPath: content.path, key: key, sha256Hex: content.sha256)
    #expect(etag.hasSuffix("-3"))  // 16 + 16 + 8 MiB
    #expect(try s3.client.head(key)?.size == Int64(size))
    let (bytes, largestChunk) = try s3.download(key)
    #expect(bytes.count == size)
    #expect(sha256Hex(bytes) == content.sha256)
    #expect(largestChunk <= 256 << 10)
    try s3.client.delete(key)
  }

  @Test func wrongContentHashIsRefusedAndNothingIsStored() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let content = try s3.file(size: 1000)
    let key = s3.key("bad-digest")
    let wrong = sha256Hex(Array("something else".utf8))

    let error = #expect(throws: S3Error.self) {
      try s3.client.putFile(atPath: content.path, key: key, sha256Hex: wrong)
    }
    #expect(error?.status == 400)
    #expect(error?.code == "BadDigest")
    #expect(error?.operation == "PutObject")
    #expect(error?.key == key)
    #expect(error?.isTransient == false)
    #expect(try s3.client.head(key) == nil)
  }

  @Test func rangeReadsReturnExactSlices() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let content = try s3.file(size: 1000, seed: 3)
    let key = s3.key("ranges")
    try s3.client.putFile(atPath: content.path, key: key, sha256Hex: content.sha256)

    #expect(try s3.download(key, range: 10...19).bytes == Array(content.bytes[10...19]))
    #expect(try s3.download(key, range: 0...0).bytes == [content.bytes[0]])
    #expect(try s3.download(key, range: 990...999).bytes == Array(content.bytes[990...999]))
    var seen: S3ObjectHead?
    let head = try s3.client.get(key, range: 100...349, onResponse: { seen = $0 }, body: { _ in })
    #expect(head == S3ObjectHead(size: 250, etag: md5Hex(content.bytes), contentRange: "bytes 100-349/1000"))
    #expect(seen == head)

    let error = #expect(throws: S3Error.self) { try s3.download(key, range: 2000...2100) }
    #expect(error?.status == 416)
    #expect(error?.code == "InvalidRange")
  }

  @Test func missingObjectsAnswerNilOrNotFound() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    #expect(try s3.client.head(s3.key("never-written")) == nil)
    let error = #expect(throws: S3Error.self) { try s3.download(s3.key("never-written")) }
    #expect(error?.status == 404)
    #expect(error?.code == "NoSuchKey")
    #expect(error?.key == s3.key("never-written"))
  }

  @Test func deleteIsIdempotent() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let key = s3.key("deleted")
    try s3.client.put(.bytes(Array("x".utf8)), key: key)
    #expect(try s3.client.head(key)?.size == 1)
    try s3.client.delete(key)
    try s3.client.delete(key)
    #expect(try s3.client.head(key) == nil)
  }

  @Test func oneClientServesManyThreadsAtOnce() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let results = Mutex<[Int: [UInt8]]>([:])
    let failures = Mutex<[String]>([])
    DispatchQueue.concurrentPerform(iterations: 16) { i in
      do {
        let bytes = [UInt8](repeating: UInt8(i), count: 1000 + i)
        try s3.client.put(.bytes(bytes), key: s3.key("parallel-\(i)"))
        let back = try s3.download(s3.key("parallel-\(i)")).bytes
        results.withLock { $0[i] = back }
      } catch {
        failures.withLock { $0.append("\(i): \(error)") }
      }
    }
    #expect(failures.withLock { $0 } == [])
    let collected = results.withLock { $0 }
    for i in 0..<16 { #expect(collected[i] == [UInt8](repeating: UInt8(i), count: 1000 + i)) }
    var listed = 0
    try s3.client.list(prefix: s3.key("parallel-"), pageSize: 5) { _ in listed += 1 }
    #expect(listed == 16)
  }

  @Test func keysNeedingEncodingRoundTrip() throws {
    let s3 = try S3Fixture()
    defer { s3.cleanUp() }
    let key = s3.key("a dir/ü+%&=?#~name.txt")
    let bytes = Array("encoded".utf8)
    try s3.client.put(.bytes(bytes), key: key)
    #expect(try s3.download(key).bytes == bytes)
    var listed: [String] = []
    try s3.client.list(prefix: s3.prefix) { listed.append($0.key) }
    #expect(listed == [key])
  }
}
