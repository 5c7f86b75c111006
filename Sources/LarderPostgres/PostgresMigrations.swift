import Larder

/// PostgreSQL's schema migrations: the same numbering and intent as ``Migrations/all``, in
/// PostgreSQL's types (`bytea`, `BIGINT`, `jsonb` bodies, byte-ordered `COLLATE "C"` names).
///
/// The version lives in `larder_schema`; migrations run in one write transaction, under the
/// catalog's advisory write lock, so nodes starting together apply each one once.
enum PostgresMigrations {
  static let all: [@Sendable (Database) throws -> Void] = [
    // 1: the store's tables (ARCHITECTURE.md, "The catalog"). Times are integer milliseconds since
    // 1970. Names and keys sort as bytes (`COLLATE "C"`), as SQLite's BINARY does: listings and
    // page tokens depend on that order.
    { db in
      try db.executeScript(
        """
        CREATE TABLE blobs(
          sha256 bytea PRIMARY KEY CHECK (length(sha256) = 32),
          size BIGINT NOT NULL CHECK (size >= 0),
          created_at BIGINT NOT NULL
        );
        CREATE TABLE files(
          id TEXT COLLATE "C" PRIMARY KEY,
          blob_sha256 bytea NOT NULL REFERENCES blobs(sha256) ON DELETE RESTRICT,
          size BIGINT NOT NULL,
          md5 bytea NOT NULL,
          filename TEXT,
          content_type TEXT NOT NULL,
          declared_content_type TEXT,
          quarantined BIGINT NOT NULL DEFAULT 0,
          created_at BIGINT NOT NULL
        );
        CREATE INDEX files_by_blob ON files(blob_sha256);
        CREATE INDEX files_by_created ON files(created_at);
        CREATE TABLE objects(
          bucket TEXT COLLATE "C" NOT NULL,
          name TEXT COLLATE "C" NOT NULL,
          file_id TEXT COLLATE "C" NOT NULL REFERENCES files(id) ON DELETE RESTRICT,
          generation BIGINT NOT NULL,
          metageneration BIGINT NOT NULL,
          content_type TEXT NOT NULL,
          metadata TEXT NOT NULL DEFAULT '{}',
          download_tokens TEXT NOT NULL,
          cache_control TEXT,
          content_disposition TEXT,
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL,
          PRIMARY KEY(bucket, name)
        );
        CREATE INDEX objects_by_file ON objects(file_id);
        CREATE TABLE records(
          type TEXT COLLATE "C" NOT NULL,
          id TEXT COLLATE "C" NOT NULL,
          body jsonb NOT NULL,
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL,
          PRIMARY KEY(type, id)
        );
        CREATE TABLE attachments(
          record_type TEXT COLLATE "C" NOT NULL,
          record_id TEXT COLLATE "C" NOT NULL,
          property TEXT COLLATE "C" NOT NULL,
          position BIGINT NOT NULL,
          file_id TEXT COLLATE "C" NOT NULL REFERENCES files(id) ON DELETE RESTRICT,
          PRIMARY KEY(record_type, record_id, property, position),
          FOREIGN KEY(record_type, record_id) REFERENCES records(type, id) ON DELETE CASCADE
        );
        CREATE INDEX attachments_by_file ON attachments(file_id);
        CREATE TABLE uploads(
          id TEXT COLLATE "C" PRIMARY KEY,
          bucket TEXT COLLATE "C" NOT NULL,
          name TEXT COLLATE "C",
          owner TEXT,
          length BIGINT,
          "offset" BIGINT NOT NULL DEFAULT 0,
          metadata TEXT NOT NULL DEFAULT '{}',
          concat TEXT,
          expires_at BIGINT NOT NULL,
          created_at BIGINT NOT NULL
        );
        CREATE INDEX uploads_by_expiry ON uploads(expires_at);
        """)
    },
    // 2: completed resumable uploads keep their row until they expire.
    { db in try db.executeScript("ALTER TABLE uploads ADD COLUMN completed_at BIGINT") },
    // 3: settings; `page_token_key` signs listing page tokens. Made here, once, by whichever
    // node migrates first, so every node shares it.
    { db in
      try db.executeScript("CREATE TABLE settings(key TEXT COLLATE \"C\" PRIMARY KEY, value bytea NOT NULL)")
      var generator = SystemRandomNumberGenerator()
      let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
      try db.execute("INSERT INTO settings(key, value) VALUES ('page_token_key', ?)", [key])
    },
    // 4: Firebase's metadata (see the SQLite migration 4).
    { db in
      try db.executeScript(
        """
        ALTER TABLE objects ADD COLUMN content_encoding TEXT;
        ALTER TABLE objects ADD COLUMN content_language TEXT;
        UPDATE objects SET content_type = coalesce(
            (SELECT f.declared_content_type FROM files f WHERE f.id = objects.file_id), 'application/octet-stream')
          WHERE content_type = (SELECT f.content_type FROM files f WHERE f.id = objects.file_id);
        """)
    },
    // 5: a blob's MD5 on its row, NULL until the background hasher fills it in.
    { db in
      try db.executeScript(
        """
        ALTER TABLE blobs ADD COLUMN md5 bytea CHECK (md5 IS NULL OR length(md5) = 16);
        UPDATE blobs SET md5 = (
            SELECT f.md5 FROM files f WHERE f.blob_sha256 = blobs.sha256 AND length(f.md5) = 16 LIMIT 1);
        CREATE INDEX blobs_without_md5 ON blobs(sha256) WHERE md5 IS NULL;
        """)
    },
    // 6: resumable uploads any node can continue (see the SQLite migration 6).
    { db in
      try db.executeScript(
        """
        ALTER TABLE uploads ADD COLUMN shared_state TEXT;
        ALTER TABLE uploads ADD COLUMN lease_holder TEXT;
        ALTER TABLE uploads ADD COLUMN lease_until BIGINT;
        """)
    },
    // 7: the lease's fencing epoch (see the SQLite migration 7).
    { db in try db.executeScript("ALTER TABLE uploads ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0") },
    // 8: service accounts' public keys (see the SQLite migration 8).
    { db in
      try db.executeScript(
        """
        CREATE TABLE service_account_keys(
          key_id TEXT COLLATE "C" PRIMARY KEY,
          name TEXT COLLATE "C" NOT NULL,
          client_email TEXT COLLATE "C" NOT NULL,
          client_id TEXT NOT NULL,
          public_key_pem TEXT NOT NULL,
          created_at BIGINT NOT NULL
        );
        CREATE INDEX service_account_keys_by_email ON service_account_keys(client_email);
        """)
    },
    // 9: fenced blob deletion (see the SQLite migration 9). Fences come from a SEQUENCE:
    // `nextval` takes no lock and is never rolled back, so no two writers ever get one fence.
    { db in
      try db.executeScript(
        """
        ALTER TABLE blobs ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
        CREATE TABLE blob_deletions(
          sha256 bytea NOT NULL, fence BIGINT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY(sha256, fence));
        CREATE SEQUENCE blob_fence_counter;
        CREATE TABLE blob_fences(name TEXT COLLATE "C" PRIMARY KEY, fence BIGINT NOT NULL, at BIGINT NOT NULL);
        INSERT INTO blob_fences(name, fence, at) VALUES ('counter', 0, 0), ('floor', 1, 0), ('mark', 0, 0);
        """)
    },
    // 10: a blob's CRC32C, NULL until known (see the SQLite migration 10).
    { db in
      try db.executeScript(
        """
        ALTER TABLE blobs ADD COLUMN crc32c BIGINT CHECK (crc32c IS NULL OR crc32c BETWEEN 0 AND 4294967295);
        CREATE INDEX blobs_without_crc32c ON blobs(sha256) WHERE crc32c IS NULL;
        """)
    },
    // 11: derived files, image variants (see the SQLite migration 11).
    { db in
      try db.executeScript(
        """
        CREATE TABLE derived_files(
          source_sha256 bytea NOT NULL,
          params TEXT COLLATE "C" NOT NULL,
          file_id TEXT COLLATE "C" NOT NULL REFERENCES files(id) ON DELETE CASCADE,
          size BIGINT NOT NULL,
          created_at BIGINT NOT NULL,
          used_at BIGINT NOT NULL,
          PRIMARY KEY(source_sha256, params));
        CREATE INDEX derived_files_by_file ON derived_files(file_id);
        CREATE INDEX derived_files_by_use ON derived_files(used_at);
        """)
    },
    // 12: references between models (see the SQLite migration 12).
    { db in
      try db.executeScript(
        """
        CREATE TABLE model_references(
          record_type TEXT COLLATE "C" NOT NULL,
          record_id TEXT COLLATE "C" NOT NULL,
          property TEXT COLLATE "C" NOT NULL,
          target_type TEXT COLLATE "C" NOT NULL,
          target_id TEXT COLLATE "C" NOT NULL,
          on_delete TEXT NOT NULL CHECK (on_delete IN ('cascade', 'nullify', 'restrict')),
          PRIMARY KEY(record_type, record_id, property),
          FOREIGN KEY(record_type, record_id) REFERENCES records(type, id) ON DELETE CASCADE,
          FOREIGN KEY(target_type, target_id) REFERENCES records(type, id));
        CREATE INDEX model_references_by_target ON model_references(target_type, target_id);
        CREATE TABLE model_links(
          relation TEXT COLLATE "C" NOT NULL,
          from_type TEXT COLLATE "C" NOT NULL,
          from_id TEXT COLLATE "C" NOT NULL,
          to_type TEXT COLLATE "C" NOT NULL,
          to_id TEXT COLLATE "C" NOT NULL,
          created_at BIGINT NOT NULL,
          PRIMARY KEY(relation, from_type, from_id, to_type, to_id),
          FOREIGN KEY(from_type, from_id) REFERENCES records(type, id) ON DELETE CASCADE,
          FOREIGN KEY(to_type, to_id) REFERENCES records(type, id) ON DELETE CASCADE);
        CREATE INDEX model_links_to ON model_links(relation, to_type, to_id);
        CREATE TABLE model_reference_rules(
          record_type TEXT COLLATE "C" NOT NULL,
          property TEXT COLLATE "C" NOT NULL,
          target_type TEXT COLLATE "C" NOT NULL,
          on_delete TEXT NOT NULL CHECK (on_delete IN ('cascade', 'nullify', 'restrict')),
          PRIMARY KEY(record_type, property));
        """)
    },
    // Service-account assertions exchanged at /token (see the SQLite migration).
    { db in
      try db.executeScript(
        """
        CREATE TABLE service_account_assertions(
          id TEXT COLLATE "C" PRIMARY KEY, expires_at BIGINT NOT NULL, issued_at BIGINT NOT NULL);
        CREATE INDEX service_account_assertions_by_expiry ON service_account_assertions(expires_at);
        """)
      },
    // snapshot pins (issue 35): a backup's lease; see ``Migrations/all``.
    { db in
      try db.executeScript(
        """
        CREATE TABLE snapshot_pins(
          id TEXT COLLATE "C" PRIMARY KEY,
          created_at BIGINT NOT NULL,
          expires_at BIGINT NOT NULL);
        """)
      },
    // Object-change events (see the SQLite migration of the same number).
    { db in
      try db.executeScript(
        """
        CREATE TABLE event_subscriptions(
          id TEXT COLLATE "C" PRIMARY KEY,
          url TEXT NOT NULL,
          bucket TEXT COLLATE "C" NOT NULL,
          prefix TEXT COLLATE "C" NOT NULL,
          kinds TEXT NOT NULL,
          mode TEXT NOT NULL CHECK (mode IN ('binary', 'structured')),
          secret TEXT NOT NULL,
          created_at BIGINT NOT NULL);
        CREATE TABLE object_events(
          seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          id TEXT COLLATE "C" NOT NULL UNIQUE,
          kind TEXT NOT NULL CHECK (kind IN ('finalized', 'deleted', 'metadataUpdated')),
          bucket TEXT COLLATE "C" NOT NULL,
          name TEXT COLLATE "C" NOT NULL,
          object TEXT NOT NULL,
          time_deleted BIGINT,
          created_at BIGINT NOT NULL,
          tx_order BIGINT NOT NULL);
        CREATE INDEX object_events_by_time ON object_events(created_at);
        CREATE INDEX object_events_by_order ON object_events(tx_order, seq);
        CREATE TABLE event_deliveries(
          subscription_id TEXT COLLATE "C" NOT NULL REFERENCES event_subscriptions(id) ON DELETE CASCADE,
          event_seq BIGINT NOT NULL,
          bucket TEXT COLLATE "C" NOT NULL,
          name TEXT COLLATE "C" NOT NULL,
          state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
          attempts BIGINT NOT NULL,
          next_attempt_at BIGINT NOT NULL,
          lease_owner TEXT,
          lease_until BIGINT,
          last_error TEXT,
          delivered_at BIGINT,
          PRIMARY KEY(subscription_id, event_seq));
        CREATE INDEX event_deliveries_pending ON event_deliveries(subscription_id, bucket, name, event_seq)
          WHERE state = 'pending';
        CREATE INDEX event_deliveries_by_event ON event_deliveries(event_seq);
        CREATE INDEX event_deliveries_undelivered ON event_deliveries(subscription_id, state) WHERE state <> 'delivered';
        """)
    },
    // A subscription's pending deliveries in event order (see the SQLite migration of the same number).
    { db in
      try db.executeScript(
        "CREATE INDEX event_deliveries_due ON event_deliveries(subscription_id, event_seq) WHERE state = 'pending'")
    },
    // Fewer indexes on every fanned-out delivery (see the SQLite migration of the same number).
    { db in
      try db.executeScript(
        """
        DROP INDEX IF EXISTS event_deliveries_by_event;
        DROP INDEX IF EXISTS event_deliveries_undelivered;
        CREATE INDEX IF NOT EXISTS event_deliveries_dead ON event_deliveries(subscription_id, event_seq)
          WHERE state = 'dead';
        """)
    },
    // Subscriptions read the outbox from a head (see the SQLite migration of the same number).
    // Existing ones start after every event committed so far: an event of a transaction still
    // open was fanned out into a row by the Larder that wrote it.
    { db in
      try db.executeScript(
        """
        ALTER TABLE event_subscriptions ADD COLUMN head_order BIGINT NOT NULL DEFAULT 0,
          ADD COLUMN head_seq BIGINT NOT NULL DEFAULT 0, ADD COLUMN head_owner TEXT, ADD COLUMN head_until BIGINT;
        UPDATE event_subscriptions SET head_order = (SELECT coalesce(max(tx_order), 0) FROM object_events),
          head_seq = 9223372036854775807;
        """)
    },
  ]

  /// Creates the schema if needed and applies what is missing, under the write lock.
  /// - Throws: ``LarderError/catalogTooNew(version:supported:)`` when a newer Larder migrated it.
  static func run(on db: any Database) throws {
    precondition(all.count == Migrations.all.count, "the two catalogs' migrations keep one numbering")
    try db.transaction(immediate: true) { db in
      // An index over a large catalog may take longer than any statement of normal work.
      try db.executeScript("SET LOCAL statement_timeout = 0")
      if let schema = (db as? PostgresDatabase)?.schema {
        try db.executeScript("CREATE SCHEMA IF NOT EXISTS \"\(schema)\"")
      }
      try db.executeScript("CREATE TABLE IF NOT EXISTS larder_schema(version BIGINT NOT NULL)")
      let current = Int(try db.row("SELECT max(version) AS v FROM larder_schema")?.int("v") ?? 0)
      guard current <= all.count else {
        throw LarderError.catalogTooNew(version: current, supported: all.count)
      }
      for index in current..<all.count { try all[index](db) }
      if current != all.count {
        try db.execute("DELETE FROM larder_schema")
        try db.execute("INSERT INTO larder_schema(version) VALUES (?)", [all.count])
      }
    }
  }
}
