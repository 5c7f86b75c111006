"""The s3 scenario's part of the report: its rows of the table of ratios and its own section."""
from .config import MB, REPS, S3_GETS, S3_GET_CLIENTS, SMALL_BYTES, TUS_CHUNKS
from .fmt import fmt_mb, med, runs_text
from .peers.swift_s3 import S3_KEY, S3_REGION


def s3_summary_rows(s3):
    """The s3 scenario's rows of the table of ratios (nothing when it did not run)."""
    if not s3:
        return []
    if "missing" in s3:
        return [("S3 mode (`--catalog postgres://` + `--blobs s3://`) vs Swift's S3 API", "missing", "missing", "—",
                 "reported", "—", "", s3["missing"])]
    rows = []
    if "up" in s3:
        rows += s3_transfer_rows(s3)
    if "resumable" in s3:
        rows += s3_resumable_rows(s3["resumable"])
    return rows


def s3_transfer_rows(s3):
    """The table-of-ratios rows of the S3_MIB transfers and the 4 KiB GETs."""
    mib, size = s3["size"] >> 20, s3["size"]
    larder_does = "Larder: stages locally, SHA-256, fsync, multipart PUT to Swift, PostgreSQL commit (fsync on)"
    rows = []
    for key, what, peer_not in (
            ("up", f"S3 mode: upload {mib} MiB, MB/s", f"{larder_does}; direct PUT: none of that (one PUT, "
             "x-amz-content-sha256 = the real hash, computed before its clock starts); Swift's own work (s3api "
             "checks the SHA-256, the object server fsyncs) is done on both sides"),
            ("down", f"S3 mode: download {mib} MiB, MB/s", "direct GET: no catalog lookup, no rules, no second "
             "server (Larder streams Swift's answer through a pipe; its object is multipart, which Swift joins)")):
        l, d = med(s3[key]["larder"]), med(s3[key]["direct"])
        rows.append((what, fmt_mb(size / l), f"curl → Swift {fmt_mb(size / d)}", f"{d / l:.2f}", "reported", "—",
                     peer_not, f"s: Larder {runs_text(s3[key]['larder'])}; direct {runs_text(s3[key]['direct'])}"))
    l = med([g["rps"] for g in s3["gets"]["larder"]])
    d = med([g["rps"] for g in s3["gets"]["direct"]])
    rows.append((f"S3 mode: {SMALL_BYTES // 1024} KiB GETs req/s, {S3_GET_CLIENTS} keep-alive curl loops", f"{l:,.0f}",
                 f"curl → Swift {d:,.0f}", f"{d and l / d:.2f}", "reported", "—",
                 "direct: a signed GET straight to Swift; Larder: catalog lookup in PostgreSQL, then the same GET "
                 "to Swift (bodies ≤ 16 KiB are fetched whole)",
                 f"Larder {runs_text([g['rps'] for g in s3['gets']['larder']], '{:,.0f}')}; direct "
                 f"{runs_text([g['rps'] for g in s3['gets']['direct']], '{:,.0f}')}"))
    w = s3["gets"]["larder wrk"]
    rows.append((f"S3 mode: {SMALL_BYTES // 1024} KiB GETs req/s, wrk against Larder", f"{med([g['rps'] for g in w]):,.0f}",
                 "— (wrk cannot sign S3 requests)", "—", "reported", "—", "",
                 f"p99 {', '.join(g['p99'] for g in w)}; {'; '.join(g['problems'] for g in w if g['problems']) or 'no errors'}"))
    return rows


S3_OP_SHORT = {"UploadPart": "part", "PUT": "PUT", "PUT (no body: copy)": "copy", "CreateMultipartUpload": "create",
               "CompleteMultipartUpload": "complete", "AbortMultipartUpload": "abort", "ListObjectsV2": "list"}


def s3_ops_text(requests, timed=False):
    """`41 = 32 part + 4 PUT + …` for one upload's requests to Swift; `timed`: each kind with the
    seconds Swift spent answering them (`32 part 3.1 s + …`)."""
    if not requests or not requests["n"]:
        return "0"
    ops = sorted(requests["ops"].items(), key=lambda kv: -kv[1])
    text = f"{requests['n']} = " + " + ".join(
        f"{n} {S3_OP_SHORT.get(op, op)}" + (f" {requests['seconds'][op]:.2f} s" if timed else "") for op, n in ops)
    return text + (f" ({requests['errors']} not 2xx)" if requests["errors"] else "")


def s3_cost_text(runs, size):
    """The median upload's requests and bytes: what went to Swift until the answer, what Swift wrote,
    and what came after the answer."""
    m = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    parts = []
    if "s3" in m:
        parts.append(f"{s3_ops_text(m['s3'])} requests, {m['s3']['in'] / size:.2f}× the bytes sent to Swift")
    parts.append(f"Swift wrote {(m['disk'] + m['disk_after']) / size:.2f}× to disk")
    if m.get("s3_after", {}).get("n"):
        parts.append(f"after the answer {s3_ops_text(m['s3_after'])} ({m['s3_after']['out'] / MB:,.0f} MB read back)")
    return "; ".join(parts)


S3_NOT_DONE = {
    "direct": "curl → Swift: one PUT; no hashing (its SHA-256 computed before the clock), no catalog, no "
              "resumability (an interrupted PUT starts over), no local staging or fsync",
    "simple": "the simple upload through Larder: not resumable (an interrupted upload starts over); one "
              "request, its parts go straight under `sha256/…`: no pieces, no lease or commit per PATCH, "
              "no server-side copy at the end",
}


def s3_resumable_rows(res):
    """The table-of-ratios rows of the resumable uploads in S3 mode."""
    size, mib, runs = res["size"], res["size"] >> 20, res["runs"]
    secs = {k: [r["seconds"] for r in v] for k, v in runs.items()}
    rows = []
    for kind in [k for k in runs if k.startswith("tus")]:
        l = med(secs[kind])
        what = f"S3 mode: tus {mib} MiB in {kind.split()[1]} MiB PATCHes, MB/s"
        for peer, label in (("simple", "simple upload through Larder"), ("direct", "curl → Swift")):
            p = med(secs[peer])
            rows.append((what, fmt_mb(size / l), f"{label} {fmt_mb(size / p)}", f"{p / l:.2f}", "reported", "—",
                         S3_NOT_DONE[peer], f"s: tus {runs_text(secs[kind])}; {peer} {runs_text(secs[peer])}"
                         + (f"; tus: {s3_cost_text(runs[kind], size)}" if peer == "simple" else "")))
    l, d = med(secs["simple"]), med(secs["direct"])
    rows.append((f"S3 mode: simple upload {mib} MiB, MB/s", fmt_mb(size / l), f"curl → Swift {fmt_mb(size / d)}",
                 f"{d / l:.2f}", "reported", "—", S3_NOT_DONE["direct"],
                 f"s: Larder {runs_text(secs['simple'])}; direct {runs_text(secs['direct'])}; Larder: "
                 f"{s3_cost_text(runs['simple'], size)}; direct: {s3_cost_text(runs['direct'], size)}"))
    return rows


def s3_cost_table(title, groups, size):
    """One row per upload: seconds, MB/s, CPU until the answer, the requests and bytes to Swift, and
    what happened after the answer."""
    L = [f"{title}\n",
         "| upload | round | seconds | MB/s | CPU Larder / Swift / PostgreSQL, s | requests to Swift until the answer, "
         "with the seconds Swift spent on them | MB sent to / read from Swift | MB Swift wrote | after the answer: "
         "requests, MB read from Swift, CPU Larder / Swift, s |",
         "|---|---:|---:|---:|---|---|---:|---:|---|"]
    for label, runs in groups:
        for i, m in enumerate(runs):
            c, a = m["cpu"], m["cpu_after"]
            s3, after = m.get("s3"), m.get("s3_after")
            L.append(f"| {label} | {i + 1} | {m['seconds']:.2f} | {fmt_mb(size / m['seconds'])} | "
                     f"{c[0]:.2f} / {c[1]:.2f} / {c[2]:.2f} | {s3_ops_text(s3, timed=True) if s3 else '?'} | "
                     f"{fmt_mb(s3['in']) + ' / ' + fmt_mb(s3['out']) if s3 else '?'} | "
                     f"{fmt_mb(m['disk'] + m['disk_after'])} | "
                     f"{s3_ops_text(after) if after else '?'}, {fmt_mb(after['out']) if after else '?'}, "
                     f"{a[0]:.2f} / {a[1]:.2f} |")
    return L + [""]


def s3_section(s3):
    """The s3 scenario's own section of the report."""
    if not s3:
        return []
    L = ["## S3 mode: Larder (`--catalog postgres://`, `--blobs s3://`) vs curl straight to Swift\n"]
    if "missing" in s3:
        return L + [f"**missing**: {s3['missing']}\n"]
    L.append("One throw-away PostgreSQL (`scripts/pg.sh`, fsync on) and one OpenStack Swift with its S3 API "
             "(`scripts/swift-s3.sh`, one proxy process) serve Larder; the direct side is curl "
             f"(`--aws-sigv4 aws:amz:{S3_REGION}:s3`, key `{S3_KEY}` from a netrc file: `--user` would split it "
             "at its colon) to the same Swift. CPU columns: seconds (or µs per GET) of Larder / Swift's "
             "processes / PostgreSQL during the transfer. Every upload starts when Larder and Swift are idle "
             "and is timed to its answer; the work Larder does after the answer (its MD5 backfill reads the "
             "new blob back from Swift; pieces a part made redundant are deleted) is waited out and reported "
             "apart. Requests to Swift: the clients' requests in Swift's proxy access log (syslog over UDP to "
             "the benchmark), split at the answer by the time each request ended; MB Swift wrote: its processes' "
             "`write_bytes` (/proc/PID/io), one replica.\n")
    if "up" in s3:
        L += s3_transfer_section(s3)
    if "resumable" in s3:
        L += s3_resumable_section(s3["resumable"])
    L.append(f"Larder's peak RSS over the scenario: {s3['rss']:.0f} MiB.\n")
    return L


def s3_transfer_section(s3):
    mib, size = s3["size"] >> 20, s3["size"]
    L = ["| transfer | side | round | seconds | MB/s | CPU Larder | CPU Swift | CPU PostgreSQL |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("up", f"upload {mib} MiB"), ("down", f"download {mib} MiB")):
        for side in ("larder", "direct"):
            for i, (t, c) in enumerate(zip(s3[key][side], s3[key + "_cpu"][side])):
                L.append(f"| {label} | {side} | {i + 1} | {t:.2f} | {fmt_mb(size / t)} | {c[0]:.2f} | {c[1]:.2f} | "
                         f"{c[2]:.2f} |")
    for side in ("larder", "direct"):
        for i, g in enumerate(s3["gets"][side]):
            c = g["cpu_us"]
            L.append(f"| {SMALL_BYTES} B GETs ×{g['requests']} | {side} | {i + 1} | — | {g['rps']:,.0f}/s, "
                     f"{g['errors']} errors{' (' + g['codes'] + ')' if g['errors'] else ''} | {c[0]:.0f} µs | {c[1]:.0f} µs | {c[2]:.0f} µs |")
    for i, g in enumerate(s3["gets"]["larder wrk"]):
        L.append(f"| {SMALL_BYTES} B GETs, {g['tool']} | larder | {i + 1} | — | {g['rps']:,.0f}/s, p99 {g['p99']}, "
                 f"{g['problems'] or 'no errors'} | {g['cpu_us']:.0f} µs | {g['swift_cpu_us']:.0f} µs | |")
    L.append(f"\nUpload: Larder's 200 means staged locally, SHA-256 computed, fsynced, PUT to Swift "
             f"(multipart above 16 MiB, each part with its SHA-256, which Swift checks) and committed in "
             f"PostgreSQL; the direct PUT is one request with `x-amz-content-sha256` = the real hash (computed "
             f"before the clock starts), so Swift checks the same hash on both sides. Download: the last "
             f"upload's object ({REPS} times each; Larder's is a multipart object). GETs: {S3_GET_CLIENTS} curl "
             f"processes at once, each {max(1, S3_GETS // S3_GET_CLIENTS)} GETs over one keep-alive connection, "
             f"every Swift request signed anew.\n")
    L += s3_cost_table(f"What each {mib} MiB upload cost:",
                       [(f"{mib} MiB, {side}", s3["up_cost"][side]) for side in ("larder", "direct")], size)
    return L


def s3_resumable_section(res):
    size, mib = res["size"], res["size"] >> 20
    L = [f"### Resumable uploads in S3 mode, {mib} MiB\n",
         f"tus through Larder with the tus scenario's client (one keep-alive connection, POST then PATCHes of "
         f"{' and '.join(str(c) for c in TUS_CHUNKS)} MiB), the same bytes as one simple upload through Larder "
         f"(`curl -X POST -T`), and as one signed PUT straight to Swift; new content every time (no dedupe), "
         f"the order rotating per round, Larder's stored SHA-256 checked after each. Each PATCH's bytes are in "
         f"Swift before its offset commits: as a multipart part once Larder's staging file holds ≥ 5 MiB past "
         f"the parts, as a small *piece* object below that (so with 1 MiB PATCHes every MiB goes up as a piece "
         f"and again inside a part, and the pieces are deleted); the last PATCH completes the multipart upload "
         f"into `uploads/<id>/data` and copies it server-side to `sha256/…`, which Swift does by reading and "
         f"rewriting the whole object.\n"]
    groups = [(f"{kind}" if kind.startswith("tus") else "simple (Larder)" if kind == "simple" else "curl → Swift", runs)
              for kind, runs in res["runs"].items()]
    L += s3_cost_table("Requests: *part* = UploadPart, *PUT* = an object with a body (a piece; the content "
                       "itself when it never made a part), *copy* = a PUT without body (x-amz-copy-source), "
                       "*create* / *complete* = a multipart upload's first and last request, *list* = ListObjectsV2. After the "
                       "answer, a GET of the whole content is the MD5 backfill reading the new blob back.", groups, size)
    return L
