"""Times one tus upload (POST + PATCHes) against Larder, tusd 1.13 and fastapi-tusd under uvicorn.

Every server gets the same client (one keep-alive connection), the same file and the same chunk
size, on this machine, in this run; the servers are interleaved within each round and each
chunk size reports the median of the rounds. Larder fsyncs every PATCH, commits the offset in
SQLite, hashes SHA-256 inline and publishes the object at the end; tusd (the reference tus
server) appends to a file and never fsyncs nor hashes; fastapi-tusd appends to a file and
writes a JSON info file. A peer that is missing is printed as missing.
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


def listening_url(proc, name):
    """The URL in the first stdout line saying 'listening on http://…' (60 s), else exit."""
    line, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            b = os.read(proc.stdout.fileno(), 1)
            if not b:
                break
            if b == b"\n":
                text = line.decode(errors="replace").strip()
                line = b""
                if "listening on http://" in text:
                    return text.split("listening on ", 1)[1].strip().rstrip("/")
            else:
                line += b
    proc.kill()
    sys.exit(f"{name} did not start")


def start_larder(binary, data_dir):
    proc = subprocess.Popen([binary, "serve", "--data", data_dir, "--port", "0", "--allow-all", "--access-log", "off"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return proc, f"{listening_url(proc, 'larder serve')}/v0/b/bench/uploads"


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


def start_tusd(binary, store):
    proc = subprocess.Popen([binary, "-host", "127.0.0.1", "-port", "0", "-upload-dir", store],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return proc, listening_url(proc, "tusd") + "/"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(MiB):
            h.update(block)
    return h.hexdigest()


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
    return time.perf_counter() - started, location


TUSD_NOTE = ("tusd neither fsyncs nor hashes: its 204 means in the page cache; "
             "Larder's means fsynced, committed, SHA-256 computed")


def run_one(name, args, work, path, size, chunk, digest, tag):
    """Starts server `name`, uploads once, checks the stored bytes, stops it; returns seconds."""
    store = os.path.join(work, f"{name}-{tag}")
    if name == "larder":
        proc, url = start_larder(args.larder, store)
    elif name == "tusd":
        proc, url = start_tusd(args.tusd, store)
    else:
        proc, url = start_fastapi(work, store)
    try:
        seconds, location = upload(url, path, size, chunk)
        if name == "larder":
            meta = requests.get(url.replace("/uploads", "/o/bench.bin"), timeout=60).json()
            assert meta["sha256"] == digest, "larder stored different bytes"
        elif name == "tusd":
            stored = os.path.join(store, location.rstrip("/").rsplit("/", 1)[1])
            assert sha256_file(stored) == digest, "tusd stored different bytes"
        return seconds
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(store, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--larder", required=True)
    ap.add_argument("--tusd", default="", help="tusd binary (reported as missing when absent)")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--chunk-mib", default="8,1", help="comma-separated PATCH sizes in MiB")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    size = args.size_mib * MiB
    chunks = [int(c) for c in args.chunk_mib.split(",") if c.strip()]
    servers = ["larder", "tusd", "fastapi-tusd"]
    missing = []
    if not (args.tusd and os.path.isfile(args.tusd) and os.access(args.tusd, os.X_OK)):
        servers.remove("tusd")
        missing.append(f"tusd: missing (no executable at {args.tusd or '(not given)'}; "
                       "set LARDER_PEERS, see ../shared/peers/tusd/README.md)")
    work = tempfile.mkdtemp(prefix="larder-tus-bench-", dir=os.environ.get("BENCH_TMPDIR") or None)
    try:
        path = os.path.join(work, "payload.bin")
        digest = hashlib.sha256()
        with open(path, "wb") as f:
            for _ in range(size // MiB):
                block = os.urandom(MiB)
                f.write(block)
                digest.update(block)
        digest = digest.hexdigest()
        for line in missing:
            print(line)
        for chunk_mib in chunks:
            times = {name: [] for name in servers}
            for round_ in range(args.rounds):
                # Interleaved within the round; the order rotates so no server always goes first.
                k = round_ % len(servers)
                for name in servers[k:] + servers[:k]:
                    times[name].append(run_one(name, args, work, path, size, chunk_mib * MiB, digest,
                                               f"{chunk_mib}-{round_}"))
            print(f"tus upload of {args.size_mib} MiB in {chunk_mib} MiB chunks, {args.rounds} rounds (median):")
            med = {k: statistics.median(v) for k, v in times.items()}
            for name, value in med.items():
                runs = ", ".join(f"{t:.2f}" for t in times[name])
                print(f"  {name:13s} {value:7.2f} s  {args.size_mib / value:8.1f} MiB/s   (runs: {runs})")
            if "tusd" in med:
                print(f"  ratio Larder speed / tusd speed: {med['tusd'] / med['larder']:.2f}x   ({TUSD_NOTE})")
            else:
                print("  ratio Larder speed / tusd speed: n/a (tusd missing)")
            print(f"  ratio Larder speed / fastapi-tusd speed: {med['fastapi-tusd'] / med['larder']:.2f}x")
        sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
