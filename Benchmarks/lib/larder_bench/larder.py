"""`larder serve` under test, on a fresh data directory."""
import os
import shutil
import subprocess

from . import processes
from .config import LARDER_BIN
from .processes import PROCESSES, peak_rss_mib, read_listening_line, stop


class Larder:
    """`larder serve` on a fresh data directory. `access_log`: "off" or a file path."""

    kind = "larder"

    def __init__(self, label, memory_limit=None, access_log="off", extra=(), catalog=None, data=None):
        """`data`: another server's data directory, to share (a second node on one catalog)."""
        self.label = label
        self.catalog = catalog
        self.data = data or os.path.join(processes.TMP, f"larder-{label}")
        if not data:
            os.makedirs(self.data)
        log_target = os.path.join(processes.TMP, f"access-{label}.log") if access_log == "file" else access_log
        args = [LARDER_BIN, "serve", "--data", self.data, "--port", "0", "--host", "127.0.0.1",
                "--allow-all", "--access-log", log_target, "--max-upload-size", "1000GiB",
                # Throughput is measured here, not the per-identity limits (every client is 127.0.0.1).
                "--write-quota", "0", "--uploads-in-progress", "0"] + list(extra)
        if memory_limit:
            args += ["--connection-memory-limit", memory_limit]
        if catalog:
            args += ["--catalog", catalog]
        self.command = " ".join(a if a != self.data else "$DATA" for a in args).replace(processes.TMP, "$TMP")
        self.stderr = open(os.path.join(processes.TMP, f"larder-{label}.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, stdin=subprocess.DEVNULL)
        PROCESSES.append(("larder", self.proc))
        self.base = read_listening_line(self.proc, "larder serve")
        self.upload_url = f"{self.base}/v0/b/bench/o?name=%s"
        self.download_url = f"{self.base}/v0/b/bench/o/%s?alt=media"
        self.tus_endpoint = f"{self.base}/v0/b/bench/uploads"
        self.upload_method = "POST"

    def peak_rss_mib(self):
        return peak_rss_mib(self.proc.pid)

    def close(self, keep_data=False):
        stop(self.proc)
        PROCESSES.remove(("larder", self.proc))
        self.stderr.close()
        if not keep_data:
            shutil.rmtree(self.data, ignore_errors=True)
