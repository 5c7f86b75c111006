#!/usr/bin/env python3
"""Larder's benchmark suite (called by Benchmarks/run.sh; see Benchmarks/README.md).

One run measures, on this machine and side by side:
  1. the machine's limits: SHA-256 and MD5 speed (openssl speed), sequential write+fsync into the
     filesystem of the data directories (dd conv=fsync, 1 MiB and 32 KiB writes), page-cache read;
  2. a 1 GiB upload and download through Larder and through nginx (WebDAV PUT, static GET with
     sendfile), curl, BENCH_REPS repetitions each, interleaved, median;
  3. small GETs (1 KiB object, keep-alive, wrk -t2 -c32) against both;
  4. the connection-memory-limit trade-off: Larder at each of BENCH_LIMITS, 1 GiB upload time
     against small-GET requests/s;
  5. Benchmarks/tus/run.sh when present, and gc-scale when BENCH_GC_SCALE=1.
Everything listens on 127.0.0.1 only. Every server is started here and stopped at exit; every
byte written lives in one temp dir that is removed at exit, whatever happens (a watchdog alarm
bounds the whole run).
"""
import datetime
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1e6  # MB/s in this suite means 10^6 bytes per second


def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


LARDER_BIN = os.environ.get("LARDER_BIN") or sys.exit("bench: set LARDER_BIN")
SIZE_MIB = env_int("BENCH_SIZE_MIB", 1024)
SIZE = SIZE_MIB << 20
REPS = env_int("BENCH_REPS", 3)
WRK_SECONDS = env_int("BENCH_WRK_SECONDS", 10)
WRK_THREADS = env_int("BENCH_WRK_THREADS", 2)
WRK_CONNECTIONS = env_int("BENCH_WRK_CONNECTIONS", 32)
LIMITS = os.environ.get("BENCH_LIMITS", "32KiB 64KiB 256KiB 1MiB").split()
BUDGET = env_int("BENCH_BUDGET", 840)
GC_SCALE = os.environ.get("BENCH_GC_SCALE") == "1"
GC_N = env_int("BENCH_GC_N", 1_000_000)
GC_BUDGET = env_int("BENCH_GC_BUDGET", 2400)
TUS_TIMEOUT = env_int("BENCH_TUS_TIMEOUT", 300)
TMP_PARENT = os.environ.get("BENCH_TMPDIR", tempfile.gettempdir())
OUT = os.environ.get("BENCH_OUT", os.path.join(ROOT, "Benchmarks/results/latest.md"))
NOTE = os.environ.get("BENCH_NOTE", "")
CURL_MAX_TIME = env_int("BENCH_CURL_MAX_TIME", 300)


class BenchError(Exception):
    pass


class Watchdog(BaseException):
    """Raised by SIGALRM / SIGTERM / SIGINT so that cleanup always runs."""


# ---------------------------------------------------------------- processes and cleanup

PROCESSES = []  # (name, Popen) of every server we started
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

class Larder:
    def __init__(self, label, memory_limit=None):
        self.label = label
        self.data = os.path.join(TMP, f"larder-{label}")
        os.makedirs(self.data)
        args = [LARDER_BIN, "serve", "--data", self.data, "--port", "0", "--host", "127.0.0.1",
                "--allow-all", "--access-log", "off", "--max-upload-size", "1000GiB"]
        if memory_limit:
            args += ["--connection-memory-limit", memory_limit]
        self.command = " ".join(a if a != self.data else "$DATA" for a in args)
        self.stderr = open(os.path.join(TMP, f"larder-{label}.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, stdin=subprocess.DEVNULL)
        PROCESSES.append(("larder", self.proc))
        line = b""
        deadline = time.monotonic() + 60
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise BenchError(f"larder did not print its address; see {self.stderr.name}")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    raise BenchError("larder closed stdout before listening")
                line += chunk
        m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise BenchError(f"unexpected first line from larder: {line!r}")
        self.base = f"http://127.0.0.1:{int(m.group(1))}"
        self.upload_url = f"{self.base}/v0/b/bench/o?name=%s"
        self.download_url = f"{self.base}/v0/b/bench/o/%s?alt=media"
        self.upload_method = "POST"

    def close(self):
        stop(self.proc)
        PROCESSES.remove(("larder", self.proc))
        self.stderr.close()
        shutil.rmtree(self.data, ignore_errors=True)


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


class Nginx:
    label = "nginx"

    def __init__(self, workers):
        self.dir = os.path.join(TMP, "nginx")
        os.makedirs(os.path.join(self.dir, "www", "dav"))
        port = free_port()
        self.conf = os.path.join(self.dir, "nginx.conf")
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, port=port, workers=workers, user=user))
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
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


def openssl_speed(algorithm):
    r = run(["openssl", "speed", "-evp", algorithm, "-bytes", "1048576", "-seconds", "3"], timeout=60)
    m = re.search(rf"^{algorithm}\s+([\d.]+)k\s*$", r.stdout, re.M | re.I)
    if not m:
        raise BenchError(f"cannot parse openssl speed output for {algorithm}: {r.stdout[-300:]}")
    return float(m.group(1)) * 1000  # bytes per second


def timed(args, timeout=300):
    started = time.monotonic()
    run(args, timeout=timeout)
    return time.monotonic() - started


def machine_limits(big):
    log("machine limits: openssl speed sha256, md5")
    limits = {"sha256": openssl_speed("sha256"), "md5": openssl_speed("md5")}
    limits["sha256+md5"] = 1 / (1 / limits["sha256"] + 1 / limits["md5"])
    target = os.path.join(TMP, "dd-write.bin")
    for label, bs, count in (("write+fsync 1 MiB", "1M", SIZE_MIB), ("write+fsync 32 KiB", "32K", SIZE_MIB * 32)):
        log(f"machine limits: {label} (dd conv=fsync, {SIZE_MIB} MiB)")
        os.sync()
        seconds = timed(["dd", f"if={big}", f"of={target}", f"bs={bs}", f"count={count}", "conv=fsync",
                         "status=none"])
        limits[label] = SIZE / seconds
        os.unlink(target)
    log("machine limits: page-cache read")
    run(["dd", f"if={big}", "of=/dev/null", "bs=1M", "status=none"])  # warm
    limits["page-cache read"] = SIZE / timed(["dd", f"if={big}", "of=/dev/null", "bs=1M", "status=none"])
    return limits


# ---------------------------------------------------------------- the run

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
        "nginx": run([shutil.which("nginx") or "/usr/sbin/nginx", "-v"], check=False).stderr.strip().split(": ")[-1],
        "curl": " ".join(run(["curl", "--version"], check=False).stdout.split()[:2]),
        "openssl": " ".join(run(["openssl", "version"], check=False).stdout.split()[:2]),
        "wrk": " ".join(run(["wrk", "-v"], check=False).stdout.split()[:2]) if shutil.which("wrk") else "absent",
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


def measure_transfers(servers, big, reps):
    """Uploads then downloads, interleaving the servers in every repetition so load drift hits all."""
    up = {s.label: [] for s in servers}
    down = {s.label: [] for s in servers}
    cpu = {(s.label, kind): [] for s in servers for kind in ("upload", "download")}
    for rep in range(1, reps + 1):
        stamp(big, rep)
        for s in servers:
            t = upload(s, big, "big.bin", cpu[(s.label, "upload")])
            up[s.label].append(t)
            log(f"upload {s.label} rep {rep}: {t:.2f}s ({SIZE / t / MB:.0f} MB/s)")
    for rep in range(1, reps + 1):
        for s in servers:
            t = download(s, "big.bin", SIZE, cpu[(s.label, "download")])
            down[s.label].append(t)
            log(f"download {s.label} rep {rep}: {t:.2f}s ({SIZE / t / MB:.0f} MB/s)")
    return up, down, cpu


def run_tus():
    script = os.path.join(ROOT, "Benchmarks/tus/run.sh")
    if not os.access(script, os.X_OK):
        return None
    log(f"tus: {script} (timeout {TUS_TIMEOUT}s)")
    try:
        r = subprocess.run([script], capture_output=True, text=True, timeout=TUS_TIMEOUT, cwd=ROOT,
                           env=dict(os.environ, LARDER_BIN=LARDER_BIN, BENCH_TMPDIR=TMP))
        status = f"exit {r.returncode}"
        out = r.stdout.strip() or r.stderr.strip()[-2000:]
    except subprocess.TimeoutExpired:
        status, out = f"timed out after {TUS_TIMEOUT}s", ""
    return status, out


def run_gc_scale():
    generator = os.path.join(ROOT, "Benchmarks/gc-scale/generate.py")
    if not os.path.exists(generator):
        return None
    data = os.path.join(TMP, "gc-scale")
    log(f"gc-scale: generating {GC_N} blobs in {data}")
    started = time.monotonic()
    run([sys.executable, generator, data, str(GC_N)], timeout=GC_BUDGET)
    generated = time.monotonic() - started
    results = {"n": GC_N, "generate_s": generated}
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
        elapsed = time.monotonic() - started
        results[label] = {"exit": proc.returncode, "seconds": elapsed, "maxrss_kib": usage.ru_maxrss,
                          "report": open(out_path).read().strip()[-800:]}
    shutil.rmtree(data, ignore_errors=True)
    return results


def recommend(tradeoff):
    """Two balanced scores per limit, 1.0 = best at both of its figures:
    wall: √((fastest upload time / this upload time) × (this rps / best rps));
    cpu:  √((least upload CPU / this upload CPU) × (least CPU per GET / this CPU per GET)),
    the one to trust on a busy machine (CPU time hardly depends on what else runs)."""
    best_up = min(row["upload"] for row in tradeoff)
    best_rps = max(row["rps"] for row in tradeoff)
    best_up_cpu = min(row["cpu"] for row in tradeoff)
    best_get_cpu = min(row["cpu_us"] for row in tradeoff)
    wall = [((best_up / row["upload"]) * (row["rps"] / best_rps)) ** 0.5 for row in tradeoff]
    cpu = [((best_up_cpu / row["cpu"]) * (best_get_cpu / row["cpu_us"])) ** 0.5 for row in tradeoff]
    pick = lambda scores: tradeoff[max(range(len(tradeoff)), key=lambda k: scores[k])]["limit"]
    return pick(wall), pick(cpu), wall, cpu


def main():
    global TMP
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    budget = BUDGET + (GC_BUDGET if GC_SCALE else 0)
    signal.alarm(budget)
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    TMP = tempfile.mkdtemp(prefix="larder-bench.", dir=TMP_PARENT)
    try:
        free = shutil.disk_usage(TMP).free
        if free < 6 * SIZE + (2 << 30):
            raise BenchError(f"{TMP} has {free >> 30} GiB free; the run needs about {(6 * SIZE >> 30) + 2} GiB")
        machine = machine_description()
        load_start = loadavg()
        big = os.path.join(TMP, "big.bin")
        log(f"writing {SIZE_MIB} MiB of random bytes to {big}")
        with open("/dev/urandom", "rb") as src, open(big, "wb") as dst:
            for _ in range(SIZE_MIB):
                dst.write(src.read(1 << 20))
            dst.flush()
            os.fsync(dst.fileno())
        small = os.path.join(TMP, "small.bin")
        with open(small, "wb") as f:
            f.write(os.urandom(1024))

        limits = machine_limits(big)

        log("starting larder (defaults) and nginx")
        larder = Larder("default")
        nginx = Nginx(workers=os.cpu_count())
        up, down, cpu = measure_transfers([larder, nginx], big, REPS)

        log("small GETs")
        upload(larder, small, "small.bin")
        upload(nginx, small, "small.bin")
        gets = {"larder": wrk(larder, "small.bin"), "nginx": wrk(nginx, "small.bin")}
        commands = {"larder": larder.command, "nginx": nginx.command}
        larder.close()

        tradeoff = []
        for limit in LIMITS:
            log(f"connection memory limit {limit}")
            server = Larder(f"cml-{limit}", memory_limit=limit)
            times, stats = [], []
            for rep in range(1, REPS + 1):
                stamp(big, 100 + rep)
                times.append(upload(server, big, "big.bin", stats))
                log(f"  upload rep {rep}: {times[-1]:.2f}s")
            upload(server, small, "small.bin")
            g = wrk(server, "small.bin")
            log(f"  small GETs: {g['rps']:.0f}/s")
            tradeoff.append({"limit": limit, "upload": median_of(times), "uploads": times, "rps": g["rps"],
                             "cpu": median_of([c for c, _ in stats]),
                             "write_size": SIZE / max(1, median_of([w for _, w in stats])),
                             "p99": g["p99"], "cpu_us": g["cpu_us"], "problems": g["problems"]})
            server.close()
        nginx.close()

        tus = run_tus()
        gc = run_gc_scale() if GC_SCALE else None
        load_end = loadavg()
        elapsed = time.monotonic() - started
        report = render(date, machine, load_start, load_end, elapsed, limits, up, down, cpu, gets, tradeoff, tus, gc,
                        commands)
        print(report)
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w") as f:
            f.write(report)
        log(f"wrote {OUT} ({elapsed:.0f}s)")
    except (BenchError, Watchdog, subprocess.TimeoutExpired) as e:
        log(f"FAILED: {e}")
        for name in os.listdir(TMP) if TMP and os.path.isdir(TMP) else []:
            if name.endswith(".log") or name == "nginx":
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


# ---------------------------------------------------------------- report

def render(date, m, load_start, load_end, elapsed, limits, up, down, cpu, gets, tradeoff, tus, gc, commands):
    size_label = f"{SIZE_MIB // 1024} GiB" if SIZE_MIB % 1024 == 0 else f"{SIZE_MIB} MiB"
    L = []
    L.append("# Larder benchmark results\n")
    L.append(f"- date: {date}; commit `{m['commit']}`; whole run {elapsed:.0f} s")
    L.append(f"- machine: {m['cpu']} (SHA-NI: {m['sha_ni']}), nproc {m['nproc']}, memory {m['memory']}, "
             f"kernel {m['kernel']}")
    L.append(f"- filesystem of the data dirs and nginx's temp/root: `{m['fs']}`")
    L.append(f"- load average (1/5/15 min) at start: {load_start}; at end: {load_end}")
    L.append("- " + "; ".join(f"{k}: {v}" for k, v in m["versions"].items()))
    L.append("- client and servers share the same cores (loopback): every figure includes curl's/wrk's own CPU.")
    if NOTE:
        L.append(f"- note: {NOTE}")
    L.append("")

    L.append("## Machine limits\n")
    L.append("| limit | MB/s | how |")
    L.append("|---|---:|---|")
    how = {
        "sha256": "`openssl speed -evp sha256 -bytes 1048576 -seconds 3`",
        "md5": "`openssl speed -evp md5 -bytes 1048576 -seconds 3`",
        "sha256+md5": "both in one thread, one after the other: 1/(1/sha256 + 1/md5)",
        "write+fsync 1 MiB": f"`dd if=big.bin of=$TMP/x bs=1M conv=fsync` ({size_label}, from page cache)",
        "write+fsync 32 KiB": f"`dd … bs=32K conv=fsync` ({size_label}; Larder's write size at 64 KiB limit is ≤ 32 KiB)",
        "page-cache read": f"`dd if=big.bin of=/dev/null bs=1M` ({size_label}, warm)",
    }
    for key, value in limits.items():
        L.append(f"| {key} | {fmt_mb(value)} | {how[key]} |")
    L.append("")

    L.append(f"## {size_label} through Larder and nginx (curl, median of {REPS}, interleaved)\n")
    L.append("| transfer | Larder s | Larder MB/s | nginx s | nginx MB/s | Larder/nginx time | Larder CPU s | "
             "nginx CPU s | all Larder runs | all nginx runs |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for label, data in (("upload", up), ("download", down)):
        lm, nm = median_of(data["default"]), median_of(data["nginx"])
        lc = median_of([c for c, _ in cpu[("default", label)]])
        nc = median_of([c for c, _ in cpu[("nginx", label)]])
        L.append(f"| {label} | {fmt_s(lm)} | {fmt_mb(SIZE / lm)} | {fmt_s(nm)} | {fmt_mb(SIZE / nm)} | "
                 f"{lm / nm:.2f}× | {lc:.2f} | {nc:.2f} | {', '.join(fmt_s(x) for x in data['default'])} | "
                 f"{', '.join(fmt_s(x) for x in data['nginx'])} |")
    L.append("\nCPU s = user + system CPU seconds the server process (nginx: master and workers) used during "
             "the transfer (median), from /proc/PID/stat; the client's CPU is not included.")
    L.append("")
    lup = SIZE / median_of(up["default"])
    L.append("Larder's upload against the machine's limits (Larder hashes SHA-256 of every byte, writes, "
             "fsyncs and commits before answering; MD5 is computed inline only to check a client's "
             "Content-MD5, otherwise after the commit; nginx's WebDAV PUT does neither hash nor fsync):\n")
    L.append("| Larder upload MB/s | / sha256 | / write+fsync 1 MiB | / durable-CAS limit |")
    L.append("|---:|---:|---:|---:|")
    durable = 1 / (1 / limits["sha256"] + 1 / limits["write+fsync 1 MiB"])
    L.append(f"| {fmt_mb(lup)} | {lup / limits['sha256']:.2f} | "
             f"{lup / limits['write+fsync 1 MiB']:.2f} | {lup / durable:.2f} |")
    L.append("")
    L.append(f"The durable-CAS limit ({fmt_mb(durable)} MB/s) is 1/(1/sha256 + 1/(write+fsync)): one thread "
             "hashing SHA-256 and then writing each block. The page cache absorbs part of each write before "
             "the final fsync, so a measured rate can exceed it.\n")

    L.append(f"## Small GETs (1 KiB object, keep-alive, {gets['larder']['tool']})\n")
    L.append("| server | requests/s | p50 | p99 | server CPU µs/request | problems |")
    L.append("|---|---:|---:|---:|---:|---|")
    for label in ("larder", "nginx"):
        g = gets[label]
        L.append(f"| {label} | {g['rps']:,.0f} | {g['p50']} | {g['p99']} | {g['cpu_us']:.0f} | {g['problems'] or 'none'} |")
    L.append(f"\nLarder/nginx requests/s: {gets['larder']['rps'] / gets['nginx']['rps']:.2f}; server CPU per request "
             f"Larder/nginx: {gets['larder']['cpu_us'] / gets['nginx']['cpu_us']:.1f}× (CPU per request is the "
             "figure least disturbed by other load on the machine).\n")

    rec, rec_cpu, scores, cpu_scores = recommend(tradeoff)
    L.append(f"## Connection memory limit trade-off (Larder, `--connection-memory-limit`)\n")
    L.append(f"| limit | {size_label} upload s (median) | MB/s | server CPU s | bytes per write(2) | small GETs/s | "
             "p99 | CPU µs/GET | wall score | CPU score | upload runs | problems |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for row, score, cpu_score in zip(tradeoff, scores, cpu_scores):
        L.append(f"| {row['limit']} | {fmt_s(row['upload'])} | {fmt_mb(SIZE / row['upload'])} | {row['cpu']:.2f} | "
                 f"{row['write_size'] / 1024:,.1f} KiB | {row['rps']:,.0f} | "
                 f"{row['p99']} | {row['cpu_us']:.0f} | {score:.3f} | {cpu_score:.3f} | {', '.join(fmt_s(x) for x in row['uploads'])} | "
                 f"{row['problems'] or 'none'} |")
    L.append("\nbytes per write(2) = upload size / the server's write calls during the upload (/proc/PID/io "
             "syscw): the size of the body chunks libmicrohttpd hands to Larder.")
    L.append(f"\nwall score = √((fastest upload time / this upload time) × (this rps / best rps)), best: **{rec}**; "
             f"CPU score = √((least upload CPU / this upload CPU) × (least CPU per GET / this CPU per GET)), best: "
             f"**{rec_cpu}**. On a busy machine trust the CPU score (wall figures swing by 2× between runs); "
             "differences of a few percent are noise either way.\n")

    if tus is not None:
        status, out = tus
        L.append(f"## tus (Benchmarks/tus/run.sh, {status})\n")
        L.append(out if out.lstrip().startswith("|") or out.lstrip().startswith("#") else f"```\n{out}\n```")
        L.append("")
    if gc is not None:
        L.append(f"## gc-scale ({gc['n']:,} blobs, 10 % orphans)\n")
        L.append(f"generation: {gc['generate_s']:.0f} s\n")
        L.append("| step | exit | seconds | peak RSS (MiB) |")
        L.append("|---|---:|---:|---:|")
        for label in ("dry run", "gc"):
            g = gc[label]
            L.append(f"| `larder gc {'--dry-run ' if label == 'dry run' else ''}--grace 1h --json` | {g['exit']} | "
                     f"{g['seconds']:.1f} | {g['maxrss_kib'] / 1024:.0f} |")
        L.append(f"\n```\n{gc['gc']['report']}\n```\n")

    L.append("## Reproduce\n")
    L.append("```sh")
    L.append("make bench            # = swift build -c release --product larder && Benchmarks/run.sh")
    L.append("# or, with a binary built elsewhere:")
    L.append("swift build -c release --product larder --scratch-path /tmp/build-bench")
    L.append("LARDER_BIN=/tmp/build-bench/release/larder Benchmarks/run.sh")
    L.append("```\n")
    L.append("What the script runs (DATA, NGINX_DIR and big.bin live in one temp dir):\n")
    L.append("```sh")
    L.append(commands["larder"])
    L.append(f"{commands['nginx']}   # config: see NGINX_CONF in Benchmarks/lib/bench.py")
    L.append("curl -sS -o /dev/null -H 'Expect:' -w '%{http_code} %{time_total}' -X POST -T big.bin "
             "'http://127.0.0.1:PORT/v0/b/bench/o?name=big.bin'")
    L.append("curl -sS -o /dev/null -H 'Expect:' -w '%{http_code} %{time_total}' -X PUT -T big.bin "
             "'http://127.0.0.1:NPORT/dav/big.bin'")
    L.append("curl -sS -o /dev/null -w '%{time_total}' 'http://127.0.0.1:PORT/v0/b/bench/o/big.bin?alt=media'")
    L.append("curl -sS -o /dev/null -w '%{time_total}' 'http://127.0.0.1:NPORT/dav/big.bin'")
    L.append(f"wrk -t{WRK_THREADS} -c{WRK_CONNECTIONS} -d{WRK_SECONDS}s --latency "
             "'http://127.0.0.1:PORT/v0/b/bench/o/small.bin?alt=media'")
    L.append(f"wrk -t{WRK_THREADS} -c{WRK_CONNECTIONS} -d{WRK_SECONDS}s --latency 'http://127.0.0.1:NPORT/dav/small.bin'")
    L.append(f"# trade-off: the same upload and wrk against larder serve ... --connection-memory-limit L, "
             f"L in {' '.join(LIMITS)}")
    L.append("```")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
