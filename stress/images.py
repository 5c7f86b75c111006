"""Image renders as an attacker asks for them (issue 37.2): one address (127.0.0.3) floods a public
1200x1200 image of random pixels with many concurrent requests for ever other sizes, as AVIF and as
PNG, while another address (127.0.0.2) downloads a small object and asks for small variants. The
other address must be served within its deadlines throughout, the attacker answered 429 past its
share of the renderers, and the blobs on disk must stay within the variant cache's budget (plus the
source and what the renders in progress hold).
"""
import os
import struct
import threading
import time
import zlib

import requests

from .harness import BUCKET, Result, exchange, quote, start_server

ATTACKER, VICTIM = "127.0.0.3", "127.0.0.2"
# The largest variant the attack asks for: 2500x2500 RGB PNG of upscaled noise, uncompressed.
LARGEST_VARIANT = 2500 * 2500 * 3 + (1 << 20)


def noise_png(width, height):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b""))


def tree_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def get(port, target, source, timeout):
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    return exchange(port, request, timeout=timeout, linger=0.1, source=source)


def run(data_dir, attackers=8, seconds=8.0, budget_mb=32, probe_deadline=2.0, render_deadline=10.0, extra=(),
        on_time=0.8, answered_within=30.0):
    """Passes when every request of the other address is answered 200 within `answered_within`
    seconds and at least `on_time` of its GETs and of its renders within their deadlines. Not all:
    a render holds its request thread while it waits (README: Image variants), and a connection
    that thread had accepted waits with it, for one render at most."""
    server = start_server(data_dir, extra=("--image-cache-size", f"{budget_mb}MiB", *extra))
    port = server.port
    big = noise_png(1200, 1200)
    for name, body in (("public/big.png", big), ("probe.txt", b"probe"), ("small.png", noise_png(64, 64))):
        r = requests.post(f"{server.url}/v0/b/{BUCKET}/o?name={quote(name)}", data=body, timeout=30)
        assert r.status_code == 200, (name, r.status_code, r.text)
    blobs = os.path.join(str(data_dir), "blobs")
    baseline = tree_bytes(blobs)
    budget = budget_mb << 20
    allowed = budget + 2 * LARGEST_VARIANT  # renders in progress hold a variant each before the budget applies

    stop = threading.Event()
    lock = threading.Lock()
    attack = {"200": 0, "429": 0, "503": 0, "other": 0}
    sizes = iter(range(1300, 10**9))
    worst_blobs = [0]

    def attacker():
        while not stop.is_set():
            with lock:
                n = next(sizes)
            width = 1300 + n % 1200
            fmt = "avif" if n % 2 else "png"
            got = get(port, f"/v0/b/{BUCKET}/o/public%2Fbig.png?alt=media&format={fmt}&width={width}",
                      ATTACKER, timeout=120)
            with lock:
                key = str(got.status) if str(got.status) in attack else "other"
                attack[key] += 1

    def sampler():
        while not stop.is_set():
            worst_blobs[0] = max(worst_blobs[0], tree_bytes(blobs) - baseline)
            stop.wait(0.2)

    threads = [threading.Thread(target=attacker) for _ in range(attackers)] + [threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the flood is under way

    probes, renders, misses = [], [], []
    end = time.monotonic() + seconds
    k = 0
    while time.monotonic() < end:
        got = get(port, f"/v0/b/{BUCKET}/o/probe.txt?alt=media", VICTIM, timeout=answered_within)
        probes.append(got.seconds)
        if got.status != 200 or not got.raw.endswith(b"probe"):
            misses.append(f"GET: status {got.status}, {got.seconds:.2f} s")
        k += 1
        got = get(port, f"/v0/b/{BUCKET}/o/small.png?alt=media&format=webp&width={16 + k}", VICTIM,
                  timeout=answered_within)
        renders.append(got.seconds)
        if got.status != 200:
            misses.append(f"render: status {got.status}, {got.seconds:.2f} s")
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    worst_blobs[0] = max(worst_blobs[0], tree_bytes(blobs) - baseline)
    alive = server.proc.poll() is None
    server.kill()
    server.stop()

    failures = []
    if misses:
        failures.append(f"{len(misses)} of {len(probes) + len(renders)} requests from another address not answered "
                        f"200 within {answered_within} s: {misses[:4]}")
    for kind, times, deadline in (("GETs", probes, probe_deadline), ("renders", renders, render_deadline)):
        share = sum(t <= deadline for t in times) / max(1, len(times))
        if share < on_time:
            failures.append(f"{share:.0%} of the other address's {kind} within {deadline} s (at least {on_time:.0%} must be)")
    if attack["429"] == 0:
        failures.append("the attacker was never answered 429 (no per-client share)")
    if worst_blobs[0] > allowed:
        failures.append(f"the blobs grew by {worst_blobs[0] >> 20} MiB, past the {budget_mb} MiB budget "
                        f"(+{(allowed - budget) >> 20} MiB for renders in progress)")
    if not alive:
        failures.append("the server died")
    figures = {"attacking connections (one address)": attackers, "seconds": seconds,
               "attacker answers": dict(attack), "victim GETs": len(probes),
               "slowest victim GET (s)": round(max(probes, default=0), 3),
               "victim renders": len(renders), "slowest victim render (s)": round(max(renders, default=0), 3),
               "--image-cache-size (MiB)": budget_mb, "largest blob growth (MiB)": round(worst_blobs[0] / (1 << 20), 1)}
    return Result("Image render flood", not failures, figures, failures)


if __name__ == "__main__":
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        result = run(os.path.join(tmp, "data"), seconds=float(sys.argv[1]) if len(sys.argv) > 1 else 8.0, extra=sys.argv[2:])
        print(result.summary())
        sys.exit(0 if result.passed else 1)
