"""Pieces every scenario shares: the server under test, the CLI, process figures, raw HTTP, tallies.

The server is interop/larder_server.py's `LarderServer` (the same start/kill code the interop tests
use), so a scenario and an interop test see the same process with the same flags.
"""
import argparse
import dataclasses
import hashlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "interop"))

from larder_server import LarderServer  # noqa: E402  (after the path is set)

BUCKET = "app"


def larder_bin():
    binary = os.environ.get("LARDER_BIN")
    assert binary and os.path.exists(binary), "set LARDER_BIN to the built larder binary"
    return binary


def raise_fd_limit():
    """Hundreds of slow connections need more descriptors than a default soft limit of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def larder(*args, timeout=120):
    """Runs `larder ARGS`; returns (exit code, stdout, stderr, seconds)."""
    started = time.monotonic()
    p = subprocess.run([larder_bin(), *args], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), \
        time.monotonic() - started


def gc(data_dir, timeout=300):
    """`larder gc --grace 0s --json`; returns (exit code, report dict or None, stderr)."""
    code, out, err, _ = larder("gc", "--grace", "0s", "--json", "--data", str(data_dir), timeout=timeout)
    try:
        report = json.loads(out)
    except ValueError:
        report = None
    return code, report, err


# What a crash may leave behind that `larder gc` reclaims: a blob linked by a write whose COMMIT
# never happened, a temp file whose writer died, trash of a collection cut short. None of them loses
# or corrupts an acknowledged object.
LEFTOVER_KINDS = {"stray-blob-file", "abandoned-temp", "leftover-trash"}


def verify(data_dir, timeout=300):
    """`larder verify --json`; returns (acceptable, exit code, findings by kind, stderr).

    Exit 0 is clean. Issue 12 asks verify to report crash leftovers as reclaimable with exit 0;
    until that lands, exit 1 is also accepted when EVERY finding is a leftover kind above (anything
    else, and any other exit code, is a real fault)."""
    code, out, err, _ = larder("verify", "--json", "--data", str(data_dir), timeout=timeout)
    kinds = {}
    try:
        for finding in json.loads(out).get("findings", []):
            kind = finding["kind"]
            # A stray that is a directory or sits off its address is no crash leftover.
            if kind == "stray-blob-file" and finding.get("detail") != "no blobs row names it":
                kind += f" ({finding.get('detail')})"
            kinds[kind] = kinds.get(kind, 0) + 1
    except ValueError:
        kinds = {"unparsable-output": 1}
    acceptable = code == 0 or (code == 1 and bool(kinds) and set(kinds) <= LEFTOVER_KINDS)
    return acceptable, code, kinds, err


def start_server(data_dir, port=0, extra=(), rules=None):
    """`larder serve --allow-all`, or with `rules` enforced (the fuzzers need refusals too)."""
    if rules:
        return RulesServer(data_dir, rules, port=port, extra=extra)
    return LarderServer(data_dir, port=port, extra=extra)


class RulesServer(LarderServer):
    """LarderServer with `--rules FILE` in place of `--allow-all` (the two exclude each other)."""

    def __init__(self, data_dir, rules, port=0, extra=()):
        self.data_dir = str(data_dir)
        args = [larder_bin(), "serve", "--data", self.data_dir, "--port", str(port), "--rules", str(rules),
                "--access-log", "off", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.port = self._read_port()
        assert self.port, "larder serve did not print 'listening on http://HOST:PORT'"
        self.url = f"http://127.0.0.1:{self.port}"


def pid_status(pid, field):
    """A `kB` figure from /proc/PID/status (VmRSS, VmHWM), in bytes; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def fd_kinds(pid):
    """Open descriptors by kind: "catalog" (SQLite files: the reader pool grows with use, bounded by
    the thread count), "socket", "data" (blobs, temp, uploads: none may stay open when idle), "other"."""
    kinds = {"catalog": 0, "socket": 0, "data": 0, "other": 0}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if "/larder.sqlite" in target:
            kinds["catalog"] += 1
        elif target.startswith("socket:"):
            kinds["socket"] += 1
        elif target.startswith("/") and not target.startswith("/dev/"):
            kinds["data"] += 1
        else:
            kinds["other"] += 1
    return kinds


def settled_fd_kinds(pid, before, seconds=5.0):
    """fd_kinds once sockets and data files are back to `before` (closed connections are noticed a
    moment later on a loaded machine), or after `seconds`, whichever comes first."""
    deadline = time.monotonic() + seconds
    while True:
        kinds = fd_kinds(pid)
        if kinds is None or before is None or time.monotonic() > deadline or \
                all(kinds[k] <= before[k] for k in ("socket", "data", "other")):
            return kinds
        time.sleep(0.2)


def metrics(url, timeout=10):
    """(size in bytes, {series: value}) of GET /metrics."""
    import requests
    r = requests.get(url + "/metrics", timeout=timeout)
    r.raise_for_status()
    values = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            try:
                values[series] = float(value)
            except ValueError:
                pass
    return len(r.content), values


def machine():
    """Where and when figures were taken: host, cores, load average, kernel."""
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "host": socket.gethostname(),
            "cores": os.cpu_count(), "load": load, "kernel": os.uname().release}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def quote(name):
    from urllib.parse import quote as q
    return q(name, safe="")


# MARK: raw HTTP


@dataclasses.dataclass
class Exchange:
    """What one raw request got back."""
    status: int | None      # first status code, None when nothing parsable came back
    raw: bytes              # every byte the server sent
    closed: bool            # the server closed the connection
    hung: bool              # neither an answer nor a close within the deadline after we stopped sending
    seconds: float


def exchange(port, data, timeout=3.0, linger=2.0, host="127.0.0.1", source=None, settle=0.05):
    """Sends raw bytes, then reads the answer with `drain` (half-closing when the server is silent
    for `timeout`, `linger` more before calling it hung, `settle` more after a whole answer)."""
    started = time.monotonic()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source:
        sock.bind((source, 0))
    sock.settimeout(timeout)
    try:
        sock.connect((host, port))
        try:
            sock.sendall(data)
        except OSError:
            pass  # the server may refuse and close before reading everything: the answer is still there
        raw, closed, hung = drain(sock, timeout, linger, settle)
    finally:
        sock.close()
    return Exchange(final_status(raw), raw, closed, hung, time.monotonic() - started)


def drain(sock, timeout, linger, settle=0.05):
    """Reads from a socket the request went out on until the server closes or the deadline; returns
    (raw, closed, hung). When nothing came back within `timeout`, half-closes (so a server waiting
    for a declared body sees the end) and waits `linger` more: a server that still neither answers
    nor closes has hung. After a whole answer it reads `settle` seconds more, for pipelined answers
    or the server's close (0: stop at the first whole answer)."""
    raw = b""
    closed = hung = False
    deadline = time.monotonic() + timeout
    half_closed = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            if raw and _complete(raw):
                break
            if half_closed:
                hung = not raw
                break
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            half_closed = True
            deadline = time.monotonic() + linger
            continue
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        raw += chunk
        if _complete(raw):
            # Pipelined requests may have more answers coming: read a little longer.
            deadline = min(deadline, time.monotonic() + settle)
    return raw, closed, hung


def _skip_interim(raw):
    """The answer after any `100 Continue` interim responses."""
    while raw.startswith(b"HTTP/1.1 100") and b"\r\n\r\n" in raw:
        raw = raw.split(b"\r\n\r\n", 1)[1]
    return raw


def _complete(raw):
    """True when `raw` holds at least one whole final response (head + Content-Length body)."""
    raw = _skip_interim(raw)
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return len(body) >= int(value.strip())
            except ValueError:
                return True
    return True


# MARK: tallies


class Tally:
    """Thread-safe counts, errors and latencies per request kind."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = {}    # kind -> [seconds]
        self.errors = {}       # "kind: what" -> count
        self.examples = {}     # "kind: what" -> first detail

    def ok(self, kind, seconds):
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)

    def error(self, kind, what, detail=""):
        key = f"{kind}: {what}"
        with self.lock:
            self.errors[key] = self.errors.get(key, 0) + 1
            self.examples.setdefault(key, str(detail)[:300])

    @property
    def requests(self):
        return sum(len(v) for v in self.latencies.values()) + sum(self.errors.values())

    @property
    def error_count(self):
        return sum(self.errors.values())

    def percentiles(self):
        """{kind: (count, p50 ms, p99 ms)}"""
        out = {}
        for kind, values in sorted(self.latencies.items()):
            values = sorted(values)
            out[kind] = (len(values), 1000 * values[len(values) // 2],
                         1000 * values[min(len(values) - 1, int(len(values) * 0.99))])
        return out


@dataclasses.dataclass
class Result:
    """What a scenario reports: passed or not, its figures, and why it failed."""
    name: str
    passed: bool
    figures: dict
    failures: list
    notes: list = dataclasses.field(default_factory=list)
    known: dict = dataclasses.field(default_factory=dict)   # named known failure -> examples (not in `passed`)
    skipped: str = ""   # why the scenario could not run here (e.g. no permission to mount); reported loudly

    def summary(self):
        if self.skipped:
            return f"{self.name}: SKIPPED ({self.skipped})"
        lines = [f"{self.name}: {'PASS' if self.passed else 'FAIL'}"]
        lines += [f"  {k}: {v}" for k, v in self.figures.items()]
        lines += [f"  failure: {f}" for f in self.failures]
        lines += [f"  known failure {k}: {v[0]} (×{len(v)})" for k, v in self.known.items()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def final_status(raw):
    """The status of the final answer in `raw` (after any 1xx), or None when there is none."""
    final = _skip_interim(raw)
    if final.startswith(b"HTTP/1."):
        try:
            return int(final.split(b" ", 2)[1])
        except (ValueError, IndexError):
            pass
    return None


def fuzzer_main(argv, doc, fuzz, failed=bool, threads=None, data_prefix=None):
    """The command line every fuzzer shares: --seconds, --seed, [--threads], --json; prints
    {figures, findings} and exits 1 when `failed(findings)`. `fuzz` takes (data dir or nothing,
    seconds, seed[, threads])."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--seed", type=int, default=1)
    if threads is not None:
        parser.add_argument("--threads", type=int, default=threads)
    parser.add_argument("--json", help="write {figures, findings} here")
    args = parser.parse_args(argv)
    extra = (args.threads,) if threads is not None else ()
    if data_prefix:
        with tempfile.TemporaryDirectory(prefix=data_prefix) as tmp:
            figures, items = fuzz(os.path.join(tmp, "data"), args.seconds, args.seed, *extra)
    else:
        figures, items = fuzz(args.seconds, args.seed, *extra)
    out = {"figures": figures, "findings": items}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1)[:20000])
    return 1 if failed(items) else 0
