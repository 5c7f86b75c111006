"""Listing filters (issue 37, item 1): the red team's `matchGlob` — `**?` × 328 and `{x,y}` × 6,
1,014 bytes that match no name — over tens of thousands of names under one prefix. It once held a
request thread for 25–98 s, and two of them stalled `/healthz` for 49 s. Now matching is linear
and each page examines a bounded number of rows, answering a `nextPageToken` when the budget is
spent: every page must come back fast, following the tokens must see every match exactly once,
and `/healthz` must stay fast beside `attackers` clients walking the listing at once.

The names are written into the catalog directly (one object uploaded, its row copied), with the
server stopped: 40,000 uploads would take longer than the scenario.
"""
import sqlite3
import threading
import time

import requests

from .harness import BUCKET, Result, start_server

GLOB = "**?" * 328 + "{x,y}" * 6
# The same shape, short enough that every name (21 characters) is matched in full.
HEAVY = "**?" * 5 + "{x,y}" * 6
PREFIX = "public/bulk/00"


def seed(data_dir, names):
    """`names` objects public/bulk/00/NNNNNN, all sharing the first one's content."""
    server = start_server(data_dir)
    try:
        seeded = f"{PREFIX}/{0:06d}"
        r = requests.post(f"{server.url}/v0/b/{BUCKET}/o", params={"name": seeded}, data=b"seed", timeout=30)
        assert r.status_code == 200, r.text
    finally:
        server.stop()
    db = sqlite3.connect(f"{data_dir}/larder.sqlite")
    columns = [row[1] for row in db.execute("PRAGMA table_info(objects)")]
    chosen = ", ".join(f"printf('{PREFIX}/%06d', n.k)" if c == "name" else f"o.{c}" for c in columns)
    db.execute(f"""WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?)
                   INSERT INTO objects({", ".join(columns)}) SELECT {chosen} FROM objects o, n WHERE o.name = ?""",
               (names - 1, seeded))
    db.commit()
    db.close()


def walk(url, glob, deadline_per_page, session=None, stop=None):
    """Every page of the listing (until `stop` is set): (matched names, pages, slowest page in s,
    pages over the deadline)."""
    session = session or requests.Session()
    names, pages, slowest, late, token = [], 0, 0.0, 0, None
    while not (stop and stop.is_set()):
        params = {"prefix": PREFIX, "matchGlob": glob}
        if token:
            params["pageToken"] = token
        started = time.monotonic()
        r = session.get(f"{url}/storage/v1/b/{BUCKET}/o", params=params, timeout=max(120, deadline_per_page * 10))
        seconds = time.monotonic() - started
        assert r.status_code == 200, r.text
        body = r.json()
        names += [item["name"] for item in body.get("items", [])]
        pages += 1
        slowest = max(slowest, seconds)
        late += seconds > deadline_per_page
        token = body.get("nextPageToken")
        if not token:
            break
    return names, pages, slowest, late


def run(data_dir, names=40_000, attackers=8, seconds=5, page_deadline=1.0, health_deadline=1.0):
    seed(data_dir, names)
    server = start_server(data_dir)
    failures, figures = [], {"names": names, "attackers": attackers}
    try:
        # One walk of the attack glob: every page fast, nothing matched, the walk ends.
        started = time.monotonic()
        matched, pages, slowest, late = walk(server.url, GLOB, page_deadline)
        figures["attack glob: pages, slowest page, whole walk"] = (
            f"{pages} pages, {slowest * 1000:.0f} ms, {time.monotonic() - started:.1f} s")
        if matched:
            failures.append(f"the attack glob matched {len(matched)} names")
        if late:
            failures.append(f"{late} of {pages} pages took over {page_deadline} s (slowest {slowest:.2f} s)")
        # Short enough for every name to be matched in full (no length shortcut): pages still fast.
        matched, pages, slowest, late = walk(server.url, HEAVY, page_deadline)
        figures["heavy glob: pages, slowest page"] = f"{pages} pages, {slowest * 1000:.0f} ms"
        if matched:
            failures.append(f"the heavy glob matched {len(matched)} names")
        if late:
            failures.append(f"{late} of {pages} heavy-glob pages took over {page_deadline} s (slowest {slowest:.2f} s)")
        # A glob matching one name in ten: every match once, in order, across the pages.
        matched, pages, slowest, late = walk(server.url, f"{PREFIX}/**7", page_deadline)
        expected = [f"{PREFIX}/{k:06d}" for k in range(names) if k % 10 == 7]
        figures["every-tenth glob: pages, slowest page"] = f"{pages} pages, {slowest * 1000:.0f} ms"
        if matched != expected:
            failures.append(f"the every-tenth glob listed {len(matched)} names, {len(set(matched))} distinct; "
                            f"expected {len(expected)}")
        if late:
            failures.append(f"{late} of {pages} every-tenth pages took over {page_deadline} s")

        # `attackers` clients walking the attack listing over and over; /healthz probed meanwhile.
        stop = threading.Event()
        walks = [0] * attackers
        errors = []

        def attack(i):
            session = requests.Session()
            while not stop.is_set():
                try:
                    walk(server.url, GLOB, page_deadline, session, stop)
                    walks[i] += 1
                except Exception as error:  # noqa: BLE001 (reported as a failure)
                    errors.append(repr(error))
                    return

        threads = [threading.Thread(target=attack, args=(i,)) for i in range(attackers)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        probes, worst, slow_probes = 0, 0.0, 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            r = requests.get(f"{server.url}/healthz", timeout=60)
            took = time.monotonic() - started
            probes += 1
            worst = max(worst, took)
            slow_probes += took > health_deadline or r.status_code != 200
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(timeout=300)
        figures["/healthz beside the attackers: probes, slowest"] = f"{probes}, {worst * 1000:.0f} ms"
        figures["attack walks completed"] = sum(walks)
        if slow_probes:
            failures.append(f"{slow_probes} of {probes} /healthz probes took over {health_deadline} s "
                            f"(slowest {worst:.2f} s)")
        if errors:
            failures.append(f"attackers failed: {errors[:3]}")
    finally:
        server.stop()
    return Result("Listing filter", not failures, figures, failures)
