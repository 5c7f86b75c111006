"""Resumable uploads continue on another node: real clients (tuspy, a raw tus PATCH, tus-js-client,
the Firebase JS SDK) upload through a switchable TCP proxy (interop/switch_proxy.py, the load
balancer) to node A of a cluster; A is SIGKILLed mid-upload, the proxy switches to node B, and the
client finishes there. Every test downloads the object through another node than the one that
finished it and compares SHA-256.

The cluster: three `larder serve` nodes (A, B, C), each with its own data directory, on one
PostgreSQL catalog (a fresh schema per test) and one S3 bucket of OpenStack Swift (a fresh key
prefix per test). The engines are started once for the module on loopback with scripts/pg.sh and
scripts/swift-s3.sh (about 5 s) and always stopped. Instead of starting them:
  LARDER_TEST_CATALOG=postgres://…   a PostgreSQL database to make the schemas in
  LARDER_TEST_S3=s3://BUCKET?…       an S3 bucket, with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
Nodes get `--upload-lease 3` (how long a dead node's hold on an upload outlives it) when the
binary takes that flag (`larder serve --help`), so a client that meets the lease waits seconds,
not the default. Without PostgreSQL or Swift the module is skipped with a line starting SKIPPED:.
"""
import base64
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from tusclient import client as tus_client

from larder_server import LarderServer
from switch_proxy import SwitchProxy, break_pair, relay

MiB = 1 << 20
TUS = {"Tus-Resumable": "1.0.0"}
REPO = Path(__file__).resolve().parent.parent
BUCKET = "larder-mn"
# Seconds a node's hold on an upload lasts without renewal (`--upload-lease`), when supported.
UPLOAD_LEASE = 3


# MARK: - the engines (once per module)

def _free_port_block(count, low=10_000):
    """A base port such that base..base+count-1 are free now, below the kernel's ephemeral range
    (so no client connection or port-0 server takes one meanwhile); the scripts refuse taken ones."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    for _ in range(100):
        base = random.randrange(low, ephemeral - count - 10) // 10 * 10
        ok = True
        for port in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block found")


def _skip_loudly(reason):
    line = "!" * 78
    print(f"\n{line}\nSKIPPED: {reason}\n{line}")
    pytest.skip(f"SKIPPED: {reason}")


class Engines:
    """Where the cluster's catalog and blobs live, and the credentials of the blobs."""

    def __init__(self, catalog, blobs, credentials):
        self.catalog = catalog
        self.blobs = blobs
        self.credentials = credentials


@pytest.fixture(scope="module")
def engines():
    root = Path(tempfile.mkdtemp(prefix="larder-mn-", dir="/tmp"))
    # pg.sh runs the server as the `postgres` user when we are root: it must reach its directory.
    root.chmod(0o755)
    stops = []
    try:
        if not os.environ.get("LARDER_TEST_S3"):
            _require_swift()
        catalog = os.environ.get("LARDER_TEST_CATALOG") or _start_postgres(root / "pg", stops)
        if os.environ.get("LARDER_TEST_S3"):
            blobs = os.environ["LARDER_TEST_S3"]
            credentials = {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        else:
            blobs = _start_swift(root / "s3", stops)
            credentials = {"AWS_ACCESS_KEY_ID": "test:tester", "AWS_SECRET_ACCESS_KEY": "testing"}
        yield Engines(catalog, blobs, credentials)
    finally:
        for stop in reversed(stops):
            stop()
        shutil.rmtree(root, ignore_errors=True)


def _start_postgres(directory, stops):
    for _ in range(5):
        port = _free_port_block(1)
        r = subprocess.run(["bash", str(REPO / "scripts/pg.sh"), "start", str(directory), str(port)],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 3:
            _skip_loudly("multi-node resumable uploads: PostgreSQL server binaries not found "
                         "(scripts/deps.sh installs postgresql; or set LARDER_TEST_CATALOG)")
        if r.returncode == 0:
            stop = lambda: subprocess.run(["bash", str(REPO / "scripts/pg.sh"), "stop", str(directory), str(port)],
                                          capture_output=True, timeout=120)
            stops.append(stop)
            _watchdog(stop_command=f"bash {REPO / 'scripts/pg.sh'} stop {directory} {port}")
            return r.stdout.strip()
    raise RuntimeError(f"scripts/pg.sh did not start PostgreSQL: {r.stdout} {r.stderr}")


def _watchdog(stop_command):
    """Stops an engine once this pytest process is gone, even SIGKILLed (swift-s3.sh has its own)."""
    subprocess.Popen(["bash", "-c", f"trap '' HUP; while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
                      f"{stop_command} >/dev/null 2>&1"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def _require_swift():
    if shutil.which("swift-proxy-server") is None or shutil.which("memcached") is None:
        _skip_loudly("multi-node resumable uploads: OpenStack Swift is not installed "
                     "(scripts/deps.sh installs swift-proxy swift-account swift-container swift-object memcached; "
                     "or set LARDER_TEST_S3)")


def _start_swift(directory, stops):
    env = dict(os.environ, SWIFT_S3_OWNER_PID=str(os.getpid()))
    failures = []
    for _ in range(5):
        port = _free_port_block(5)
        r = subprocess.run(["bash", str(REPO / "scripts/swift-s3.sh"), "start", str(directory), str(port), BUCKET],
                           capture_output=True, text=True, timeout=180, env=env)
        if r.returncode == 0:
            stops.append(lambda: subprocess.run(["bash", str(REPO / "scripts/swift-s3.sh"), "stop", str(directory)],
                                                capture_output=True, timeout=120))
            return r.stdout.strip().splitlines()[-1]
        failures.append(f"port {port}: rc={r.returncode} {r.stderr[-1500:]}")
        if r.returncode == 3:
            _skip_loudly(f"multi-node resumable uploads: {r.stderr.strip()}")
        if r.returncode != 4:
            break
    raise RuntimeError("scripts/swift-s3.sh did not start Swift:\n" + "\n".join(failures))


def _serve_takes(flag):
    text = subprocess.run([os.environ["LARDER_BIN"], "serve", "--help"], capture_output=True, text=True,
                          timeout=60).stdout
    return flag in text


# MARK: - the cluster (per test)

class Cluster:
    """Nodes A, B, C on one store, and the proxy clients talk to (pointing at A)."""

    def __init__(self, engines, root):
        self.root = root
        suffix = uuid.uuid4().hex[:12]
        self.store = ["--catalog", _with_query(engines.catalog, f"schema=mn_{suffix}"),
                      "--blobs", _with_query(engines.blobs, f"prefix=mn{suffix}")]
        self.lease = ["--upload-lease", str(UPLOAD_LEASE)] if _serve_takes("--upload-lease") else []
        self.env = engines.credentials
        self.nodes = {}
        self.proxy = None
        try:
            # One after the other: A creates the schema, B and C find it.
            for name in ("A", "B", "C"):
                self.nodes[name] = LarderServer(root / f"data-{name}", extra=[*self.store, *self.lease],
                                                env=self.env, stderr_path=root / f"stderr-{name}.log",
                                                access_log=root / f"access-{name}.log")
            self.proxy = SwitchProxy(self.nodes["A"].port)
        except BaseException:
            self.stop()
            raise

    def __getitem__(self, name):
        return self.nodes[name]

    def fail_over(self, dead="A", to="B"):
        """SIGKILL one node and send new connections to another, as a load balancer would."""
        self.nodes[dead].kill()
        self.proxy.switch(self.nodes[to].port)

    def logs(self):
        """What each node answered (its access log) and said (its stderr), for a failing
        assertion's message."""
        out = []
        for name in self.nodes:
            for kind in ("access", "stderr"):
                path = self.root / f"{kind}-{name}.log"
                if path.exists():
                    lines = [l for l in path.read_text(errors="replace").splitlines() if not _is_banner(l)]
                    out.append(f"--- node {name} {kind} ---\n" + "\n".join(lines[-30:]))
        return "\n".join(out)

    def stop(self):
        if self.proxy:
            self.proxy.close()
        for node in self.nodes.values():
            node.stop()


def _with_query(url, setting):
    return url + ("&" if "?" in url else "?") + setting


def _is_banner(line):
    """The --allow-all warning every node prints at start: noise in a failure's message."""
    return line.startswith("*") or line.startswith("WARNING: --allow-all") or line.startswith("Do not expose")


@pytest.fixture
def cluster(engines, tmp_path):
    c = Cluster(engines, tmp_path)
    yield c
    c.stop()


# MARK: - helpers

def random_file(path, size, seed):
    rng = random.Random(seed)
    data = rng.randbytes(size)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def tus_endpoint(url):
    return f"{url}/v0/b/app/uploads"


def assert_object(node, name, size, digest):
    """The object as `node` serves it: its metadata and the SHA-256 of its bytes."""
    meta = node.object_metadata("app", name)
    assert (meta["size"], meta["sha256"]) == (str(size), digest), meta
    assert node.object_sha256("app", name) == digest


def head_offset(url, cluster):
    r = requests.head(url, headers=TUS, timeout=30)
    assert r.status_code == 200 and "Upload-Offset" in r.headers, \
        f"HEAD {url}: {r.status_code} {dict(r.headers)}\n{cluster.logs()}"
    return int(r.headers["Upload-Offset"])


# MARK: - no failure: the harness itself

def test_upload_through_one_node_is_served_by_the_others(cluster, tmp_path):
    """No kill: a tus upload and a simple one through A (behind the proxy) are served exactly by B
    and C, and by the proxy once it points at B. When this fails, the harness or the shared store
    is broken, not resumable uploads."""
    path = tmp_path / "sanity.bin"
    size = 6 * MiB + 17
    digest = random_file(path, size, seed="sanity")
    uploader = tus_client.TusClient(tus_endpoint(cluster.proxy.url)).uploader(
        str(path), chunk_size=2 * MiB, metadata={"name": "mn/sanity.bin"})
    uploader.upload()
    assert uploader.offset == size
    assert uploader.url.startswith(cluster.proxy.url + "/v0/b/app/uploads/")
    small = b"small bytes through A\n" * 1000
    r = requests.post(f"{cluster['A'].url}/v0/b/app/o", params={"name": "mn/small.txt"}, data=small, timeout=30)
    assert r.status_code == 200, r.text
    for node in ("B", "C"):
        assert_object(cluster[node], "mn/sanity.bin", size, digest)
        got = requests.get(f"{cluster[node].url}/v0/b/app/o/mn%2Fsmall.txt", params={"alt": "media"}, timeout=30)
        assert (got.status_code, got.content) == (200, small)
    cluster.proxy.switch(cluster["B"].port)
    assert head_offset(uploader.url, cluster) == size
    got = requests.get(f"{cluster.proxy.url}/v0/b/app/o/mn%2Fsanity.bin", params={"alt": "media"}, timeout=60)
    assert (got.status_code, hashlib.sha256(got.content).hexdigest()) == (200, digest)


# MARK: - tuspy: A dies between chunks

def test_tuspy_upload_started_on_a_is_finished_on_b(cluster, tmp_path):
    path = tmp_path / "tuspy.bin"
    size = 24 * MiB + 12345
    digest = random_file(path, size, seed="tuspy")
    chunk = 5 * MiB
    first = tus_client.TusClient(tus_endpoint(cluster.proxy.url)).uploader(
        str(path), chunk_size=chunk, metadata={"name": "mn/tuspy.bin", "filename": "tuspy.bin"})
    first.upload_chunk()
    first.upload_chunk()
    assert first.offset == 2 * chunk
    url = first.url
    assert url.startswith(cluster.proxy.url + "/v0/b/app/uploads/")
    assert head_offset(url, cluster) == 2 * chunk

    cluster.fail_over("A", "B")
    assert head_offset(url, cluster) == 2 * chunk
    second = tus_client.TusClient(tus_endpoint(cluster.proxy.url)).uploader(str(path), chunk_size=chunk, url=url)
    assert second.offset == 2 * chunk
    try:
        second.upload()
    except Exception as error:  # the client's error names the server's answer; add the nodes' view
        raise AssertionError(f"tuspy on B: {error!r} {getattr(error, 'response_content', b'')[:500]!r}\n"
                             f"{cluster.logs()}") from error
    assert second.offset == size
    assert head_offset(url, cluster) == size
    assert_object(cluster["C"], "mn/tuspy.bin", size, digest)
    assert_object(cluster["B"], "mn/tuspy.bin", size, digest)


# MARK: - no sticky sessions: every chunk to another node

def test_tuspy_chunks_alternating_between_nodes(cluster, tmp_path):
    """No kill: the proxy sends each chunk to the next node (A, B, C, A, ...), as a load balancer
    without affinity may. Each node takes the upload where the previous one acknowledged it, so a
    node must give up its hold on an upload when its PATCH ends (tuspy does not retry a 423)."""
    path = tmp_path / "alternate.bin"
    size = 11 * MiB + 3
    digest = random_file(path, size, seed="alternate")
    chunk = 2 * MiB
    uploader = tus_client.TusClient(tus_endpoint(cluster.proxy.url)).uploader(
        str(path), chunk_size=chunk, metadata={"name": "mn/alternate.bin"})
    order = ["A", "B", "C"]
    served = []
    while uploader.offset < size:
        node = order[len(served) % 3]
        cluster.proxy.switch(cluster[node].port, drop_open=True)
        served.append(node)
        before = uploader.offset
        try:
            uploader.upload_chunk()
        except Exception as error:
            raise AssertionError(f"chunk {len(served)} on {node} at {before}: {error!r} "
                                 f"{getattr(error, 'response_content', b'')[:500]!r}\n{cluster.logs()}") from error
        assert uploader.offset == min(before + chunk, size)
        assert head_offset(uploader.url, cluster) == uploader.offset
    assert served == ["A", "B", "C", "A", "B", "C"]
    assert_object(cluster["A"], "mn/alternate.bin", size, digest)
    assert_object(cluster["B"], "mn/alternate.bin", size, digest)


# MARK: - a raw PATCH: A dies in the middle of its body

def test_patch_broken_by_a_kill_keeps_a_checkpoint_and_b_takes_the_rest(cluster, tmp_path):
    """One 20 MiB PATCH paced at 6 MiB/s; A is SIGKILLed once 12 MiB went out (a checkpoint every
    8 MiB or 2 s has happened by then). B reports an offset in (0, sent] and takes the rest, once
    A's lease on the upload has expired (423 until then)."""
    size = 20 * MiB
    data = random.Random("patch").randbytes(size)
    digest = hashlib.sha256(data).hexdigest()
    proxy = cluster.proxy
    r = requests.post(tus_endpoint(proxy.url), headers={**TUS, "Upload-Length": str(size),
                      "Upload-Metadata": "name bW4vcGF0Y2guYmlu"}, timeout=30)  # mn/patch.bin
    assert r.status_code == 201, r.text
    location = r.headers["Location"]
    url = location if location.startswith("http") else proxy.url + location

    sent = _send_patch_until_killed(cluster, url, data, kill_after=12 * MiB, rate=6 * MiB)
    assert 12 * MiB <= sent < size

    offset = head_offset(url, cluster)
    assert 0 < offset <= sent, (offset, sent)
    # B refuses (423) until A's lease has run out. The client gives up only when the deadline has
    # passed *and* it has tried several times since: CI once saw one refused try come back after
    # more than 30 s (its answer had left B in 3 ms), which a deadline alone turned into a failure.
    deadline = time.monotonic() + UPLOAD_LEASE + 30
    answers = []  # (status, seconds the try took), for the failure message
    late_tries = 0
    while True:
        started = time.monotonic()
        r = requests.patch(url, data=data[offset:], timeout=120, headers={
            **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset)})
        answers.append((r.status_code, round(time.monotonic() - started, 2)))
        if r.status_code != 423:
            break
        if time.monotonic() > deadline:
            late_tries += 1
            if late_tries >= 3:
                break
        time.sleep(0.5)
    assert r.status_code == 204, f"PATCH on B at {offset}: {answers} {r.text[:500]}\n{cluster.logs()}"
    assert r.headers["Upload-Offset"] == str(size)
    assert head_offset(url, cluster) == size
    assert_object(cluster["C"], "mn/patch.bin", size, digest)


def _send_patch_until_killed(cluster, url, data, kill_after, rate):
    """Sends a PATCH of all of `data` at `rate` bytes/s through the proxy; once `kill_after` bytes
    went out, fails over from A to B. Returns how many body bytes were handed to the socket."""
    path = url.split(cluster.proxy.url, 1)[1]
    head = (f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1:{cluster.proxy.port}\r\nTus-Resumable: 1.0.0\r\n"
            f"Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", cluster.proxy.port), timeout=30)
    sent = 0
    try:
        sock.sendall(head)
        started = time.monotonic()
        piece = 256 * 1024
        while sent < kill_after:
            due = started + sent / rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            sock.sendall(data[sent:sent + piece])
            sent += piece
        cluster.fail_over("A", "B")
        try:  # the broken connection: what the client sees of A's death
            sock.sendall(data[sent:sent + piece])
            sock.settimeout(10)
            sock.recv(1)
        except OSError:
            pass
    finally:
        sock.close()
    return sent


# MARK: - a node stopped (SIGSTOP) mid-part past its lease, then continued (SIGCONT)

class ThrottledForwarder:
    """A TCP forwarder from 127.0.0.1:`port` to 127.0.0.1:`target` (node A's way to the S3 store)
    that, once `rate` is set, passes what A sends at that many bytes/s: a part then takes seconds
    to reach the store, long enough to stop A in the middle of it. Counts the bytes A sent. Its
    receive buffer is small, so what A's kernel still delivers after SIGSTOP is bounded by A's send
    buffer (tcp_wmem, 4 MiB by default): the test's part is much larger."""

    def __init__(self, target):
        self.target = target
        self.rate = None
        self.sent = 0
        self._lock = threading.Lock()
        self._open = []
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=relay, args=(client, upstream, self._count), daemon=True).start()

    def _count(self, data):
        with self._lock:
            self.sent += len(data)
        if self.rate:
            time.sleep(len(data) / self.rate)

    def drop(self):
        """Breaks every open connection (a network that reset them)."""
        with self._lock:
            sockets, self._open = self._open, []
        break_pair(sockets)

    def close(self):
        self._listener.close()
        self.drop()


def test_a_node_stopped_mid_part_past_its_lease_cannot_replace_the_next_holders_part(engines, tmp_path):
    """Proves the lease epoch in the part numbers, with a real stopped process. A (its S3 traffic
    slowed to 2 MiB/s) has recorded part 1 and is sending part 2 (20 MiB: a checksum-guarded PATCH
    takes no checkpoint) when it gets SIGSTOP; its lease (3 s) runs out; B takes the upload over
    and records its next part (21 MiB, other bounds); A's connection to the store is reset while it
    is stopped; SIGCONT: A's client retries the part, which now reaches the store after B's; A's
    commit is refused; B finishes. With part numbers `count + 1` A's late part replaced B's and the
    upload could never complete. (Without the reset, Swift keeps B's part anyway: a PUT begun
    earlier never replaces one begun later, by Swift's timestamps; a retry begins later.)"""
    if not _serve_takes("--upload-lease"):
        pytest.skip("larder serve has no --upload-lease")
    endpoint = engines.blobs.split("endpoint=", 1)[1].split("&", 1)[0]
    forwarder = ThrottledForwarder(int(endpoint.rsplit(":", 1)[1]))
    suffix = uuid.uuid4().hex[:12]
    catalog = ["--catalog", _with_query(engines.catalog, f"schema=mn_{suffix}")]
    blobs = _with_query(engines.blobs, f"prefix=mn{suffix}")
    lease = ["--upload-lease", str(UPLOAD_LEASE)]
    slow = blobs.replace(f"endpoint={endpoint}", f"endpoint=http://127.0.0.1:{forwarder.port}")
    a = LarderServer(tmp_path / "data-A", extra=[*catalog, "--blobs", slow, *lease], env=engines.credentials,
                     stderr_path=tmp_path / "stderr-A.log")
    b = LarderServer(tmp_path / "data-B", extra=[*catalog, "--blobs", blobs, *lease], env=engines.credentials,
                     stderr_path=tmp_path / "stderr-B.log")
    stopped = False
    try:
        size = 30 * MiB
        data = random.Random("stopped").randbytes(size)
        r = requests.post(tus_endpoint(b.url), headers={**TUS, "Upload-Length": str(size),
                          "Upload-Metadata": "name bW4vc3RvcHBlZC5iaW4="}, timeout=30)  # mn/stopped.bin
        assert r.status_code == 201, r.text
        path = "/" + r.headers["Location"].split("://", 1)[-1].split("/", 1)[1]

        def patch(node, start, end, checksum=False):
            guard = {"Upload-Checksum": "sha256 " + base64.b64encode(hashlib.sha256(data[start:end]).digest()).decode()}
            return requests.patch(node.url + path, data=data[start:end], timeout=120, headers={
                **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(start),
                **(guard if checksum else {})})

        assert patch(a, 0, 6 * MiB).status_code == 204  # part 1, at full speed
        forwarder.rate = 2 * MiB
        before = forwarder.sent
        late = {}
        sender = threading.Thread(target=lambda: late.update(answer=patch(a, 6 * MiB, 26 * MiB, checksum=True)))
        sender.start()
        deadline = time.monotonic() + 30
        while forwarder.sent - before < 2 * MiB and time.monotonic() < deadline:
            time.sleep(0.05)  # 2 MiB of part 2 on its way to the store
        a.proc.send_signal(signal.SIGSTOP)
        stopped = True
        time.sleep(UPLOAD_LEASE + 1.5)
        r = requests.head(b.url + path, headers=TUS, timeout=30)
        assert r.headers.get("Upload-Offset") == str(6 * MiB), (r.status_code, dict(r.headers))
        r = patch(b, 6 * MiB, 27 * MiB)
        assert r.status_code == 204, r.text
        forwarder.drop()
        forwarder.rate = None
        a.proc.send_signal(signal.SIGCONT)
        stopped = False
        sender.join(timeout=60)
        assert late["answer"].status_code != 204, late["answer"].text  # its commit was refused
        r = patch(b, 27 * MiB, size)
        assert r.status_code == 204, f"{r.status_code} {r.text}\n{(tmp_path / 'stderr-B.log').read_text()[-2000:]}"
        assert_object(b, "mn/stopped.bin", size, hashlib.sha256(data).hexdigest())
    finally:
        if stopped:
            a.proc.send_signal(signal.SIGCONT)
        a.stop()
        b.stop()
        forwarder.close()


# MARK: - tus-js-client: A dies during a chunk

def test_tus_js_client_retries_on_b_after_a_dies(cluster, tmp_path):
    tusjs = _tus_js()
    path = tmp_path / "tusjs.bin"
    size = 16 * MiB + 7
    digest = random_file(path, size, seed="tusjs")
    killed = {}

    def on_event(event):
        if event["event"] == "progress" and event["sent"] > 8 * MiB and not killed:
            killed["sent"] = event["sent"]
            cluster.fail_over("A", "B")

    run = tusjs.run_client(tus_endpoint(cluster.proxy.url), path, options={
        "chunkSize": 4 * MiB, "metadata": {"name": "mn/tusjs.bin"}, "retryDelays": [0, 1000, 2000, 4000, 8000]},
        throttle={"bytesPerSecond": 8 * MiB, "patches": 3}, on_event=on_event, timeout=60)
    assert killed, run
    assert run.returncode == 0, f"{run}\n{cluster.logs()}"
    requests_ = run.requests()
    assert requests_[0]["method"] == "POST" and requests_[0]["status"] == 201
    url = run.last("success")["url"]
    assert url.startswith(cluster.proxy.url + "/v0/b/app/uploads/")
    broken = [i for i, r in enumerate(requests_) if r["method"] == "PATCH" and "error" in r]
    assert broken, run
    after = requests_[broken[0] + 1:]
    heads = [r for r in after if r["method"] == "HEAD" and r.get("status") == 200]
    assert heads, run
    resumed_at = int(heads[0]["responseHeaders"]["upload-offset"])
    assert 0 < resumed_at <= killed["sent"]
    patches = [r for r in after[after.index(heads[0]):] if r["method"] == "PATCH" and r.get("status") != 423]
    tusjs.assert_patches_contiguous(patches, resumed_at, size)
    assert_object(cluster["B"], "mn/tusjs.bin", size, digest)
    assert_object(cluster["C"], "mn/tusjs.bin", size, digest)


def _tus_js():
    import test_tus_js
    if not test_tus_js.BUNDLE.is_file() or test_tus_js.NODE is None:
        _skip_loudly(f"tus-js-client on several nodes: needs node and {test_tus_js.BUNDLE} (set LARDER_CLIENTS)")
    return test_tus_js


# MARK: - the Firebase JS SDK: A dies during uploadBytesResumable

def test_firebase_sdk_resumable_upload_finishes_on_b(cluster):
    """sdk_checks.cjs `restart` (20 MiB, uploadBytesResumable, PROGRESS lines) pointed at the proxy:
    past 4 MiB A dies and the proxy switches; the SDK retries its chunk on B and completes, its own
    getBytes (through B) and metadata match, and C serves the same bytes."""
    import test_firebase_sdk as fbsdk
    if fbsdk.CLIENTS is None or fbsdk.NODE is None:
        _skip_loudly("Firebase SDK on several nodes: needs node and the bundle (set LARDER_CLIENTS)")
    killed_at, out, err = fbsdk.run_restart_check(
        cluster.proxy.port, 4 * MiB, lambda: cluster.fail_over("A", "B"), timeout=60)
    size = 20 * MiB
    assert killed_at is not None and killed_at < size, "".join(out)
    reports = [line for line in out if line.startswith("{")]
    assert reports, f"no report from node: {''.join(out)[-2000:]} {err[-2000:]}"
    report = json.loads(reports[-1])
    # The whole report: an SDK error's message holds the server's answer.
    assert report["failures"] == [] and report["checks"] > 0, f"{json.dumps(report, indent=1)}\n{cluster.logs()}"
    digest = hashlib.sha256(_seeded(size, "restart")).hexdigest()
    assert_object(cluster["B"], "sdk/restarted.bin", size, digest)
    assert_object(cluster["C"], "sdk/restarted.bin", size, digest)


def _seeded(size, seed):
    """sdk_checks.cjs's `seeded`: SHA-256 in counter mode."""
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{block}".encode()).digest()
        block += 1
    return bytes(out[:size])
