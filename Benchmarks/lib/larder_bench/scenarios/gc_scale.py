"""`gc` (opt-in, BENCH_GC_SCALE=1): `larder gc` of a million generated blobs."""
import os
import shutil
import subprocess
import sys
import time

from .. import processes
from ..config import GC_BUDGET, GC_N, LARDER_BIN, ROOT
from ..machine import loadavg
from ..processes import PROCESSES, log, run


def scenario_gc():
    generator = os.path.join(ROOT, "Benchmarks/gc-scale/generate.py")
    data = os.path.join(processes.TMP, "gc-scale")
    log(f"gc-scale: generating {GC_N} blobs in {data}")
    started = time.monotonic()
    run([sys.executable, generator, data, str(GC_N)], timeout=GC_BUDGET)
    results = {"n": GC_N, "generate_s": time.monotonic() - started, "load_before": loadavg()}
    for label, extra in (("dry run", ["--dry-run"]), ("gc", [])):
        log(f"gc-scale: larder gc {' '.join(extra)}")
        started = time.monotonic()
        out_path = os.path.join(processes.TMP, "gc-out.txt")
        with open(out_path, "w") as out:
            proc = subprocess.Popen([LARDER_BIN, "gc", "--grace", "1h", "--json", "--data", data] + extra,
                                    stdout=out, stderr=subprocess.STDOUT)
            PROCESSES.append(("gc", proc))
            # wait4 gives this child's own peak RSS; the watchdog alarm bounds the wait.
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            PROCESSES.remove(("gc", proc))
        results[label] = {"exit": proc.returncode, "seconds": time.monotonic() - started,
                          "maxrss_kib": usage.ru_maxrss, "report": open(out_path).read().strip()[-800:]}
    results["load_after"] = loadavg()
    shutil.rmtree(data, ignore_errors=True)
    return results
