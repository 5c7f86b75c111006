"""SIGKILL torture: uploaders keep writing while the server is killed -9 and restarted on the same
data directory, again and again. Every ACKNOWLEDGED object (a 2xx, a tus HEAD reporting the whole
length, or a Firebase resumable `query` answering `final`) must then be present with exactly its
bytes; an unacknowledged one may be present or absent, but never with other bytes. Then `larder
verify` (only reclaimable leftovers allowed), `larder gc --grace 0s`, `larder verify` again, and the
check once more on a restarted server.

KNOWN_410 (found by this scenario, reported to the lead; the crash variant of issue 12's "COMMIT fails
while publishing"): a kill between linking a finished tus upload into blobs/ and the COMMIT leaves
uploads/<id> hard-linked to a stray blob; after the restart HEAD reports the last offset but every
PATCH answers 410 "stored bytes ... are missing", so the client can never finish. It is kept apart
from the other failures so the short test can mark it xfail until recovery handles it.
"""
import base64
import random
import threading
import time

import requests

from .harness import BUCKET, Result, gc, quote, sha256, start_server, verify

TUS = {"Tus-Resumable": "1.0.0"}
KiB = 1024
KNOWN_410 = "tus-410-after-kill-in-publish"


class Store:
    """The harness's record: which names were acknowledged with which digest, and which were tried."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}      # name -> sha256
        self.attempted = {}  # name -> sha256 (every try, acknowledged or not)
        self.counts = {"simple acked": 0, "simple unacked": 0, "tus acked": 0, "tus resumes": 0,
                       "tus acked by HEAD after a kill": 0, "firebase acked": 0, "firebase resumes": 0,
                       "firebase acked by query after a kill": 0, "firebase chunks kept though unanswered": 0,
                       "firebase starts unanswered": 0}
        self.failures = []
        self.known = {}

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def fail(self, what):
        with self.lock:
            if len(self.failures) < 50:
                self.failures.append(what)

    def fail_known(self, name, what):
        with self.lock:
            self.known.setdefault(name, []).append(what)


class Target:
    """The current server: the killer swaps it, the uploaders only read its URL (the port stays)."""

    def __init__(self, server):
        self.server = server
        self.url = server.url


def payload(rng):
    """Mostly small, some up to 2 MiB, some duplicates of each other (dedupe under crashes)."""
    if rng.random() < 0.2:
        return random.Random(rng.randrange(8)).randbytes(40 * KiB)
    return rng.randbytes(rng.choice([0, 1, 100, 4 * KiB, 64 * KiB, 300 * KiB, 2048 * KiB]))


def simple_uploader(index, target, store, stop, rng):
    n = 0
    while not stop.is_set():
        n += 1
        name = f"simple/{index}/{n}"
        body = payload(rng)
        digest = sha256(body)
        with store.lock:
            store.attempted[name] = digest
        try:
            r = requests.post(f"{target.url}/v0/b/{BUCKET}/o?name={quote(name)}", data=body, timeout=30)
        except requests.RequestException:
            store.add("simple unacked")
            time.sleep(0.05)
            continue
        if 200 <= r.status_code < 300:
            if r.json().get("sha256") != digest:
                store.fail(f"{name}: acknowledged with sha256 {r.json().get('sha256')}, sent {digest}")
            with store.lock:
                store.acked[name] = digest
            store.add("simple acked")
        else:
            store.add("simple unacked")
            if r.status_code != 503:
                store.fail(f"{name}: POST answered {r.status_code} {r.text[:200]}")


def tus_uploader(index, target, store, stop, rng):
    n = 0
    while not stop.is_set():
        n += 1
        name = f"tus/{index}/{n}"
        body = rng.randbytes(rng.choice([1, 200 * KiB, 1024 * KiB, 3 * 1024 * KiB]))
        digest = sha256(body)
        with store.lock:
            store.attempted[name] = digest
        meta = "name " + base64.b64encode(name.encode()).decode()
        try:
            r = requests.post(f"{target.url}/v0/b/{BUCKET}/uploads", timeout=30,
                              headers={**TUS, "Upload-Length": str(len(body)), "Upload-Metadata": meta})
        except requests.RequestException:
            time.sleep(0.05)
            continue
        if r.status_code != 201:
            store.fail(f"{name}: tus POST answered {r.status_code} {r.text[:200]}")
            continue
        location = r.headers["Location"]
        offset = 0
        chunk = rng.choice([64 * KiB, 256 * KiB, 1024 * KiB])
        acked_offset = 0
        while not stop.is_set():
            try:
                r = requests.patch(target.url + location, data=body[offset:offset + chunk], timeout=30,
                                   headers={**TUS, "Content-Type": "application/offset+octet-stream",
                                            "Upload-Offset": str(offset)})
            except requests.RequestException:
                offset = resume(target, location, name, acked_offset, len(body), store, stop)
                if offset is None:
                    break
                store.add("tus resumes")
                if offset == len(body):
                    with store.lock:
                        store.acked[name] = digest
                    store.add("tus acked by HEAD after a kill")
                    break
                continue
            if r.status_code == 410 and "are missing" in r.text:
                store.fail_known(KNOWN_410, f"{name}: PATCH at {offset} (length {len(body)}) answered 410 {r.text[:160]}")
                break
            if r.status_code != 204:
                store.fail(f"{name}: PATCH at {offset} (length {len(body)}, chunk {chunk}, "
                           f"acknowledged offset {acked_offset}) answered {r.status_code} {r.text[:200]}")
                break
            offset = acked_offset = int(r.headers["Upload-Offset"])
            if offset == len(body):
                with store.lock:
                    store.acked[name] = digest
                store.add("tus acked")
                break


def resume(target, location, name, acked_offset, length, store, stop):
    """HEAD until the server is back; the offset it reports must lie in [acknowledged, length]."""
    while not stop.is_set():
        try:
            head = requests.head(target.url + location, headers=TUS, timeout=10)
        except requests.RequestException:
            time.sleep(0.05)
            continue
        if head.status_code != 200:
            store.fail(f"{name}: HEAD after a kill answered {head.status_code} (acknowledged offset {acked_offset})")
            return None
        offset = int(head.headers["Upload-Offset"])
        if not acked_offset <= offset <= length:
            store.fail(f"{name}: HEAD offset {offset} outside [{acked_offset}, {length}]")
            return None
        return offset
    return None


# MARK: Firebase resumable uploads, as the JS SDK's uploadBytesResumable drives them

GRANULARITY = 256 * KiB  # X-Goog-Upload-Chunk-Granularity: every chunk but the last is a multiple


def firebase_uploader(index, target, store, stop, rng):
    """`start`, then chunks (`upload`, the last `upload, finalize`). When a chunk's answer is lost
    (the server was killed), the SDK asks `query` until the server answers and goes on from
    X-Goog-Upload-Size-Received; `final` there means the object was published.

    Resumable sessions are uploads of the tus endpoint's UploadStore and meet KNOWN_410's window:
    after the kill `query` reports the last acknowledged offset and the resent last chunk answers
    410; filed under the same name (`python -m stress.sigkill --kills 15 --simple 0 --tus 0
    --firebase 6 --seed 2` shows it)."""
    n = 0
    while not stop.is_set():
        n += 1
        name = f"firebase/{index}/{n}"
        body = rng.randbytes(rng.choice([0, 1, 200 * KiB, 1024 * KiB, 3 * 1024 * KiB]))
        digest = sha256(body)
        with store.lock:
            store.attempted[name] = digest
        try:
            r = requests.post(f"{target.url}/v0/b/{BUCKET}/o?name={quote(name)}", timeout=30, headers={
                "X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
                "X-Goog-Upload-Header-Content-Length": str(len(body)),
                "X-Goog-Upload-Header-Content-Type": "application/octet-stream",
                "Content-Type": "application/json; charset=utf-8"},
                json={"name": name, "contentType": "application/octet-stream"})
        except requests.RequestException:
            # A session may have been made; it expires unused. The SDK starts over with a new one.
            store.add("firebase starts unanswered")
            time.sleep(0.05)
            continue
        if r.status_code != 200 or "X-Goog-Upload-URL" not in r.headers:
            store.fail(f"{name}: resumable start answered {r.status_code} {r.text[:200]}")
            continue
        session = r.headers["X-Goog-Upload-URL"]
        chunk = GRANULARITY * rng.choice([1, 2, 4])
        offset = acked = 0
        resumed = False
        while not stop.is_set():
            end = min(offset + chunk, len(body))
            last = end == len(body)
            try:
                r = requests.post(session, data=body[offset:end], timeout=30, headers={
                    "X-Goog-Upload-Command": "upload, finalize" if last else "upload",
                    "X-Goog-Upload-Offset": str(offset)})
            except requests.RequestException:
                state = firebase_query(session, name, acked, end, len(body), store, stop)
                if state is None:
                    break
                status, received = state
                resumed = True
                store.add("firebase resumes")
                if received not in (acked, end):
                    store.add("firebase chunks kept though unanswered")  # allowed: the SDK goes on from there
                if status == "final":
                    if received != len(body):
                        store.fail(f"{name}: query says final at {received} of {len(body)} bytes")
                        break
                    with store.lock:
                        store.acked[name] = digest
                    store.add("firebase acked by query after a kill")
                    break
                offset = acked = received
                continue
            if r.status_code == 410 and "are missing" in r.text and resumed:
                # The same window as the tus one: both protocols publish through the UploadStore.
                store.fail_known(KNOWN_410, f"{name} (Firebase resumable): chunk at {offset} (length {len(body)}) "
                                 f"after a kill answered 410 {r.text[:160]}")
                break
            if r.status_code != 200:
                store.fail(f"{name}: '{'upload, finalize' if last else 'upload'}' at {offset} (length {len(body)}, "
                           f"acknowledged {acked}) answered {r.status_code} {r.text[:200]}")
                break
            status = r.headers.get("X-Goog-Upload-Status")
            if last:
                if status != "final" or r.json().get("sha256") != digest:
                    store.fail(f"{name}: finalize answered status {status}, sha256 "
                               f"{r.json().get('sha256')} for {digest}")
                with store.lock:
                    store.acked[name] = digest
                store.add("firebase acked")
                break
            received = r.headers.get("X-Goog-Upload-Size-Received")
            if status != "active" or received != str(end):
                store.fail(f"{name}: chunk to {end} answered status {status}, size received {received}")
                break
            offset = acked = end


def firebase_query(session, name, acked, sent_end, length, store, stop):
    """`query` until the server is back: (status, size received) with the size in [acknowledged,
    length] and never past what was sent; None (a failure is filed) otherwise."""
    while not stop.is_set():
        try:
            r = requests.post(session, headers={"X-Goog-Upload-Command": "query"}, timeout=10)
        except requests.RequestException:
            time.sleep(0.05)
            continue
        if r.status_code == 503:
            time.sleep(0.05)
            continue
        status = r.headers.get("X-Goog-Upload-Status")
        received = r.headers.get("X-Goog-Upload-Size-Received", "")
        if r.status_code != 200 or status not in ("active", "final") or not received.isdigit():
            store.fail(f"{name}: query after a kill answered {r.status_code}, status {status}, size received "
                       f"{received!r} (acknowledged {acked}): {r.text[:160]}")
            return None
        if not acked <= int(received) <= min(sent_end, length):
            store.fail(f"{name}: query after a kill says {received} received, outside [{acked}, {sent_end}]")
            return None
        return status, int(received)
    return None


def check_objects(url, store, session_timeout=60):
    """Every acknowledged object has its bytes; every other present object has the bytes tried."""
    lost, wrong, present_unacked = [], [], 0
    with requests.Session() as s:
        for name, digest in sorted(store.attempted.items()):
            r = s.get(f"{url}/v0/b/{BUCKET}/o/{quote(name)}?alt=media", timeout=session_timeout)
            if r.status_code == 404:
                if name in store.acked:
                    lost.append(name)
                continue
            if r.status_code != 200 or sha256(r.content) != digest:
                wrong.append(f"{name}: {r.status_code}, sha256 {sha256(r.content)[:12]} != {digest[:12]}")
            elif name not in store.acked:
                present_unacked += 1
    return lost, wrong, present_unacked


def run(data_dir, kills=3, simple_clients=3, tus_clients=2, seed=1, firebase_clients=0):
    rng = random.Random(seed)
    server = start_server(data_dir)
    target = Target(server)
    store = Store()
    stop = threading.Event()
    threads = [threading.Thread(target=simple_uploader, args=(i, target, store, stop, random.Random(rng.random())))
               for i in range(simple_clients)]
    threads += [threading.Thread(target=tus_uploader, args=(i, target, store, stop, random.Random(rng.random())))
                for i in range(tus_clients)]
    # Drawn after the others, so that a run without Firebase uploaders keeps its earlier streams.
    threads += [threading.Thread(target=firebase_uploader, args=(i, target, store, stop, random.Random(rng.random())))
                for i in range(firebase_clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    restarts = []
    try:
        for _ in range(kills):
            time.sleep(rng.uniform(0.3, 1.2))
            target.server.kill()
            t0 = time.monotonic()
            target.server = start_server(data_dir, port=target.server.port)
            restarts.append(time.monotonic() - t0)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    seconds = time.monotonic() - started
    failures = list(store.failures)
    lost, wrong, present_unacked = check_objects(target.url, store)
    failures += [f"acknowledged and lost: {n}" for n in lost[:20]]
    failures += [f"wrong bytes: {w}" for w in wrong[:20]]
    target.server.stop()

    # Straight after the crashes: only reclaimable leftovers may be reported (see harness.verify).
    ok, before_code, before_kinds, before_err = verify(data_dir)
    if not ok:
        failures.append(f"verify before gc exited {before_code} with findings {before_kinds}: {before_err[:300]}")
    gc_code, gc_report, gc_err = gc(data_dir)
    if gc_code != 0:
        failures.append(f"gc exited {gc_code}: {gc_err[:300]}")
    ok, verify_code, kinds, verify_err = verify(data_dir)
    if not ok:
        failures.append(f"verify exited {verify_code} with findings {kinds}: {verify_err[:300]}")

    # After the collector, the acknowledged objects are still all there with their bytes.
    server = start_server(data_dir)
    lost2, wrong2, _ = check_objects(server.url, store)
    server.stop()
    failures += [f"lost after gc: {n}" for n in lost2[:20]] + [f"wrong after gc: {w}" for w in wrong2[:20]]

    figures = {"kills": kills, "seconds": round(seconds, 1),
               "uploaders": f"{simple_clients} simple + {tus_clients} tus + {firebase_clients} Firebase resumable",
               **store.counts, "acknowledged objects": len(store.acked), "attempted names": len(store.attempted),
               "present though unacknowledged": present_unacked, "lost": len(lost) + len(lost2),
               "wrong bytes": len(wrong) + len(wrong2),
               "restart seconds (max)": round(max(restarts), 2) if restarts else None,
               "verify before gc": f"exit {before_code}, findings {before_kinds or 'none'}",
               "gc": _gc_summary(gc_report), "verify after gc": f"exit {verify_code}, findings {kinds or 'none'}"}
    return Result("SIGKILL torture", not failures, figures, failures, known=store.known)


def _gc_summary(report):
    if not report:
        return "no report"
    keys = ["filesReleased", "blobsRemoved", "strayFilesRemoved", "tempFilesRemoved", "uploadsExpired",
            "trashRemoved", "trashRestored"]
    return ", ".join(f"{k} {report.get(k)}" for k in keys)


def main(argv=None):
    """`python -m stress.sigkill --kills 10 --simple 1 --tus 6` reproduces KNOWN_410 in most runs."""
    import argparse
    import tempfile
    parser = argparse.ArgumentParser(description="SIGKILL torture")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--simple", type=int, default=3)
    parser.add_argument("--tus", type=int, default=2)
    parser.add_argument("--firebase", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="larder-sigkill-") as tmp:
        result = run(f"{tmp}/data", kills=args.kills, simple_clients=args.simple, tus_clients=args.tus, seed=args.seed,
                     firebase_clients=args.firebase)
    print(result.summary())
    return 0 if result.passed and not result.known else 1


if __name__ == "__main__":
    raise SystemExit(main())
