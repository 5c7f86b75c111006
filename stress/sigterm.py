"""SIGTERM under load: uploaders run, and slow uploads and slow downloads are mid-flight when the
server gets SIGTERM. Those in-flight requests must finish with their exact answers, the process must
exit 0 within its 30 s grace, and every acknowledged upload must be there after a restart.
"""
import http.client
import json
import random
import signal
import threading
import time

import requests

from .harness import BUCKET, Result, quote, sha256, start_server, verify

MiB = 1 << 20
GRACE = 30


def slow_upload(port, name, body, pieces, pause, out):
    """One request whose body takes pieces × pause seconds to send."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.putrequest("POST", f"/v0/b/{BUCKET}/o?name={quote(name)}")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        step = -(-len(body) // pieces)
        for i in range(0, len(body), step):
            conn.send(body[i:i + step])
            time.sleep(pause)
        r = conn.getresponse()
        answer = r.read()
        out[name] = (r.status, json.loads(answer).get("sha256") if r.status == 200 else answer[:200])
    except Exception as e:  # noqa: BLE001 (the failure is the finding)
        out[name] = (None, repr(e))


def slow_download(port, name, expected, chunk, pause, out, key):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", f"/v0/b/{BUCKET}/o/{quote(name)}?alt=media")
        r = conn.getresponse()
        got = b""
        while True:
            piece = r.read(chunk)
            if not piece:
                break
            got += piece
            time.sleep(pause)
        out[key] = (r.status, got == expected, len(got))
    except Exception as e:  # noqa: BLE001
        out[key] = (None, repr(e), 0)


def uploader(index, url, acked, stop, rng):
    n = 0
    while not stop.is_set():
        n += 1
        name, body = f"load/{index}/{n}", rng.randbytes(rng.choice([10, 5000, 100_000, 700_000]))
        try:
            r = requests.post(f"{url}/v0/b/{BUCKET}/o?name={quote(name)}", data=body, timeout=30)
        except requests.RequestException:
            time.sleep(0.05)
            continue
        if r.status_code == 200:
            acked[name] = sha256(body)


def run(data_dir, uploaders=8, slow_uploads=4, slow_downloads=4, load_seconds=2.0, slow_seconds=3.0, seed=4):
    rng = random.Random(seed)
    server = start_server(data_dir)
    big = rng.randbytes(8 * MiB)
    assert requests.post(f"{server.url}/v0/b/{BUCKET}/o?name=big", data=big, timeout=60).status_code == 200
    acked, stop = {}, threading.Event()
    load = [threading.Thread(target=uploader, args=(i, server.url, acked, stop, random.Random(rng.random())))
            for i in range(uploaders)]
    for t in load:
        t.start()
    time.sleep(load_seconds)

    in_flight, expected = {}, {}
    slow = []
    for k in range(slow_uploads):
        body = rng.randbytes(2 * MiB)
        expected[f"slow/{k}"] = sha256(body)
        slow.append(threading.Thread(target=slow_upload, args=(server.port, f"slow/{k}", body, 20,
                                                               slow_seconds / 20, in_flight)))
    for k in range(slow_downloads):
        slow.append(threading.Thread(target=slow_download, args=(server.port, "big", big, 256 * 1024,
                                                                 slow_seconds / 32, in_flight, f"download {k}")))
    for t in slow:
        t.start()
    time.sleep(0.5)  # every slow request is now past its headers and mid-body
    term_at = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        code = server.proc.wait(timeout=GRACE + 10)
    except Exception:  # noqa: BLE001
        code = None
    exit_seconds = time.monotonic() - term_at
    stop.set()
    for t in load + slow:
        t.join(timeout=60)
    server.stop()

    failures = []
    if code != 0:
        failures.append(f"exit code {code} (expected 0)")
    if exit_seconds > GRACE:
        failures.append(f"took {exit_seconds:.1f} s to exit (grace {GRACE} s)")
    finished = 0
    for key, answer in sorted(in_flight.items()):
        if key.startswith("download"):
            ok = answer[0] == 200 and answer[1] is True
        else:
            ok = answer == (200, expected[key])
            if ok:
                acked[key] = expected[key]
        finished += ok
        if not ok:
            failures.append(f"in-flight {key} got {answer}")
    if len(in_flight) != slow_uploads + slow_downloads:
        failures.append(f"{slow_uploads + slow_downloads - len(in_flight)} in-flight requests never returned")

    server = start_server(data_dir)
    lost = []
    with requests.Session() as s:
        for name, digest in sorted(acked.items()):
            r = s.get(f"{server.url}/v0/b/{BUCKET}/o/{quote(name)}?alt=media", timeout=60)
            if r.status_code != 200 or sha256(r.content) != digest:
                lost.append(f"{name}: {r.status_code}")
    server.stop()
    failures += [f"acknowledged and lost: {n}" for n in lost[:10]]
    ok, verify_code, kinds, _ = verify(data_dir)
    if not ok:
        failures.append(f"verify exited {verify_code}: {kinds}")
    figures = {"uploaders": uploaders, "in-flight at SIGTERM": f"{slow_uploads} slow uploads (2 MiB over "
               f"{slow_seconds} s) + {slow_downloads} slow downloads (8 MiB)",
               "in-flight finished correctly": f"{finished}/{slow_uploads + slow_downloads}",
               "exit code": code, "exit after SIGTERM (s)": round(exit_seconds, 2),
               "acknowledged uploads": len(acked), "lost": len(lost),
               "verify": f"exit {verify_code}, findings {kinds or 'none'}"}
    return Result("SIGTERM under load", not failures, figures, failures)
