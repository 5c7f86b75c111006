"""The run: checks BENCH_ONLY, makes the temp dir and the test files, runs the scenarios in their
order, writes the report (stdout and BENCH_OUT), and cleans up whatever happens."""
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import processes
from .config import (ALL_SCENARIOS, BUDGET, CONCURRENT, CONCURRENT_UPLOAD_MIB, GC_BUDGET, OUT, REPS,
    SCENARIOS, SIZE_MIB, SMALL_BYTES, TMP_PARENT, TUS_MIB, UPLOAD_MIB)
from .machine import loadavg, machine_description
from .measure import make_file
from .processes import BenchError, Watchdog, cleanup, log, on_signal
from .report import render
from .scenarios.catalog import scenario_postgres
from .scenarios.catalog_writes import scenario_pg_writes
from .scenarios.cml import scenario_cml
from .scenarios.concurrent_clients import scenario_concurrent
from .scenarios.download import scenario_download
from .scenarios.gc_scale import scenario_gc
from .scenarios.gets import scenario_gets
from .scenarios.images import scenario_images
from .scenarios.limits import scenario_limits
from .scenarios.s3 import scenario_s3
from .scenarios.tus import scenario_tus
from .scenarios.upload import scenario_upload
from .scenarios.verify import scenario_verify


def main():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    known = ALL_SCENARIOS + ["cml", "gc", "s3", "s3-tus"]
    unknown = [s for s in SCENARIOS if s not in known]
    if unknown:
        sys.exit(f"bench: unknown scenario(s) {unknown}; known: {known}")
    signal.alarm(BUDGET + (GC_BUDGET if "gc" in SCENARIOS else 0))
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    processes.TMP = tempfile.mkdtemp(prefix="larder-bench.", dir=TMP_PARENT)
    R, commands = {}, []
    try:
        need = (SIZE_MIB * 3 + UPLOAD_MIB * (REPS + 2) * 2 + TUS_MIB * 3 + CONCURRENT * CONCURRENT_UPLOAD_MIB) << 20
        free = shutil.disk_usage(processes.TMP).free
        if free < need:
            raise BenchError(f"{processes.TMP} has {free >> 30} GiB free; the run needs about {need >> 30} GiB")
        machine = machine_description()
        load_start = loadavg()
        log(f"scenarios: {' '.join(SCENARIOS)}; load average {load_start}")
        files = {"small": os.path.join(processes.TMP, "small.bin")}
        with open(files["small"], "wb") as f:
            f.write(os.urandom(SMALL_BYTES))
        if {"limits", "upload", "cml"} & set(SCENARIOS):
            files["upload"] = make_file(os.path.join(processes.TMP, "upload.bin"), UPLOAD_MIB)
        if "tus" in SCENARIOS:
            files["tus"] = make_file(os.path.join(processes.TMP, "tus.bin"), TUS_MIB)
        if {"download", "verify"} & set(SCENARIOS):
            files["download"] = make_file(os.path.join(processes.TMP, "download.bin"), SIZE_MIB)
        if "limits" in SCENARIOS:
            R["limits"] = scenario_limits(files)
        if "gets" in SCENARIOS:
            R["gets"] = scenario_gets(files, commands)
        if "upload" in SCENARIOS:
            R["upload"] = scenario_upload(files, commands)
        if "tus" in SCENARIOS:
            R["tus"] = scenario_tus(files)
        if {"download", "verify"} & set(SCENARIOS):
            R["download"] = scenario_download(files, commands)
            if "verify" in SCENARIOS:
                R["verify"] = scenario_verify(R["download"]["store"], R.get("limits") or {})
            if "download" not in SCENARIOS:
                del R["download"]
        if "concurrent" in SCENARIOS:
            R["concurrent"] = scenario_concurrent(files)
        if "postgres" in SCENARIOS:
            R["postgres"] = scenario_postgres(files, commands)
        if "pg-writes" in SCENARIOS:
            R["pg-writes"] = scenario_pg_writes(files, commands)
        if "images" in SCENARIOS:
            R["images"] = scenario_images()
        if "cml" in SCENARIOS:
            R["cml"] = scenario_cml(files)
        if "gc" in SCENARIOS:
            R["gc"] = scenario_gc()
        if {"s3", "s3-tus"} & set(SCENARIOS):
            # s3: all of the S3 rows; s3-tus: the resumable uploads alone.
            R["s3"] = scenario_s3(files, commands, transfers="s3" in SCENARIOS)
        load_end = loadavg()
        elapsed = time.monotonic() - started
        report = render(date, machine, load_start, load_end, elapsed, R, commands)
        print(report)
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w") as f:
            f.write(report)
        log(f"wrote {OUT} ({elapsed:.0f}s)")
    except (BenchError, Watchdog, subprocess.TimeoutExpired) as e:
        log(f"FAILED: {e}")
        for name in os.listdir(processes.TMP) if processes.TMP and os.path.isdir(processes.TMP) else []:
            if name.endswith(".log") and not name.startswith("access-") or name == "nginx":
                path = os.path.join(processes.TMP, name, "error.log") if name == "nginx" else os.path.join(processes.TMP, name)
                if os.path.isfile(path):
                    tail = open(path, errors="replace").read()[-1500:]
                    if tail.strip():
                        log(f"--- {path}:\n{tail}")
        return 1
    finally:
        signal.alarm(0)
        cleanup()
    return 0
