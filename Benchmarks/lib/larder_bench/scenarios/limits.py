"""`limits`: the machine's own ceilings (openssl speed sha256/md5, dd write+fsync, disk and
page-cache read) and the durable-CAS limit."""
import os
import re

from .. import processes
from ..config import QUICK
from ..measure import timed
from ..processes import BenchError, log, run


def scenario_limits(files):
    log("limits: openssl speed sha256, md5")
    seconds = 1 if QUICK else 3
    limits = {"sha256": openssl_speed("sha256", seconds), "md5": openssl_speed("md5", seconds)}
    limits["sha256+md5"] = 1 / (1 / limits["sha256"] + 1 / limits["md5"])
    big = files["upload"]
    size = os.path.getsize(big)
    target = os.path.join(processes.TMP, "dd-write.bin")
    log(f"limits: dd bs=1M conv=fsync ({size >> 20} MiB)")
    os.sync()
    limits["write+fsync"] = size / timed(["dd", f"if={big}", f"of={target}", "bs=1M", "conv=fsync", "status=none"])
    os.unlink(target)
    log("limits: disk read (dd iflag=direct)")
    limits["disk read"] = size / timed(["dd", f"if={big}", "of=/dev/null", "bs=1M", "iflag=direct", "status=none"])
    run(["dd", f"if={big}", "of=/dev/null", "bs=1M", "status=none"])  # warm
    limits["page-cache read"] = size / timed(["dd", f"if={big}", "of=/dev/null", "bs=1M", "status=none"])
    limits["durable-CAS"] = min(limits["write+fsync"], limits["sha256"])
    return limits


def openssl_speed(algorithm, seconds=3):
    r = run(["openssl", "speed", "-evp", algorithm, "-bytes", "1048576", "-seconds", str(seconds)], timeout=60)
    m = re.search(rf"^{algorithm}\s+([\d.]+)k\s*$", r.stdout, re.M | re.I)
    if not m:
        raise BenchError(f"cannot parse openssl speed output for {algorithm}: {r.stdout[-300:]}")
    return float(m.group(1)) * 1000  # bytes per second
