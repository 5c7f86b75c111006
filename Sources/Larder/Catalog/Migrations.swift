/// Numbered schema migrations, run at open in one transaction.
///
/// `PRAGMA user_version` records how many have run. Append new migrations; never edit old ones.
package enum Migrations {
  package static let all: [String] = [
    // 1: the store's tables (ARCHITECTURE.md, "The catalog"). Times are integer milliseconds since
    // 1970.
    """
    CREATE TABLE blobs(
      sha256 BLOB PRIMARY KEY CHECK (length(sha256) = 32),
      size INTEGER NOT NULL CHECK (size >= 0),
      created_at INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE files(
      id TEXT PRIMARY KEY,
      blob_sha256 BLOB NOT NULL REFERENCES blobs(sha256) ON DELETE RESTRICT,
      size INTEGER NOT NULL,
      md5 BLOB NOT NULL,
      filename TEXT,
      content_type TEXT NOT NULL,
      declared_content_type TEXT,
      quarantined INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX files_by_blob ON files(blob_sha256);
    CREATE INDEX files_by_created ON files(created_at);

    CREATE TABLE objects(
      bucket TEXT NOT NULL,
      name TEXT NOT NULL,
      file_id TEXT NOT NULL REFERENCES files(id) ON DELETE RESTRICT,
      generation INTEGER NOT NULL,
      metageneration INTEGER NOT NULL,
      content_type TEXT NOT NULL,
      metadata TEXT NOT NULL DEFAULT '{}',
      download_tokens TEXT NOT NULL,
      cache_control TEXT,
      content_disposition TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY(bucket, name)
    ) WITHOUT ROWID;
    CREATE INDEX objects_by_file ON objects(file_id);

    CREATE TABLE records(
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      body TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY(type, id)
    ) WITHOUT ROWID;

    CREATE TABLE attachments(
      record_type TEXT NOT NULL,
      record_id TEXT NOT NULL,
      property TEXT NOT NULL,
      position INTEGER NOT NULL,
      file_id TEXT NOT NULL REFERENCES files(id) ON DELETE RESTRICT,
      PRIMARY KEY(record_type, record_id, property, position),
      FOREIGN KEY(record_type, record_id) REFERENCES records(type, id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX attachments_by_file ON attachments(file_id);

    CREATE TABLE uploads(
      id TEXT PRIMARY KEY,
      bucket TEXT NOT NULL,
      name TEXT,
      owner TEXT,
      length INTEGER,
      "offset" INTEGER NOT NULL DEFAULT 0,
      metadata TEXT NOT NULL DEFAULT '{}',
      concat TEXT,
      expires_at INTEGER NOT NULL,
      created_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX uploads_by_expiry ON uploads(expires_at);
    """,
    // 2: resumable uploads keep a completed row (offset = length, no bytes) until they expire, so
    // a client whose last answer was lost finds the upload finished instead of missing.
    """
    ALTER TABLE uploads ADD COLUMN completed_at INTEGER;
    """,
    // 3: settings of this store; `page_token_key` signs listing page tokens so they are opaque.
    """
    CREATE TABLE settings(key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
    INSERT INTO settings(key, value) VALUES ('page_token_key', randomblob(32));
    """,
    // 4: Firebase's metadata. Objects keep `contentEncoding`/`contentLanguage`, and an object's
    // `content_type` becomes the declared type (or application/octet-stream), as Firebase reports
    // it; the detected type stays in `files.content_type`. Rows whose type is still the detected
    // one take their file's declared type; a type set by a PATCH (different) is kept.
    """
    ALTER TABLE objects ADD COLUMN content_encoding TEXT;
    ALTER TABLE objects ADD COLUMN content_language TEXT;
    UPDATE objects SET content_type = coalesce(
        (SELECT f.declared_content_type FROM files f WHERE f.id = objects.file_id), 'application/octet-stream')
      WHERE content_type = (SELECT f.content_type FROM files f WHERE f.id = objects.file_id);
    """,
    // 5: MD5 leaves the upload's critical path. A blob's MD5 (Firebase's `md5Hash`) lives on its
    // `blobs` row, NULL until known: uploads without a client MD5 commit without one and the
    // background hasher (`MD5Backfill`) fills it in; the partial index is its work list. Existing
    // blobs take the MD5 their files recorded. `files.md5` stays as written at upload (empty when
    // it was not computed); reads take the blob's.
    """
    ALTER TABLE blobs ADD COLUMN md5 BLOB CHECK (md5 IS NULL OR length(md5) = 16);
    UPDATE blobs SET md5 = (
        SELECT f.md5 FROM files f WHERE f.blob_sha256 = blobs.sha256 AND length(f.md5) = 16 LIMIT 1);
    CREATE INDEX blobs_without_md5 ON blobs(sha256) WHERE md5 IS NULL;
    """,
    // 6: resumable uploads any node can continue (ARCHITECTURE.md, "Resumable uploads across
    // nodes"): where their bytes are in the shared store (JSON: multipart upload, parts, pieces,
    // SHA-256 state) and a lease with an end, so a node that died holding one blocks the upload
    // only until then.
    """
    ALTER TABLE uploads ADD COLUMN shared_state TEXT;
    ALTER TABLE uploads ADD COLUMN lease_holder TEXT;
    ALTER TABLE uploads ADD COLUMN lease_until INTEGER;
    """,
    // 7: the lease's fencing epoch (ARCHITECTURE.md, "Resumable uploads across nodes"), moved by
    // every takeover of a lease that was not given back cleanly; an upload's part numbers are
    // spaced by it, so a node that stalled past its lease can never replace a part the next holder recorded.
    """
    ALTER TABLE uploads ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
    """,
    // 8: service accounts' public keys: the key a Google-format key file's
    // `private_key_id` names, so every node verifies `/token` assertions and V4 signed URLs. The
    // private key is only in the file. Revoking deletes the row.
    """
    CREATE TABLE service_account_keys(
      key_id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      client_email TEXT NOT NULL,
      client_id TEXT NOT NULL,
      public_key_pem TEXT NOT NULL,
      created_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX service_account_keys_by_email ON service_account_keys(client_email);
    """,
    // 9: fenced blob deletion (ARCHITECTURE.md, "Fenced deletion"). A blob's bytes in S3 are at
    // (sha256, fence); a fence is handed out once (`blob_fences` 'counter') and only to a writer
    // about to upload, so an address whose row is gone is never claimed again and a late DELETE of
    // it is harmless. Every existing row keeps fence 0, whose key is the one it always had. `blob_deletions`
    // holds the collector's committed intents: addresses whose row is gone and whose bytes are
    // still to be deleted. Addresses below 'floor' can no longer be committed by anyone (the
    // stray pass raises it to an earlier 'mark' of the counter); it starts at 1, since no S3
    // writer takes fence 0 any more. The filesystem uses fence 0 only.
    """
    ALTER TABLE blobs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE blob_deletions(
      sha256 BLOB NOT NULL, fence INTEGER NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY(sha256, fence)
    ) WITHOUT ROWID;
    CREATE TABLE blob_fences(name TEXT PRIMARY KEY, fence INTEGER NOT NULL, at INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO blob_fences(name, fence, at) VALUES ('counter', 0, 0), ('floor', 1, 0), ('mark', 0, 0);
    """,
    // 10: a blob's CRC32C (Castagnoli; GCS's `crc32c`, `x-goog-hash`), NULL until known. Filled
    // after the commit by the background hasher with the MD5 (one read for both), or at once by
    // an answer of the GCS JSON API that needs it; the partial index is its work list.
    """
    ALTER TABLE blobs ADD COLUMN crc32c INTEGER CHECK (crc32c IS NULL OR crc32c BETWEEN 0 AND 4294967295);
    CREATE INDEX blobs_without_crc32c ON blobs(sha256) WHERE crc32c IS NULL;
    """,
    // 11: derived files (image variants). A variant is a file like any other, keyed by
    // its source blob and the canonical parameters that made it; gc keeps it while a file holds
    // its source and removes it with the source (``DerivedFiles``). `used_at` orders the LRU budget.
    """
    CREATE TABLE derived_files(
      source_sha256 BLOB NOT NULL,
      params TEXT NOT NULL,
      file_id TEXT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
      size INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      used_at INTEGER NOT NULL,
      PRIMARY KEY(source_sha256, params)
    ) WITHOUT ROWID;
    CREATE INDEX derived_files_by_file ON derived_files(file_id);
    CREATE INDEX derived_files_by_use ON derived_files(used_at);
    """,
    // 12: references and links between models. One row per declared reference a saved model
    // holds: what it points at and what happens to it when that is deleted (``DeleteRule``).
    // The second foreign key is the database's own guard: a row can only point at a record that
    // exists, and a record cannot be deleted while a row points at it (``ModelTransaction``
    // cascades, nullifies or refuses first, so this never fires unless something bypasses it).
    // `model_links` holds many-to-many links (``ModelRelation``): a row per (relation, from, to),
    // gone with either end. `model_reference_rules` is each type's declared references as its
    // last typed save had them, for what imports documents without the Swift type.
    """
    CREATE TABLE model_references(
      record_type TEXT NOT NULL,
      record_id TEXT NOT NULL,
      property TEXT NOT NULL,
      target_type TEXT NOT NULL,
      target_id TEXT NOT NULL,
      on_delete TEXT NOT NULL CHECK (on_delete IN ('cascade', 'nullify', 'restrict')),
      PRIMARY KEY(record_type, record_id, property),
      FOREIGN KEY(record_type, record_id) REFERENCES records(type, id) ON DELETE CASCADE,
      FOREIGN KEY(target_type, target_id) REFERENCES records(type, id)
    ) WITHOUT ROWID;
    CREATE INDEX model_references_by_target ON model_references(target_type, target_id);
    CREATE TABLE model_links(
      relation TEXT NOT NULL,
      from_type TEXT NOT NULL,
      from_id TEXT NOT NULL,
      to_type TEXT NOT NULL,
      to_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY(relation, from_type, from_id, to_type, to_id),
      FOREIGN KEY(from_type, from_id) REFERENCES records(type, id) ON DELETE CASCADE,
      FOREIGN KEY(to_type, to_id) REFERENCES records(type, id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX model_links_to ON model_links(relation, to_type, to_id);
    CREATE TABLE model_reference_rules(
      record_type TEXT NOT NULL,
      property TEXT NOT NULL,
      target_type TEXT NOT NULL,
      on_delete TEXT NOT NULL CHECK (on_delete IN ('cascade', 'nullify', 'restrict')),
      PRIMARY KEY(record_type, property)
    ) WITHOUT ROWID;
    """,
    // Service-account assertions exchanged at /token, each kept until it expires so that it
    // is accepted once across every node of the catalog.
    """
    CREATE TABLE service_account_assertions(
      id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, issued_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX service_account_assertions_by_expiry ON service_account_assertions(expires_at);
    """,
    // snapshot pins (issue 35): a backup's lease on the catalog snapshot it copies. While a pin
    // has not expired the collector deletes no blob row (``UnreferencedBlobs``), so every blob
    // the snapshot references stays until it is copied. The backup renews its pin while it
    // copies and deletes it when done; a killed backup's pin lapses at `expires_at`.
    """
    CREATE TABLE snapshot_pins(
      id TEXT PRIMARY KEY,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
    // Object-change events (issue 32): the outbox, written by the transaction of the change
    // (``ObjectChangeOutbox``), webhook subscriptions, and one delivery row per subscription and
    // event, fanned out by that same transaction so no event can slip past a subscription.
    // `seq` never repeats (AUTOINCREMENT): it is the feed's cursor and the per-object order.
    // `tx_order` is the writing transaction's id where the catalog has concurrent writers
    // (PostgreSQL), so the feed can answer in commit order; 0 on SQLite (one writer).
    """
    CREATE TABLE event_subscriptions(
      id TEXT PRIMARY KEY,
      url TEXT NOT NULL,
      bucket TEXT NOT NULL,
      prefix TEXT NOT NULL,
      kinds TEXT NOT NULL,
      mode TEXT NOT NULL CHECK (mode IN ('binary', 'structured')),
      secret TEXT NOT NULL,
      created_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE object_events(
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      kind TEXT NOT NULL CHECK (kind IN ('finalized', 'deleted', 'metadataUpdated')),
      bucket TEXT NOT NULL,
      name TEXT NOT NULL,
      object TEXT NOT NULL,
      time_deleted INTEGER,
      created_at INTEGER NOT NULL,
      tx_order INTEGER NOT NULL
    );
    CREATE INDEX object_events_by_time ON object_events(created_at);
    CREATE TABLE event_deliveries(
      subscription_id TEXT NOT NULL REFERENCES event_subscriptions(id) ON DELETE CASCADE,
      event_seq INTEGER NOT NULL,
      bucket TEXT NOT NULL,
      name TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
      attempts INTEGER NOT NULL,
      next_attempt_at INTEGER NOT NULL,
      lease_owner TEXT,
      lease_until INTEGER,
      last_error TEXT,
      delivered_at INTEGER,
      PRIMARY KEY(subscription_id, event_seq)
    ) WITHOUT ROWID;
    CREATE INDEX event_deliveries_pending ON event_deliveries(subscription_id, bucket, name, event_seq)
      WHERE state = 'pending';
    CREATE INDEX event_deliveries_by_event ON event_deliveries(event_seq);
    CREATE INDEX event_deliveries_undelivered ON event_deliveries(subscription_id, state) WHERE state <> 'delivered';
    """,
    // A subscription's pending deliveries in event order, so a deliverer's claim reads only
    // those (``EventDeliveryQueue``, which names it and `event_deliveries_pending` to SQLite's
    // planner), never the subscription's whole delivered history.
    """
    CREATE INDEX event_deliveries_due ON event_deliveries(subscription_id, event_seq) WHERE state = 'pending';
    """,
    // Every fanned-out delivery was written into five b-trees in its upload's transaction (and
    // three again when acknowledged). Two go: `by_event` (prune and replay now reach deliveries
    // through the primary key, one subscription at a time) and `undelivered`, whose
    // `state <> 'delivered'` no query with a bound state could use; dead letters get an index of
    // their own, empty while deliveries succeed, so it costs an upload nothing.
    """
    DROP INDEX IF EXISTS event_deliveries_by_event;
    DROP INDEX IF EXISTS event_deliveries_undelivered;
    CREATE INDEX IF NOT EXISTS event_deliveries_dead ON event_deliveries(subscription_id, event_seq) WHERE state = 'dead';
    """,
    // A subscription reads the outbox from its head instead of having a delivery row written
    // for it in every change's transaction (``EventDeliveryQueue``): rows remain for what is
    // retried, queued behind a retry, replayed or dead. `head_order`/`head_seq` is the position
    // in commit order up to which its events are sent or have rows; `head_owner`/`head_until`
    // lease the head to one deliverer. Subscriptions made before start after the last event
    // (every earlier one was fanned out into rows when it committed).
    """
    ALTER TABLE event_subscriptions ADD COLUMN head_order INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE event_subscriptions ADD COLUMN head_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE event_subscriptions ADD COLUMN head_owner TEXT;
    ALTER TABLE event_subscriptions ADD COLUMN head_until INTEGER;
    UPDATE event_subscriptions SET head_seq = (SELECT coalesce(max(seq), 0) FROM object_events);
    """,
  ]

  /// The schema version of the SQLite catalog on `db` (`PRAGMA user_version`).
  static func version(of db: Database) throws -> Int {
    Int(try db.row("PRAGMA user_version")?.int("user_version") ?? 0)
  }

  static func run(on db: Database) throws {
    try db.transaction(immediate: true) { db in
      let current = Int(try db.row("PRAGMA user_version")?.int("user_version") ?? 0)
      guard current <= all.count else {
        throw LarderError.catalogTooNew(version: current, supported: all.count)
      }
      for index in current..<all.count {
        try db.executeScript(all[index])
      }
      if current != all.count { try db.execute("PRAGMA user_version = \(all.count)") }
    }
  }
}
