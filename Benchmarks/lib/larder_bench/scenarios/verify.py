"""`verify`: `larder verify` of the download scenario's store against the disk's read rate."""
import json
import os
import time

from ..config import LARDER_BIN
from ..measure import evict
from ..processes import BenchError, run


def scenario_verify(store, limits):
    """`larder verify` of the download scenario's store, its blobs evicted from the page cache
    first, against the disk's read rate (dd iflag=direct)."""
    blobs = []
    for dirpath, _, names in os.walk(os.path.join(store, "blobs")):
        blobs += [os.path.join(dirpath, n) for n in names]
    for path in blobs:
        evict(path)
    started = time.monotonic()
    r = run([LARDER_BIN, "verify", "--json", "--data", store], timeout=1200, check=False)
    seconds = time.monotonic() - started
    try:
        report = json.loads(r.stdout)
    except ValueError:
        raise BenchError(f"larder verify printed no JSON (exit {r.returncode}): {r.stderr[-300:]}")
    hashed = report.get("bytesHashed", 0)
    return {"exit": r.returncode, "seconds": seconds, "bytes": hashed, "blobs": report.get("blobsChecked"),
            "rate": hashed / seconds if seconds > 0 else float("nan"), "findings": report.get("findingCount")}
