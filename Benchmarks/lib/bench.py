#!/usr/bin/env python3
"""Larder's benchmark suite (called by Benchmarks/run.sh; see Benchmarks/README.md).

One run measures every ratio of issue 13 on this machine, Larder and its peer side by side,
interleaved within each of BENCH_REPS (>= 3) rounds, and prints them in one table:
  limits      the machine: SHA-256/MD5 speed (openssl speed), write+fsync (dd conv=fsync), disk
              read (dd iflag=direct), page-cache read;
  gets        4 KiB GETs over keep-alive connections (wrk): Larder with its access log off and on
              (buffered, to a file) against nginx with its log off: requests/s, p99, server CPU
              µs per request;
  upload      a simple upload (BENCH_UPLOAD_MIB, 512) through Larder (POST) and nginx (WebDAV PUT),
              and against the durable-CAS limit min(write+fsync, SHA-256);
  tus         a tus upload (BENCH_TUS_MIB, 256) in 8 and 1 MiB PATCHes: Larder, tusd, fastapi-tusd;
  download    a large download (BENCH_SIZE_MIB, 1024) from Larder and nginx (both sendfile), and
              Larder's peak RSS over that upload and the downloads;
  concurrent  Larder's peak RSS with BENCH_CONCURRENT (200) clients at once (uploads, then GETs);
  verify      `larder verify` of a store against the disk's read rate;
  postgres    the PostgreSQL catalog beside SQLite: 4 KiB GETs and 4 KiB uploads, Larder on each,
              a throw-away PostgreSQL (scripts/pg.sh, fsync on) started and stopped here;
  cml         (opt-in: BENCH_LIMITS) the connection-memory-limit trade-off;
  gc          (opt-in: BENCH_GC_SCALE=1) gc of a million blobs.
  s3          (opt-in: BENCH_S3=1) Larder on PostgreSQL + Swift's S3 API vs curl straight to that Swift:
              transfers, 4 KiB GETs, and resumable uploads (tus in 8 and 1 MiB PATCHes, BENCH_S3_TUS_MIB);
  s3-tus      the S3 scenario's resumable uploads alone.
BENCH_ONLY=gets,tus,... runs a subset; BENCH_QUICK=1 shrinks sizes and durations (a few minutes).
Everything listens on 127.0.0.1 only. Every server is started here and stopped at exit; every
byte written lives in one temp dir that is removed at exit, whatever happens (a watchdog alarm
bounds the whole run). A missing peer is reported as missing, never dropped.

This file is the entry point only; the suite is the package larder_bench beside it (its
__init__ lists the modules: config, processes, measure, peers/, scenarios/, report, main).
"""
import sys

from larder_bench.main import main

if __name__ == "__main__":
    sys.exit(main())
