"""`cml` (opt-in, BENCH_LIMITS): the connection-memory-limit trade-off."""
import os

from ..config import LIMITS, REPS
from ..fmt import med
from ..larder import Larder
from ..measure import stamp, upload, wrk
from ..processes import log


def scenario_cml(files):
    """The connection-memory-limit trade-off: upload time and CPU against small-GET rate and CPU."""
    big = files["upload"]
    rows = []
    for limit in LIMITS:
        log(f"connection memory limit {limit}")
        server = Larder(f"cml-{limit}", memory_limit=limit)
        times, stats = [], []
        for rep in range(REPS):
            stamp(big, 100 + rep)
            times.append(upload(server, big, f"cml{rep}.bin", stats))
        upload(server, files["small"], "small.bin")
        g = wrk(server, "small.bin")
        rows.append({"limit": limit, "upload": med(times), "uploads": times, "rps": g["rps"],
                     "cpu": med([c for c, _ in stats]),
                     "write_size": os.path.getsize(big) / max(1, med([w for _, w in stats])),
                     "p99": g["p99"], "cpu_us": g["cpu_us"], "problems": g["problems"]})
        server.close()
    return rows
