"""Measurements and clients shared by the scenarios: curl transfers, wrk (or a Python keep-alive
loop), the tus client, test files (random, stamped per round, evicted from the page cache)."""
import http.client
import os
import re
import shutil
import threading
import time
from urllib.parse import urljoin, urlsplit

from .config import CURL_MAX_TIME, MiB, WRK_CONNECTIONS, WRK_SECONDS, WRK_THREADS
from .processes import BenchError, run, server_cpu, server_write_calls


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


def urlopen_text(url):
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("GET", u.path + ("?" + u.query if u.query else ""))
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return body
