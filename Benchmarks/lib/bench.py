#!/usr/bin/env python3
"""Larder's benchmark suite (called by Benchmarks/run.sh; see Benchmarks/README.md).

One run measures every ratio of issue 13 on this machine, Larder and its peer side by side,
interleaved within each of BENCH_REPS (>= 3) rounds, and prints them in one table:
  limits      the machine: SHA-256/MD5 speed (openssl speed), write+fsync (dd conv=fsync), disk
              read (dd iflag=direct), page-cache read;
  gets        4 KiB GETs over keep-alive connections (wrk): Larder with its access log off and on
              (buffered, to a file) against nginx with its log off: requests/s, p99, server CPU
              µs per request;
  upload      a simple upload (BENCH_UPLOAD_MIB, 512) through Larder (POST) and nginx (WebDAV PUT),
              and against the durable-CAS limit min(write+fsync, SHA-256);
  tus         a tus upload (BENCH_TUS_MIB, 256) in 8 and 1 MiB PATCHes: Larder, tusd, fastapi-tusd;
  download    a large download (BENCH_SIZE_MIB, 1024) from Larder and nginx (both sendfile), and
              Larder's peak RSS over that upload and the downloads;
  concurrent  Larder's peak RSS with BENCH_CONCURRENT (200) clients at once (uploads, then GETs);
  verify      `larder verify` of a store against the disk's read rate;
  postgres    the PostgreSQL catalog beside SQLite: 4 KiB GETs and 4 KiB uploads, Larder on each,
              a throw-away PostgreSQL (scripts/pg.sh, fsync on) started and stopped here;
  cml         (opt-in: BENCH_LIMITS) the connection-memory-limit trade-off;
  gc          (opt-in: BENCH_GC_SCALE=1) gc of a million blobs.
  s3          (opt-in: BENCH_S3=1) Larder on PostgreSQL + Swift's S3 API vs curl straight to that Swift:
              transfers, 4 KiB GETs, and resumable uploads (tus in 8 and 1 MiB PATCHes, BENCH_S3_TUS_MIB);
  s3-tus      the S3 scenario's resumable uploads alone.
BENCH_ONLY=gets,tus,... runs a subset; BENCH_QUICK=1 shrinks sizes and durations (a few minutes).
Everything listens on 127.0.0.1 only. Every server is started here and stopped at exit; every
byte written lives in one temp dir that is removed at exit, whatever happens (a watchdog alarm
bounds the whole run). A missing peer is reported as missing, never dropped.
"""
import datetime
import http.client
import json
import os
import platform
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import urljoin, urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
ALL_SCENARIOS = ["limits", "gets", "upload", "tus", "download", "concurrent", "verify", "postgres"]
ONLY = [s for s in os.environ.get("BENCH_ONLY", "").replace(" ", ",").split(",") if s]
SCENARIOS = ONLY or ALL_SCENARIOS + (["cml"] if LIMITS else []) + (["gc"] if GC_SCALE else []) + (["s3"] if os.environ.get("BENCH_S3") == "1" else [])


class BenchError(Exception):
    pass


class Watchdog(BaseException):
    """Raised by SIGALRM / SIGTERM / SIGINT so that cleanup always runs."""


# ---------------------------------------------------------------- processes and cleanup

PROCESSES = []  # (name, Popen) of every server we started
POSTGRES = []  # data directories of the PostgreSQL servers we started (stopped with scripts/pg.sh)
TMP = None


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def stop(proc, sig=signal.SIGTERM, wait=35):
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def cleanup():
    for name, proc in reversed(PROCESSES):
        stop(proc, signal.SIGQUIT if name == "nginx" else signal.SIGTERM, wait=15)
    PROCESSES.clear()
    for directory in POSTGRES:
        subprocess.run([os.path.join(ROOT, "scripts/pg.sh"), "stop", directory], capture_output=True, timeout=60)
    POSTGRES.clear()
    if TMP and os.path.isdir(TMP):
        shutil.rmtree(TMP, ignore_errors=True)


def on_signal(signum, _frame):
    raise Watchdog(f"signal {signal.Signals(signum).name}")


def run(args, timeout=120, check=True, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise BenchError(f"nothing listening on 127.0.0.1:{port} after {seconds}s")


def server_pids(pid):
    """The server and its live children (nginx's workers)."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                pids.append(int(entry))
    return pids


def server_cpu(pid):
    """CPU seconds (user + system) used so far by the server and its live children."""
    total = 0
    for p in server_pids(pid):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def server_write_calls(pid):
    """write(2)-family calls made so far by the server and its live children (/proc/PID/io syscw)."""
    total = 0
    for p in server_pids(pid):
        try:
            total += int(re.search(r"syscw: (\d+)", open(f"/proc/{p}/io").read()).group(1))
        except (OSError, AttributeError):
            pass
    return total


# ---------------------------------------------------------------- servers

def peak_rss_mib(pid):
    """The process's peak resident set (VmHWM) so far, MiB."""
    try:
        m = re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())
        return int(m.group(1)) / 1024 if m else float("nan")
    except OSError:
        return float("nan")


def read_listening_line(proc, name, seconds=60):
    """The URL in the first stdout line that says 'listening on http://…'."""
    line, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if select.select([proc.stdout], [], [], 0.5)[0]:
            b = os.read(proc.stdout.fileno(), 1)
            if not b:
                break
            if b == b"\n":
                text = line.decode(errors="replace")
                line = b""
                m = re.search(r"listening on (http://\S+)", text)
                if m:
                    return m.group(1).rstrip("/")
            else:
                line += b
    raise BenchError(f"{name} did not print its address")


class Larder:
    """`larder serve` on a fresh data directory. `access_log`: "off" or a file path."""

    kind = "larder"

    def __init__(self, label, memory_limit=None, access_log="off", extra=(), catalog=None):
        self.label = label
        self.catalog = catalog
        self.data = os.path.join(TMP, f"larder-{label}")
        os.makedirs(self.data)
        log_target = os.path.join(TMP, f"access-{label}.log") if access_log == "file" else access_log
        args = [LARDER_BIN, "serve", "--data", self.data, "--port", "0", "--host", "127.0.0.1",
                "--allow-all", "--access-log", log_target, "--max-upload-size", "1000GiB"] + list(extra)
        if memory_limit:
            args += ["--connection-memory-limit", memory_limit]
        if catalog:
            args += ["--catalog", catalog]
        self.command = " ".join(a if a != self.data else "$DATA" for a in args).replace(TMP, "$TMP")
        self.stderr = open(os.path.join(TMP, f"larder-{label}.log"), "wb")
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


class Postgres:
    """A throw-away PostgreSQL on loopback from scripts/pg.sh, with fsync on (durable commits, as
    SQLite's synchronous=FULL), in $TMP/pg; stopped by `close` or, whatever happens, by cleanup.
    `missing` says why there is none (no server binaries: scripts/deps.sh installs them)."""

    def __init__(self):
        self.dir = os.path.join(TMP, "pg")
        self.url, self.missing = None, None
        # As root the server runs as `postgres`, which must be able to traverse $TMP (mode 0700).
        os.chmod(TMP, 0o711)
        r = subprocess.run([os.path.join(ROOT, "scripts/pg.sh"), "start", self.dir, str(free_port())],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "FSYNC": "on"})
        if r.returncode != 0:
            self.missing = (r.stderr.strip() or f"scripts/pg.sh exited {r.returncode}")[-300:]
            return
        POSTGRES.append(self.dir)
        self.url = r.stdout.strip()
        psql = shutil.which("psql")
        self.version = (run([psql, "-At", "-c", "SHOW server_version", self.url], check=False).stdout.strip()
                        if psql else "") or "?"
        self.command = f"FSYNC=on scripts/pg.sh start $TMP/pg PORT   # PostgreSQL {self.version}, fsync on"

    def catalog(self, label):
        """A catalog URL of its own (a schema per Larder)."""
        return f"{self.url}?schema=bench_{re.sub('[^a-z0-9]', '_', label)}"

    def cpu(self):
        """CPU seconds of the postmaster and its live backends."""
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            return server_cpu(int(f.readline()))

    def close(self):
        if self.dir in POSTGRES:
            POSTGRES.remove(self.dir)
            run([os.path.join(ROOT, "scripts/pg.sh"), "stop", self.dir], check=False)


NGINX_CONF = """\
# Generated by Benchmarks/lib/bench.py: nginx as a peer, loopback only, everything under {dir}.
{user}worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    client_max_body_size 0;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {dir}/www;
        location /dav/ {{
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
        location / {{ }}
    }}
}}
"""


def nginx_binary():
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    return binary if os.access(binary, os.X_OK) else None


class Nginx:
    label = "nginx"
    kind = "nginx"

    def __init__(self, workers):
        binary = nginx_binary()
        if not binary:
            raise BenchError("nginx is not installed")
        self.dir = os.path.join(TMP, "nginx")
        os.makedirs(os.path.join(self.dir, "www", "dav"))
        port = free_port()
        self.conf = os.path.join(self.dir, "nginx.conf")
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, port=port, workers=workers, user=user))
        args = [binary, "-p", self.dir, "-c", self.conf, "-e", os.path.join(self.dir, "error.log")]
        self.command = " ".join(args).replace(self.dir, "$NGINX_DIR")
        self.stderr = open(os.path.join(TMP, "nginx.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.stderr, stderr=self.stderr, stdin=subprocess.DEVNULL)
        PROCESSES.append(("nginx", self.proc))
        wait_for_port(port, self.proc)
        self.base = f"http://127.0.0.1:{port}"
        self.upload_url = f"{self.base}/dav/%s"
        self.download_url = f"{self.base}/dav/%s"
        self.upload_method = "PUT"

    def close(self):
        stop(self.proc, signal.SIGQUIT)
        PROCESSES.remove(("nginx", self.proc))
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Tusd:
    """tusd 1.13 (the reference tus server) from $LARDER_PEERS/tusd/tusd."""

    def __init__(self, store):
        self.store = store
        self.proc = subprocess.Popen([TUSD_BIN, "-host", "127.0.0.1", "-port", "0", "-upload-dir", store],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        PROCESSES.append(("tusd", self.proc))
        self.tus_endpoint = read_listening_line(self.proc, "tusd") + "/"

    def stored_sha256(self, location):
        return sha256_file(os.path.join(self.store, location.rstrip("/").rsplit("/", 1)[1]))

    def close(self):
        stop(self.proc)
        PROCESSES.remove(("tusd", self.proc))


FASTAPI_APP = """
from fastapi import FastAPI
from fastapi_tusd import TusRouter
import os
app = FastAPI()
port = os.environ["BENCH_PORT"]
app.include_router(TusRouter(store_dir=os.environ["BENCH_STORE"], location=f"http://127.0.0.1:{port}/files"),
                   prefix="/files")
"""


def fastapi_tusd_available():
    """fastapi-tusd and uvicorn importable by this Python (run.sh installs them into a venv)."""
    r = subprocess.run([sys.executable, "-c", "import fastapi_tusd, uvicorn"], capture_output=True)
    return r.returncode == 0


class FastapiTusd:
    """fastapi-tusd (PyPI) under uvicorn: a Python tus server."""

    def __init__(self, store):
        port = free_port()
        app_dir = os.path.join(TMP, "fastapi-app")
        os.makedirs(app_dir, exist_ok=True)
        with open(os.path.join(app_dir, "tusapp.py"), "w") as f:
            f.write(FASTAPI_APP)
        env = dict(os.environ, BENCH_PORT=str(port), BENCH_STORE=store)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "tusapp:app", "--app-dir", app_dir, "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning", "--no-access-log"], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        PROCESSES.append(("fastapi-tusd", self.proc))
        # (fastapi-tusd's OPTIONS answer fails under current FastAPI: probe the socket instead.)
        wait_for_port(port, self.proc, seconds=60)
        self.tus_endpoint = f"http://127.0.0.1:{port}/files"

    def close(self):
        stop(self.proc)
        PROCESSES.remove(("fastapi-tusd", self.proc))


# ---------------------------------------------------------------- measurements

def curl(args, expect_status, expect_up=None, expect_down=None):
    """One transfer; returns curl's time_total in seconds."""
    fmt = "%{http_code} %{time_total} %{size_upload} %{size_download}"
    r = run(["curl", "-sS", "--noproxy", "*", "-o", os.devnull, "-H", "Expect:", "--max-time", str(CURL_MAX_TIME),
             "-w", fmt] + args, timeout=CURL_MAX_TIME + 30)
    code, total, up, down = r.stdout.split()
    if int(code) not in expect_status:
        raise BenchError(f"curl {args[-1]} answered {code}")
    if expect_up is not None and int(float(up)) != expect_up:
        raise BenchError(f"curl {args[-1]} sent {up} bytes, expected {expect_up}")
    if expect_down is not None and int(float(down)) != expect_down:
        raise BenchError(f"curl {args[-1]} received {down} bytes, expected {expect_down}")
    return float(total)


def upload(server, path, name, stats=None):
    """Seconds for one upload; appends the server's CPU seconds and write calls to `stats`."""
    # Start from a quiet disk: dirty pages of an earlier step (nginx never fsyncs) would otherwise be
    # written back during this upload and slow its fsync.
    os.sync()
    cpu, writes = server_cpu(server.proc.pid), server_write_calls(server.proc.pid)
    # -T streams the file (--data-binary would read all of it into memory first).
    t = curl(["-X", server.upload_method, "-T", path, server.upload_url % name],
             expect_status=(200, 201, 204), expect_up=os.path.getsize(path))
    if stats is not None:
        stats.append((server_cpu(server.proc.pid) - cpu, server_write_calls(server.proc.pid) - writes))
    return t


def download(server, name, size, stats=None):
    cpu = server_cpu(server.proc.pid)
    t = curl([server.download_url % name], expect_status=(200,), expect_down=size)
    if stats is not None:
        stats.append((server_cpu(server.proc.pid) - cpu, 0))
    return t


def stamp(path, rep):
    """Makes the content of rep N unique (first 64 bytes), so no run is helped by deduplication."""
    with open(path, "r+b") as f:
        f.write(f"larder-bench rep {rep} {time.time_ns()} ".encode().ljust(64, b"."))


def wrk(server, name):
    """Small keep-alive GETs: requests/s, latency, the server's CPU µs per request, problems."""
    pid = server.proc.pid
    cpu = server_cpu(pid)
    result = wrk_tool(server.download_url % name)
    result["cpu_us"] = (server_cpu(pid) - cpu) / max(1, result["requests"]) * 1e6
    return result


def wrk_tool(url):
    if shutil.which("wrk"):
        r = run(["wrk", f"-t{WRK_THREADS}", f"-c{WRK_CONNECTIONS}", f"-d{WRK_SECONDS}s", "--latency", url],
                timeout=WRK_SECONDS + 60)
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", r.stdout).group(1))
        requests = int(re.search(r"(\d+) requests in", r.stdout).group(1))
        p50 = re.search(r"^\s+50%\s+(\S+)", r.stdout, re.M)
        p99 = re.search(r"^\s+99%\s+(\S+)", r.stdout, re.M)
        problems = []
        for pattern in (r"Non-2xx or 3xx responses: \d+", r"Socket errors: [^\n]+"):
            m = re.search(pattern, r.stdout)
            if m:
                problems.append(m.group(0))
        return {"rps": rps, "requests": requests, "p50": p50.group(1) if p50 else "?", "p99": p99.group(1) if p99 else "?",
                "problems": "; ".join(problems), "tool": f"wrk -t{WRK_THREADS} -c{WRK_CONNECTIONS} -d{WRK_SECONDS}s"}
    return python_get_loop(url)


def python_get_loop(url):
    """Fallback when wrk is missing: WRK_CONNECTIONS keep-alive connections in threads (GIL-bound)."""
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(url)
    target = u.path + ("?" + u.query if u.query else "")
    counts, errors = [], []
    stop_at = time.monotonic() + WRK_SECONDS

    def worker():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        n = 0
        while time.monotonic() < stop_at:
            conn.request("GET", target)
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                errors.append(resp.status)
            n += 1
        counts.append(n)

    threads = [threading.Thread(target=worker) for _ in range(WRK_CONNECTIONS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rps = sum(counts) / (time.monotonic() - started)
    return {"rps": rps, "requests": sum(counts), "p50": "?", "p99": "?", "problems": f"{len(errors)} non-200" if errors else "",
            "tool": f"python keep-alive loop, {WRK_CONNECTIONS} connections (wrk missing; client-bound)"}


def timed(args, timeout=300):
    started = time.monotonic()
    run(args, timeout=timeout)
    return time.monotonic() - started



def machine_description():
    def read(path):
        try:
            return open(path).read()
        except OSError:
            return ""
    cpu = re.search(r"model name\s*:\s*(.*)", read("/proc/cpuinfo"))
    flags = re.search(r"flags\s*:\s*(.*)", read("/proc/cpuinfo"))
    mem = re.search(r"MemTotal:\s*(\d+) kB", read("/proc/meminfo"))
    fs = run(["findmnt", "-T", TMP, "-no", "FSTYPE,SOURCE,TARGET"], check=False).stdout.strip()
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


def fmt_s(x):
    return f"{x:.2f}"


def fmt_mb(x):
    return f"{x / MB:,.0f}"


def median_of(samples):
    return statistics.median(samples)



def sha256_file(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(MiB):
            h.update(block)
    return h.hexdigest()


def make_file(path, mib):
    """`mib` MiB of random bytes, fsync'ed (so no later step pays for its writeback)."""
    with open("/dev/urandom", "rb") as src, open(path, "wb") as dst:
        for _ in range(mib):
            dst.write(src.read(MiB))
        dst.flush()
        os.fsync(dst.fileno())
    return path


def evict(path):
    """Drops `path`'s (clean) pages from the page cache, so the next read comes from the disk.
    Only this file's pages: nothing else on the machine is disturbed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- scenarios

def scenario_limits(files):
    log("limits: openssl speed sha256, md5")
    seconds = 1 if QUICK else 3
    limits = {"sha256": openssl_speed("sha256", seconds), "md5": openssl_speed("md5", seconds)}
    limits["sha256+md5"] = 1 / (1 / limits["sha256"] + 1 / limits["md5"])
    big = files["upload"]
    size = os.path.getsize(big)
    target = os.path.join(TMP, "dd-write.bin")
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


def p99_us(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text or "")
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def scenario_gets(files, commands):
    """4 KiB GETs: Larder (log off), Larder (log on, to a file), nginx (log off), interleaved."""
    small = files["small"]
    variants = {"larder": Larder("gets"), "larder+log": Larder("gets-log", access_log="file")}
    commands += [variants["larder"].command, variants["larder+log"].command]
    peers = {}
    if nginx_binary():
        peers["nginx"] = Nginx(workers=os.cpu_count())
        commands.append(peers["nginx"].command + "   # config: NGINX_CONF in Benchmarks/lib/bench.py")
    servers = {**variants, **peers}
    for s in servers.values():
        upload(s, small, "small.bin")
    runs = {name: [] for name in servers}
    names = list(servers)
    for rep in range(REPS):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            g = wrk(servers[name], "small.bin")
            runs[name].append(g)
            log(f"gets {name} round {rep + 1}: {g['rps']:,.0f}/s p99 {g['p99']} {g['cpu_us']:.0f} µs CPU")
    for s in servers.values():
        s.close()
    if "nginx" not in runs:
        runs["nginx"] = None
    return runs


def scenario_upload(files, commands):
    """Simple upload of BENCH_UPLOAD_MIB: Larder POST vs nginx WebDAV PUT, interleaved."""
    big = files["upload"]
    larder = Larder("upload")
    servers = [larder]
    if nginx_binary():
        servers.append(Nginx(workers=os.cpu_count()))
    times = {s.kind: [] for s in servers}
    cpu = {s.kind: [] for s in servers}
    for rep in range(REPS):
        stamp(big, rep)
        order = servers if rep % 2 == 0 else servers[::-1]
        for s in order:
            stats = []
            times[s.kind].append(upload(s, big, f"up{rep}.bin", stats))
            cpu[s.kind].append(stats[0][0])
            log(f"upload {s.kind} round {rep + 1}: {times[s.kind][-1]:.2f}s")
    for s in servers:
        s.close()
    if len(servers) == 1:
        times["nginx"] = None
    return {"times": times, "cpu": cpu, "size": os.path.getsize(big)}


WRK_UPLOAD_LUA = """\
-- Generated by Benchmarks/lib/bench.py: POSTs of SIZE bytes, each to a new name with new
-- content (no request is helped by deduplication or by replacing the same row).
local threads = 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
local n = 0
local head = "{head}"
function request()
  n = n + 1
  local name = string.format("s%d-%d-%d", id, n, os.time())
  local body = head .. name
  return wrk.format("POST", "{path}" .. name, {{["Content-Type"] = "application/octet-stream"}},
                    body .. string.rep("{filler}", {size} - #body))
end
"""

# The small uploads' bodies: text (libmagic's costliest case: it runs its text and encoding
# tests over the first 16 KiB) and the start of a PNG (a magic number at offset 0 and binary
# bytes after it, as an app's avatars and photos are), so one row measures the server rather
# than the sniffing of text. Lua decimal escapes: \137PNG\r\n\26\n, then an IHDR chunk.
SMALL_UPLOAD_BODIES = {
    "text": {"head": "", "filler": "."},
    "png": {"head": "\\137PNG\\r\\n\\26\\n\\0\\0\\0\\13IHDR\\0\\0\\0\\1\\0\\0\\0\\1\\8\\2\\0\\0\\0",
            "filler": "\\0"},
}


def small_uploads(server, postgres=None, body="text"):
    """SMALL_BYTES uploads over SMALL_UPLOAD_CONNECTIONS keep-alive connections for WRK_SECONDS:
    requests/s (wrk), commits/s (new objects the catalog holds afterwards, by `larder ls`),
    p99, Larder's (and PostgreSQL's) CPU µs per upload. `body`: a key of SMALL_UPLOAD_BODIES."""
    if not shutil.which("wrk"):
        raise BenchError("the small-upload rows need wrk (apt-get install wrk)")
    script = os.path.join(TMP, f"upload-{body}.lua")
    with open(script, "w") as f:
        f.write(WRK_UPLOAD_LUA.format(path=urlsplit(server.upload_url).path + "?name=", size=SMALL_BYTES,
                                      **SMALL_UPLOAD_BODIES[body]))
    before = objects_in(server)
    cpu, pg_cpu = server_cpu(server.proc.pid), postgres.cpu() if postgres else 0
    started = time.monotonic()
    r = run(["wrk", "-t2", f"-c{SMALL_UPLOAD_CONNECTIONS}", f"-d{WRK_SECONDS}s", "--latency", "-s", script,
             server.base], timeout=WRK_SECONDS + 60)
    seconds = time.monotonic() - started
    requests = int(re.search(r"(\d+) requests in", r.stdout).group(1))
    wrk_seconds = float(re.search(r"requests in ([\d.]+)s", r.stdout).group(1))
    larder_us = (server_cpu(server.proc.pid) - cpu) / max(1, requests) * 1e6
    pg_us = (postgres.cpu() - pg_cpu) / max(1, requests) * 1e6 if postgres else None
    committed = objects_in(server) - before
    problems = [m.group(0) for p in (r"Non-2xx or 3xx responses: \d+", r"Socket errors: [^\n]+")
                for m in [re.search(p, r.stdout)] if m]
    p99 = re.search(r"^\s+99%\s+(\S+)", r.stdout, re.M)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", r.stdout).group(1)), "requests": requests,
            "commits": committed, "cps": committed / wrk_seconds, "p99": p99.group(1) if p99 else "?",
            "cpu_us": larder_us, "pg_cpu_us": pg_us, "problems": "; ".join(problems), "seconds": seconds}


def objects_in(server):
    """Objects in the bench bucket, by `larder ls` (its per-bucket counts) on the server's catalog."""
    args = [LARDER_BIN, "ls", "--data", server.data]
    if server.catalog:
        args += ["--catalog", server.catalog]
    m = re.search(r"^bench/\t(\d+) objects$", run(args, timeout=300).stdout, re.M)
    return int(m.group(1)) if m else 0


def scenario_postgres(files, commands):
    """The PostgreSQL catalog beside SQLite: 4 KiB GETs and 4 KiB uploads, interleaved."""
    pg = Postgres()
    if pg.missing:
        log(f"postgres: missing ({pg.missing})")
        return {"missing": pg.missing}
    commands.append(pg.command)
    try:
        servers = {"SQLite": Larder("cat-sqlite"), "PostgreSQL": Larder("cat-pg", catalog=pg.catalog("cat-pg"))}
        commands.append(servers["PostgreSQL"].command.replace(pg.url, "$PG"))
        for s in servers.values():
            upload(s, files["small"], "small.bin")
        gets = {name: [] for name in servers}
        ups = {name: [] for name in servers}
        ups_png = {name: [] for name in servers}
        names = list(servers)
        for rep in range(REPS):
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                cpu = pg.cpu() if name == "PostgreSQL" else 0
                g = wrk(servers[name], "small.bin")
                g["pg_cpu_us"] = (pg.cpu() - cpu) / max(1, g["requests"]) * 1e6 if name == "PostgreSQL" else None
                gets[name].append(g)
                log(f"postgres gets {name} round {rep + 1}: {g['rps']:,.0f}/s p99 {g['p99']} {g['cpu_us']:.0f} µs CPU")
            for body, runs in (("text", ups), ("png", ups_png)):
                for name in order:
                    u = small_uploads(servers[name], pg if name == "PostgreSQL" else None, body=body)
                    runs[name].append(u)
                    log(f"postgres uploads ({body}) {name} round {rep + 1}: {u['rps']:,.0f} req/s, "
                        f"{u['cps']:,.0f} commits/s, p99 {u['p99']}, {u['cpu_us']:.0f} µs CPU")
        for s in servers.values():
            s.close()
        return {"gets": gets, "uploads": ups, "uploads_png": ups_png, "version": pg.version}
    finally:
        pg.close()


def tus_upload(endpoint, path, size, chunk, name="bench.bin"):
    """POST then PATCH every chunk over one keep-alive connection (stdlib client); returns seconds
    from the POST to the last answer, and the upload's URL."""
    import base64
    u = urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    tus = {"Tus-Resumable": "1.0.0"}
    metadata = "name " + base64.b64encode(name.encode()).decode()
    started = time.perf_counter()
    conn.request("POST", u.path, headers={**tus, "Upload-Length": str(size), "Upload-Metadata": metadata,
                                          "Content-Length": "0"})
    r = conn.getresponse()
    r.read()
    if r.status != 201:
        raise BenchError(f"tus POST {endpoint} answered {r.status}")
    location = urljoin(endpoint, r.getheader("Location"))
    target = urlsplit(location).path
    offset = 0
    with open(path, "rb") as f:
        while offset < size:
            body = f.read(chunk)
            conn.request("PATCH", target, body=body, headers={
                **tus, "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset)})
            r = conn.getresponse()
            r.read()
            offset += len(body)
            if r.status != 204 or int(r.getheader("Upload-Offset", -1)) != offset:
                raise BenchError(f"tus PATCH {location} answered {r.status} at offset {offset}")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds, location


def scenario_tus(files):
    """tus upload in each chunk size: Larder, tusd, fastapi-tusd, a fresh server per run,
    interleaved (the order rotates per round); the stored bytes are checked after each run."""
    path = files["tus"]
    size = os.path.getsize(path)
    digest = sha256_file(path)
    kinds = {"larder": None}
    missing = {}
    if os.access(TUSD_BIN, os.X_OK):
        kinds["tusd"] = None
    else:
        missing["tusd"] = f"no executable at {TUSD_BIN} (set LARDER_PEERS; see its README)"
    if fastapi_tusd_available():
        kinds["fastapi-tusd"] = None
    else:
        missing["fastapi-tusd"] = "fastapi-tusd/uvicorn not importable (run.sh installs them into Benchmarks/.venv-bench)"
    names = list(kinds)
    results = {}
    for chunk in TUS_CHUNKS:
        runs = {name: [] for name in names}
        cpu = {name: [] for name in names}
        for rep in range(REPS):
            k = rep % len(names)
            for name in names[k:] + names[:k]:
                store = os.path.join(TMP, f"tus-{name}-{chunk}-{rep}")
                os.makedirs(store, exist_ok=True)
                os.sync()
                server = Larder(f"tus-{chunk}-{rep}") if name == "larder" else \
                    Tusd(store) if name == "tusd" else FastapiTusd(store)
                try:
                    c0 = server_cpu(server.proc.pid)
                    seconds, location = tus_upload(server.tus_endpoint, path, size, chunk * MiB)
                    cpu[name].append(server_cpu(server.proc.pid) - c0)
                    if name == "larder":
                        meta = json.loads(urlopen_text(server.base + "/v0/b/bench/o/bench.bin"))
                        if meta.get("sha256") != digest:
                            raise BenchError("larder stored different bytes")
                    elif name == "tusd" and server.stored_sha256(location) != digest:
                        raise BenchError("tusd stored different bytes")
                finally:
                    server.close()
                    shutil.rmtree(store, ignore_errors=True)
                runs[name].append(seconds)
                log(f"tus {chunk} MiB {name} round {rep + 1}: {seconds:.2f}s")
        results[chunk] = {"runs": runs, "cpu": cpu}
    return {"size": size, "chunks": results, "missing": missing}


def urlopen_text(url):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("GET", u.path + ("?" + u.query if u.query else ""))
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return body


def scenario_download(files, commands):
    """Large download from Larder and nginx (both sendfile), interleaved; Larder's peak RSS over
    the upload of the file and all downloads (a fresh process)."""
    big = files["download"]
    larder = Larder("download")
    servers = [larder]
    if nginx_binary():
        servers.append(Nginx(workers=os.cpu_count()))
    for s in servers:
        upload(s, big, "big.bin")
    times = {s.kind: [] for s in servers}
    cpu = {s.kind: [] for s in servers}
    for rep in range(REPS):
        order = servers if rep % 2 == 0 else servers[::-1]
        for s in order:
            stats = []
            times[s.kind].append(download(s, "big.bin", SIZE, stats))
            cpu[s.kind].append(stats[0][0])
            log(f"download {s.kind} round {rep + 1}: {times[s.kind][-1]:.2f}s")
    rss = larder.peak_rss_mib()
    for s in servers:
        if s is larder:
            s.close(keep_data=True)  # the verify scenario reads this store
        else:
            s.close()
    if len(servers) == 1:
        times["nginx"] = None
    return {"times": times, "cpu": cpu, "rss": rss, "store": larder.data}


def scenario_concurrent(files):
    """CONCURRENT clients at once against one Larder: each uploads CONCURRENT_UPLOAD_MIB (all
    bodies in flight together), then the same clients GET 4 KiB in a loop; Larder's peak RSS."""
    larder = Larder("concurrent", extra=["--per-ip-connection-limit", "0"])
    upload(larder, files["small"], "small.bin")
    body = os.urandom(CONCURRENT_UPLOAD_MIB * MiB)
    u = urlsplit(larder.base)
    stop_at = [0.0]
    connected = threading.Barrier(CONCURRENT)
    # The GET phase lasts WRK_SECONDS from the moment every upload is answered (set before any
    # client is released).
    uploaded = threading.Barrier(CONCURRENT, action=lambda: stop_at.__setitem__(0, time.monotonic() + WRK_SECONDS))
    errors, gets = [], []

    def client(i):
        try:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
            conn.connect()
            connected.wait(timeout=120)
            conn.request("POST", f"/v0/b/bench/o?name=c{i}.bin", body=body)
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                errors.append(f"upload {r.status}")
            uploaded.wait(timeout=600)
            n = 0
            while time.monotonic() < stop_at[0]:
                conn.request("GET", "/v0/b/bench/o/small.bin?alt=media")
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(f"get {r.status}")
                n += 1
            gets.append(n)
            conn.close()
        except Exception as e:  # reported, never hidden
            errors.append(repr(e)[:200])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CONCURRENT)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    rss = larder.peak_rss_mib()
    larder.close()
    return {"rss": rss, "clients": CONCURRENT, "upload_mib": CONCURRENT_UPLOAD_MIB, "gets": sum(gets),
            "errors": errors[:5], "error_count": len(errors), "seconds": time.monotonic() - started}


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
        rows.append({"limit": limit, "upload": median_of(times), "uploads": times, "rps": g["rps"],
                     "cpu": median_of([c for c, _ in stats]),
                     "write_size": os.path.getsize(big) / max(1, median_of([w for _, w in stats])),
                     "p99": g["p99"], "cpu_us": g["cpu_us"], "problems": g["problems"]})
        server.close()
    return rows


def scenario_gc():
    generator = os.path.join(ROOT, "Benchmarks/gc-scale/generate.py")
    data = os.path.join(TMP, "gc-scale")
    log(f"gc-scale: generating {GC_N} blobs in {data}")
    started = time.monotonic()
    run([sys.executable, generator, data, str(GC_N)], timeout=GC_BUDGET)
    results = {"n": GC_N, "generate_s": time.monotonic() - started, "load_before": loadavg()}
    for label, extra in (("dry run", ["--dry-run"]), ("gc", [])):
        log(f"gc-scale: larder gc {' '.join(extra)}")
        started = time.monotonic()
        out_path = os.path.join(TMP, "gc-out.txt")
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


# ---------------------------------------------------------------- s3 scenario (issue 15)
# Larder in scale-out mode (`--catalog postgres://… --blobs s3://…`) against curl straight to the
# same OpenStack Swift (its S3 API), both engines throw-away ones started here by the project's
# scripts. Swift's tempauth access key is `test:tester` (a colon in it): curl's `--user a:b:c`
# splits at the first colon and signs as the wrong key, so the direct requests take their key
# and secret from a netrc file (login and password are separate tokens there).

S3_MIB = env_int("BENCH_S3_MIB", 128 if QUICK else 1024)
S3_GETS = env_int("BENCH_S3_GETS", 400 if QUICK else 1200)  # 4 KiB GETs per curl-loop run
S3_GET_CLIENTS = env_int("BENCH_S3_GET_CLIENTS", 4)  # concurrent keep-alive curl loops
S3_TUS_MIB = env_int("BENCH_S3_TUS_MIB", 32 if QUICK else 256)  # the resumable rows' upload size
S3_KEY, S3_SECRET, S3_REGION, S3_BUCKET = "test:tester", "testing", "us-east-1", "bench"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


class SwiftS3:
    """OpenStack Swift with s3api on loopback (scripts/swift-s3.sh), one bucket; stopped by `close`
    and, should this process die first, by the script's own watchdog (SWIFT_S3_OWNER_PID)."""

    def __init__(self, access_log_port=None):
        self.dir = os.path.join(TMP, "swift")
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
        self.netrc = os.path.join(TMP, "swift.netrc")
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


def s3_settle(larder, swift, swift_log, quiet=1.0, limit=180):
    """Waits until Larder and Swift are idle: no CPU used by either (under 30 ms) and no request
    logged for `quiet` seconds. After an upload's answer Larder still works: its MD5 backfill
    reads the new blob back from S3 (MD5 is computed after commit), and it removes the pieces a
    part made redundant; without this wait that work would be charged to the next transfer."""
    deadline = time.monotonic() + limit
    pids = [larder.proc.pid] + swift.pids()
    last = sum(server_cpu(p) for p in pids)
    calm_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now, cpu = time.monotonic(), sum(server_cpu(p) for p in pids)
        if cpu - last > 0.03:
            last, calm_since = cpu, now
        if now - calm_since >= quiet and (not swift_log or now - swift_log.last >= quiet):
            return
    log(f"s3: Larder and Swift still busy after {limit}s; measuring anyway")


def s3_transfer(larder, swift, pg, swift_log, body):
    """Runs `body` (returns its seconds) from a quiet start, and what it cost: CPU seconds of
    (Larder, Swift, PostgreSQL) until the answer ("cpu") and after it until all is quiet again
    ("cpu_after"); Swift's disk writes ("disk", "disk_after"); the requests Swift served before
    the answer ("s3") and after it ("s3_after"), split by the time each request ended. (Not by its
    start: Larder wakes its MD5 backfill at the commit, so the backfill's GET may start a moment
    before the client has its answer; it ends well after, and nothing waited for it.)"""
    os.sync()
    s3_settle(larder, swift, swift_log)
    cpus = lambda: (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
    c0, w0, mark = cpus(), swift.disk_writes(), swift_log.mark() if swift_log else 0
    seconds = body()
    answered, c1, w1 = time.time(), cpus(), swift.disk_writes()
    s3_settle(larder, swift, swift_log)
    c2, w2 = cpus(), swift.disk_writes()
    result = {"seconds": seconds, "cpu": tuple(b - a for a, b in zip(c0, c1)),
              "cpu_after": tuple(b - a for a, b in zip(c1, c2)), "disk": w1 - w0, "disk_after": w2 - w1}
    if swift_log:
        records = swift_log.since(mark)
        result["s3"] = s3_requests([r for r in records if r["end"] <= answered])
        result["s3_after"] = s3_requests([r for r in records if r["end"] > answered])
    return result


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


def curl_get_loops(url, extra):
    """S3_GET_CLIENTS curl processes at once, each GETting `url` S3_GETS / S3_GET_CLIENTS times in a row
    over one keep-alive connection (one curl, many URLs: curl reuses the connection and signs every
    request anew when `extra` has --aws-sigv4). Returns requests/s and the non-200 answers by status
    (000: curl got no answer)."""
    per = max(1, S3_GETS // S3_GET_CLIENTS)
    config = os.path.join(TMP, "s3-get-loop.cfg")
    with open(config, "w") as f:
        f.write(f'url = "{url}"\noutput = "{os.devnull}"\n' * per)
    started = time.monotonic()
    procs = [subprocess.Popen(["curl", "-sS", "--noproxy", "*", "-w", "%{http_code}\\n", "-K", config] + extra,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(S3_GET_CLIENTS)]
    codes, complaints = [], []
    for p in procs:
        out, err = p.communicate(timeout=600)
        codes += out.split()
        complaints += err.strip().splitlines()
    seconds = time.monotonic() - started
    bad = [c for c in codes if c != "200"]
    return {"rps": len(codes) / seconds, "requests": len(codes), "errors": len(bad),
            "codes": ", ".join(f"{n}× {c}" for c, n in sorted({c: bad.count(c) for c in bad}.items()))
            + (f"; curl: {complaints[0][:120]}" if complaints else "")}


def wait_connections_closed(base, seconds=60):
    """Waits until the server at `base` holds no client connection (ESTABLISHED or CLOSE_WAIT in
    /proc/net/tcp). After wrk's 64 connections, Larder in S3 mode is still answering queued GETs
    from Swift; the next run's connections would meet its per-address limit (64) and be reset."""
    port = f":{urlsplit(base).port:04X} "
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        held = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                for line in open(table).read().splitlines()[1:]:
                    fields = line.split()
                    held += (fields[1] + " ").endswith(port) and fields[3] in ("01", "08")
            except OSError:
                pass
        if not held:
            return
        time.sleep(0.2)


def scenario_s3(files, commands, transfers=True, resumable=True):
    """Larder on PostgreSQL (fsync on) + Swift's S3 API vs curl straight to that Swift, interleaved
    rounds, the order alternating. `transfers`: S3_MIB upload, S3_MIB download, 4 KiB GETs.
    `resumable`: S3_TUS_MIB through tus in each PATCH size of TUS_CHUNKS, the same bytes as one
    simple upload through Larder, and as one PUT straight to Swift. Each upload starts from a quiet
    Larder and Swift and is measured until its answer, then until both are quiet again."""
    if not shutil.which("curl"):
        return {"missing": "curl is not installed"}
    need = ((S3_MIB * (2 * REPS + 4) if transfers else 0)
            + (S3_TUS_MIB * (REPS * (len(TUS_CHUNKS) + 2) * 2 + 2) if resumable else 0)) << 20
    if shutil.disk_usage(TMP).free < need:
        raise BenchError(f"{TMP} has too little space for the s3 scenario (about {need >> 30} GiB)")
    engines = []
    try:
        swift_log = SwiftLog()
        engines.append(swift_log)
        try:
            swift = SwiftS3(access_log_port=swift_log.port)
            engines.append(swift)
            pg = Postgres()
            engines.append(pg)
            if pg.missing:
                return {"missing": pg.missing}
        except FileNotFoundError as e:
            return {"missing": str(e)}
        commands += [swift.command.replace("scripts/", "SWIFT_S3_ACCESS_LOG_UDP=PORT scripts/", 1), pg.command]
        saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        os.environ.update(AWS_ACCESS_KEY_ID=S3_KEY, AWS_SECRET_ACCESS_KEY=S3_SECRET)
        try:
            larder = Larder("s3", extra=["--catalog", pg.url, "--blobs", swift.blobs_url])
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        engines.append(larder)
        commands.append("AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing " + larder.command)
        direct = f"{swift.base}/{S3_BUCKET}/direct/%s"
        commands.append(f"curl --netrc-file NETRC --aws-sigv4 aws:amz:{S3_REGION}:s3 -H 'x-amz-content-sha256: "
                        f"<hex SHA-256 | e3b0…(empty) for GET>' [-T FILE] {swift.base}/{S3_BUCKET}/direct/KEY"
                        f"   # NETRC: machine 127.0.0.1 login {S3_KEY} password {S3_SECRET}")
        measure = lambda body: s3_transfer(larder, swift, pg, swift_log, body)
        result = {}
        if transfers:
            result.update(s3_transfers(files, larder, swift, pg, direct, measure))
        if resumable:
            result["resumable"] = s3_resumable(larder, swift, direct, measure)
        result["rss"] = larder.peak_rss_mib()
        return result
    finally:
        for e in reversed(engines):
            e.close()


def check_larder_object(larder, name, digest):
    """The object `name` in Larder's bench bucket holds the content whose SHA-256 is `digest`."""
    meta = json.loads(urlopen_text(f"{larder.base}/v0/b/bench/o/{name}"))
    if meta.get("sha256") != digest:
        raise BenchError(f"larder stored different bytes for {name}: {meta}")


def s3_transfers(files, larder, swift, pg, direct, measure):
    """The S3_MIB upload and download and the 4 KiB GETs, Larder vs curl straight to Swift."""
    big = make_file(os.path.join(TMP, "s3.bin"), S3_MIB)
    up = {"larder": [], "direct": []}
    up_cpu = {"larder": [], "direct": []}  # (Larder, Swift, PostgreSQL) CPU seconds
    up_cost = {"larder": [], "direct": []}  # s3_transfer's whole result
    for rep in range(REPS):
        stamp(big, 200 + rep)
        digest = sha256_file(big)  # the direct PUT's x-amz-content-sha256, hashed before its clock starts
        for side in (("larder", "direct") if rep % 2 == 0 else ("direct", "larder")):
            if side == "larder":
                m = measure(lambda: upload(larder, big, f"s3up{rep}.bin"))
            else:
                m = measure(lambda: s3_curl(swift.curl_args(digest) + ["-T", big, direct % f"up{rep}.bin"], (200,),
                                            expect_up=S3_MIB * MiB))
            up[side].append(m["seconds"])
            up_cpu[side].append(m["cpu"])
            up_cost[side].append(m)
            log(f"s3 upload {side} round {rep + 1}: {m['seconds']:.2f}s")
    os.unlink(big)
    last = f"up{REPS - 1}.bin"
    down = {"larder": [], "direct": []}
    down_cpu = {"larder": [], "direct": []}
    for rep in range(REPS):
        for side in (("larder", "direct") if rep % 2 == 0 else ("direct", "larder")):
            c0 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            if side == "larder":
                t = download(larder, "s3" + last, S3_MIB * MiB)
            else:
                t = s3_curl(swift.curl_args(EMPTY_SHA256) + [direct % last], (200,), expect_down=S3_MIB * MiB)
            c1 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            down[side].append(t)
            down_cpu[side].append(tuple(b - a for a, b in zip(c0, c1)))
            log(f"s3 download {side} round {rep + 1}: {t:.2f}s")
    small = files["small"]
    upload(larder, small, "small.bin")
    s3_curl(swift.curl_args(sha256_file(small)) + ["-T", small, direct % "small.bin"], (200,), expect_up=SMALL_BYTES)
    gets = {"larder": [], "direct": [], "larder wrk": []}
    for rep in range(REPS):
        for side in (("larder", "direct") if rep % 2 == 0 else ("direct", "larder")):
            c0 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            if side == "larder":
                g = curl_get_loops(larder.download_url % "small.bin", [])
            else:
                g = curl_get_loops(direct % "small.bin", swift.curl_args(EMPTY_SHA256))
            c1 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            g["cpu_us"] = tuple((b - a) / max(1, g["requests"]) * 1e6 for a, b in zip(c0, c1))
            gets[side].append(g)
            log(f"s3 gets {side} round {rep + 1}: {g['rps']:,.0f}/s, {g['errors']} errors {g['codes']}")
        s0 = swift.cpu()
        g = wrk(larder, "small.bin")
        g["swift_cpu_us"] = (swift.cpu() - s0) / max(1, g["requests"]) * 1e6
        gets["larder wrk"].append(g)
        log(f"s3 gets larder wrk round {rep + 1}: {g['rps']:,.0f}/s p99 {g['p99']} {g['problems']}")
        wait_connections_closed(larder.base)
    return {"size": S3_MIB * MiB, "up": up, "up_cpu": up_cpu, "up_cost": up_cost, "down": down,
            "down_cpu": down_cpu, "gets": gets}


def s3_resumable(larder, swift, direct, measure):
    """S3_TUS_MIB through tus in each PATCH size (the tus scenario's client), the same bytes as a
    simple upload through Larder, and as one PUT straight to Swift; every upload new content (no
    dedupe), the order rotating per round, Larder's stored bytes checked after each."""
    path = make_file(os.path.join(TMP, "s3-tus.bin"), S3_TUS_MIB)
    size = S3_TUS_MIB * MiB
    kinds = [f"tus {c} MiB" for c in TUS_CHUNKS] + ["simple", "direct"]
    runs = {k: [] for k in kinds}
    for rep in range(REPS):
        k = rep % len(kinds)
        for i, kind in enumerate(kinds[k:] + kinds[:k]):
            stamp(path, 300 + rep * len(kinds) + i)
            digest = sha256_file(path)  # before the clock: the direct PUT's header, and the check afterwards
            name = f"s3res-{rep}-{kind.replace(' ', '')}.bin"
            if kind.startswith("tus"):
                chunk = int(kind.split()[1])
                m = measure(lambda: tus_upload(larder.tus_endpoint, path, size, chunk * MiB, name=name)[0])
            elif kind == "simple":
                m = measure(lambda: upload(larder, path, name))
            else:
                m = measure(lambda: s3_curl(swift.curl_args(digest) + ["-T", path, direct % name], (200,),
                                            expect_up=size))
            if kind != "direct":
                check_larder_object(larder, name, digest)
            runs[kind].append(m)
            s3 = m.get("s3") or {}
            log(f"s3 resumable {kind} round {rep + 1}: {m['seconds']:.2f}s, {s3.get('n', '?')} S3 requests "
                f"{s3.get('ops', '')}, {s3.get('in', 0) / MB:,.0f} MB sent to Swift")
    os.unlink(path)
    return {"size": size, "runs": runs}


def s3_summary_rows(s3):
    """The s3 scenario's rows of the table of ratios (nothing when it did not run)."""
    if not s3:
        return []
    if "missing" in s3:
        return [("S3 mode (`--catalog postgres://` + `--blobs s3://`) vs Swift's S3 API", "missing", "missing", "—",
                 "reported", "—", "", s3["missing"])]
    rows = []
    if "up" in s3:
        rows += s3_transfer_rows(s3)
    if "resumable" in s3:
        rows += s3_resumable_rows(s3["resumable"])
    return rows


def s3_transfer_rows(s3):
    """The table-of-ratios rows of the S3_MIB transfers and the 4 KiB GETs."""
    mib, size = s3["size"] >> 20, s3["size"]
    larder_does = "Larder: stages locally, SHA-256, fsync, multipart PUT to Swift, PostgreSQL commit (fsync on)"
    rows = []
    for key, what, peer_not in (
            ("up", f"S3 mode: upload {mib} MiB, MB/s", f"{larder_does}; direct PUT: none of that (one PUT, "
             "x-amz-content-sha256 = the real hash, computed before its clock starts); Swift's own work (s3api "
             "checks the SHA-256, the object server fsyncs) is done on both sides"),
            ("down", f"S3 mode: download {mib} MiB, MB/s", "direct GET: no catalog lookup, no rules, no second "
             "server (Larder streams Swift's answer through a pipe; its object is multipart, which Swift joins)")):
        l, d = med(s3[key]["larder"]), med(s3[key]["direct"])
        rows.append((what, fmt_mb(size / l), f"curl → Swift {fmt_mb(size / d)}", f"{d / l:.2f}", "reported", "—",
                     peer_not, f"s: Larder {runs_text(s3[key]['larder'])}; direct {runs_text(s3[key]['direct'])}"))
    l = med([g["rps"] for g in s3["gets"]["larder"]])
    d = med([g["rps"] for g in s3["gets"]["direct"]])
    rows.append((f"S3 mode: {SMALL_BYTES // 1024} KiB GETs req/s, {S3_GET_CLIENTS} keep-alive curl loops", f"{l:,.0f}",
                 f"curl → Swift {d:,.0f}", f"{d and l / d:.2f}", "reported", "—",
                 "direct: a signed GET straight to Swift; Larder: catalog lookup in PostgreSQL, then the same GET "
                 "to Swift (bodies ≤ 16 KiB are fetched whole)",
                 f"Larder {runs_text([g['rps'] for g in s3['gets']['larder']], '{:,.0f}')}; direct "
                 f"{runs_text([g['rps'] for g in s3['gets']['direct']], '{:,.0f}')}"))
    w = s3["gets"]["larder wrk"]
    rows.append((f"S3 mode: {SMALL_BYTES // 1024} KiB GETs req/s, wrk against Larder", f"{med([g['rps'] for g in w]):,.0f}",
                 "— (wrk cannot sign S3 requests)", "—", "reported", "—", "",
                 f"p99 {', '.join(g['p99'] for g in w)}; {'; '.join(g['problems'] for g in w if g['problems']) or 'no errors'}"))
    return rows


S3_OP_SHORT = {"UploadPart": "part", "PUT": "PUT", "PUT (no body: copy)": "copy", "CreateMultipartUpload": "create",
               "CompleteMultipartUpload": "complete", "AbortMultipartUpload": "abort", "ListObjectsV2": "list"}


def s3_ops_text(requests, timed=False):
    """`41 = 32 part + 4 PUT + …` for one upload's requests to Swift; `timed`: each kind with the
    seconds Swift spent answering them (`32 part 3.1 s + …`)."""
    if not requests or not requests["n"]:
        return "0"
    ops = sorted(requests["ops"].items(), key=lambda kv: -kv[1])
    text = f"{requests['n']} = " + " + ".join(
        f"{n} {S3_OP_SHORT.get(op, op)}" + (f" {requests['seconds'][op]:.2f} s" if timed else "") for op, n in ops)
    return text + (f" ({requests['errors']} not 2xx)" if requests["errors"] else "")


def s3_cost_text(runs, size):
    """The median upload's requests and bytes: what went to Swift until the answer, what Swift wrote,
    and what came after the answer."""
    m = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    parts = []
    if "s3" in m:
        parts.append(f"{s3_ops_text(m['s3'])} requests, {m['s3']['in'] / size:.2f}× the bytes sent to Swift")
    parts.append(f"Swift wrote {(m['disk'] + m['disk_after']) / size:.2f}× to disk")
    if m.get("s3_after", {}).get("n"):
        parts.append(f"after the answer {s3_ops_text(m['s3_after'])} ({m['s3_after']['out'] / MB:,.0f} MB read back)")
    return "; ".join(parts)


S3_NOT_DONE = {
    "direct": "curl → Swift: one PUT; no hashing (its SHA-256 computed before the clock), no catalog, no "
              "resumability (an interrupted PUT starts over), no local staging or fsync",
    "simple": "the simple upload through Larder: not resumable (an interrupted upload starts over); one "
              "request, its parts go straight under `sha256/…`: no pieces, no lease or commit per PATCH, "
              "no server-side copy at the end",
}


def s3_resumable_rows(res):
    """The table-of-ratios rows of the resumable uploads in S3 mode."""
    size, mib, runs = res["size"], res["size"] >> 20, res["runs"]
    secs = {k: [r["seconds"] for r in v] for k, v in runs.items()}
    rows = []
    for kind in [k for k in runs if k.startswith("tus")]:
        l = med(secs[kind])
        what = f"S3 mode: tus {mib} MiB in {kind.split()[1]} MiB PATCHes, MB/s"
        for peer, label in (("simple", "simple upload through Larder"), ("direct", "curl → Swift")):
            p = med(secs[peer])
            rows.append((what, fmt_mb(size / l), f"{label} {fmt_mb(size / p)}", f"{p / l:.2f}", "reported", "—",
                         S3_NOT_DONE[peer], f"s: tus {runs_text(secs[kind])}; {peer} {runs_text(secs[peer])}"
                         + (f"; tus: {s3_cost_text(runs[kind], size)}" if peer == "simple" else "")))
    l, d = med(secs["simple"]), med(secs["direct"])
    rows.append((f"S3 mode: simple upload {mib} MiB, MB/s", fmt_mb(size / l), f"curl → Swift {fmt_mb(size / d)}",
                 f"{d / l:.2f}", "reported", "—", S3_NOT_DONE["direct"],
                 f"s: Larder {runs_text(secs['simple'])}; direct {runs_text(secs['direct'])}; Larder: "
                 f"{s3_cost_text(runs['simple'], size)}; direct: {s3_cost_text(runs['direct'], size)}"))
    return rows


def s3_cost_table(title, groups, size):
    """One row per upload: seconds, MB/s, CPU until the answer, the requests and bytes to Swift, and
    what happened after the answer."""
    L = [f"{title}\n",
         "| upload | round | seconds | MB/s | CPU Larder / Swift / PostgreSQL, s | requests to Swift until the answer, "
         "with the seconds Swift spent on them | MB sent to / read from Swift | MB Swift wrote | after the answer: "
         "requests, MB read from Swift, CPU Larder / Swift, s |",
         "|---|---:|---:|---:|---|---|---:|---:|---|"]
    for label, runs in groups:
        for i, m in enumerate(runs):
            c, a = m["cpu"], m["cpu_after"]
            s3, after = m.get("s3"), m.get("s3_after")
            L.append(f"| {label} | {i + 1} | {m['seconds']:.2f} | {fmt_mb(size / m['seconds'])} | "
                     f"{c[0]:.2f} / {c[1]:.2f} / {c[2]:.2f} | {s3_ops_text(s3, timed=True) if s3 else '?'} | "
                     f"{fmt_mb(s3['in']) + ' / ' + fmt_mb(s3['out']) if s3 else '?'} | "
                     f"{fmt_mb(m['disk'] + m['disk_after'])} | "
                     f"{s3_ops_text(after) if after else '?'}, {fmt_mb(after['out']) if after else '?'}, "
                     f"{a[0]:.2f} / {a[1]:.2f} |")
    return L + [""]


def s3_section(s3):
    """The s3 scenario's own section of the report."""
    if not s3:
        return []
    L = ["## S3 mode: Larder (`--catalog postgres://`, `--blobs s3://`) vs curl straight to Swift\n"]
    if "missing" in s3:
        return L + [f"**missing**: {s3['missing']}\n"]
    L.append("One throw-away PostgreSQL (`scripts/pg.sh`, fsync on) and one OpenStack Swift with its S3 API "
             "(`scripts/swift-s3.sh`, one proxy process) serve Larder; the direct side is curl "
             f"(`--aws-sigv4 aws:amz:{S3_REGION}:s3`, key `{S3_KEY}` from a netrc file: `--user` would split it "
             "at its colon) to the same Swift. CPU columns: seconds (or µs per GET) of Larder / Swift's "
             "processes / PostgreSQL during the transfer. Every upload starts when Larder and Swift are idle "
             "and is timed to its answer; the work Larder does after the answer (its MD5 backfill reads the "
             "new blob back from Swift; pieces a part made redundant are deleted) is waited out and reported "
             "apart. Requests to Swift: the clients' requests in Swift's proxy access log (syslog over UDP to "
             "the benchmark), split at the answer by the time each request ended; MB Swift wrote: its processes' "
             "`write_bytes` (/proc/PID/io), one replica.\n")
    if "up" in s3:
        L += s3_transfer_section(s3)
    if "resumable" in s3:
        L += s3_resumable_section(s3["resumable"])
    L.append(f"Larder's peak RSS over the scenario: {s3['rss']:.0f} MiB.\n")
    return L


def s3_transfer_section(s3):
    mib, size = s3["size"] >> 20, s3["size"]
    L = ["| transfer | side | round | seconds | MB/s | CPU Larder | CPU Swift | CPU PostgreSQL |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("up", f"upload {mib} MiB"), ("down", f"download {mib} MiB")):
        for side in ("larder", "direct"):
            for i, (t, c) in enumerate(zip(s3[key][side], s3[key + "_cpu"][side])):
                L.append(f"| {label} | {side} | {i + 1} | {t:.2f} | {fmt_mb(size / t)} | {c[0]:.2f} | {c[1]:.2f} | "
                         f"{c[2]:.2f} |")
    for side in ("larder", "direct"):
        for i, g in enumerate(s3["gets"][side]):
            c = g["cpu_us"]
            L.append(f"| {SMALL_BYTES} B GETs ×{g['requests']} | {side} | {i + 1} | — | {g['rps']:,.0f}/s, "
                     f"{g['errors']} errors{' (' + g['codes'] + ')' if g['errors'] else ''} | {c[0]:.0f} µs | {c[1]:.0f} µs | {c[2]:.0f} µs |")
    for i, g in enumerate(s3["gets"]["larder wrk"]):
        L.append(f"| {SMALL_BYTES} B GETs, {g['tool']} | larder | {i + 1} | — | {g['rps']:,.0f}/s, p99 {g['p99']}, "
                 f"{g['problems'] or 'no errors'} | {g['cpu_us']:.0f} µs | {g['swift_cpu_us']:.0f} µs | |")
    L.append(f"\nUpload: Larder's 200 means staged locally, SHA-256 computed, fsynced, PUT to Swift "
             f"(multipart above 16 MiB, each part with its SHA-256, which Swift checks) and committed in "
             f"PostgreSQL; the direct PUT is one request with `x-amz-content-sha256` = the real hash (computed "
             f"before the clock starts), so Swift checks the same hash on both sides. Download: the last "
             f"upload's object ({REPS} times each; Larder's is a multipart object). GETs: {S3_GET_CLIENTS} curl "
             f"processes at once, each {max(1, S3_GETS // S3_GET_CLIENTS)} GETs over one keep-alive connection, "
             f"every Swift request signed anew.\n")
    L += s3_cost_table(f"What each {mib} MiB upload cost:",
                       [(f"{mib} MiB, {side}", s3["up_cost"][side]) for side in ("larder", "direct")], size)
    return L


def s3_resumable_section(res):
    size, mib = res["size"], res["size"] >> 20
    L = [f"### Resumable uploads in S3 mode, {mib} MiB\n",
         f"tus through Larder with the tus scenario's client (one keep-alive connection, POST then PATCHes of "
         f"{' and '.join(str(c) for c in TUS_CHUNKS)} MiB), the same bytes as one simple upload through Larder "
         f"(`curl -X POST -T`), and as one signed PUT straight to Swift; new content every time (no dedupe), "
         f"the order rotating per round, Larder's stored SHA-256 checked after each. Each PATCH's bytes are in "
         f"Swift before its offset commits: as a multipart part once Larder's staging file holds ≥ 5 MiB past "
         f"the parts, as a small *piece* object below that (so with 1 MiB PATCHes every MiB goes up as a piece "
         f"and again inside a part, and the pieces are deleted); the last PATCH completes the multipart upload "
         f"into `uploads/<id>/data` and copies it server-side to `sha256/…`, which Swift does by reading and "
         f"rewriting the whole object.\n"]
    groups = [(f"{kind}" if kind.startswith("tus") else "simple (Larder)" if kind == "simple" else "curl → Swift", runs)
              for kind, runs in res["runs"].items()]
    L += s3_cost_table("Requests: *part* = UploadPart, *PUT* = an object with a body (a piece; the content "
                       "itself when it never made a part), *copy* = a PUT without body (x-amz-copy-source), "
                       "*create* / *complete* = a multipart upload's first and last request, *list* = ListObjectsV2. After the "
                       "answer, a GET of the whole content is the MD5 backfill reading the new blob back.", groups, size)
    return L


# ---------------------------------------------------------------- report

NOT_DONE = {
    "nginx-get": "nginx: a static file; no catalog lookup, no rules, no token check",
    "nginx-put": "nginx WebDAV PUT: no hash, no fsync (its 201 means in the page cache), no catalog",
    "tusd": "tusd: no fsync, no hash, no catalog commit (its 204 means in the page cache)",
    "fastapi-tusd": "fastapi-tusd: no fsync, no hash (a JSON info file per upload)",
    "nginx-get-big": "nginx: sendfile of a static file; no catalog lookup, no rules",
}


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def runs_text(xs, fmt="{:.2f}"):
    return ", ".join(fmt.format(x) for x in xs)


def verdict(value, goal, higher_is_better=True):
    if goal is None or value != value:  # NaN
        return "—"
    return "yes" if (value >= goal if higher_is_better else value <= goal) else "**no**"


def summary_rows(R):
    """Every ratio of issue 13: (measure, Larder, peer, ratio, goal, met, peer does not, runs)."""
    rows = []
    limits = R.get("limits")
    gets = R.get("gets")
    if gets:
        lar = gets["larder"]
        for variant, goal, label in (("larder", 0.7, "access log off (both)"),
                                     ("larder+log", 0.6, "Larder's access log on (file, buffered); nginx's off")):
            l_rps = med([g["rps"] for g in gets[variant]])
            if gets["nginx"] is None:
                rows.append((f"{SMALL_BYTES // 1024} KiB GETs req/s, {label}", f"{l_rps:,.0f}", "nginx: missing",
                             "—", f"≥ {goal}", "—", NOT_DONE["nginx-get"], ""))
                continue
            n_rps = med([g["rps"] for g in gets["nginx"]])
            ratio = l_rps / n_rps
            rows.append((f"{SMALL_BYTES // 1024} KiB GETs req/s, {label}", f"{l_rps:,.0f}", f"{n_rps:,.0f}",
                         f"{ratio:.2f}", f"≥ {goal}", verdict(ratio, goal), NOT_DONE["nginx-get"],
                         f"Larder {runs_text([g['rps'] for g in gets[variant]], '{:,.0f}')}; nginx "
                         f"{runs_text([g['rps'] for g in gets['nginx']], '{:,.0f}')}"))
        cpu = med([g["cpu_us"] for g in lar])
        n_cpu = med([g["cpu_us"] for g in gets["nginx"]]) if gets["nginx"] else float("nan")
        rows.append(("server CPU µs per GET (log off)", f"{cpu:.0f}", f"{n_cpu:.0f}" if gets["nginx"] else "missing",
                     f"{n_cpu / cpu:.2f}" if gets["nginx"] else "—", "Larder ≤ 30 µs", verdict(cpu, 30, False),
                     "CPU time is the figure least disturbed by other load", runs_text([g["cpu_us"] for g in lar], "{:.0f}")))
        for variant in ("larder", "larder+log"):
            p99 = med([p99_us(g["p99"]) for g in gets[variant]])
            n99 = med([p99_us(g["p99"]) for g in gets["nginx"]]) if gets["nginx"] else float("nan")
            rows.append((f"p99 latency of a GET, µs ({'log on' if variant.endswith('log') else 'log off'})",
                         f"{p99:,.0f}", f"{n99:,.0f}" if gets["nginx"] else "missing",
                         f"{n99 / p99:.2f}" if gets["nginx"] else "—", "reported", "—", "", 
                         runs_text([p99_us(g["p99"]) for g in gets[variant]], "{:,.0f}")))
    pg = R.get("postgres")
    if pg and "missing" in pg:
        rows.append((f"{SMALL_BYTES // 1024} KiB GETs and uploads, PostgreSQL catalog", "missing", "SQLite", "—",
                     "reported", "—", "", pg["missing"]))
    elif pg:
        for what, key, data in ((f"{SMALL_BYTES // 1024} KiB GETs req/s", "rps", pg["gets"]),
                                (f"{SMALL_BYTES // 1024} KiB uploads commits/s (fsync on in both)", "cps", pg["uploads"]),
                                (f"{SMALL_BYTES // 1024} KiB uploads of a PNG commits/s (fsync on in both)", "cps",
                                 pg["uploads_png"])):
            p, q = med([r[key] for r in data["PostgreSQL"]]), med([r[key] for r in data["SQLite"]])
            rows.append((f"{what}, PostgreSQL catalog", f"{p:,.0f}", f"SQLite catalog {q:,.0f}", f"{p / q:.2f}",
                         "reported", "—", "SQLite: in process, one machine only",
                         f"PostgreSQL {runs_text([r[key] for r in data['PostgreSQL']], '{:,.0f}')}; SQLite "
                         f"{runs_text([r[key] for r in data['SQLite']], '{:,.0f}')}"))
        for what, data in (("GET", pg["gets"]), ("upload", pg["uploads"]), ("upload of a PNG", pg["uploads_png"])):
            both = [r["cpu_us"] + r["pg_cpu_us"] for r in data["PostgreSQL"]]
            p, q = med(both), med([r["cpu_us"] for r in data["SQLite"]])
            p99, q99 = (med([p99_us(r["p99"]) for r in data[n]]) for n in ("PostgreSQL", "SQLite"))
            rows.append((f"CPU µs per {SMALL_BYTES // 1024} KiB {what} (Larder + PostgreSQL), PostgreSQL catalog",
                         f"{p:,.0f}", f"SQLite catalog {q:,.0f}", f"{q / p:.2f}", "reported", "—", "",
                         f"p99 µs: PostgreSQL {p99:,.0f}, SQLite {q99:,.0f}"))
    tus = R.get("tus")
    if tus:
        mib = tus["size"] >> 20
        for chunk, data in tus["chunks"].items():
            l = med(data["runs"]["larder"])
            for peer in ("tusd", "fastapi-tusd"):
                goal = 0.8 if peer == "tusd" else None
                what = f"tus {mib} MiB in {chunk} MiB PATCHes, MiB/s"
                if peer not in data["runs"]:
                    rows.append((what, f"{mib / l:,.0f}", f"{peer}: missing ({tus['missing'].get(peer, '')})", "—",
                                 f"≥ {goal}" if goal else "reported", "—", NOT_DONE[peer], ""))
                    continue
                p = med(data["runs"][peer])
                rows.append((what, f"{mib / l:,.0f}", f"{peer} {mib / p:,.0f}", f"{p / l:.2f}",
                             f"≥ {goal}" if goal else "reported", verdict(p / l, goal), NOT_DONE[peer],
                             f"s: Larder {runs_text(data['runs']['larder'])}; {peer} {runs_text(data['runs'][peer])}"))
    up = R.get("upload")
    if up:
        mib = up["size"] >> 20
        l = med(up["times"]["larder"])
        l_rate = up["size"] / l
        if up["times"]["nginx"] is None:
            rows.append((f"simple upload {mib} MiB, MB/s", fmt_mb(l_rate), "nginx: missing", "—", "≥ 0.8", "—",
                         NOT_DONE["nginx-put"], ""))
        else:
            n = med(up["times"]["nginx"])
            rows.append((f"simple upload {mib} MiB, MB/s", fmt_mb(l_rate), f"nginx PUT {fmt_mb(up['size'] / n)}",
                         f"{n / l:.2f}", "≥ 0.8", verdict(n / l, 0.8), NOT_DONE["nginx-put"],
                         f"s: Larder {runs_text(up['times']['larder'])}; nginx {runs_text(up['times']['nginx'])}"))
        if limits:
            cas = limits["durable-CAS"]
            rows.append((f"simple upload / durable-CAS limit", fmt_mb(l_rate),
                         f"min(dd conv=fsync {fmt_mb(limits['write+fsync'])}, sha256 {fmt_mb(limits['sha256'])})",
                         f"{l_rate / cas:.2f}", "reported", "—", "the limit: one core hashing, or the disk writing", ""))
    down = R.get("download")
    if down:
        l = med(down["times"]["larder"])
        if down["times"]["nginx"] is None:
            rows.append((f"download {SIZE_MIB} MiB, MB/s", fmt_mb(SIZE / l), "nginx: missing", "—", "≥ 0.95", "—",
                         NOT_DONE["nginx-get-big"], ""))
        else:
            n = med(down["times"]["nginx"])
            rows.append((f"download {SIZE_MIB} MiB, MB/s", fmt_mb(SIZE / l), f"nginx {fmt_mb(SIZE / n)}", f"{n / l:.2f}",
                         "≥ 0.95", verdict(n / l, 0.95), NOT_DONE["nginx-get-big"],
                         f"s: Larder {runs_text(down['times']['larder'])}; nginx {runs_text(down['times']['nginx'])}"))
        rows.append((f"Larder peak RSS, MiB, over a {SIZE_MIB} MiB upload + {REPS} downloads", f"{down['rss']:.0f}", "—",
                     "—", "≤ 64", verdict(down["rss"], 64, False), "", ""))
    conc = R.get("concurrent")
    if conc:
        rows.append((f"Larder peak RSS, MiB, {conc['clients']} concurrent clients "
                     f"({conc['upload_mib']} MiB uploads, then 4 KiB GETs)", f"{conc['rss']:.0f}", "—", "—", "≤ 256",
                     verdict(conc["rss"], 256, False), "", f"{conc['error_count']} errors, {conc['gets']:,} GETs"))
    ver = R.get("verify")
    if ver and not limits:
        rows.append(("`larder verify` MB/s / disk read MB/s", fmt_mb(ver["rate"]), "disk read: not measured (add `limits`)",
                     "—", "reported", "—", "", ""))
    if ver and limits:
        rows.append(("`larder verify` MB/s / disk read MB/s", fmt_mb(ver["rate"]),
                     f"dd iflag=direct {fmt_mb(limits['disk read'])}", f"{ver['rate'] / limits['disk read']:.2f}",
                     "reported", "—", f"verify hashes SHA-256 and MD5 on two threads: "
                     f"{ver['rate'] / min(limits['disk read'], limits['sha256'], limits['md5']):.2f} of min(disk read, "
                     f"sha256, md5 {fmt_mb(min(limits['sha256'], limits['md5']))} MB/s)", ""))
    gc = R.get("gc")
    if gc:
        rows.append((f"`larder gc` of {gc['n']:,} blobs (10 % orphans), s", f"{gc['gc']['seconds']:.1f}", "—", "—",
                     "≤ 60 s, ≤ 64 MiB", verdict(gc["gc"]["seconds"], 60, False), "",
                     f"peak RSS {gc['gc']['maxrss_kib'] / 1024:.0f} MiB; load {gc['load_before']} → {gc['load_after']}"))
    else:
        rows.append(("`larder gc` of 1,000,000 blobs", "not run", "—", "—", "≤ 60 s", "—", "",
                     "opt-in: BENCH_GC_SCALE=1 (tens of minutes)"))
    rows += s3_summary_rows(R.get("s3"))
    return rows


def round_rows(times, cpu, columns, cells):
    """Table rows `| server | round | cells(seconds, cpu) |` for each server's rounds; a server
    whose times are None is one `missing` row with `columns` cells."""
    rows = []
    for name, ts in times.items():
        if ts is None:
            rows.append(f"| {name} | — | missing |" + " |" * (columns - 1))
            continue
        for i, (t, c) in enumerate(zip(ts, cpu[name])):
            rows.append(f"| {name} | {i + 1} | {cells(t, c)} |")
    return rows


def render(date, m, load_start, load_end, elapsed, R, commands):
    L = ["# Larder benchmark results\n"]
    L.append(f"- date: {date}; commit `{m['commit']}`; whole run {elapsed:.0f} s"
             + ("; **quick mode** (BENCH_QUICK=1: small sizes, short runs)" if QUICK else ""))
    L.append(f"- machine: {m['cpu']} (SHA-NI: {m['sha_ni']}), nproc {m['nproc']}, memory {m['memory']}, "
             f"kernel {m['kernel']}")
    L.append(f"- filesystem of the data dirs and nginx's temp/root: `{m['fs']}`")
    L.append(f"- load average (1/5/15 min) at start: {load_start}; at end: {load_end}")
    L.append("- " + "; ".join(f"{k}: {v}" for k, v in m["versions"].items()))
    L.append(f"- {REPS} rounds per scenario, Larder and its peers interleaved (the order alternates); medians; "
             "every run listed. Client and servers share the same cores (loopback).")
    if NOTE:
        L.append(f"- note: {NOTE}")
    L.append("")
    L.append("## Every ratio of issue 13\n")
    L.append("Ratios are speeds, > 1 = Larder faster (for CPU and latency: peer / Larder).\n")
    L.append("| measure | Larder | peer | ratio | goal | met | what the peer does not do | runs |")
    L.append("|---|---:|---:|---:|---|---|---|---|")
    for row in summary_rows(R):
        L.append("| " + " | ".join(str(c) for c in row) + " |")
    L.append("")

    limits = R.get("limits")
    if limits:
        L.append("## Machine limits\n")
        L.append("| limit | MB/s | how |")
        L.append("|---|---:|---|")
        how = {
            "sha256": "`openssl speed -evp sha256 -bytes 1048576`, one core",
            "md5": "`openssl speed -evp md5 -bytes 1048576`, one core (Larder hashes MD5 inline only to check a client's Content-MD5)",
            "sha256+md5": "both in one thread, one after the other: 1/(1/sha256 + 1/md5)",
            "write+fsync": f"`dd if=upload.bin of=$TMP/x bs=1M conv=fsync` ({UPLOAD_MIB} MiB, from page cache)",
            "disk read": f"`dd if=upload.bin of=/dev/null bs=1M iflag=direct` ({UPLOAD_MIB} MiB)",
            "page-cache read": f"`dd if=upload.bin of=/dev/null bs=1M` (warm)",
            "durable-CAS": "min(write+fsync, sha256): hashing beside writing, the slower of the two",
        }
        for key, value in limits.items():
            L.append(f"| {key} | {fmt_mb(value)} | {how[key]} |")
        L.append("")
    gets = R.get("gets")
    if gets:
        first = gets["larder"][0]
        L.append(f"## {SMALL_BYTES} B GETs ({first['tool']}, keep-alive)\n")
        L.append("| server | round | requests/s | p50 | p99 | server CPU µs/request | problems |")
        L.append("|---|---:|---:|---:|---:|---:|---|")
        for name, runs in gets.items():
            if runs is None:
                L.append(f"| {name} | — | missing | | | | |")
                continue
            for i, g in enumerate(runs):
                L.append(f"| {name} | {i + 1} | {g['rps']:,.0f} | {g['p50']} | {g['p99']} | {g['cpu_us']:.0f} | "
                         f"{g['problems'] or 'none'} |")
        L.append("\nlarder+log: `--access-log FILE` (Larder's buffered access log to a file); nginx: `access_log off`.\n")
    up = R.get("upload")
    if up:
        mib = up["size"] >> 20
        L.append(f"## Simple upload, {mib} MiB (curl -T, interleaved)\n")
        L.append("| server | round | seconds | MB/s | server CPU s | server CPU ms/MiB |")
        L.append("|---|---:|---:|---:|---:|---:|")
        L += round_rows(up["times"], up["cpu"], 4,
                        lambda t, c: f"{t:.2f} | {fmt_mb(up['size'] / t)} | {c:.2f} | {c / mib * 1000:.2f}")
        L.append("\nLarder hashes SHA-256 of every byte (the address), writes, fsyncs and commits before answering; "
                 "nginx's WebDAV PUT writes a temp file and renames it.\n")
    tus = R.get("tus")
    if tus:
        mib = tus["size"] >> 20
        L.append(f"## tus, {mib} MiB over one keep-alive connection (a fresh server per run, interleaved)\n")
        for peer, why in tus["missing"].items():
            L.append(f"- **{peer}: missing** — {why}")
        L.append("\n| PATCH size | server | round | seconds | MiB/s | server CPU ms/MiB |")
        L.append("|---:|---|---:|---:|---:|---:|")
        for chunk, data in tus["chunks"].items():
            for name, times in data["runs"].items():
                for i, (t, c) in enumerate(zip(times, data["cpu"][name])):
                    L.append(f"| {chunk} MiB | {name} | {i + 1} | {t:.2f} | {mib / t:,.0f} | {c / mib * 1000:.2f} |")
        L.append("\nLarder's 204 means fsynced, committed in the catalog, SHA-256 computed; "
                 f"{NOT_DONE['tusd']}; {NOT_DONE['fastapi-tusd']}. fastapi-tusd's CPU is uvicorn's process.\n")
    down = R.get("download")
    if down:
        L.append(f"## Download, {SIZE_MIB} MiB (curl -o /dev/null, interleaved)\n")
        L.append("| server | round | seconds | MB/s | server CPU s |")
        L.append("|---|---:|---:|---:|---:|")
        L += round_rows(down["times"], down["cpu"], 3, lambda t, c: f"{t:.2f} | {fmt_mb(SIZE / t)} | {c:.2f}")
        L.append(f"\nLarder's peak RSS (VmHWM) over its process's life (start, one {SIZE_MIB} MiB upload, "
                 f"{REPS} downloads): {down['rss']:.0f} MiB.\n")
    pg = R.get("postgres")
    if pg:
        L.append(f"## The PostgreSQL catalog beside SQLite ({SMALL_BYTES} B objects)\n")
        if "missing" in pg:
            L.append(f"- **PostgreSQL: missing** — {pg['missing']}\n")
        else:
            L.append(f"PostgreSQL {pg['version']} from `scripts/pg.sh` on loopback, **fsync on** (a commit is durable, "
                     "as SQLite's synchronous=FULL), one schema per Larder; blobs in the data directory for both. "
                     "PostgreSQL's CPU (postmaster and backends) is reported apart from Larder's.\n")
            L.append(f"GETs: {pg['gets']['SQLite'][0]['tool']}, log off. Uploads: `wrk -t2 -c{SMALL_UPLOAD_CONNECTIONS} "
                     f"-d{WRK_SECONDS}s` POSTs, each a new name and new content; commits/s = objects in the catalog "
                     "afterwards (`larder ls`) / wrk's seconds (it can exceed requests/s by the uploads still in flight "
                     "when wrk stops, which wrk does not count). Two bodies: text (the name, then dots: libmagic's "
                     "costliest case, its text tests run over the content) and the start of a PNG (signature and "
                     "IHDR, the name, then zero bytes: detected as `image/png` from its first bytes, as an app's "
                     "avatars and photos are).\n")
            L.append("| catalog | what | round | requests/s | commits/s | p99 | Larder CPU µs/request | "
                     "PostgreSQL CPU µs/request | problems |")
            L.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
            for what, data in (("GET", pg["gets"]), ("upload", pg["uploads"]), ("upload, PNG", pg["uploads_png"])):
                for name, runs in data.items():
                    for i, r in enumerate(runs):
                        commits = f"{r['cps']:,.0f}" if "cps" in r else ""
                        pg_cpu = f"{r['pg_cpu_us']:.0f}" if r.get("pg_cpu_us") is not None else "—"
                        L.append(f"| {name} | {what} | {i + 1} | {r['rps']:,.0f} | {commits} | {r['p99']} | "
                                 f"{r['cpu_us']:.0f} | {pg_cpu} | {r['problems'] or 'none'} |")
            L.append("")
    conc = R.get("concurrent")
    if conc:
        L.append(f"## {conc['clients']} concurrent clients\n")
        L.append(f"Each client opens its connection, waits for all others, uploads {conc['upload_mib']} MiB "
                 f"(all bodies in flight at once), waits for all uploads, then GETs {SMALL_BYTES} B in a loop for "
                 f"{WRK_SECONDS} s. Larder's peak RSS: **{conc['rss']:.0f} MiB**; {conc['gets']:,} GETs; "
                 f"{conc['error_count']} errors{': ' + '; '.join(conc['errors']) if conc['errors'] else ''}; "
                 f"{conc['seconds']:.1f} s.\n")
    ver = R.get("verify")
    if ver:
        L.append("## `larder verify`\n")
        L.append(f"The download scenario's store ({ver['blobs']} blobs, {ver['bytes'] / MB:,.0f} MB hashed), its "
                 f"blob files evicted from the page cache first: {ver['seconds']:.2f} s, "
                 f"{fmt_mb(ver['rate'])} MB/s, exit {ver['exit']}, {ver['findings']} findings.\n")
    cml = R.get("cml")
    if cml:
        L.append("## Connection memory limit trade-off (`--connection-memory-limit`)\n")
        L.append("| limit | upload s (median) | server CPU s | bytes per write(2) | small GETs/s | p99 | CPU µs/GET | upload runs |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---|")
        for row in cml:
            L.append(f"| {row['limit']} | {row['upload']:.2f} | {row['cpu']:.2f} | {row['write_size'] / 1024:,.1f} KiB | "
                     f"{row['rps']:,.0f} | {row['p99']} | {row['cpu_us']:.0f} | {runs_text(row['uploads'])} |")
        L.append("")
    gc = R.get("gc")
    if gc:
        L.append(f"## gc-scale ({gc['n']:,} blobs, 10 % orphans)\n")
        L.append(f"generation: {gc['generate_s']:.0f} s; load average before {gc['load_before']}, after {gc['load_after']}\n")
        L.append("| step | exit | seconds | peak RSS (MiB) |")
        L.append("|---|---:|---:|---:|")
        for label in ("dry run", "gc"):
            g = gc[label]
            L.append(f"| `larder gc {'--dry-run ' if label == 'dry run' else ''}--grace 1h --json` | {g['exit']} | "
                     f"{g['seconds']:.1f} | {g['maxrss_kib'] / 1024:.0f} |")
        L.append(f"\n```\n{gc['gc']['report']}\n```\n")
    L += s3_section(R.get("s3"))
    L.append("## Reproduce\n")
    L.append("```sh")
    L.append("make bench                     # = swift build -c release --product larder && Benchmarks/run.sh")
    L.append("BENCH_QUICK=1 Benchmarks/run.sh   # small sizes, short runs: a check in a few minutes")
    L.append("BENCH_ONLY=gets Benchmarks/run.sh # one scenario (limits gets upload tus download concurrent verify postgres cml gc s3 s3-tus)")
    L.append("```\n")
    L.append("Servers as the script starts them ($TMP is the run's temp dir):\n")
    L.append("```sh")
    for c in dict.fromkeys(commands):
        L.append(c)
    L.append(f"{TUSD_BIN} -host 127.0.0.1 -port 0 -upload-dir $TMP/store")
    L.append("python -m uvicorn tusapp:app --port P   # FASTAPI_APP in Benchmarks/lib/bench.py")
    L.append(f"wrk -t{WRK_THREADS} -c{WRK_CONNECTIONS} -d{WRK_SECONDS}s --latency URL")
    L.append("curl -sS -o /dev/null -H 'Expect:' -X POST|PUT -T upload.bin URL")
    L.append("```")
    return "\n".join(L) + "\n"


def main():
    global TMP
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    known = ALL_SCENARIOS + ["cml", "gc", "s3", "s3-tus"]
    unknown = [s for s in SCENARIOS if s not in known]
    if unknown:
        sys.exit(f"bench: unknown scenario(s) {unknown}; known: {known}")
    signal.alarm(BUDGET + (GC_BUDGET if "gc" in SCENARIOS else 0))
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    TMP = tempfile.mkdtemp(prefix="larder-bench.", dir=TMP_PARENT)
    R, commands = {}, []
    try:
        need = (SIZE_MIB * 3 + UPLOAD_MIB * (REPS + 2) * 2 + TUS_MIB * 3 + CONCURRENT * CONCURRENT_UPLOAD_MIB) << 20
        free = shutil.disk_usage(TMP).free
        if free < need:
            raise BenchError(f"{TMP} has {free >> 30} GiB free; the run needs about {need >> 30} GiB")
        machine = machine_description()
        load_start = loadavg()
        log(f"scenarios: {' '.join(SCENARIOS)}; load average {load_start}")
        files = {"small": os.path.join(TMP, "small.bin")}
        with open(files["small"], "wb") as f:
            f.write(os.urandom(SMALL_BYTES))
        if {"limits", "upload", "cml"} & set(SCENARIOS):
            files["upload"] = make_file(os.path.join(TMP, "upload.bin"), UPLOAD_MIB)
        if "tus" in SCENARIOS:
            files["tus"] = make_file(os.path.join(TMP, "tus.bin"), TUS_MIB)
        if {"download", "verify"} & set(SCENARIOS):
            files["download"] = make_file(os.path.join(TMP, "download.bin"), SIZE_MIB)
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
        for name in os.listdir(TMP) if TMP and os.path.isdir(TMP) else []:
            if name.endswith(".log") and not name.startswith("access-") or name == "nginx":
                path = os.path.join(TMP, name, "error.log") if name == "nginx" else os.path.join(TMP, name)
                if os.path.isfile(path):
                    tail = open(path, errors="replace").read()[-1500:]
                    if tail.strip():
                        log(f"--- {path}:\n{tail}")
        return 1
    finally:
        signal.alarm(0)
        cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
