import Foundation
import Larder
import LarderTestSupport
import Testing

/// Catalog migration 4: an object's `contentType` becomes the declared type, as Firebase reports
/// it, and objects gain `contentEncoding`/`contentLanguage`.
@Suite struct MetadataMigrationTests {
  static let text = Data("plain words, nothing more\n".utf8)

  @Test(TestCatalog.sqliteOnly) func aVersion3CatalogTakesTheDeclaredTypesAndKeepsPatchedOnes() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    do {
      let larder = try TestStore.open(at: directory)
      try larder.objects.put(
        bucket: "b", name: "declared", data: Self.text, options: .init(declaredContentType: "image/png"))
      try larder.objects.put(bucket: "b", name: "undeclared", data: Self.text)
      try larder.objects.put(
        bucket: "b", name: "patched", data: Self.text, options: .init(declaredContentType: "text/plain"))
      try larder.objects.update(bucket: "b", name: "patched", patch: ObjectPatch(contentType: "text/csv"))
    }
    // Back to what version 3 stored: the detected type in `objects.content_type` (a PATCHed type
    // stays as set), no encoding or language columns, and no `blobs.md5` (migration 5).
    do {
      let db = try SQLiteDatabase(path: directory.appendingPathComponent("larder.sqlite").path)
      try db.executeScript(
        """
        UPDATE objects SET content_type = (SELECT content_type FROM files WHERE id = objects.file_id)
          WHERE name IN ('declared', 'undeclared');
        ALTER TABLE objects DROP COLUMN content_encoding;
        ALTER TABLE objects DROP COLUMN content_language;
        DROP TABLE event_deliveries;
        DROP TABLE object_events;
        DROP TABLE event_subscriptions;
        DROP TABLE snapshot_pins;
        DROP TABLE service_account_assertions;
        DROP TABLE model_reference_rules;
        DROP TABLE model_links;
        DROP TABLE model_references;
        DROP TABLE derived_files;
        DROP INDEX blobs_without_crc32c;
        ALTER TABLE blobs DROP COLUMN crc32c;
        DROP INDEX blobs_without_md5;
        ALTER TABLE blobs DROP COLUMN md5;
        ALTER TABLE uploads DROP COLUMN shared_state;
        ALTER TABLE uploads DROP COLUMN lease_holder;
        ALTER TABLE uploads DROP COLUMN lease_until;
        ALTER TABLE uploads DROP COLUMN lease_epoch;
        DROP TABLE service_account_keys;
        ALTER TABLE blobs DROP COLUMN fence;
        DROP TABLE blob_deletions;
        DROP TABLE blob_fences;
        PRAGMA user_version = 3;
        """)
      #expect(try db.row("SELECT content_type FROM objects WHERE name = 'declared'")?.string("content_type") == "text/plain")
    }

    let larder = try TestStore.open(at: directory)
    let declared = try larder.objects.get(bucket: "b", name: "declared")
    #expect(declared.contentType == "image/png")
    #expect(declared.detectedContentType == "text/plain")
    #expect(declared.contentEncoding == nil)
    #expect(declared.contentLanguage == nil)
    #expect(declared.metageneration == 1)
    let undeclared = try larder.objects.get(bucket: "b", name: "undeclared")
    #expect(undeclared.contentType == "application/octet-stream")
    #expect(undeclared.detectedContentType == "text/plain")
    let patched = try larder.objects.get(bucket: "b", name: "patched")
    #expect(patched.contentType == "text/csv")
    #expect(patched.metageneration == 2)
    // The new columns work.
    let updated = try larder.objects.update(
      bucket: "b", name: "declared", patch: ObjectPatch(contentEncoding: "gzip", contentLanguage: "en"))
    #expect(updated.contentEncoding == "gzip")
    #expect(updated.firebaseMetadata.contentEncoding == "gzip")
    #expect(updated.firebaseMetadata.contentLanguage == "en")
    #expect(try larder.objects.get(bucket: "b", name: "declared").contentLanguage == "en")
    let version = try larder.catalog.read { try $0.row("PRAGMA user_version")?.int("user_version") }
    #expect(version == Int64(Larder.catalogSchemaVersion))
    // Every later migration ran too: migration 6's columns, dropped above, are back.
    #expect(throws: Never.self) {
      try larder.catalog.read { try $0.rows("SELECT shared_state, lease_holder, lease_until FROM uploads LIMIT 0") }
    }
  }

  @Test func writeOptionsAreValidatedLikeAPatch() throws {
    let larder = try TestStore.temporary()
    for (options, field) in [
      (ObjectWriteOptions(cacheControl: "a\r\nb"), "cacheControl"),
      (ObjectWriteOptions(contentDisposition: "inline\n"), "contentDisposition"),
      (ObjectWriteOptions(contentEncoding: "gz\u{0}"), "contentEncoding"),
      (ObjectWriteOptions(contentLanguage: String(repeating: "e", count: 1025)), "contentLanguage"),
    ] {
      #expect(throws: LarderError.invalidArgument("\(field) must be printable and at most 1024 bytes")) {
        try larder.objects.put(bucket: "b", name: "x", data: Self.text, options: options)
      }
    }
    #expect(try larder.objects.find(bucket: "b", name: "x") == nil)
    let stored = try larder.objects.put(
      bucket: "b", name: "x", data: Self.text,
      options: .init(cacheControl: "no-cache", contentEncoding: "identity", contentLanguage: "fr"))
    #expect(stored.contentType == "application/octet-stream")
    #expect(stored.contentEncoding == "identity")
    #expect(stored.contentLanguage == "fr")
    // `contentType: nil` in a patch leaves it; `.some(nil)` resets it.
    let typed = try larder.objects.update(bucket: "b", name: "x", patch: ObjectPatch(contentType: "text/plain"))
    #expect(typed.contentType == "text/plain")
    let kept = try larder.objects.update(bucket: "b", name: "x", patch: ObjectPatch(cacheControl: .some(nil)))
    #expect(kept.contentType == "text/plain")
    #expect(kept.cacheControl == nil)
    let reset = try larder.objects.update(bucket: "b", name: "x", patch: ObjectPatch(contentType: .some(nil)))
    #expect(reset.contentType == "application/octet-stream")
  }
}
