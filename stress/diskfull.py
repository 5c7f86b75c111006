"""Full disk under load: the server's data directory on its own small tmpfs, filled by concurrent
uploaders speaking every upload protocol (simple POST, Firebase multipart, Firebase resumable, tus),
each halving its size after a refusal until not even a few KiB fit.

Passes when:
- every upload is answered 2xx or 507 with a JSON error (never a 500, never a hang), on every protocol;
- every acknowledged object reads back with exactly its bytes while the disk is full;
- no temp file is left in tmp/ by the refused writes;
- deletes (objects, tus uploads, resumable sessions) succeed on the full disk, while the uploaders
  keep pushing (the store's `reserve` file is given back on ENOSPC so SQLite can commit them);
- after the deletes and `larder gc --grace 0s` (the CLI beside the running server), uploads
  succeed again and the reserve is back;
- the objects not deleted keep their bytes, the deleted ones are gone, `larder verify` is clean.

Mounting needs root (CAP_SYS_ADMIN); without it the scenario is reported SKIPPED, loudly.

KNOWN_RESERVE_SPENT (found by this scenario): the reserve is given back once, on the first delete
that meets ENOSPC; the uploads in flight then take that space, and from then on every delete
(objects, tus terminations, resumable cancels) answers 507. Nothing can be deleted through the API,
`gc` has nothing to free, and the reserve is only made again with 16 MiB free: the store cannot get
out of the full disk by itself. Deletes that fail while the reserve file is gone are filed under this
name (so the short test can mark it xfail); the scenario then grows the tmpfs (as an operator would
grow the volume), retries them, and checks the rest. `reproduce_reserve_spent` is the deterministic
reproducer (`python -m stress.diskfull --reproduce`): fill, one delete, fill again, delete the rest.

    LARDER_BIN=… .venv/bin/python -m stress.diskfull --mb 64 --clients 6
"""
import base64
import json
import os
import random
import subprocess
import threading
import time

import requests

from .harness import BUCKET, Result, gc, quote, sha256, start_server, verify

KiB = 1024
MiB = 1024 * KiB
TUS = {"Tus-Resumable": "1.0.0"}
NAME = "Full disk"
KNOWN_RESERVE_SPENT = "reserve-spent-by-uploads"


def mount_tmpfs(path, mb):
    """Mounts a tmpfs of `mb` MiB at `path`; None, or why it could not."""
    os.makedirs(path, exist_ok=True)
    try:
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", path], capture_output=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"mount: {e!r}"
    if p.returncode != 0:
        return f"mount -t tmpfs exited {p.returncode}: {p.stderr.decode(errors='replace').strip()[:200]}"
    return None


def unmount(path):
    if subprocess.run(["umount", path], capture_output=True, timeout=60).returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=60)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def reserve_bytes(data_dir):
    try:
        return os.stat(os.path.join(data_dir, "reserve")).st_blocks * 512
    except OSError:
        return None


class Book:
    """What the clients were told: acknowledged objects, refusals, failures."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}       # name -> sha256
        self.counts = {}      # "kind: outcome" -> n
        self.failures = []
        self.known = {}       # known failure name -> examples

    def count(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def fail(self, what):
        with self.lock:
            if len(self.failures) < 40:
                self.failures.append(what)

    def fail_known(self, name, what):
        with self.lock:
            self.known.setdefault(name, []).append(what)

    def fail_delete(self, data, what, r):
        """A delete that did not commit: known when the reserve is already spent (its file missing,
        or empty: how the store marks it spent), else a failure."""
        if r.status_code == 507 and not reserve_bytes(data):
            self.fail_known(KNOWN_RESERVE_SPENT, f"{what} answered 507 with the reserve already given back")
        else:
            self.fail(f"{what} answered {r.status_code} {r.text[:200]}")

    def ack(self, name, digest):
        with self.lock:
            self.acked[name] = digest


def check_refusal(book, kind, r, what):
    """A refusal must be 507 with Larder's JSON error; returns True for a 507."""
    if r.status_code == 507:
        try:
            error = r.json()["error"]
            ok = error["code"] == 507 and error["status"] == "RESOURCE_EXHAUSTED"
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            book.fail(f"{kind} {what}: 507 without the JSON error: {r.headers.get('Content-Type')} {r.text[:200]}")
        book.count(f"{kind}: 507")
        return True
    book.fail(f"{kind} {what}: answered {r.status_code} {r.text[:200]} (only 2xx or 507 are honest here)")
    return False


class Uploader:
    """One client: uploads with one protocol after another; a 507 halves its next size."""

    KINDS = ("simple", "multipart", "resumable", "tus")

    def __init__(self, index, url, data, book, rng):
        self.index, self.url, self.data, self.book, self.rng = index, url, data, book, rng
        self.size = 4 * MiB
        self.n = 0
        self.full_at_smallest = 0   # 507s in a row at the smallest size: the disk is full
        self.http = requests.Session()

    def one(self, tag="fill"):
        self.n += 1
        kind = self.KINDS[(self.index + self.n) % len(self.KINDS)]
        name = f"{tag}/{kind}/{self.index}/{self.n}"
        body = self.rng.randbytes(max(1, int(self.size * self.rng.uniform(0.6, 1.0))))
        try:
            stored = getattr(self, kind)(name, body)
        except requests.Timeout as e:
            self.book.fail(f"{kind} {name}: no answer within the client's timeout (a hang): {e!r}")
            return None
        except requests.RequestException as e:
            self.book.fail(f"{kind} {name}: {e!r}")
            return None
        if stored:
            self.book.ack(name, sha256(body))
            self.book.count(f"{kind}: acknowledged")
            self.book.count("bytes acknowledged", len(body))
            self.full_at_smallest = 0
        elif stored is False:
            if self.size <= 4 * KiB:
                self.full_at_smallest += 1
            self.size = max(4 * KiB, self.size // 2)
        return stored

    def post(self, url, **kw):
        return self.http.post(url, timeout=60, **kw)

    def simple(self, name, body):
        r = self.post(f"{self.url}/v0/b/{BUCKET}/o?name={quote(name)}", data=body)
        if r.status_code == 200:
            return self.acknowledged("simple", name, r, body)
        return None if not check_refusal(self.book, "simple", r, name) else False

    def multipart(self, name, body):
        boundary = "83671420925871936049"
        meta = json.dumps({"name": name, "contentType": "application/octet-stream"}).encode()
        wire = (f"--{boundary}\r\nContent-Type: application/json; charset=utf-8\r\n\r\n".encode() + meta
                + f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode() + body
                + f"\r\n--{boundary}--".encode())
        r = self.post(f"{self.url}/v0/b/{BUCKET}/o?name={quote(name)}", data=wire, headers={
            "X-Goog-Upload-Protocol": "multipart", "Content-Type": f"multipart/related; boundary={boundary}"})
        if r.status_code == 200:
            return self.acknowledged("multipart", name, r, body)
        return None if not check_refusal(self.book, "multipart", r, name) else False

    def resumable(self, name, body):
        r = self.post(f"{self.url}/v0/b/{BUCKET}/o?name={quote(name)}", json={"name": name}, headers={
            "X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Length": str(len(body))})
        if r.status_code != 200:
            return None if not check_refusal(self.book, "resumable start", r, name) else False
        session = r.headers["X-Goog-Upload-URL"]
        r = self.post(session, data=body, headers={"X-Goog-Upload-Command": "upload, finalize",
                                                   "X-Goog-Upload-Offset": "0"})
        if r.status_code == 200:
            return self.acknowledged("resumable", name, r, body)
        refused = check_refusal(self.book, "resumable", r, name)
        # The session is still there and says what it kept: nothing, or at most what was sent.
        q = self.post(session, headers={"X-Goog-Upload-Command": "query"})
        received = q.headers.get("X-Goog-Upload-Size-Received", "")
        if q.status_code != 200 or not received.isdigit() or int(received) > len(body):
            self.book.fail(f"resumable query of {name} after a 507 answered {q.status_code}, size received "
                           f"{received!r}: {q.text[:200]}")
        else:
            self.book.count("resumable query after a 507: " + ("nothing kept" if received == "0" else "part kept"))
        # The client gives up: cancelling is a delete, and must work on the full disk.
        c = self.post(session, headers={"X-Goog-Upload-Command": "cancel"})
        self.book.count(f"resumable cancel on a full disk: {c.status_code}")
        if c.status_code != 200:
            self.book.fail_delete(self.data, f"resumable cancel of {name} after a 507", c)
        return False if refused else None

    def tus(self, name, body):
        meta = "name " + base64.b64encode(name.encode()).decode()
        r = self.post(f"{self.url}/v0/b/{BUCKET}/uploads", headers={
            **TUS, "Upload-Length": str(len(body)), "Upload-Metadata": meta})
        if r.status_code != 201:
            return None if not check_refusal(self.book, "tus create", r, name) else False
        location = self.url + r.headers["Location"]
        r = self.http.patch(location, data=body, timeout=60, headers={
            **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"})
        if r.status_code == 204 and r.headers.get("Upload-Offset") == str(len(body)):
            return True
        refused = check_refusal(self.book, "tus patch", r, name) if r.status_code != 204 else False
        if r.status_code == 204:
            self.book.fail(f"tus {name}: 204 at offset {r.headers.get('Upload-Offset')} of {len(body)}")
        head = self.http.head(location, headers=TUS, timeout=60)
        offset = int(head.headers.get("Upload-Offset", -1))
        if head.status_code != 200 or not 0 <= offset <= len(body):
            self.book.fail(f"tus {name}: HEAD after the 507 answered {head.status_code}, offset {offset}")
        # The client gives up: termination is a delete, and must work on the full disk.
        d = self.http.delete(location, headers=TUS, timeout=60)
        self.book.count(f"tus terminate on a full disk: {d.status_code}")
        if d.status_code != 204:
            self.book.fail_delete(self.data, f"tus DELETE of {name} after a 507", d)
        return False if refused else None

    def acknowledged(self, kind, name, r, body):
        if r.json().get("sha256") != sha256(body):
            self.book.fail(f"{kind} {name}: acknowledged with sha256 {r.json().get('sha256')}, sent {sha256(body)}")
        return True


def check_objects(url, names_digests, book, what):
    """Every name has exactly its bytes; returns how many were checked."""
    with requests.Session() as s:
        for name, digest in sorted(names_digests.items()):
            r = s.get(f"{url}/v0/b/{BUCKET}/o/{quote(name)}?alt=media", timeout=60)
            if r.status_code != 200 or sha256(r.content) != digest:
                book.fail(f"{what}: {name} answered {r.status_code}, sha256 {sha256(r.content)[:12]} != {digest[:12]}")
    return len(names_digests)


def run(data_dir, clients=6, mb=64, fill_seconds=60, seed=1, reproduce=False):
    """`data_dir`'s parent gets a tmpfs at `mnt/`; the store lives in `mnt/data`. `reproduce` adds
    the KNOWN_RESERVE_SPENT reproducer's verdict to the figures (on a tmpfs of its own)."""
    parent = os.path.dirname(os.path.abspath(data_dir))
    mnt = os.path.join(parent, "mnt")
    why = mount_tmpfs(mnt, mb)
    if why:
        return Result(NAME, True, {"tmpfs": f"{mb} MiB"}, [], skipped=f"cannot mount a tmpfs ({why}); needs root")
    try:
        result = _run(os.path.join(mnt, "data"), mnt, clients, mb, fill_seconds, seed)
    finally:
        unmount(mnt)
    if reproduce:
        os.makedirs(os.path.join(parent, "repro"), exist_ok=True)
        passed, detail = reproduce_reserve_spent(os.path.join(parent, "repro"), mb)
        result.figures[f"reproducer {KNOWN_RESERVE_SPENT}"] = f"{'fixed' if passed else 'still fails'}: {detail}"
    return result


def _run(data, mnt, clients, mb, fill_seconds, seed):
    rng = random.Random(seed)
    book = Book()
    server = start_server(data)
    figures = {"tmpfs": f"{mb} MiB", "clients": f"{clients} (simple, Firebase multipart, Firebase resumable, tus)",
               "reserve at start (bytes)": reserve_bytes(data)}
    started = time.monotonic()
    uploaders = [Uploader(i, server.url, data, book, random.Random(rng.random())) for i in range(clients)]
    stop = threading.Event()

    # 1. Fill: every client until three of its smallest uploads in a row are refused.
    def fill(u):
        while not stop.is_set() and u.full_at_smallest < 3 and time.monotonic() - started < fill_seconds:
            u.one()

    threads = [threading.Thread(target=fill, args=(u,)) for u in uploaders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    figures["seconds to fill"] = round(time.monotonic() - started, 1)
    full = all(u.full_at_smallest >= 3 for u in uploaders)
    figures["free bytes when full"] = free_bytes(mnt)
    if not full:
        book.fail(f"the disk did not fill within {fill_seconds} s ({free_bytes(mnt)} bytes free)")
    if server.proc.poll() is not None:
        book.fail(f"the server died while the disk filled (exit {server.proc.returncode})")
        return _result(figures, book, started)
    acked_when_full = dict(book.acked)
    figures["objects acknowledged when full"] = len(acked_when_full)

    # 2. On the full disk: reads are exact, refused writes left no temp file.
    check_objects(server.url, acked_when_full, book, "read on the full disk")
    time.sleep(0.5)
    tmp_left = os.listdir(os.path.join(data, "tmp"))
    figures["temp files left by refused writes"] = len(tmp_left)
    if tmp_left:
        book.fail(f"{len(tmp_left)} temp files left in tmp/ by refused writes: {tmp_left[:5]}")

    # 3. Deletes while the uploaders keep pushing: each must commit (on the reserve's space).
    def push(u):
        while not stop.is_set():
            u.one(tag="during-deletes")

    pushers = [threading.Thread(target=push, args=(u,)) for u in uploaders[: max(1, clients // 2)]]
    for t in pushers:
        t.start()
    doomed = sorted(acked_when_full)[::2]
    delete_statuses, undeleted = {}, []
    with requests.Session() as s:
        for name in doomed:
            r = s.delete(f"{server.url}/v0/b/{BUCKET}/o/{quote(name)}", timeout=60)
            delete_statuses[r.status_code] = delete_statuses.get(r.status_code, 0) + 1
            if r.status_code != 204:
                undeleted.append(name)
                book.fail_delete(data, f"DELETE {name} on the full disk", r)
    stop.set()
    for t in pushers:
        t.join()
    figures["deletes on the full disk"] = {str(k): v for k, v in delete_statuses.items()}
    figures["reserve after the deletes (bytes)"] = reserve_bytes(data)
    if undeleted:
        # What an operator would do when nothing can be deleted: grow the volume. Then they must commit.
        subprocess.run(["mount", "-o", f"remount,size={mb + 32}m", mnt], capture_output=True, timeout=30)
        figures["tmpfs grown to let the refused deletes through"] = f"{mb + 32} MiB"
        retried = {}
        with requests.Session() as s:
            for name in undeleted:
                r = s.delete(f"{server.url}/v0/b/{BUCKET}/o/{quote(name)}", timeout=60)
                retried[r.status_code] = retried.get(r.status_code, 0) + 1
                if r.status_code != 204:
                    book.fail(f"DELETE {name} after the volume grew answered {r.status_code} {r.text[:200]}")
        figures["refused deletes retried after growing"] = {str(k): v for k, v in retried.items()}
    gone = {name for name in doomed}
    with requests.Session() as s:
        for name in doomed[:10]:
            r = s.get(f"{server.url}/v0/b/{BUCKET}/o/{quote(name)}", timeout=60)
            if r.status_code != 404:
                book.fail(f"{name} deleted with 204 but GET answers {r.status_code}")

    # 4. The collector beside the running server frees the bytes; then uploads succeed again.
    code, report, err = gc(data)
    figures["gc beside the server"] = (f"exit {code}, blobsRemoved {report.get('blobsRemoved')}, "
                                       f"blobBytesFreed {report.get('blobBytesFreed')}" if report else f"exit {code}")
    if code != 0:
        book.fail(f"gc on the full disk exited {code}: {err[:300]}")
    figures["free bytes after gc"] = free_bytes(mnt)
    after = Uploader(clients, server.url, data, book, random.Random(rng.random()))
    after.size = 256 * KiB
    results = [after.one(tag="after-gc") for _ in range(8)]
    figures["uploads after gc (acknowledged of 8)"] = sum(1 for x in results if x)
    if not all(results):
        book.fail(f"after deleting and gc, uploads still refused: {results}")
    figures["reserve at end (bytes)"] = reserve_bytes(data)
    if not reserve_bytes(data):
        book.fail("the reserve did not come back once the disk had room again")

    # 5. What was kept has its bytes, what was deleted is gone, and the store verifies clean.
    kept = {n: d for n, d in book.acked.items() if n not in gone}
    figures["objects checked at end"] = check_objects(server.url, kept, book, "after gc")
    server.stop()
    code, report, err = gc(data)
    if code != 0:
        book.fail(f"gc after the run exited {code}: {err[:300]}")
    ok, vcode, kinds, verr = verify(data)
    figures["verify after gc"] = f"exit {vcode}, findings {kinds or 'none'}"
    if vcode != 0:
        book.fail(f"verify after gc exited {vcode}: {kinds} {verr[:300]}")
    return _result(figures, book, started)


def _result(figures, book, started):
    figures["counts"] = dict(sorted(book.counts.items()))
    figures["seconds"] = round(time.monotonic() - started, 1)
    return Result(NAME, not book.failures, figures, list(book.failures), known=book.known)


def reproduce_reserve_spent(tmp, mb=64):
    """KNOWN_RESERVE_SPENT, one client, no timing: fill the disk; delete one object (the reserve is
    given back, the delete commits); fill the freed space again; delete every other object. Returns
    (passed, what happened); passed means fixed: every delete commits."""
    mnt = os.path.join(tmp, "mnt")
    why = mount_tmpfs(mnt, mb)
    if why:
        return False, f"skipped: {why}"
    data = os.path.join(mnt, "data")
    server = start_server(data)
    try:
        url = f"{server.url}/v0/b/{BUCKET}/o"
        rng = random.Random(5)
        with requests.Session() as s:
            def fill(prefix, sizes):
                return [f"{prefix}{i}" for i, size in enumerate(sizes)
                        if s.post(f"{url}?name={prefix}{i}", data=rng.randbytes(size), timeout=60).status_code == 200]
            stored = fill("f", [4 * MiB] * (mb // 4) + [64 * KiB] * 80 + [4 * KiB] * 50)
            first = s.delete(f"{url}/{stored[0]}", timeout=60).status_code
            refilled = fill("t", [1 * MiB] * 8 + [64 * KiB] * 40 + [4 * KiB] * 40)
            statuses = {}
            for name in stored[1:]:
                code = s.delete(f"{url}/{name}", timeout=60).status_code
                statuses[code] = statuses.get(code, 0) + 1
        passed = first == 204 and set(statuses) == {204}
        return passed, (f"{len(stored)} objects filled {mb} MiB; the first delete answered {first} (reserve given "
                        f"back); {len(refilled)} uploads took the freed space; the other deletes answered {statuses}")
    finally:
        server.stop()
        unmount(mnt)


def main(argv=None):
    import argparse
    import tempfile
    parser = argparse.ArgumentParser(description="full disk under load")
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=60, help="the most the filling may take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reproduce", action="store_true", help=f"run the {KNOWN_RESERVE_SPENT} reproducer only")
    args = parser.parse_args(argv)
    if args.reproduce:
        with tempfile.TemporaryDirectory(prefix="larder-diskfull-") as tmp:
            passed, detail = reproduce_reserve_spent(tmp, args.mb)
        print(f"{KNOWN_RESERVE_SPENT}: {'fixed' if passed else 'still fails'}: {detail}")
        return 0 if passed else 1
    with tempfile.TemporaryDirectory(prefix="larder-diskfull-") as tmp:
        result = run(os.path.join(tmp, "data"), clients=args.clients, mb=args.mb, fill_seconds=args.seconds,
                     seed=args.seed)
    print(result.summary())
    return 0 if result.passed and not result.known and not result.skipped else 1


if __name__ == "__main__":
    raise SystemExit(main())
