"""The suite's knobs: every BENCH_* (and LARDER_BIN, LARDER_PEERS) environment variable, read once
at import, and the scenario list (BENCH_ONLY, or the default set plus the opt-in ones)."""
import os
import sys
import tempfile


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MB = 1e6  # MB/s in this suite means 10^6 bytes per second
MiB = 1 << 20


def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


QUICK = os.environ.get("BENCH_QUICK") == "1"
LARDER_BIN = os.environ.get("LARDER_BIN") or sys.exit("bench: set LARDER_BIN")
SIZE_MIB = env_int("BENCH_SIZE_MIB", 128 if QUICK else 1024)  # the large download
SIZE = SIZE_MIB << 20
UPLOAD_MIB = env_int("BENCH_UPLOAD_MIB", 64 if QUICK else 512)
TUS_MIB = env_int("BENCH_TUS_MIB", 32 if QUICK else 256)
TUS_CHUNKS = [int(c) for c in os.environ.get("BENCH_TUS_CHUNK_MIB", "8,1").split(",") if c.strip()]
REPS = max(1, env_int("BENCH_REPS", 3))
WRK_SECONDS = env_int("BENCH_WRK_SECONDS", 3 if QUICK else 10)
WRK_THREADS = env_int("BENCH_WRK_THREADS", 2)
WRK_CONNECTIONS = env_int("BENCH_WRK_CONNECTIONS", 64)
SMALL_BYTES = env_int("BENCH_SMALL_BYTES", 4096)
CONCURRENT = env_int("BENCH_CONCURRENT", 200)
CONCURRENT_UPLOAD_MIB = env_int("BENCH_CONCURRENT_UPLOAD_MIB", 4)
LIMITS = os.environ.get("BENCH_LIMITS", "").split()
BUDGET = env_int("BENCH_BUDGET", 600 if QUICK else 1800)
GC_SCALE = os.environ.get("BENCH_GC_SCALE") == "1"
GC_N = env_int("BENCH_GC_N", 1_000_000)
GC_BUDGET = env_int("BENCH_GC_BUDGET", 2400)
TMP_PARENT = os.environ.get("BENCH_TMPDIR", tempfile.gettempdir())
OUT = os.environ.get("BENCH_OUT", os.path.join(ROOT, "Benchmarks/results/latest.md"))
NOTE = os.environ.get("BENCH_NOTE", "")
CURL_MAX_TIME = env_int("BENCH_CURL_MAX_TIME", 300)
PEERS = os.environ.get("LARDER_PEERS") or os.path.join(os.path.dirname(ROOT), "shared", "peers")
TUSD_BIN = os.path.join(PEERS, "tusd", "tusd")
SMALL_UPLOAD_CONNECTIONS = env_int("BENCH_SMALL_UPLOAD_CONNECTIONS", 16)
ALL_SCENARIOS = ["limits", "gets", "upload", "tus", "download", "concurrent", "verify", "postgres", "pg-writes",
                 "images"]
ONLY = [s for s in os.environ.get("BENCH_ONLY", "").replace(" ", ",").split(",") if s]
SCENARIOS = ONLY or ALL_SCENARIOS + (["cml"] if LIMITS else []) + (["gc"] if GC_SCALE else []) + (["s3"] if os.environ.get("BENCH_S3") == "1" else [])


S3_MIB = env_int("BENCH_S3_MIB", 128 if QUICK else 1024)
S3_GETS = env_int("BENCH_S3_GETS", 400 if QUICK else 1200)  # 4 KiB GETs per curl-loop run
S3_GET_CLIENTS = env_int("BENCH_S3_GET_CLIENTS", 4)  # concurrent keep-alive curl loops
S3_TUS_MIB = env_int("BENCH_S3_TUS_MIB", 32 if QUICK else 256)  # the resumable rows' upload size
