"""The machine the run is on (CPU, SHA-NI, memory, kernel, filesystem, tool versions) and its load."""
import os
import platform
import re
import shutil

from . import processes
from .config import ROOT, TUSD_BIN
from .peers.fastapi_tusd import fastapi_tusd_available
from .peers.nginx import nginx_binary
from .processes import run


def machine_description():
    def read(path):
        try:
            return open(path).read()
        except OSError:
            return ""
    cpu = re.search(r"model name\s*:\s*(.*)", read("/proc/cpuinfo"))
    flags = re.search(r"flags\s*:\s*(.*)", read("/proc/cpuinfo"))
    mem = re.search(r"MemTotal:\s*(\d+) kB", read("/proc/meminfo"))
    fs = run(["findmnt", "-T", processes.TMP, "-no", "FSTYPE,SOURCE,TARGET"], check=False).stdout.strip()
    sha_ni = flags and " sha_ni" in f" {flags.group(1)} "
    versions = {
        "nginx": run([nginx_binary(), "-v"], check=False).stderr.strip().split(": ")[-1] if nginx_binary() else "missing",
        "curl": " ".join(run(["curl", "--version"], check=False).stdout.split()[:2]),
        "openssl": " ".join(run(["openssl", "version"], check=False).stdout.split()[:2]),
        "wrk": " ".join(run(["wrk", "-v"], check=False).stdout.split()[:2]) if shutil.which("wrk") else "absent",
        "tusd": "1.13.0 (" + TUSD_BIN + ")" if os.access(TUSD_BIN, os.X_OK) else f"missing ({TUSD_BIN})",
        "fastapi-tusd": "present" if fastapi_tusd_available() else "missing",
    }
    commit = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
    return {
        "cpu": cpu.group(1).strip() if cpu else platform.processor(),
        "sha_ni": "yes" if sha_ni else "no",
        "nproc": os.cpu_count(),
        "memory": f"{int(mem.group(1)) / 1024 / 1024:.1f} GiB" if mem else "?",
        "kernel": platform.release(),
        "fs": fs,
        "versions": versions,
        "commit": commit,
    }


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])
