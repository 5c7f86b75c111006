import Foundation
import Larder
import LarderHTTP
import LarderServer
import LarderTestSupport
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A real full disk: the data directory on a 4 MiB tmpfs (mounting needs root, as in CI).
// The full disk is the SQLite catalog's (its file and log share the tmpfs with the blobs).
@Suite(.serialized, .enabled(if: getuid() == 0, "mounting a tmpfs needs root"), TestCatalog.sqliteOnly)
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
      let larder = try TestStore.open(at: dir.appendingPathComponent("data"))
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
      let service = try LarderService(options: options.onTestStores())
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
      let larder = try TestStore.open(at: data)
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
      // Given back, and marked spent by the empty file.
      #expect(Self.reserveBytes(data) == 0)
      #expect(try larder.objects.list(bucket: "b").items.isEmpty)
      // So does the collector, which frees the bytes.
      let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
      #expect(report.filesReleased == 20)
      #expect(report.blobsRemoved == 20)
      #expect(report.blobBytesFreed == 20 * (64 << 10))
      var statistics = try larder.statistics()
      #expect(statistics.lastCollection?.blobsRemoved == 20)  // the collection is noted as the last gc
      statistics.lastCollection = nil
      #expect(statistics == StoreStatistics())
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
      let service = try LarderService(options: options.onTestStores())
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
      // They committed on the reserve's space (the empty file marks it spent).
      #expect(Self.reserveBytes(service.larder.directory) == 0)
    }
  }

  @Test func withoutAReserveADeleteOnAFullDiskFailsAndChangesNothing() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      let larder = try TestStore.open(at: data, configuration: .init(reserveBytes: 0))
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
      let larder = try TestStore.open(at: data)
      #expect(Self.reserveBytes(data) == nil)
      _ = try larder.objects.put(bucket: "b", name: "x", data: Data("x".utf8))
      #expect(Self.reserveBytes(data) == nil)
    }
  }

  // MARK: - a spent reserve stays with the deletes

  static let reserve = 4 << 20

  static func availableBytes(_ url: URL) -> Int64 {
    var st = statvfs()
    guard statvfs(url.path, &st) == 0 else { return -1 }
    return Int64(st.f_bavail) * Int64(st.f_frsize)
  }

  static func entries(_ url: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
  }

  /// A 507 with Larder's JSON error, as every refused upload on a full disk answers.
  static func expectDiskFull(_ r: WireResponse, _ what: String) {
    #expect(r.status == 507, "\(what): \(r.status) \(r.text)")
    let error = r.json?["error"] as? [String: Any]
    #expect(error?["code"] as? Int == 507, "\(what): \(r.text)")
    #expect(error?["status"] as? String == "RESOURCE_EXHAUSTED", "\(what): \(r.text)")
  }

  /// The stress harness's `reserve-spent-by-uploads`: once the first delete on the full disk has
  /// released the reserve, uploads on every protocol are refused instead of taking that space, so
  /// every later delete (objects, tus terminations, resumable cancels) still commits; `gc` then
  /// frees the bytes, the reserve is made again, and uploads succeed.
  @Test func uploadsCannotTakeTheSpaceTheReserveGaveBackToDeletes() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      // `s.directory` is the harness's own unused directory: the store is `data`, on the tmpfs.
      let s = try LiveService { $0.dataDirectory = data }
      defer { s.close() }
      let larder = s.service.larder
      #expect(Self.reserveBytes(data) == Int64(Self.reserve))
      let objects = (0..<20).map { testBytes(1 << 20, seed: UInt64(100 + $0)) }
      for (i, bytes) in objects.enumerated() { try s.upload("f\(i)", bytes) }
      // A tus upload and a Firebase resumable session, each with 64 KiB received.
      let tus = try s.create(length: 256 << 10, name: "tus.bin")
      #expect(try s.patch(tus, offset: 0, testBytes(64 << 10, seed: 1)).status == 204)
      let session = try s.startSession("resumable.bin", length: 256 << 10)
      #expect(try s.send(FirebaseWire.command(session, "upload", offset: 0, body: testBytes(64 << 10, seed: 2))).status == 200)
      try larder.catalog.checkpoint()
      let filler = try Self.fillDisk(dir)
      defer { try? FileManager.default.removeItem(at: filler) }
      #expect(Self.availableBytes(dir) == 0)

      // The first delete releases the reserve and commits on its space.
      #expect(try s.request("DELETE", "/v0/b/app/o/f0").status == 204)
      #expect(Self.reserveBytes(data) == 0)

      // Content is refused on every protocol; metadata-only writes (creations) still commit.
      let chunk = testBytes(64 << 10, seed: 3)
      Self.expectDiskFull(try s.send(.init("POST", "/v0/b/app/o?name=late-simple", body: chunk)), "simple upload")
      Self.expectDiskFull(try s.send(FirebaseWire.multipart("late-multipart", content: chunk)), "multipart upload")
      Self.expectDiskFull(try s.patch(tus, offset: 64 << 10, chunk), "tus PATCH")
      #expect(try s.head(tus)["Upload-Offset"] == String(64 << 10))
      let tusLate = try s.create(length: 64 << 10, name: "late-tus")
      Self.expectDiskFull(try s.patch(tusLate, offset: 0, chunk), "tus PATCH of a new upload")
      #expect(try s.head(tusLate)["Upload-Offset"] == "0")
      Self.expectDiskFull(
        try s.send(FirebaseWire.command(session, "upload", offset: 64 << 10, body: chunk)), "resumable upload")
      let query = try s.send(FirebaseWire.command(session, "query", offset: nil))
      #expect(query["X-Goog-Upload-Size-Received"] == String(64 << 10))
      let sessionLate = try s.startSession("late-resumable", length: 64 << 10)
      Self.expectDiskFull(
        try s.send(FirebaseWire.command(sessionLate, "upload, finalize", offset: 0, body: chunk)), "resumable upload")
      // Nothing of them stored: no temp file, no object, no bytes past what was committed.
      #expect(Self.entries(larder.blobs.tmpDirectory) == [])
      for name in ["late-simple", "late-multipart", "late-tus", "late-resumable"] {
        #expect(try s.snapshot(name) == nil, "\(name)")
      }
      let uploadSizes = try Self.entries(larder.blobs.uploadsDirectory).map {
        try FileManager.default.attributesOfItem(atPath: larder.blobs.uploadsDirectory.appendingPathComponent($0).path)[
          .size] as? Int
      }
      #expect(uploadSizes.sorted { ($0 ?? -1) < ($1 ?? -1) } == [0, 0, 64 << 10, 64 << 10])
      #expect(try s.rowCounts() == ["objects": 19, "files": 20, "blobs": 20])
      #expect(Self.reserveBytes(data) == 0)

      // Every other delete commits: objects, tus terminations, resumable cancels.
      for i in 1..<20 {
        let r = try s.request("DELETE", "/v0/b/app/o/f\(i)")
        #expect(r.status == 204, "DELETE f\(i): \(r.status) \(r.text)")
      }
      for path in [tus, tusLate] {
        let r = try s.request("DELETE", path, headers: [LiveService.tus])
        #expect(r.status == 204, "tus termination: \(r.status) \(r.text)")
      }
      for url in [session, sessionLate] {
        let r = try s.send(FirebaseWire.command(url, "cancel", offset: nil))
        #expect(r.status == 200, "cancel: \(r.status) \(r.text)")
        #expect(r["X-Goog-Upload-Status"] == "cancelled")
      }
      #expect(try s.rowCounts() == ["objects": 0, "files": 20, "blobs": 20])
      #expect(try s.uploadRows() == 0)
      #expect(Self.entries(larder.blobs.uploadsDirectory) == [])

      // The collector frees the bytes (after its last commit: the reserve is not made yet).
      let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
      #expect(report.filesReleased == 20)
      #expect(report.blobsRemoved == 20)
      #expect(report.blobBytesFreed == 20 << 20)

      // Uploads succeed again, on every protocol, with their exact bytes; the first one admitted
      // made the reserve again.
      let after = testBytes(64 << 10, seed: 4)
      try s.upload("after-simple", after)
      #expect(try s.send(FirebaseWire.multipart("after-multipart", content: after)).status == 200)
      let tusAfter = try s.create(length: after.count, name: "after-tus")
      #expect(try s.patch(tusAfter, offset: 0, after).status == 204)
      let sessionAfter = try s.startSession("after-resumable", length: after.count)
      #expect(try s.send(FirebaseWire.command(sessionAfter, "upload, finalize", offset: 0, body: after)).status == 200)
      for name in ["after-simple", "after-multipart", "after-tus", "after-resumable"] {
        #expect(try s.snapshot(name)?.bytes == after, "\(name)")
      }
      #expect(Self.reserveBytes(data) == Int64(Self.reserve))
      #expect(try Verifier(larder: larder).verify().isClean)
    }
  }

  /// The spent state is read from the disk: a reserve released by another process on the same
  /// directory (the CLI beside a server) refuses content in this one too.
  @Test func aReserveSpentByAnotherProcessRefusesContentHere() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      let server = try TestStore.open(at: data)
      let cli = try TestStore.open(at: data)
      for i in 0..<3 { _ = try server.objects.put(bucket: "b", name: "o\(i)", data: Data(testBytes(64 << 10, seed: UInt64(i)))) }
      try server.catalog.checkpoint()
      let filler = try Self.fillDisk(dir)

      try cli.objects.delete(bucket: "b", name: "o0")
      #expect(Self.reserveBytes(data) == 0)
      // Refused before any temp file is made, and on a write already under way.
      #expect(throws: LarderError.diskFull) { _ = try server.files.makeWriter() }
      #expect(throws: LarderError.diskFull) {
        _ = try server.objects.put(bucket: "b", name: "late", data: Data(testBytes(4096, seed: 9)))
      }
      #expect(Self.entries(server.blobs.tmpDirectory) == [])
      try server.objects.delete(bucket: "b", name: "o1")
      #expect(try server.objects.list(bucket: "b").items.map(\.name) == ["o2"])

      // Room again: the next write is admitted once the reserve is made again.
      try FileManager.default.removeItem(at: filler)
      let after = try server.objects.put(bucket: "b", name: "after", data: Data("fits".utf8))
      #expect(try server.files.data(of: after.file) == Data("fits".utf8))
      #expect(Self.reserveBytes(data) == Int64(Self.reserve))
    }
  }

  /// While the reserve is spent and cannot be made again yet, content may use the disk only down
  /// to twice the reserve's size free; with room for the reserve, it is made before content goes on.
  @Test func aSpentReserveKeepsContentTwiceItsSizeAwayFromAFullDisk() throws {
    try withTinyFilesystem(bytes: 40 << 20) { dir in
      let data = dir.appendingPathComponent("data")
      let larder = try TestStore.open(at: data)
      _ = try larder.objects.put(bucket: "b", name: "kept", data: Data("kept".utf8))
      try larder.catalog.checkpoint()
      let filler = try Self.fillDisk(dir)
      try larder.objects.delete(bucket: "b", name: "kept")
      #expect(Self.reserveBytes(data) == 0)

      // 10 MiB free: too little to make the reserve (16), enough for 1 MiB above the floor (8).
      let free = Self.availableBytes(dir)
      let size = try #require(try FileManager.default.attributesOfItem(atPath: filler.path)[.size] as? Int64)
      #expect(truncate(filler.path, off_t(size - (10 << 20) + free)) == 0)
      #expect(Self.availableBytes(dir) == 10 << 20)
      let one = try larder.objects.put(bucket: "b", name: "one", data: Data(testBytes(1 << 20, seed: 1)))
      #expect(try larder.files.data(of: one.file) == Data(testBytes(1 << 20, seed: 1)))
      #expect(Self.reserveBytes(data) == 0)
      #expect(throws: LarderError.diskFull) {
        _ = try larder.objects.put(bucket: "b", name: "two", data: Data(testBytes(2 << 20, seed: 2)))
      }
      #expect(Self.entries(larder.blobs.tmpDirectory) == [])
      #expect(Self.availableBytes(dir) >= 2 * Int64(Self.reserve))

      // Room for the reserve: admitting the next write makes it first.
      try FileManager.default.removeItem(at: filler)
      let writer = try larder.files.makeWriter()
      #expect(Self.reserveBytes(data) == Int64(Self.reserve))
      writer.cancel()
      let two = try larder.objects.put(bucket: "b", name: "two", data: Data(testBytes(2 << 20, seed: 2)))
      #expect(try larder.files.data(of: two.file) == Data(testBytes(2 << 20, seed: 2)))
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
