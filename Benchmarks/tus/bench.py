"""Times one tus upload (POST + PATCHes) against Larder and against fastapi-tusd under uvicorn.

Both servers get the same client, the same file and the same chunk size, on this machine, in
this run. Larder fsyncs every PATCH, commits the offset in SQLite, hashes (SHA-256 + MD5) and
publishes the object at the end; fastapi-tusd appends to a file and writes a JSON info file.
"""
import argparse
import hashlib
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import requests

MiB = 1 << 20
TUS = {"Tus-Resumable": "1.0.0"}

FASTAPI_APP = """
from fastapi import FastAPI
from fastapi_tusd import TusRouter
import os
app = FastAPI()
port = os.environ["BENCH_PORT"]
app.include_router(TusRouter(store_dir=os.environ["BENCH_STORE"], location=f"http://127.0.0.1:{port}/files"),
                   prefix="/files")
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_larder(binary, data_dir):
    proc = subprocess.Popen([binary, "serve", "--data", data_dir, "--port", "0", "--allow-all", "--access-log", "off"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            b = os.read(proc.stdout.fileno(), 1)
            if not b:
                break
            if b == b"\n":
                text = line.decode(errors="replace").strip()
                line = b""
                if text.startswith("listening on http://"):
                    return proc, f"{text.split('listening on ', 1)[1].rstrip('/')}/v0/b/bench/uploads"
            else:
                line += b
    proc.kill()
    sys.exit("larder serve did not start")


def start_fastapi(workdir, store):
    port = free_port()
    with open(os.path.join(workdir, "tusapp.py"), "w") as f:
        f.write(FASTAPI_APP)
    env = dict(os.environ, BENCH_PORT=str(port), BENCH_STORE=store)
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "tusapp:app", "--app-dir", workdir, "--port", str(port),
                             "--log-level", "warning", "--no-access-log"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/files"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # (fastapi-tusd's OPTIONS answer crashes under current FastAPI: probe the socket instead.)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("uvicorn did not start")


def upload(endpoint, path, size, chunk):
    """POST then PATCH every chunk; returns seconds from the POST to the last answer."""
    s = requests.Session()
    started = time.perf_counter()
    r = s.post(endpoint, headers={**TUS, "Upload-Length": str(size), "Upload-Metadata": "name YmVuY2guYmlu"},
               timeout=120)
    assert r.status_code == 201, (r.status_code, r.text)
    location = requests.compat.urljoin(endpoint, r.headers["Location"])
    offset = 0
    with open(path, "rb") as f:
        while offset < size:
            body = f.read(chunk)
            r = s.patch(location, data=body, timeout=600, headers={
                **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset)})
            assert r.status_code == 204, (r.status_code, r.text)
            offset += len(body)
            assert int(r.headers["Upload-Offset"]) == offset
    return time.perf_counter() - started


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--larder", required=True)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--chunk-mib", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    size, chunk = args.size_mib * MiB, args.chunk_mib * MiB
    work = tempfile.mkdtemp(prefix="larder-tus-bench-", dir=os.environ.get("BENCH_TMPDIR") or None)
    try:
        path = os.path.join(work, "payload.bin")
        digest = hashlib.sha256()
        with open(path, "wb") as f:
            for _ in range(size // MiB):
                block = os.urandom(MiB)
                f.write(block)
                digest.update(block)
        times = {"larder": [], "fastapi-tusd": []}
        for round_ in range(args.rounds):
            data = os.path.join(work, f"larder-{round_}")
            proc, url = start_larder(args.larder, data)
            try:
                times["larder"].append(upload(url, path, size, chunk))
                meta = requests.get(url.replace("/uploads", "/o/bench.bin"), timeout=60).json()
                assert meta["sha256"] == digest.hexdigest(), "larder stored different bytes"
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            store = os.path.join(work, f"fastapi-{round_}")
            proc, url = start_fastapi(work, store)
            try:
                times["fastapi-tusd"].append(upload(url, path, size, chunk))
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            shutil.rmtree(data, ignore_errors=True)
            shutil.rmtree(store, ignore_errors=True)
        print(f"tus upload of {args.size_mib} MiB in {args.chunk_mib} MiB chunks, {args.rounds} rounds (median):")
        med = {k: statistics.median(v) for k, v in times.items()}
        for name, value in med.items():
            runs = ", ".join(f"{t:.2f}" for t in times[name])
            print(f"  {name:13s} {value:7.2f} s  {args.size_mib / value:8.1f} MiB/s   (runs: {runs})")
        print(f"  ratio fastapi-tusd / larder: {med['fastapi-tusd'] / med['larder']:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
