import Dispatch
import Foundation
import Larder
import LarderTestSupport
import Synchronization
import Testing

/// Several `larder put` processes and this process write one data directory at once.
@Suite struct ConcurrencyTests {
  @Test func parallelCLIPutsBesideLibraryPuts() throws {
    let box = try Sandbox()
    let binary = try CLI.binary()
    // Eight shared contents (each stored by CLI and library names alike) and eight unique ones.
    let shared = (0..<8).map { pseudoRandomBytes(5_000 + $0 * 300, seed: 500 + UInt64($0)) }
    var expected: [String: [UInt8]] = [:]
    var pids: [(pid_t, String)] = []
    // The catalog exists before the race starts (as with a running server).
    let larder = try TestStore.open(at: box.data)
    for i in 0..<16 {
      let bytes = i < 8 ? shared[i] : shared[i % 8]  // the second eight duplicate the first
      let name = "cli-\(i)"
      expected[name] = bytes
      let src = try box.write("src-\(i)", bytes)
      let pid = try CLI.spawn(
        binary, ["put", "--data", box.dataPath, src, "bkt/\(name)"], stdoutPath: box.path("out-\(i)"),
        stderrPath: box.path("err-\(i)"))
      pids.append((pid, name))
    }
    // Meanwhile, 16 puts through the library on four threads: 8 duplicates of the CLI's, 8 new.
    let libraryContents = (0..<16).map { i in
      i < 8 ? shared[i] : pseudoRandomBytes(7_000 + i, seed: 600 + UInt64(i))
    }
    for i in 0..<16 { expected["lib-\(i)"] = libraryContents[i] }
    let failures = Mutex<[String]>([])
    DispatchQueue.concurrentPerform(iterations: 4) { worker in
      for i in stride(from: worker, to: 16, by: 4) {
        do {
          _ = try larder.objects.put(bucket: "bkt", name: "lib-\(i)", data: Data(libraryContents[i]))
        } catch {
          failures.withLock { $0.append("lib-\(i): \(error)") }
        }
      }
    }
    #expect(failures.withLock { $0 } == [])
    for (pid, name) in pids {
      let status = try CLI.wait(pid, timeout: 120)
      let err = (try? String(contentsOfFile: box.path("err-\(name.dropFirst(4))"), encoding: .utf8)) ?? ""
      #expect(status == 0, "\(name): status \(status) \(err)")
    }

    // All 32 readable with the right bytes, through the library and through the CLI.
    #expect(try Sandbox.count(larder, "objects") == 32)
    for (name, bytes) in expected {
      let object = try larder.objects.get(bucket: "bkt", name: name)
      #expect(try larder.files.data(of: object.file) == Data(bytes), "\(name)")
    }
    for name in ["cli-0", "cli-15", "lib-3", "lib-12"] {
      #expect(try box.larder("get", "bkt/\(name)").stdoutBytes == expected[name], "\(name)")
    }
    // Catalog consistent: foreign keys hold, one blob per distinct content, rows == files on disk.
    #expect(try larder.catalog.read { db in try TestCatalog.foreignKeyViolations(db) } == 0)
    #expect(try Sandbox.count(larder, "blobs") == 16)
    #expect(try Sandbox.count(larder, "files") == 32)
    #expect(try Sandbox.blobRows(larder) == box.blobFileNames)
    #expect(box.entries("tmp") == [])
    let verify = try box.larder("verify")
    #expect(verify.status == 0, "\(verify)")
  }

  /// A store that keeps serving one object from its cache (as `serve` does) sees another
  /// process's `put` and `rm` of that name at its next lookup: the change is read from SQLite's
  /// shared WAL-index header, which the other process's commit rewrote.
  @Test(TestCatalog.sqliteOnly) func aCachingStoreSeesAnotherProcesssWritesAtItsNextLookup() throws {
    let box = try Sandbox()
    let larder = try TestStore.open(at: box.data)
    let first = try larder.objects.put(bucket: "bkt", name: "hot.txt", data: Data("first".utf8))
    for _ in 0..<20 { #expect(try larder.objects.find(bucket: "bkt", name: "hot.txt") == first) }

    let put = try box.larder("put", try box.write("second", Array("second!".utf8)), "bkt/hot.txt")
    #expect(put.status == 0, "\(put)")
    let replaced = try #require(try larder.objects.find(bucket: "bkt", name: "hot.txt"))
    #expect(replaced.generation > first.generation)
    #expect(try larder.files.data(of: replaced.file) == Data("second!".utf8))

    let rm = try box.larder("rm", "bkt/hot.txt")
    #expect(rm.status == 0, "\(rm)")
    #expect(try larder.objects.find(bucket: "bkt", name: "hot.txt") == nil)
  }
}
