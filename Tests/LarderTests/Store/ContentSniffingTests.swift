import Foundation
import LarderTestSupport
import Larder
import Testing

/// The stored type comes from the content (libmagic), never from what the uploader claims.
@Suite struct ContentSniffingTests {
  struct Sample: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let declared: String
    let expected: String
    var testDescription: String { "\(name) declared as \(declared)" }
  }

  static let samples: [Sample] = [
    Sample(name: "pixel.png", bytes: SampleFiles.png, declared: "text/plain", expected: "image/png"),
    Sample(name: "photo.jpg", bytes: SampleFiles.jpeg, declared: "application/pdf", expected: "image/jpeg"),
    Sample(name: "doc.pdf", bytes: SampleFiles.pdf, declared: "image/jpeg", expected: "application/pdf"),
    Sample(name: "notes.txt", bytes: Array("hello world\nthis is plain text\n".utf8), declared: "text/html", expected: "text/plain"),
    Sample(name: "page.html", bytes: SampleFiles.html, declared: "image/png", expected: "text/html"),
    Sample(name: "archive.zip", bytes: SampleFiles.zip, declared: "image/png", expected: "application/zip"),
  ]

  @Test(arguments: samples)
  func typeIsSniffedFromContentWhenTheDeclaredTypeLies(sample: Sample) throws {
    // `contentType` reports the declared type, as Firebase does; the sniffed one is kept beside it.
    let larder = try TestStore.temporary()
    let object = try larder.objects.put(
      bucket: "mime", name: sample.name, data: Data(sample.bytes),
      options: ObjectWriteOptions(declaredContentType: sample.declared))
    #expect(object.contentType == sample.declared)
    #expect(object.detectedContentType == sample.expected)
    #expect(object.file.contentType == sample.expected)
    #expect(object.file.declaredContentType == sample.declared)
    #expect(object.firebaseMetadata.contentType == sample.declared)
    #expect(object.firebaseMetadata.detectedContentType == sample.expected)
    let again = try larder.objects.get(bucket: "mime", name: sample.name)
    #expect(again.contentType == sample.declared)
    #expect(again.detectedContentType == sample.expected)
    #expect(again.file.declaredContentType == sample.declared)
    #expect(try larder.files.data(of: again.file) == Data(sample.bytes))
    #expect(ContentSniffer.shared.mimeType(of: sample.bytes) == sample.expected)
  }

  @Test func declaredTypeIsCleanedOrDropped() throws {
    let larder = try TestStore.temporary()
    let padded = try larder.files.put(Data("x".utf8), declaredContentType: "  image/png ")
    #expect(padded.declaredContentType == "image/png")
    let hostile = try larder.files.put(Data("x".utf8), declaredContentType: "text/html\r\nX-Evil: 1")
    #expect(hostile.declaredContentType == nil)
    let huge = try larder.files.put(Data("x".utf8), declaredContentType: String(repeating: "a", count: 256))
    #expect(huge.declaredContentType == nil)
    let none = try larder.files.put(Data("plain words, nothing declared\n".utf8))
    #expect(none.declaredContentType == nil)
    #expect(none.contentType == "text/plain")
  }

  @Test func sniffingIsSafeUnderConcurrency() async throws {
    let results = await withTaskGroup(of: Bool.self) { group in
      for i in 0..<64 {
        group.addTask {
          let sample = Self.samples[i % Self.samples.count]
          return ContentSniffer.shared.mimeType(of: sample.bytes) == sample.expected
        }
      }
      var all: [Bool] = []
      for await ok in group { all.append(ok) }
      return all
    }
    #expect(results.count == 64)
    #expect(results.allSatisfy { $0 })
  }
}

/// Minimal but valid files of each type, built in code.
enum SampleFiles {
  /// A real 1×1 PNG (signature, IHDR, IDAT, IEND with correct CRCs).
  static let png: [UInt8] = Array(
    Data(
      base64Encoded:
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)

  /// JFIF APP0 segment, then end of image.
  static let jpeg: [UInt8] = [
    0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01,
    0x00, 0x00, 0xFF, 0xD9,
  ]

  static let pdf: [UInt8] = Array(
    "%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n".utf8)

  static let html: [UInt8] = Array(
    "<!DOCTYPE html>\n<html><head><title>x</title></head><body><p>hi</p></body></html>\n".utf8)

  /// A stored (uncompressed) ZIP with one entry, `hello.txt`.
  static let zip: [UInt8] = {
    let name = Array("hello.txt".utf8)
    let content = Array("hello world\n".utf8)
    let crc = crc32(content)
    func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8 & 0xff)] }
    func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * UInt32($0)) & 0xff) } }
    var local: [UInt8] = [0x50, 0x4B, 0x03, 0x04] + le16(20) + le16(0) + le16(0) + le16(0) + le16(0x21)
    local += le32(crc) + le32(UInt32(content.count)) + le32(UInt32(content.count)) + le16(name.count) + le16(0)
    local += name + content
    var central: [UInt8] = [0x50, 0x4B, 0x01, 0x02] + le16(20) + le16(20) + le16(0) + le16(0) + le16(0) + le16(0x21)
    central += le32(crc) + le32(UInt32(content.count)) + le32(UInt32(content.count)) + le16(name.count)
    central += le16(0) + le16(0) + le16(0) + le16(0) + le32(0) + le32(0) + name
    var end: [UInt8] = [0x50, 0x4B, 0x05, 0x06] + le16(0) + le16(0) + le16(1) + le16(1)
    end += le32(UInt32(central.count)) + le32(UInt32(local.count)) + le16(0)
    return local + central + end
  }()

  static func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
      crc ^= UInt32(byte)
      for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
    }
    return ~crc
  }
}
