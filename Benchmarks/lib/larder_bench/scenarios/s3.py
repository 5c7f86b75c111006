"""`s3` and `s3-tus` (issue 15, opt-in): Larder in scale-out mode (`--catalog postgres://…
--blobs s3://…`) against curl straight to the same OpenStack Swift (its S3 API), both engines
throw-away ones started here by the project's scripts. Swift's tempauth access key is `test:tester`
(a colon in it): curl's `--user a:b:c` splits at the first colon and signs as the wrong key, so the
direct requests take their key and secret from a netrc file (login and password are separate
tokens there)."""
import json
import os
import shutil
import subprocess
import time
from urllib.parse import urlsplit

from .. import processes
from ..config import MB, MiB, REPS, S3_GETS, S3_GET_CLIENTS, S3_MIB, S3_TUS_MIB, SMALL_BYTES, TUS_CHUNKS
from ..larder import Larder
from ..measure import download, make_file, sha256_file, stamp, tus_upload, upload, urlopen_text, wrk
from ..peers.postgres import Postgres
from ..peers.swift_s3 import (EMPTY_SHA256, S3_BUCKET, S3_KEY, S3_REGION, S3_SECRET, SwiftLog, SwiftS3,
    s3_curl, s3_requests)
from ..processes import BenchError, log, server_cpu


def s3_settle(larder, swift, swift_log, quiet=1.0, limit=180):
    """Waits until Larder and Swift are idle: no CPU used by either (under 30 ms) and no request
    logged for `quiet` seconds. After an upload's answer Larder still works: its MD5 backfill
    reads the new blob back from S3 (MD5 is computed after commit), and it removes the pieces a
    part made redundant; without this wait that work would be charged to the next transfer."""
    deadline = time.monotonic() + limit
    pids = [larder.proc.pid] + swift.pids()
    last = sum(server_cpu(p) for p in pids)
    calm_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now, cpu = time.monotonic(), sum(server_cpu(p) for p in pids)
        if cpu - last > 0.03:
            last, calm_since = cpu, now
        if now - calm_since >= quiet and (not swift_log or now - swift_log.last >= quiet):
            return
    log(f"s3: Larder and Swift still busy after {limit}s; measuring anyway")


def s3_transfer(larder, swift, pg, swift_log, body):
    """Runs `body` (returns its seconds) from a quiet start, and what it cost: CPU seconds of
    (Larder, Swift, PostgreSQL) until the answer ("cpu") and after it until all is quiet again
    ("cpu_after"); Swift's disk writes ("disk", "disk_after"); the requests Swift served before
    the answer ("s3") and after it ("s3_after"), split by the time each request ended. (Not by its
    start: Larder wakes its MD5 backfill at the commit, so the backfill's GET may start a moment
    before the client has its answer; it ends well after, and nothing waited for it.)"""
    os.sync()
    s3_settle(larder, swift, swift_log)
    cpus = lambda: (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
    c0, w0, mark = cpus(), swift.disk_writes(), swift_log.mark() if swift_log else 0
    seconds = body()
    answered, c1, w1 = time.time(), cpus(), swift.disk_writes()
    s3_settle(larder, swift, swift_log)
    c2, w2 = cpus(), swift.disk_writes()
    result = {"seconds": seconds, "cpu": tuple(b - a for a, b in zip(c0, c1)),
              "cpu_after": tuple(b - a for a, b in zip(c1, c2)), "disk": w1 - w0, "disk_after": w2 - w1}
    if swift_log:
        records = swift_log.since(mark)
        result["s3"] = s3_requests([r for r in records if r["end"] <= answered])
        result["s3_after"] = s3_requests([r for r in records if r["end"] > answered])
    return result


def curl_get_loops(url, extra):
    """S3_GET_CLIENTS curl processes at once, each GETting `url` S3_GETS / S3_GET_CLIENTS times in a row
    over one keep-alive connection (one curl, many URLs: curl reuses the connection and signs every
    request anew when `extra` has --aws-sigv4). Returns requests/s and the non-200 answers by status
    (000: curl got no answer)."""
    per = max(1, S3_GETS // S3_GET_CLIENTS)
    config = os.path.join(processes.TMP, "s3-get-loop.cfg")
    with open(config, "w") as f:
        f.write(f'url = "{url}"\noutput = "{os.devnull}"\n' * per)
    started = time.monotonic()
    procs = [subprocess.Popen(["curl", "-sS", "--noproxy", "*", "-w", "%{http_code}\\n", "-K", config] + extra,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(S3_GET_CLIENTS)]
    codes, complaints = [], []
    for p in procs:
        out, err = p.communicate(timeout=600)
        codes += out.split()
        complaints += err.strip().splitlines()
    seconds = time.monotonic() - started
    bad = [c for c in codes if c != "200"]
    return {"rps": len(codes) / seconds, "requests": len(codes), "errors": len(bad),
            "codes": ", ".join(f"{n}× {c}" for c, n in sorted({c: bad.count(c) for c in bad}.items()))
            + (f"; curl: {complaints[0][:120]}" if complaints else "")}


def wait_connections_closed(base, seconds=60):
    """Waits until the server at `base` holds no client connection (ESTABLISHED or CLOSE_WAIT in
    /proc/net/tcp). After wrk's 64 connections, Larder in S3 mode is still answering queued GETs
    from Swift; the next run's connections would meet its per-address limit (64) and be reset."""
    port = f":{urlsplit(base).port:04X} "
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        held = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                for line in open(table).read().splitlines()[1:]:
                    fields = line.split()
                    held += (fields[1] + " ").endswith(port) and fields[3] in ("01", "08")
            except OSError:
                pass
        if not held:
            return
        time.sleep(0.2)


def scenario_s3(files, commands, transfers=True, resumable=True):
    """Larder on PostgreSQL (fsync on) + Swift's S3 API vs curl straight to that Swift, interleaved
    rounds, the order alternating. `transfers`: S3_MIB upload, S3_MIB download, 4 KiB GETs.
    `resumable`: S3_TUS_MIB through tus in each PATCH size of TUS_CHUNKS, the same bytes as one
    simple upload through Larder, and as one PUT straight to Swift. Each upload starts from a quiet
    Larder and Swift and is measured until its answer, then until both are quiet again."""
    if not shutil.which("curl"):
        return {"missing": "curl is not installed"}
    need = ((S3_MIB * (2 * REPS + 4) if transfers else 0)
            + (S3_TUS_MIB * (REPS * (len(TUS_CHUNKS) + 2) * 2 + 2) if resumable else 0)) << 20
    if shutil.disk_usage(processes.TMP).free < need:
        raise BenchError(f"{processes.TMP} has too little space for the s3 scenario (about {need >> 30} GiB)")
    engines = []
    try:
        swift_log = SwiftLog()
        engines.append(swift_log)
        try:
            swift = SwiftS3(access_log_port=swift_log.port)
            engines.append(swift)
            pg = Postgres()
            engines.append(pg)
            if pg.missing:
                return {"missing": pg.missing}
        except FileNotFoundError as e:
            return {"missing": str(e)}
        commands += [swift.command.replace("scripts/", "SWIFT_S3_ACCESS_LOG_UDP=PORT scripts/", 1), pg.command]
        saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        os.environ.update(AWS_ACCESS_KEY_ID=S3_KEY, AWS_SECRET_ACCESS_KEY=S3_SECRET)
        try:
            larder = Larder("s3", extra=["--catalog", pg.url, "--blobs", swift.blobs_url])
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        engines.append(larder)
        commands.append("AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing " + larder.command)
        direct = f"{swift.base}/{S3_BUCKET}/direct/%s"
        commands.append(f"curl --netrc-file NETRC --aws-sigv4 aws:amz:{S3_REGION}:s3 -H 'x-amz-content-sha256: "
                        f"<hex SHA-256 | e3b0…(empty) for GET>' [-T FILE] {swift.base}/{S3_BUCKET}/direct/KEY"
                        f"   # NETRC: machine 127.0.0.1 login {S3_KEY} password {S3_SECRET}")
        measure = lambda body: s3_transfer(larder, swift, pg, swift_log, body)
        result = {}
        if transfers:
            result.update(s3_transfers(files, larder, swift, pg, direct, measure))
        if resumable:
            result["resumable"] = s3_resumable(larder, swift, direct, measure)
        result["rss"] = larder.peak_rss_mib()
        return result
    finally:
        for e in reversed(engines):
            e.close()


def check_larder_object(larder, name, digest):
    """The object `name` in Larder's bench bucket holds the content whose SHA-256 is `digest`."""
    meta = json.loads(urlopen_text(f"{larder.base}/v0/b/bench/o/{name}"))
    if meta.get("sha256") != digest:
        raise BenchError(f"larder stored different bytes for {name}: {meta}")


def s3_transfers(files, larder, swift, pg, direct, measure):
    """The S3_MIB upload and download and the 4 KiB GETs, Larder vs curl straight to Swift."""
    big = make_file(os.path.join(processes.TMP, "s3.bin"), S3_MIB)
    up = {"larder": [], "direct": []}
    up_cpu = {"larder": [], "direct": []}  # (Larder, Swift, PostgreSQL) CPU seconds
    up_cost = {"larder": [], "direct": []}  # s3_transfer's whole result
    for rep in range(REPS):
        stamp(big, 200 + rep)
        digest = sha256_file(big)  # the direct PUT's x-amz-content-sha256, hashed before its clock starts
        for side in (("larder", "direct") if rep % 2 == 0 else ("direct", "larder")):
            if side == "larder":
                m = measure(lambda: upload(larder, big, f"s3up{rep}.bin"))
            else:
                m = measure(lambda: s3_curl(swift.curl_args(digest) + ["-T", big, direct % f"up{rep}.bin"], (200,),
                                            expect_up=S3_MIB * MiB))
            up[side].append(m["seconds"])
            up_cpu[side].append(m["cpu"])
            up_cost[side].append(m)
            log(f"s3 upload {side} round {rep + 1}: {m['seconds']:.2f}s")
    os.unlink(big)
    last = f"up{REPS - 1}.bin"
    down = {"larder": [], "direct": []}
    down_cpu = {"larder": [], "direct": []}
    for rep in range(REPS):
        for side in (("larder", "direct") if rep % 2 == 0 else ("direct", "larder")):
            c0 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            if side == "larder":
                t = download(larder, "s3" + last, S3_MIB * MiB)
            else:
                t = s3_curl(swift.curl_args(EMPTY_SHA256) + [direct % last], (200,), expect_down=S3_MIB * MiB)
            c1 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            down[side].append(t)
            down_cpu[side].append(tuple(b - a for a, b in zip(c0, c1)))
            log(f"s3 download {side} round {rep + 1}: {t:.2f}s")
    small = files["small"]
    upload(larder, small, "small.bin")
    s3_curl(swift.curl_args(sha256_file(small)) + ["-T", small, direct % "small.bin"], (200,), expect_up=SMALL_BYTES)
    gets = {"larder": [], "direct": [], "larder wrk": []}
    for rep in range(REPS):
        for side in (("larder", "direct") if rep % 2 == 0 else ("direct", "larder")):
            c0 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            if side == "larder":
                g = curl_get_loops(larder.download_url % "small.bin", [])
            else:
                g = curl_get_loops(direct % "small.bin", swift.curl_args(EMPTY_SHA256))
            c1 = (server_cpu(larder.proc.pid), swift.cpu(), pg.cpu())
            g["cpu_us"] = tuple((b - a) / max(1, g["requests"]) * 1e6 for a, b in zip(c0, c1))
            gets[side].append(g)
            log(f"s3 gets {side} round {rep + 1}: {g['rps']:,.0f}/s, {g['errors']} errors {g['codes']}")
        s0 = swift.cpu()
        g = wrk(larder, "small.bin")
        g["swift_cpu_us"] = (swift.cpu() - s0) / max(1, g["requests"]) * 1e6
        gets["larder wrk"].append(g)
        log(f"s3 gets larder wrk round {rep + 1}: {g['rps']:,.0f}/s p99 {g['p99']} {g['problems']}")
        wait_connections_closed(larder.base)
    return {"size": S3_MIB * MiB, "up": up, "up_cpu": up_cpu, "up_cost": up_cost, "down": down,
            "down_cpu": down_cpu, "gets": gets}


def s3_resumable(larder, swift, direct, measure):
    """S3_TUS_MIB through tus in each PATCH size (the tus scenario's client), the same bytes as a
    simple upload through Larder, and as one PUT straight to Swift; every upload new content (no
    dedupe), the order rotating per round, Larder's stored bytes checked after each."""
    path = make_file(os.path.join(processes.TMP, "s3-tus.bin"), S3_TUS_MIB)
    size = S3_TUS_MIB * MiB
    kinds = [f"tus {c} MiB" for c in TUS_CHUNKS] + ["simple", "direct"]
    runs = {k: [] for k in kinds}
    for rep in range(REPS):
        k = rep % len(kinds)
        for i, kind in enumerate(kinds[k:] + kinds[:k]):
            stamp(path, 300 + rep * len(kinds) + i)
            digest = sha256_file(path)  # before the clock: the direct PUT's header, and the check afterwards
            name = f"s3res-{rep}-{kind.replace(' ', '')}.bin"
            if kind.startswith("tus"):
                chunk = int(kind.split()[1])
                m = measure(lambda: tus_upload(larder.tus_endpoint, path, size, chunk * MiB, name=name)[0])
            elif kind == "simple":
                m = measure(lambda: upload(larder, path, name))
            else:
                m = measure(lambda: s3_curl(swift.curl_args(digest) + ["-T", path, direct % name], (200,),
                                            expect_up=size))
            if kind != "direct":
                check_larder_object(larder, name, digest)
            runs[kind].append(m)
            s3 = m.get("s3") or {}
            log(f"s3 resumable {kind} round {rep + 1}: {m['seconds']:.2f}s, {s3.get('n', '?')} S3 requests "
                f"{s3.get('ops', '')}, {s3.get('in', 0) / MB:,.0f} MB sent to Swift")
    os.unlink(path)
    return {"size": size, "runs": runs}
