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

  /// Writes a file of zeros in `directory` until the filesystem refuses another byte.
  static func fillDisk(_ directory: URL) throws -> URL {
    let filler = directory.appendingPathComponent("filler")
    let fd = open(filler.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    try #require(fd >= 0)
    defer { close(fd) }
    let block = [UInt8](repeating: 0, count: 4096)
    while true {
      let n = block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
      if n < 0 {
        try #require(errno == ENOSPC, "filling: \(String(cString: strerror(errno)))")
        break
      }
      if n < block.count { continue }
    }
    // Single bytes until the last one is refused too.
    var byte: UInt8 = 0
    while write(fd, &byte, 1) == 1 {}
    return filler
  }

  static func reserveBytes(_ data: URL) -> Int64? {
    var st = stat()
    guard lstat(data.appendingPathComponent("reserve").path, &st) == 0 else { return nil }
    return Int64(st.st_blocks) * 512
  }

  @Test func deletesAndTheCollectorCommitOnAFullDiskThanksToTheReserve() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      let larder = try Larder(at: data)
      // Room enough at open: the reserve is made, whole.
      #expect(Self.reserveBytes(data) == 4 << 20)
      for i in 0..<20 {
        _ = try larder.objects.put(bucket: "b", name: "o\(i)", data: Data(repeating: UInt8(i), count: 64 << 10))
      }
      // An empty write-ahead log: the next commit must allocate new pages, on a disk with none.
      try larder.catalog.checkpoint()
      let filler = try Self.fillDisk(dir)

      // Content does not get the reserve: the upload fails, the reserve stays.
      #expect(throws: LarderError.diskFull) {
        _ = try larder.objects.put(bucket: "b", name: "more", data: Data(repeating: 0xee, count: 64 << 10))
      }
      #expect(Self.reserveBytes(data) == 4 << 20)

      // Every delete commits: the first one found the disk full and released the reserve.
      for i in 0..<20 { try larder.objects.delete(bucket: "b", name: "o\(i)") }
      #expect(Self.reserveBytes(data) == nil)
      #expect(try larder.objects.list(bucket: "b").items.isEmpty)
      // So does the collector, which frees the bytes.
      let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
      #expect(report.filesReleased == 20)
      #expect(report.blobsRemoved == 20)
      #expect(report.blobBytesFreed == 20 * (64 << 10))
      #expect(try larder.statistics() == StoreStatistics())
      #expect(try Verifier(larder: larder).verify().isClean)

      // Space is back: the next write that commits makes the reserve again.
      try FileManager.default.removeItem(at: filler)
      let after = try larder.objects.put(bucket: "b", name: "after", data: Data("fits".utf8))
      #expect(try larder.files.data(of: after.file) == Data("fits".utf8))
      #expect(Self.reserveBytes(data) == 4 << 20)
    }
  }

  @Test func httpDeletesOnAFullDiskAnswer204() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      var options = LarderService.Options(dataDirectory: dir.appendingPathComponent("data"), policy: .allowAll)
      options.http.accessLog = .disabled
      let service = try LarderService(options: options)
      try service.start()
      defer { service.stop() }
      let base = "http://127.0.0.1:\(service.port)/v0/b/app/o"
      for i in 0..<5 {
        let (status, _) = try Self.send("POST", "\(base)?name=f\(i)", Data(repeating: UInt8(i), count: 32 << 10))
        #expect(status == 200)
      }
      #expect(Self.reserveBytes(service.larder.directory) == 4 << 20)
      try service.larder.catalog.checkpoint()
      let filler = try Self.fillDisk(dir)
      defer { try? FileManager.default.removeItem(at: filler) }
      let (refused, _) = try Self.send("POST", "\(base)?name=more", Data(repeating: 0xee, count: 32 << 10))
      #expect(refused == 507)
      for i in 0..<5 {
        let (status, body) = try Self.send("DELETE", "\(base)/f\(i)", Data())
        #expect(status == 204, "\(String(decoding: body, as: UTF8.self))")
      }
      let (gone, _) = try Self.send("GET", "\(base)/f0", Data())
      #expect(gone == 404)
      #expect(try service.larder.statistics().objectCount == 0)
      // They committed on the reserve's space.
      #expect(Self.reserveBytes(service.larder.directory) == nil)
    }
  }

  @Test func withoutAReserveADeleteOnAFullDiskFailsAndChangesNothing() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      let larder = try Larder(at: data, configuration: .init(reserveBytes: 0))
      #expect(Self.reserveBytes(data) == nil)
      _ = try larder.objects.put(bucket: "b", name: "kept", data: Data("kept".utf8))
      try larder.catalog.checkpoint()
      let filler = try Self.fillDisk(dir)
      // What the reserve prevents: SQLite cannot grow its log to commit the delete.
      #expect {
        try larder.objects.delete(bucket: "b", name: "kept")
      } throws: { error in
        (error as? DatabaseError)?.isDiskFull == true || (error as? LarderError) == .diskFull
      }
      try FileManager.default.removeItem(at: filler)
      #expect(try larder.files.data(of: larder.objects.get(bucket: "b", name: "kept").file) == Data("kept".utf8))
    }
  }

  @Test func noReserveIsMadeOnADiskThatHasLittleRoom() throws {
    // 4 MiB of reserve needs four times as much free: a 12 MiB filesystem has less.
    try withTinyFilesystem(bytes: 12 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      let larder = try Larder(at: data)
      #expect(Self.reserveBytes(data) == nil)
      _ = try larder.objects.put(bucket: "b", name: "x", data: Data("x".utf8))
      #expect(Self.reserveBytes(data) == nil)
    }
  }

  /// A blocking POST through URLSession; returns the status and body.
  static func post(_ url: String, _ body: Data) throws -> (Int, Data) { try send("POST", url, body) }

  /// A blocking request through URLSession; returns the status and body.
  static func send(_ method: String, _ url: String, _ body: Data) throws -> (Int, Data) {
    var request = URLRequest(url: URL(string: url)!)
    request.httpMethod = method
    if !body.isEmpty { request.httpBody = body }
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
