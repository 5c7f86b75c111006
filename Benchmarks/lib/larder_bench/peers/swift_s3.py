"""OpenStack Swift with its S3 API (scripts/swift-s3.sh): the s3 scenario's blob store and the direct
peer (curl signing its own requests), and the proxy's access log (the requests Larder made)."""
import os
import re
import socket
import subprocess
import threading
import time

from .. import processes
from ..config import CURL_MAX_TIME, ROOT
from ..processes import BenchError, log, run, server_cpu


S3_KEY, S3_SECRET, S3_REGION, S3_BUCKET = "test:tester", "testing", "us-east-1", "bench"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


class SwiftS3:
    """OpenStack Swift with s3api on loopback (scripts/swift-s3.sh), one bucket; stopped by `close`
    and, should this process die first, by the script's own watchdog (SWIFT_S3_OWNER_PID)."""

    def __init__(self, access_log_port=None):
        self.dir = os.path.join(processes.TMP, "swift")
        script = os.path.join(ROOT, "scripts/swift-s3.sh")
        env = dict(os.environ, SWIFT_S3_OWNER_PID=str(os.getpid()))
        if access_log_port:
            env["SWIFT_S3_ACCESS_LOG_UDP"] = str(access_log_port)
        for attempt in range(6):  # a port range below the ephemeral range; exit 4: taken, try another
            port = 20000 + (os.getpid() * 7 + attempt * 997) % 8000 // 5 * 5
            r = subprocess.run([script, "start", self.dir, str(port), S3_BUCKET], capture_output=True, text=True,
                               timeout=180, env=env)
            if r.returncode != 4:
                break
        if r.returncode == 3:
            raise FileNotFoundError(r.stderr.strip() or "OpenStack Swift is not installed (scripts/deps.sh)")
        if r.returncode != 0:
            raise BenchError(f"swift-s3.sh start exited {r.returncode}: {r.stderr.strip()[-500:]}")
        self.blobs_url = r.stdout.strip().splitlines()[-1]
        self.base = f"http://127.0.0.1:{port}"
        self.command = f"scripts/swift-s3.sh start $TMP/swift {port} {S3_BUCKET}   # OpenStack Swift, s3api + tempauth"
        self.netrc = os.path.join(processes.TMP, "swift.netrc")
        with open(os.open(self.netrc, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(f"machine 127.0.0.1 login {S3_KEY} password {S3_SECRET}\n")

    def pids(self):
        run_dir = os.path.join(self.dir, "run")
        return [int(open(os.path.join(run_dir, n)).read()) for n in os.listdir(run_dir) if n.endswith(".pid")]

    def cpu(self):
        """CPU seconds of the proxy, account, container and object servers and memcached."""
        return sum(server_cpu(p) for p in self.pids())

    def disk_writes(self):
        """Bytes Swift's processes have written to the filesystem so far (/proc/PID/io write_bytes:
        the pages they dirtied; one replica, so about what the object server stored)."""
        total = 0
        for p in self.pids():
            try:
                total += int(re.search(r"^write_bytes: (\d+)", open(f"/proc/{p}/io").read(), re.M).group(1))
            except (OSError, AttributeError):
                pass
        return total

    def curl_args(self, sha256):
        """curl signs with SigV4 itself; s3api demands x-amz-content-sha256 and checks it."""
        return ["--netrc-file", self.netrc, "--aws-sigv4", f"aws:amz:{S3_REGION}:s3",
                "-H", f"x-amz-content-sha256: {sha256}"]

    def close(self):
        subprocess.run([os.path.join(ROOT, "scripts/swift-s3.sh"), "stop", self.dir], capture_output=True, timeout=60)


class SwiftLog:
    """The requests Swift's proxy served, from its access log (scripts/swift-s3.sh sends it as syslog
    datagrams to SWIFT_S3_ACCESS_LOG_UDP): a thread reads them; `mark` and `since` cut out one
    transfer's. Only clients' requests are kept: the proxy also logs its middleware's subrequests
    (s3api's translations, SLO's segment reads, the copy's GET), which have no client address."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.records, self.last, self.seen = [], time.monotonic(), 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        from urllib.parse import unquote
        while True:
            try:
                line = self.sock.recv(65536).decode(errors="replace")
            except OSError:
                return
            self.last = time.monotonic()
            self.seen += 1
            m = re.search(r"proxy-server: (.*)", line)
            f = m.group(1).split() if m else []
            if len(f) < 20 or f[0] == "-":
                continue
            path = unquote(f[4])
            if path.startswith(("/v1/", "/auth", "/healthcheck")):
                continue
            number = lambda x: int(x) if x.isdigit() else 0
            self.records.append({"op": s3_operation(f[3], path, number(f[10])), "status": f[6], "in": number(f[10]),
                                 "out": number(f[11]), "start": float(f[18]), "end": float(f[19]), "path": path})
            if os.environ.get("BENCH_S3_LOG_DEBUG"):
                log(f"swift: {f[3]} {path[:90]} {f[6]} in {f[10]} out {f[11]} start {f[18]} end {f[19]}")

    def mark(self):
        return len(self.records)

    def since(self, mark):
        return self.records[mark:]

    def close(self):
        self.sock.close()


def s3_operation(method, path, body_bytes):
    """The S3 operation of a request line (s3api logs the S3 path with its query)."""
    query = "&" + path.partition("?")[2] + "&"
    if method == "PUT":
        return "UploadPart" if "&partNumber=" in query else "PUT" if body_bytes else "PUT (no body: copy)"
    if method == "POST":
        return "CreateMultipartUpload" if re.search(r"&uploads[=&]", query) else \
            "CompleteMultipartUpload" if "&uploadId=" in query else "POST"
    if method == "DELETE":
        return "AbortMultipartUpload" if "&uploadId=" in query else "DELETE"
    if method == "GET" and "&list-type=" in query:
        return "ListObjectsV2"
    return method


def s3_requests(records):
    """Counts, times and bytes of some requests: {"n", "ops": {op: count}, "seconds": {op: seconds
    Swift spent answering them (its log's start to end)}, "in": bytes sent to Swift, "out": bytes
    Swift answered with, "errors": non-2xx}."""
    ops, seconds = {}, {}
    for r in records:
        ops[r["op"]] = ops.get(r["op"], 0) + 1
        seconds[r["op"]] = seconds.get(r["op"], 0) + r["end"] - r["start"]
    return {"n": len(records), "ops": ops, "seconds": seconds, "in": sum(r["in"] for r in records),
            "out": sum(r["out"] for r in records), "errors": sum(not r["status"].startswith("2") for r in records)}


def s3_curl(args, expect_status, expect_up=None, expect_down=None):
    """curl for the direct side: no `-H Expect:` (libcurl 7.88 signs even a header it does not send,
    so suppressing 100-continue breaks the signature); returns time_total."""
    fmt = "%{http_code} %{time_total} %{size_upload} %{size_download}"
    r = run(["curl", "-sS", "--noproxy", "*", "-o", os.devnull, "--max-time", str(CURL_MAX_TIME), "-w", fmt] + args,
            timeout=CURL_MAX_TIME + 30)
    code, total, up, down = r.stdout.split()
    if int(code) not in expect_status or (expect_up is not None and int(float(up)) != expect_up) \
            or (expect_down is not None and int(float(down)) != expect_down):
        raise BenchError(f"curl {args[-1]} answered {code}, sent {up}, received {down} bytes")
    return float(total)
