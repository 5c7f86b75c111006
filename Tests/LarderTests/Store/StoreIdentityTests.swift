import Foundation
import Larder
import LarderTestSupport
import Testing

/// A catalog and a blob store of different stores are refused at open, naming both, instead of
/// serving every object as an error (issue 23: nodes on one PostgreSQL catalog with filesystem
/// blobs in different data directories answered 500 for every object another node wrote).
@Suite struct StoreIdentityTests {
  private func identityFile(_ directory: URL) -> URL { directory.appendingPathComponent("store-id") }

  private func catalogIdentity(_ larder: Larder) throws -> String? {
    try larder.catalog.read { db in
      try db.row("SELECT value FROM settings WHERE key = 'store_id'")?.bytes("value")
    }.map { String(decoding: $0, as: UTF8.self) }
  }

  /// Proves: the identity check at open. Two data directories on one shared catalog (the
  /// PostgreSQL pass: filesystem blobs; the S3 pass: a prefix per directory): the second is
  /// refused, and nothing it could have served wrongly exists.
  @Test(.enabled(if: TestCatalog.isPostgres, "needs a shared catalog (make test's PostgreSQL pass)"))
  func aSecondBlobStoreOnOneCatalogIsRefusedNamingBoth() throws {
    let scratch = try StoreScratch()
    let first = try TestStore.open(at: scratch.url.appendingPathComponent("a"))
    func expectRefused(_ directory: String) {
      do {
        _ = try TestStore.open(at: scratch.url.appendingPathComponent(directory), configuration: .init(catalog: first.catalogLocation))
        Issue.record("a data directory whose blobs are another store's opened")
      } catch let error as LarderError {
        #expect(error.code == "invalid-argument")
        #expect(error.description.contains("is not the catalog's"), "\(error)")
        #expect(error.description.contains(first.catalogLocation.description), "\(error)")
      } catch {
        Issue.record("unexpected \(error)")
      }
    }
    // Refused while the store is still empty too: the two would part ways at the first upload.
    expectRefused("b")
    let put = try first.objects.put(bucket: "app", name: "kept.txt", data: Data("on the first node".utf8))
    expectRefused("c")
    #expect(try first.files.data(of: put.file) == Data("on the first node".utf8))
  }

  /// Proves: the identity comparison itself. A catalog file carried into another store's data
  /// directory (whose blobs are that store's) is refused; its own directory still opens.
  @Test(TestCatalog.sqliteOnly) func aCatalogInAnotherStoresDirectoryIsRefused() throws {
    let scratch = try StoreScratch()
    let a = scratch.url.appendingPathComponent("a")
    let b = scratch.url.appendingPathComponent("b")
    do {
      let storeA = try TestStore.open(at: a)
      _ = try storeA.objects.put(bucket: "app", name: "a.txt", data: Data("a".utf8))
      try storeA.checkpoint()
      let storeB = try TestStore.open(at: b)
      _ = try storeB.objects.put(bucket: "app", name: "b.txt", data: Data("b".utf8))
      try storeB.checkpoint()
      #expect(try catalogIdentity(storeA) != catalogIdentity(storeB))
    }
    try FileManager.default.removeItem(at: b.appendingPathComponent("larder.sqlite"))
    try FileManager.default.copyItem(at: a.appendingPathComponent("larder.sqlite"), to: b.appendingPathComponent("larder.sqlite"))
    #expect(throws: LarderError.self) { try TestStore.open(at: b) }
    let again = try TestStore.open(at: a)
    #expect(try again.objects.get(bucket: "app", name: "a.txt").file.size == 1)
  }

  /// Proves: a new catalog is refused on a blob store that records another store's identity,
  /// while that store holds no content yet too (issue 31), and records nothing there. In the S3
  /// pass the second store's catalog is pointed at the first's bucket and prefix; on the
  /// filesystem the first's `store-id` is carried into a new data directory. The first store
  /// keeps working, and the second is refused again once the first holds content.
  @Test func aNewCatalogOnABlobStoreHoldingAnotherStoresIdentityIsRefused() throws {
    let scratch = try StoreScratch()
    let a = scratch.url.appendingPathComponent("a")
    let b = scratch.url.appendingPathComponent("b")
    let first = try TestStore.open(at: a)
    let identity = try #require(try catalogIdentity(first))
    let recorder: any StoreIdentityRecording = first.content
    var configuration = Larder.Configuration()
    if TestBlobs.isS3 {
      configuration.blobs = TestStore.blobs(for: a)
    } else {
      try FileManager.default.createDirectory(at: b, withIntermediateDirectories: true)
      try FileManager.default.copyItem(at: identityFile(a), to: identityFile(b))
    }
    func expectRefused() {
      do {
        _ = try TestStore.open(at: b, configuration: configuration)
        Issue.record("a second store opened on a blob store holding store \(identity)")
      } catch let error as LarderError {
        #expect(error.code == "invalid-argument")
        #expect(
          error.description.contains("already holds store \(identity)'s identity and this catalog is new"),
          "\(error)")
      } catch {
        Issue.record("unexpected \(error)")
      }
    }
    expectRefused()
    #expect(try recorder.recordedStoreIdentities() == [identity], "the refused catalog recorded nothing")
    let put = try first.objects.put(bucket: "app", name: "kept.txt", data: Data("first store".utf8))
    expectRefused()
    #expect(try first.files.data(of: put.file) == Data("first store".utf8))
    #expect(try catalogIdentity(TestStore.open(at: a)) == identity)
  }

  /// A store in `directory` as a Larder before identities left it: an object, no identity in
  /// the catalog and none in the data directory.
  private func makeStoreWithoutIdentity(at directory: URL) throws {
    let old = try TestStore.open(at: directory)
    _ = try old.objects.put(bucket: "app", name: "old.txt", data: Data("from before".utf8))
    try old.catalog.write { db in try db.execute("DELETE FROM settings WHERE key = 'store_id'") }
    try FileManager.default.removeItem(at: identityFile(directory))
  }

  /// Proves: a store made before identities (rows, no identity on either side) gets one at open,
  /// the same in the catalog and the blob store, and opens again after that.
  @Test(TestBlobs.filesystemOnly) func aStoreWithoutAnIdentityGetsOneOnBothSides() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    try makeStoreWithoutIdentity(at: directory)
    let upgraded = try TestStore.open(at: directory)
    let recorded = try String(contentsOf: identityFile(directory), encoding: .utf8)
      .trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(recorded.count == 32)
    #expect(try catalogIdentity(upgraded) == recorded)
    #expect(try upgraded.objects.get(bucket: "app", name: "old.txt").file.size == 11)
  }

  /// Proves: the content check for stores without an identity. A catalog with rows whose blobs
  /// are nowhere in the blob store (a data directory that is not the one holding them) is
  /// refused rather than given the directory's identity.
  @Test(TestBlobs.filesystemOnly) func aCatalogWhoseContentIsNotInTheBlobStoreIsRefused() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    try makeStoreWithoutIdentity(at: directory)
    try FileManager.default.removeItem(at: directory.appendingPathComponent("blobs"))
    do {
      _ = try TestStore.open(at: directory)
      Issue.record("a catalog whose content is not in its blob store opened")
    } catch let error as LarderError {
      #expect(error.description.contains("none of the catalog's first blobs is in the blob store"), "\(error)")
    }
    #expect(!FileManager.default.fileExists(atPath: identityFile(directory).path), "no identity was recorded")
  }
}

/// A catalog or blob store whose backend the store was not given is refused at open, naming the
/// module that has it, before anything is created or connected.
@Suite struct MissingBackendTests {
  @Test func aPostgresCatalogWithoutItsBackendIsRefusedNamingTheModule() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let location = try CatalogLocation(parsing: "postgres://nobody@127.0.0.1:9/none")
    do {
      _ = try Larder(at: directory, configuration: .init(catalog: location, backends: .embedded))
      Issue.record("a PostgreSQL catalog opened without LarderPostgres")
    } catch let error as LarderError {
      #expect(error.code == "invalid-argument")
      #expect(error.description.contains("LarderPostgres"), "\(error)")
    }
    #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("larder.sqlite").path))
  }

  @Test func s3BlobsWithoutTheirBackendAreRefusedNamingTheModule() throws {
    let scratch = try StoreScratch()
    let blobs = try BlobLocation(parsing: "s3://bucket?endpoint=http://127.0.0.1:9&path-style=1")
    do {
      _ = try Larder(at: scratch.url.appendingPathComponent("data"), configuration: .init(blobs: blobs))
      Issue.record("S3 blobs opened without LarderS3Store")
    } catch let error as LarderError {
      #expect(error.code == "invalid-argument")
      #expect(error.description.contains("LarderS3Store"), "\(error)")
    }
  }
}
