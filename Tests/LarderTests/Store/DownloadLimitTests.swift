import Foundation
import LarderTestSupport
import Larder
import Testing

/// `data(of:maxSize:)` refuses oversize content before reading any of it.
@Suite struct DownloadLimitTests {
  @Test func maxSizeAtUnderAndOverTheSize() throws {
    let larder = try TestStore.temporary()
    var random = PseudoRandomBytes(seed: 77)
    let bytes = Data(random.bytes(10_000))
    let file = try larder.files.put(bytes)
    #expect(try larder.files.data(of: file, maxSize: 10_000) == bytes)
    #expect(try larder.files.data(of: file, maxSize: 10_001) == bytes)
    #expect(throws: LarderError.downloadSizeExceeded(size: 10_000, maxSize: 9_999)) {
      try larder.files.data(of: file, maxSize: 9_999)
    }
    #expect(throws: LarderError.downloadSizeExceeded(size: 10_000, maxSize: 0)) {
      try larder.files.data(of: file, maxSize: 0)
    }
  }

  /// With the blob file moved away, a too-small limit still answers downloadSizeExceeded: the
  /// decision came from the catalog, before any open or read.
  @Test func limitIsCheckedBeforeOpening() throws {
    let larder = try TestStore.temporary()
    let file = try larder.files.put(Data(count: 5_000))
    let path = larder.blobs.path(forHex: file.sha256)
    #expect(rename(path, path + ".away") == 0)
    #expect(throws: LarderError.downloadSizeExceeded(size: 5_000, maxSize: 4_999)) {
      try larder.files.data(of: file, maxSize: 4_999)
    }
    let missing = #expect(throws: LarderError.self) { try larder.files.data(of: file, maxSize: 5_000) }
    #expect(missing == .io(operation: "open", path: path, errno: ENOENT))
    #expect(rename(path + ".away", path) == 0)
    #expect(try larder.files.data(of: file, maxSize: 5_000) == Data(count: 5_000))
  }

  @Test func malformedFileValueIsRefused() throws {
    let larder = try TestStore.temporary()
    let forged = File(
      id: "x", sha256: "../../etc/passwd", size: 1, md5: "", contentType: "text/plain", declaredContentType: nil,
      filename: nil, createdAt: Date())
    let error = #expect(throws: LarderError.self) { try larder.files.data(of: forged) }
    #expect(errorCode(of: error) == "invalid-argument")
  }
}
