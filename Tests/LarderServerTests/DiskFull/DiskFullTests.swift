import Foundation
import Larder
import LarderHTTP
import LarderServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A real full disk: the data directory on a 4 MiB tmpfs (mounting needs root, as in CI).
@Suite(.serialized, .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct DiskFullTests {
  /// Runs `body` with a fresh directory on its own small tmpfs, unmounted afterwards.
  func withTinyFilesystem(bytes: Int, _ body: (URL) throws -> Void) throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("larder-full-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let mounted = mount("tmpfs", dir.path, "tmpfs", 0, "size=\(bytes)")
    try #require(mounted == 0, "mount tmpfs: \(String(cString: strerror(errno)))")
    defer { umount2(dir.path, Int32(MNT_DETACH)) }
    try body(dir)
  }

  @Test func libraryWriteOnAFullDiskThrowsDiskFullAndLeavesNothing() throws {
    try withTinyFilesystem(bytes: 4 << 20) { dir in
      let larder = try Larder(at: dir.appendingPathComponent("data"))
      let small = try larder.objects.put(bucket: "b", name: "small", data: Data("kept".utf8))
      #expect(throws: LarderError.diskFull) {
        _ = try larder.objects.put(bucket: "b", name: "big", data: Data(repeating: 0x5a, count: 8 << 20))
      }
      #expect(try FileManager.default.contentsOfDirectory(atPath: larder.blobs.tmpDirectory.path) == [])
      #expect(throws: LarderError.notFound(bucket: "b", name: "big")) {
        _ = try larder.objects.get(bucket: "b", name: "big")
      }
      // Space is back, and what was stored before is intact.
      #expect(try larder.files.data(of: small.file) == Data("kept".utf8))
      let after = try larder.objects.put(bucket: "b", name: "after", data: Data("fits".utf8))
      #expect(try larder.files.data(of: after.file) == Data("fits".utf8))
    }
  }

  @Test func httpUploadOnAFullDiskAnswers507AndLosesNothing() async throws {
    try withTinyFilesystem(bytes: 4 << 20) { dir in
      var options = LarderService.Options(dataDirectory: dir.appendingPathComponent("data"), policy: .allowAll)
      options.http.accessLog = .disabled
      let service = try LarderService(options: options)
      try service.start()
      defer { service.stop() }
      let base = "http://127.0.0.1:\(service.port)/v0/b/app/o"

      let (status1, _) = try Self.post("\(base)?name=small.txt", Data("kept".utf8))
      #expect(status1 == 200)
      let (status2, body2) = try Self.post("\(base)?name=big.bin", Data(repeating: 0x5a, count: 8 << 20))
      #expect(status2 == 507)
      let error = try JSONSerialization.jsonObject(with: body2) as? [String: [String: Any]]
      #expect(error?["error"]?["code"] as? Int == 507)
      #expect(error?["error"]?["status"] as? String == "RESOURCE_EXHAUSTED")
      #expect(try FileManager.default.contentsOfDirectory(atPath: service.larder.blobs.tmpDirectory.path) == [])
      #expect(throws: LarderError.notFound(bucket: "app", name: "big.bin")) {
        _ = try service.larder.objects.get(bucket: "app", name: "big.bin")
      }
      let kept = try service.larder.objects.get(bucket: "app", name: "small.txt")
      #expect(try service.larder.files.data(of: kept.file) == Data("kept".utf8))
    }
  }

  /// A blocking POST through URLSession; returns the status and body.
  static func post(_ url: String, _ body: Data) throws -> (Int, Data) {
    var request = URLRequest(url: URL(string: url)!)
    request.httpMethod = "POST"
    request.httpBody = body
    request.timeoutInterval = 60
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: (Int, Data)?
    nonisolated(unsafe) var failure: (any Error)?
    URLSession.shared.dataTask(with: request) { data, response, error in
      if let error { failure = error }
      result = ((response as? HTTPURLResponse)?.statusCode ?? 0, data ?? Data())
      done.signal()
    }.resume()
    done.wait()
    if let failure { throw failure }
    return result!
  }
}
