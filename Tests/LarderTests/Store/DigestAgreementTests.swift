import Foundation
import LarderTestSupport
import Larder
import Testing

/// The digests Larder computes while streaming agree with OpenSSL's command-line tool.
@Suite struct DigestAgreementTests {
  @Test(arguments: [1, 65_537, (1 << 20) + 123])
  func digestsAgreeWithOpenSSLCommandLine(size: Int) throws {
    let seed = UInt64(size) &* 31
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    var random = PseudoRandomBytes(seed: seed)
    let source = try scratch.file("random-\(size).bin", random.bytes(size))

    let sha256Line = String(decoding: try runTool("/usr/bin/env", ["openssl", "dgst", "-sha256", "-r", source.path]), as: UTF8.self)
    let opensslSHA256 = String(sha256Line.prefix(while: { $0 != " " }))
    let md5Line = try runTool("/bin/sh", ["-c", "openssl dgst -md5 -binary \"$1\" | base64", "sh", source.path])
    let opensslMD5Base64 = String(decoding: md5Line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(opensslSHA256.count == 64)
    #expect(opensslMD5Base64.count == 24)

    let object = try larder.objects.put(
      bucket: "digests", name: "random-\(size)", staged: try stage(source, in: larder))
    #expect(object.file.sha256 == opensslSHA256)
    #expect(object.file.md5Base64 == opensslMD5Base64)
    #expect(object.firebaseMetadata.md5Hash == opensslMD5Base64)
    #expect(object.firebaseMetadata.sha256 == opensslSHA256)
    #expect(object.firebaseMetadata.size == String(size))

    // The stored blob is named by its digest, at blobs/sha256/ab/cd/<hex>.
    let a = opensslSHA256.prefix(2)
    let b = opensslSHA256.dropFirst(2).prefix(2)
    #expect(larder.storeBlobFiles() == ["blobs/sha256/\(a)/\(b)/\(opensslSHA256)"])
    let stored = larder.directory.appendingPathComponent("blobs/sha256/\(a)/\(b)/\(opensslSHA256)")
    let storedLine = String(decoding: try runTool("/usr/bin/env", ["openssl", "dgst", "-sha256", "-r", stored.path]), as: UTF8.self)
    #expect(String(storedLine.prefix(while: { $0 != " " })) == opensslSHA256)
  }

  /// Streams `url` through a writer, as the CLI's `put` does.
  private func stage(_ url: URL, in larder: Larder) throws -> StagedBlob {
    let writer = try larder.files.makeWriter()
    let bytes = try Data(contentsOf: url)
    var offset = 0
    while offset < bytes.count {
      let end = min(bytes.count, offset + 10_000)
      try writer.write(bytes[offset..<end])
      offset = end
    }
    return try writer.finish()
  }
}
