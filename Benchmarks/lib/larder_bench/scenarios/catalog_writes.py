"""`pg-writes`: how 4 KiB uploads scale with concurrent clients and with nodes on the PostgreSQL
catalog (fsync on): 1 and 16 clients on one node, 2 and 16 on two nodes (two `larder serve` on one
catalog and one data directory), and the catalog lock hold time per upload from /metrics."""
import os
import re
import shutil
import subprocess
import time
import urllib.request
from urllib.parse import urlsplit

from .. import processes
from ..config import REPS, SMALL_BYTES, WRK_SECONDS
from ..larder import Larder
from ..peers.postgres import with_postgres
from ..processes import BenchError, log
from .catalog import SMALL_UPLOAD_BODIES, WRK_UPLOAD_LUA

# Request threads per node: the default (one per core) would let only two uploads per node be
# in their commit at once, whatever the catalog allows.
THREADS = 16
# (label, nodes, clients in all): one node alone, then the same store served by two processes;
# last, one node with a single writer connection (`--catalog-writers 1`: every write of the
# process in turn, as before keyed locks), the baseline of the same run.
SHAPES = [("one node", 1, 1), ("one node", 1, 16), ("two nodes", 2, 2), ("two nodes", 2, 16),
          ("one node, 1 writer", 1, 1), ("one node, 1 writer", 1, 16)]
HELD = "larder_catalog_lock_held_seconds"
WAIT = "larder_catalog_lock_wait_seconds"


def fsync_rate(directory, seconds=2.0):
    """fdatasync(2)s per second of an 8 KiB rewrite in `directory` (the filesystem of the data
    directories and of PostgreSQL's WAL): the disk's ceiling for durable commits one at a time."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block, n, started = os.urandom(8192), 0, time.monotonic()
        while time.monotonic() - started < seconds:
            os.pwrite(fd, block, 0)
            os.fdatasync(fd)
            n += 1
        return n / (time.monotonic() - started)
    finally:
        os.close(fd)
        os.unlink(path)


def histogram(base, name, label=None):
    """Cumulative bucket counts {le: count} of `name` (the series with `label`, e.g. writes="keyed")."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
        text = r.read().decode()
    want = f'{label},' if label else ""
    out = {}
    for m in re.finditer(rf'^{name}_bucket\{{{re.escape(want)}le="([^"]+)"\}} (\d+)$', text, re.M):
        out[float("inf") if m.group(1) == "+Inf" else float(m.group(1))] = int(m.group(2))
    return out


def delta(after, before):
    return {le: after[le] - before.get(le, 0) for le in after}


def quantile(cumulative, q):
    """`q` of a cumulative histogram, interpolated linearly inside its bucket (seconds)."""
    bounds = sorted(cumulative)
    total = cumulative[bounds[-1]] if bounds else 0
    if total == 0:
        return None
    rank, lower, below = q * total, 0.0, 0
    for le in bounds:
        if cumulative[le] >= rank:
            if le == float("inf"):
                return lower
            inside = cumulative[le] - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1)
        lower, below = le, cumulative[le]
    return lower


def wrk_uploads(nodes, clients):
    """`clients` keep-alive connections in all, split evenly over `nodes`, each POSTing a new name
    with new content for WRK_SECONDS: uploads/s, problems, and the lock times of every node."""
    if not shutil.which("wrk"):
        raise BenchError("the pg-writes rows need wrk (apt-get install wrk)")
    per = clients // len(nodes)
    before = [(histogram(n.base, HELD, 'writes="keyed"'), histogram(n.base, WAIT)) for n in nodes]
    procs = []
    for i, node in enumerate(nodes):
        script = os.path.join(processes.TMP, f"pg-writes-{i}.lua")
        body = dict(SMALL_UPLOAD_BODIES["png"])
        # A prefix per node: two wrk processes' names and bodies never coincide (no dedupe).
        body["head"] += f"n{i}c{clients}-"
        with open(script, "w") as f:
            f.write(WRK_UPLOAD_LUA.format(path=urlsplit(node.upload_url).path + f"?name=n{i}c{clients}-",
                                          size=SMALL_BYTES, **body))
        procs.append(subprocess.Popen(["wrk", f"-t{min(2, per)}", f"-c{per}", f"-d{WRK_SECONDS}s", "--latency", "-s",
                                       script, node.base], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=WRK_SECONDS + 60)[0] for p in procs]
    rps = sum(float(re.search(r"Requests/sec:\s+([\d.]+)", o).group(1)) for o in outs)
    problems = [m.group(0) for o in outs for p in (r"Non-2xx or 3xx responses: \d+", r"Socket errors: [^\n]+")
                for m in [re.search(p, o)] if m]
    held, waited = {}, {}
    for node, (h0, w0) in zip(nodes, before):
        for le, c in delta(histogram(node.base, HELD, 'writes="keyed"'), h0).items():
            held[le] = held.get(le, 0) + c
        for le, c in delta(histogram(node.base, WAIT), w0).items():
            waited[le] = waited.get(le, 0) + c
    return {"rps": rps, "problems": "; ".join(problems),
            "held_p50": quantile(held, 0.5), "held_p99": quantile(held, 0.99),
            "wait_p50": quantile(waited, 0.5), "wait_p99": quantile(waited, 0.99),
            "keyed": held.get(float("inf"), 0)}


def scenario_pg_writes(files, commands):
    return with_postgres("pg-writes", commands, lambda pg: write_scaling(pg, commands))


def write_scaling(pg, commands):
    rate = fsync_rate(processes.TMP)
    log(f"pg-writes: fdatasync {rate:,.0f}/s on {processes.TMP}")
    runs = {(label, n, c): [] for label, n, c in SHAPES}
    for rep in range(REPS):
        catalog = pg.catalog(f"pgw{rep}")
        first = Larder(f"pgw{rep}", catalog=catalog, extra=["--threads", str(THREADS)])
        second, single = None, None
        if rep == 0:
            commands.append(first.command.replace(pg.url, "$PG") + "   # and a second on the same --data")
        for label, n, clients in SHAPES:
            if n == 2 and second is None:
                second = Larder(f"pgw{rep}b", catalog=catalog, data=first.data, extra=["--threads", str(THREADS)])
            if label.endswith("1 writer") and single is None:
                for node in (second, first):
                    if node:
                        node.close(keep_data=True)
                second = None
                single = Larder(f"pgw{rep}w1", catalog=catalog, data=first.data,
                                extra=["--threads", str(THREADS), "--catalog-writers", "1"])
            r = wrk_uploads([single] if single else [first, second][:n], clients)
            runs[(label, n, clients)].append(r)
            log(f"pg-writes {label}, {clients} clients, round {rep + 1}: {r['rps']:,.0f} uploads/s, lock held p50 "
                f"{(r['held_p50'] or 0) * 1e3:.2f} ms p99 {(r['held_p99'] or 0) * 1e3:.2f} ms {r['problems']}")
        single.close(keep_data=True)
        shutil.rmtree(first.data, ignore_errors=True)
    return {"runs": runs, "fsync": rate, "version": pg.version, "threads": THREADS}
