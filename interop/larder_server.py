"""Starts and kills a real `larder serve` for the interop tests (shared by the interop tests)."""
import os
import select
import signal
import subprocess
import time

import requests


class LarderServer:
    """`$LARDER_BIN serve --data DIR --port PORT --allow-all`, parsed from its 'listening on' line.

    `allow_all=False` leaves the policy to `extra` (e.g. `--rules FILE`). `env` adds to (or
    overrides) this process's environment, e.g. the S3 credentials of `--blobs s3://…`, which are
    never on the command line; `stderr_path` keeps the server's stderr in that file (appended)
    instead of discarding it, and `access_log` (a file) its access log, so a test can show what a
    node answered and why it refused or failed."""

    def __init__(self, data_dir, port=0, extra=(), allow_all=True, env=None, stderr_path=None, access_log="off"):
        binary = os.environ.get("LARDER_BIN")
        assert binary and os.path.exists(binary), "set LARDER_BIN to the built larder binary"
        self.data_dir = str(data_dir)
        args = [binary, "serve", "--data", self.data_dir, "--port", str(port),
                *(["--allow-all"] if allow_all else []), "--access-log", str(access_log), *extra]
        environment = dict(os.environ, **env) if env else None
        self.stderr_path = stderr_path
        self.proc = None
        # The port of a SIGKILLed server is free at once (SO_REUSEADDR); retry a bind race anyway.
        for attempt in range(20):
            if stderr_path is None:
                self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment)
            else:
                with open(stderr_path, "ab") as err:
                    self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, env=environment)
            self.port = self._read_port()
            if self.port:
                break
            self.proc.wait(timeout=30)
            time.sleep(0.25)
        assert self.port, "larder serve did not print 'listening on http://HOST:PORT'"
        self.url = f"http://127.0.0.1:{self.port}"

    def _read_port(self):
        deadline = time.monotonic() + 60
        line = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                byte = os.read(self.proc.stdout.fileno(), 1)
                if not byte:
                    return None
                if byte == b"\n":
                    text = line.decode(errors="replace").strip()
                    line = b""
                    if text.startswith("listening on http://"):
                        return int(text.rsplit(":", 1)[1].strip("/"))
                else:
                    line += byte
            elif self.proc.poll() is not None:
                return None
        return None

    def kill(self):
        """SIGKILL: no graceful anything, like a power cut for the process."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()

    def object_metadata(self, bucket, name):
        r = requests.get(f"{self.url}/v0/b/{bucket}/o/{requests.utils.quote(name, safe='')}", timeout=60)
        r.raise_for_status()
        return r.json()

    def object_sha256(self, bucket, name):
        """SHA-256 of the downloaded bytes, streamed."""
        import hashlib
        h = hashlib.sha256()
        with requests.get(f"{self.url}/v0/b/{bucket}/o/{requests.utils.quote(name, safe='')}?alt=media",
                          stream=True, timeout=120) as r:
            r.raise_for_status()
            for chunk in r.iter_content(1 << 20):
                h.update(chunk)
        return h.hexdigest()
