#!/usr/bin/env python3
"""Build a Larder data directory with many small blobs, for measuring `larder gc` at scale.

Writes the real layout directly (much faster than uploading one by one):
  larder.sqlite            schema taken from Sources/Larder/Catalog/Migrations.swift
  blobs/sha256/ab/cd/<hex> content, mode 0444
  tmp/ trash/ uploads/ quarantine/

Of N blobs, 90 % are referenced (blob + file + object), 10 % are orphans: half of those have a
files row that no object references (released by gc step 2), half have no files row at all.
Every file is dated a day back, so `gc --grace 1h` collects all orphans.

  python3 Benchmarks/gc-scale/generate.py /tmp/gc-scale 1000000
"""
import hashlib
import os
import re
import sqlite3
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def migrations():
    """The numbered migrations, read from the Swift source so the schema never drifts."""
    text = open(os.path.join(ROOT, "Sources/Larder/Catalog/Migrations.swift")).read()
    body = text[text.index("static let all"):]
    return re.findall(r'"""\n(.*?)"""', body, re.S)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    data = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    orphan_every = 10
    if os.path.exists(os.path.join(data, "larder.sqlite")):
        sys.exit(f"{data} already holds a store; remove it first")
    for sub in ["blobs/sha256", "tmp", "trash", "uploads", "quarantine"]:
        os.makedirs(os.path.join(data, sub), exist_ok=True)

    started = time.time()
    db = sqlite3.connect(os.path.join(data, "larder.sqlite"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    steps = migrations()
    db.execute("BEGIN")
    for sql in steps:
        for statement in sql.split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute(f"PRAGMA user_version = {len(steps)}")
    db.execute("COMMIT")

    day_ago = int((time.time() - 86400) * 1000)
    made_dirs = set()
    blobs, files, objects = [], [], []
    orphans = orphan_bytes = 0

    def flush():
        db.execute("BEGIN")
        db.executemany("INSERT INTO blobs(sha256, size, created_at) VALUES (?, ?, ?)", blobs)
        db.executemany(
            "INSERT INTO files(id, blob_sha256, size, md5, filename, content_type, created_at) "
            "VALUES (?, ?, ?, ?, ?, 'text/plain', ?)", files)
        db.executemany(
            "INSERT INTO objects(bucket, name, file_id, generation, metageneration, content_type, metadata, "
            "download_tokens, created_at, updated_at) VALUES ('bench', ?, ?, ?, 1, 'text/plain', '{}', 't', ?, ?)",
            objects)
        db.execute("COMMIT")
        blobs.clear(); files.clear(); objects.clear()

    for i in range(count):
        content = b"larder gc scale blob %d\n" % i
        digest = hashlib.sha256(content).digest()
        hexd = digest.hex()
        leaf = os.path.join(data, "blobs/sha256", hexd[:2], hexd[2:4])
        if leaf not in made_dirs:
            os.makedirs(leaf, exist_ok=True)
            made_dirs.add(leaf)
        path = os.path.join(leaf, hexd)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.write(fd, content)
        os.close(fd)
        blobs.append((digest, len(content), day_ago))
        kind = i % orphan_every
        if kind != 0 or i % (2 * orphan_every) == 0:
            file_id = "%012x%016x" % (day_ago, i)
            files.append((file_id, digest, len(content), hashlib.md5(content).digest(), f"f{i}.txt", day_ago))
            if kind != 0:
                objects.append((f"o/{i}", file_id, day_ago * 1000 + i, day_ago, day_ago))
        if kind == 0:
            orphans += 1
            orphan_bytes += len(content)
        if len(blobs) >= 50_000:
            flush()
            print(f"  {i + 1} blobs, {time.time() - started:.0f} s", flush=True)
    flush()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    print(f"built {count} blobs ({orphans} orphans, {orphan_bytes} orphan bytes) in {data} "
          f"in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
