import Foundation
import LarderTestSupport
import LarderCrypto
import Synchronization
import Testing

@testable import Larder

/// Uploads that dedupe against blobs the collector is removing, for 20 seconds.
///
/// Uploaders work through one `Larder`; the collector runs with grace 0 in a loop through a
/// second `Larder` on the same directory, which has its own SQLite connections exactly as a
/// separate `larder gc` process would. Content comes from a few shared values, so uploads keep
/// deduping onto blobs whose last reference was just deleted; every fifth upload is unique and
/// deleted at once, so the collector certainly has blobs to remove.
@Suite struct GCSoakTests {
  @Test func dedupeAgainstCollectionLosesNothing() throws {
    let dir = ScratchDirectory("soak")
    let uploads = try TestStore.open(at: dir.url)
    let collectorSide = try TestStore.open(at: dir.url)
    let shared = Fixture.contents(4, tag: "shared")
    let tally = Tally()
    let running = Mutex(true)
    let deadline = Date().addingTimeInterval(20)
    let workers = 4

    Fixture.onThreads(workers + 1) { role in
      if role == workers {
        repeat {
          do {
            let report = try GarbageCollector(larder: collectorSide).collect(
              options: .init(grace: .zero, batchSize: 8))
            tally.add("gc runs")
            tally.add("blobs collected", report.blobsRemoved)
            tally.add("files released", report.filesReleased)
          } catch { tally.problem("gc: \(error)") }
        } while running.withLock { $0 }
        return
      }
      var live: [(name: String, sha256: String)] = []
      var n = 0
      func check(_ entry: (name: String, sha256: String)) {
        do {
          let object = try uploads.objects.get(bucket: "soak", name: entry.name)
          let bytes = try uploads.files.data(of: object.file)
          if Fixture.sha256Hex(bytes) == entry.sha256 {
            tally.add("checked")
          } else {
            tally.add("lost")
            tally.problem("\(entry.name): wrong bytes")
          }
        } catch {
          tally.add("lost")
          tally.problem("\(entry.name): \(error)")
        }
      }
      while Date() < deadline {
        n += 1
        let unique = n % 5 == 0
        let data = unique ? Data("unique \(role) \(n) \(UUID())".utf8) : shared[(n + role) % shared.count]
        let name = "w\(role)/\(n)"
        do {
          let object = try uploads.objects.put(bucket: "soak", name: name, data: data)
          tally.add("acknowledged")
          if object.file.sha256 != Fixture.sha256Hex(data) {
            tally.problem("\(name): acknowledged wrong digest")
          }
          live.append((name, Fixture.sha256Hex(data)))
        } catch {
          tally.problem("put \(name): \(error)")
          continue
        }
        // Keep one object per worker; check each before deleting it, so shared
        // blobs keep losing their last reference while others upload the same bytes.
        while live.count > (unique ? 0 : 1) {
          let entry = live.removeFirst()
          check(entry)
          do {
            try uploads.objects.delete(bucket: "soak", name: entry.name)
            tally.add("deleted")
          } catch { tally.problem("delete \(entry.name): \(error)") }
        }
      }
      for entry in live {
        check(entry)
        tally.add("kept")
      }
      tally.add("workers done")
      if tally["workers done"] == workers { running.withLock { $0 = false } }
    }

    let final = try GarbageCollector(larder: collectorSide).collect(options: .init(grace: .zero))
    tally.add("blobs collected", final.blobsRemoved)
    // Every object still named downloads with its digest after the last collection.
    let remaining = try uploads.catalog.read { db in
      try db.rows("SELECT o.name, f.blob_sha256 FROM objects o JOIN files f ON f.id = o.file_id")
    }
    for row in remaining {
      let object = try uploads.objects.get(bucket: "soak", name: row.string("name") ?? "")
      let bytes = try uploads.files.data(of: object.file)
      if Fixture.sha256Hex(bytes) != Hex.encode(row.bytes("blob_sha256") ?? []) { tally.add("lost") }
    }
    let verify = try Verifier(larder: uploads).verify()
    print(
      "gc soak: uploads acknowledged \(tally["acknowledged"]), deleted \(tally["deleted"]), kept \(tally["kept"]), "
        + "checked \(tally["checked"]), gc runs \(tally["gc runs"]), files released \(tally["files released"]), "
        + "blobs collected \(tally["blobs collected"]), lost \(tally["lost"])")
    #expect(tally.allProblems == [])
    #expect(tally["lost"] == 0)
    #expect(tally["acknowledged"] > 0)
    #expect(tally["acknowledged"] == tally["deleted"] + tally["kept"])
    #expect(tally["checked"] == tally["acknowledged"])
    #expect(tally["blobs collected"] > 0)
    #expect(remaining.count == tally["kept"])
    #expect(verify.findings == [])
    #expect(verify.isClean)
    // Only what the kept objects use is left.
    #expect(try Fixture.count(uploads, "files") == tally["kept"])
    #expect(
      try Fixture.count(uploads, "blobs") == Set(remaining.compactMap { $0.bytes("blob_sha256") }).count)
  }
}
