"""The report: the table of every ratio of issue 13, then the machine and every run, as Markdown."""
from .config import (MB, NOTE, QUICK, REPS, SIZE, SIZE_MIB, SMALL_BYTES, SMALL_UPLOAD_CONNECTIONS, TUSD_BIN,
    UPLOAD_MIB, WRK_CONNECTIONS, WRK_SECONDS, WRK_THREADS)
from .fmt import fmt_mb, med, p99_us, runs_text, verdict
from .report_s3 import s3_section, s3_summary_rows


NOT_DONE = {
    "nginx-get": "nginx: a static file; no catalog lookup, no rules, no token check",
    "nginx-put": "nginx WebDAV PUT: no hash, no fsync (its 201 means in the page cache), no catalog",
    "tusd": "tusd: no fsync, no hash, no catalog commit (its 204 means in the page cache)",
    "fastapi-tusd": "fastapi-tusd: no fsync, no hash (a JSON info file per upload)",
    "nginx-get-big": "nginx: sendfile of a static file; no catalog lookup, no rules",
}


def summary_rows(R):
    """Every ratio of issue 13: (measure, Larder, peer, ratio, goal, met, peer does not, runs)."""
    rows = []
    limits = R.get("limits")
    gets = R.get("gets")
    if gets:
        lar = gets["larder"]
        for variant, goal, label in (("larder", 0.7, "access log off (both)"),
                                     ("larder+log", 0.6, "Larder's access log on (file, buffered); nginx's off")):
            l_rps = med([g["rps"] for g in gets[variant]])
            if gets["nginx"] is None:
                rows.append((f"{SMALL_BYTES // 1024} KiB GETs req/s, {label}", f"{l_rps:,.0f}", "nginx: missing",
                             "—", f"≥ {goal}", "—", NOT_DONE["nginx-get"], ""))
                continue
            n_rps = med([g["rps"] for g in gets["nginx"]])
            ratio = l_rps / n_rps
            rows.append((f"{SMALL_BYTES // 1024} KiB GETs req/s, {label}", f"{l_rps:,.0f}", f"{n_rps:,.0f}",
                         f"{ratio:.2f}", f"≥ {goal}", verdict(ratio, goal), NOT_DONE["nginx-get"],
                         f"Larder {runs_text([g['rps'] for g in gets[variant]], '{:,.0f}')}; nginx "
                         f"{runs_text([g['rps'] for g in gets['nginx']], '{:,.0f}')}"))
        cpu = med([g["cpu_us"] for g in lar])
        n_cpu = med([g["cpu_us"] for g in gets["nginx"]]) if gets["nginx"] else float("nan")
        rows.append(("server CPU µs per GET (log off)", f"{cpu:.0f}", f"{n_cpu:.0f}" if gets["nginx"] else "missing",
                     f"{n_cpu / cpu:.2f}" if gets["nginx"] else "—", "Larder ≤ 30 µs", verdict(cpu, 30, False),
                     "CPU time is the figure least disturbed by other load", runs_text([g["cpu_us"] for g in lar], "{:.0f}")))
        for variant in ("larder", "larder+log"):
            p99 = med([p99_us(g["p99"]) for g in gets[variant]])
            n99 = med([p99_us(g["p99"]) for g in gets["nginx"]]) if gets["nginx"] else float("nan")
            rows.append((f"p99 latency of a GET, µs ({'log on' if variant.endswith('log') else 'log off'})",
                         f"{p99:,.0f}", f"{n99:,.0f}" if gets["nginx"] else "missing",
                         f"{n99 / p99:.2f}" if gets["nginx"] else "—", "reported", "—", "", 
                         runs_text([p99_us(g["p99"]) for g in gets[variant]], "{:,.0f}")))
    pg = R.get("postgres")
    if pg and "missing" in pg:
        rows.append((f"{SMALL_BYTES // 1024} KiB GETs and uploads, PostgreSQL catalog", "missing", "SQLite", "—",
                     "reported", "—", "", pg["missing"]))
    elif pg:
        for what, key, data in ((f"{SMALL_BYTES // 1024} KiB GETs req/s", "rps", pg["gets"]),
                                (f"{SMALL_BYTES // 1024} KiB uploads commits/s (fsync on in both)", "cps", pg["uploads"]),
                                (f"{SMALL_BYTES // 1024} KiB uploads of a PNG commits/s (fsync on in both)", "cps",
                                 pg["uploads_png"])):
            p, q = med([r[key] for r in data["PostgreSQL"]]), med([r[key] for r in data["SQLite"]])
            rows.append((f"{what}, PostgreSQL catalog", f"{p:,.0f}", f"SQLite catalog {q:,.0f}", f"{p / q:.2f}",
                         "reported", "—", "SQLite: in process, one machine only",
                         f"PostgreSQL {runs_text([r[key] for r in data['PostgreSQL']], '{:,.0f}')}; SQLite "
                         f"{runs_text([r[key] for r in data['SQLite']], '{:,.0f}')}"))
        for what, data in (("GET", pg["gets"]), ("upload", pg["uploads"]), ("upload of a PNG", pg["uploads_png"])):
            both = [r["cpu_us"] + r["pg_cpu_us"] for r in data["PostgreSQL"]]
            p, q = med(both), med([r["cpu_us"] for r in data["SQLite"]])
            p99, q99 = (med([p99_us(r["p99"]) for r in data[n]]) for n in ("PostgreSQL", "SQLite"))
            rows.append((f"CPU µs per {SMALL_BYTES // 1024} KiB {what} (Larder + PostgreSQL), PostgreSQL catalog",
                         f"{p:,.0f}", f"SQLite catalog {q:,.0f}", f"{q / p:.2f}", "reported", "—", "",
                         f"p99 µs: PostgreSQL {p99:,.0f}, SQLite {q99:,.0f}"))
    rows += pg_writes_summary_rows(R.get("pg-writes"))
    tus = R.get("tus")
    if tus:
        mib = tus["size"] >> 20
        for chunk, data in tus["chunks"].items():
            l = med(data["runs"]["larder"])
            for peer in ("tusd", "fastapi-tusd"):
                goal = 0.8 if peer == "tusd" else None
                what = f"tus {mib} MiB in {chunk} MiB PATCHes, MiB/s"
                if peer not in data["runs"]:
                    rows.append((what, f"{mib / l:,.0f}", f"{peer}: missing ({tus['missing'].get(peer, '')})", "—",
                                 f"≥ {goal}" if goal else "reported", "—", NOT_DONE[peer], ""))
                    continue
                p = med(data["runs"][peer])
                rows.append((what, f"{mib / l:,.0f}", f"{peer} {mib / p:,.0f}", f"{p / l:.2f}",
                             f"≥ {goal}" if goal else "reported", verdict(p / l, goal), NOT_DONE[peer],
                             f"s: Larder {runs_text(data['runs']['larder'])}; {peer} {runs_text(data['runs'][peer])}"))
    up = R.get("upload")
    if up:
        mib = up["size"] >> 20
        l = med(up["times"]["larder"])
        l_rate = up["size"] / l
        if up["times"]["nginx"] is None:
            rows.append((f"simple upload {mib} MiB, MB/s", fmt_mb(l_rate), "nginx: missing", "—", "≥ 0.8", "—",
                         NOT_DONE["nginx-put"], ""))
        else:
            n = med(up["times"]["nginx"])
            rows.append((f"simple upload {mib} MiB, MB/s", fmt_mb(l_rate), f"nginx PUT {fmt_mb(up['size'] / n)}",
                         f"{n / l:.2f}", "≥ 0.8", verdict(n / l, 0.8), NOT_DONE["nginx-put"],
                         f"s: Larder {runs_text(up['times']['larder'])}; nginx {runs_text(up['times']['nginx'])}"))
        if limits:
            cas = limits["durable-CAS"]
            rows.append((f"simple upload / durable-CAS limit", fmt_mb(l_rate),
                         f"min(dd conv=fsync {fmt_mb(limits['write+fsync'])}, sha256 {fmt_mb(limits['sha256'])})",
                         f"{l_rate / cas:.2f}", "reported", "—", "the limit: one core hashing, or the disk writing", ""))
    down = R.get("download")
    if down:
        l = med(down["times"]["larder"])
        if down["times"]["nginx"] is None:
            rows.append((f"download {SIZE_MIB} MiB, MB/s", fmt_mb(SIZE / l), "nginx: missing", "—", "≥ 0.95", "—",
                         NOT_DONE["nginx-get-big"], ""))
        else:
            n = med(down["times"]["nginx"])
            rows.append((f"download {SIZE_MIB} MiB, MB/s", fmt_mb(SIZE / l), f"nginx {fmt_mb(SIZE / n)}", f"{n / l:.2f}",
                         "≥ 0.95", verdict(n / l, 0.95), NOT_DONE["nginx-get-big"],
                         f"s: Larder {runs_text(down['times']['larder'])}; nginx {runs_text(down['times']['nginx'])}"))
        rows.append((f"Larder peak RSS, MiB, over a {SIZE_MIB} MiB upload + {REPS} downloads", f"{down['rss']:.0f}", "—",
                     "—", "≤ 64", verdict(down["rss"], 64, False), "", ""))
    conc = R.get("concurrent")
    if conc:
        rows.append((f"Larder peak RSS, MiB, {conc['clients']} concurrent clients "
                     f"({conc['upload_mib']} MiB uploads, then 4 KiB GETs)", f"{conc['rss']:.0f}", "—", "—", "≤ 256",
                     verdict(conc["rss"], 256, False), "", f"{conc['error_count']} errors, {conc['gets']:,} GETs"))
    ver = R.get("verify")
    if ver and not limits:
        rows.append(("`larder verify` MB/s / disk read MB/s", fmt_mb(ver["rate"]), "disk read: not measured (add `limits`)",
                     "—", "reported", "—", "", ""))
    if ver and limits:
        rows.append(("`larder verify` MB/s / disk read MB/s", fmt_mb(ver["rate"]),
                     f"dd iflag=direct {fmt_mb(limits['disk read'])}", f"{ver['rate'] / limits['disk read']:.2f}",
                     "reported", "—", f"verify hashes SHA-256 and MD5 on two threads: "
                     f"{ver['rate'] / min(limits['disk read'], limits['sha256'], limits['md5']):.2f} of min(disk read, "
                     f"sha256, md5 {fmt_mb(min(limits['sha256'], limits['md5']))} MB/s)", ""))
    gc = R.get("gc")
    if gc:
        rows.append((f"`larder gc` of {gc['n']:,} blobs (10 % orphans), s", f"{gc['gc']['seconds']:.1f}", "—", "—",
                     "≤ 60 s, ≤ 64 MiB", verdict(gc["gc"]["seconds"], 60, False), "",
                     f"peak RSS {gc['gc']['maxrss_kib'] / 1024:.0f} MiB; load {gc['load_before']} → {gc['load_after']}"))
    else:
        rows.append(("`larder gc` of 1,000,000 blobs", "not run", "—", "—", "≤ 60 s", "—", "",
                     "opt-in: BENCH_GC_SCALE=1 (tens of minutes)"))
    rows += images_summary_rows(R.get("images"))
    rows += s3_summary_rows(R.get("s3"))
    return rows


def images_summary_rows(im):
    """Issue 26's goals: a cold variant at >= 0.8x vipsthumbnail's rate, a cached one as fast as a small GET."""
    if not im:
        return []
    cold = im["larder_cold_variants_per_s"]
    ratio = cold / im["vipsthumbnail_per_s"]
    cached = im["cached_variant_gets_per_s"] / im["small_gets_per_s"]
    return [
        (f"cold image variants/s ({im['source']} -> 256 px WebP)", f"{cold:.2f}",
         f"vipsthumbnail {im['vipsthumbnail_per_s']:.2f}", f"{ratio:.2f}", "≥ 0.8", verdict(ratio, 0.8),
         "a process per image; no HTTP, no hashing, no catalog",
         f"ImageMagick convert -thumbnail {im['imagemagick_convert_thumbnail_per_s']:.2f}/s "
         f"({cold / im['imagemagick_convert_thumbnail_per_s']:.2f}×); server peak RSS {im['server_peak_rss_mib']} MiB"),
        ("cached-variant GETs/s / small GETs/s (one connection)", f"{im['cached_variant_gets_per_s']:,}",
         f"1 KiB small GET {im['small_gets_per_s']:,}", f"{cached:.2f}", "≥ 1.0", verdict(cached, 1.0),
         "a plain object: no image parameters to parse, no variant to find", f"n = {im['n']}"),
    ]


def round_rows(times, cpu, columns, cells):
    """Table rows `| server | round | cells(seconds, cpu) |` for each server's rounds; a server
    whose times are None is one `missing` row with `columns` cells."""
    rows = []
    for name, ts in times.items():
        if ts is None:
            rows.append(f"| {name} | — | missing |" + " |" * (columns - 1))
            continue
        for i, (t, c) in enumerate(zip(ts, cpu[name])):
            rows.append(f"| {name} | {i + 1} | {cells(t, c)} |")
    return rows


def render(date, m, load_start, load_end, elapsed, R, commands):
    L = ["# Larder benchmark results\n"]
    L.append(f"- date: {date}; commit `{m['commit']}`; whole run {elapsed:.0f} s"
             + ("; **quick mode** (BENCH_QUICK=1: small sizes, short runs)" if QUICK else ""))
    L.append(f"- machine: {m['cpu']} (SHA-NI: {m['sha_ni']}), nproc {m['nproc']}, memory {m['memory']}, "
             f"kernel {m['kernel']}")
    L.append(f"- filesystem of the data dirs and nginx's temp/root: `{m['fs']}`")
    L.append(f"- load average (1/5/15 min) at start: {load_start}; at end: {load_end}")
    L.append("- " + "; ".join(f"{k}: {v}" for k, v in m["versions"].items()))
    L.append(f"- {REPS} rounds per scenario, Larder and its peers interleaved (the order alternates); medians; "
             "every run listed. Client and servers share the same cores (loopback).")
    if NOTE:
        L.append(f"- note: {NOTE}")
    L.append("")
    L.append("## Every ratio of issue 13\n")
    L.append("Ratios are speeds, > 1 = Larder faster (for CPU and latency: peer / Larder).\n")
    L.append("| measure | Larder | peer | ratio | goal | met | what the peer does not do | runs |")
    L.append("|---|---:|---:|---:|---|---|---|---|")
    for row in summary_rows(R):
        L.append("| " + " | ".join(str(c) for c in row) + " |")
    L.append("")

    limits = R.get("limits")
    if limits:
        L.append("## Machine limits\n")
        L.append("| limit | MB/s | how |")
        L.append("|---|---:|---|")
        how = {
            "sha256": "`openssl speed -evp sha256 -bytes 1048576`, one core",
            "md5": "`openssl speed -evp md5 -bytes 1048576`, one core (Larder hashes MD5 inline only to check a client's Content-MD5)",
            "sha256+md5": "both in one thread, one after the other: 1/(1/sha256 + 1/md5)",
            "write+fsync": f"`dd if=upload.bin of=$TMP/x bs=1M conv=fsync` ({UPLOAD_MIB} MiB, from page cache)",
            "disk read": f"`dd if=upload.bin of=/dev/null bs=1M iflag=direct` ({UPLOAD_MIB} MiB)",
            "page-cache read": f"`dd if=upload.bin of=/dev/null bs=1M` (warm)",
            "durable-CAS": "min(write+fsync, sha256): hashing beside writing, the slower of the two",
        }
        for key, value in limits.items():
            L.append(f"| {key} | {fmt_mb(value)} | {how[key]} |")
        L.append("")
    gets = R.get("gets")
    if gets:
        first = gets["larder"][0]
        L.append(f"## {SMALL_BYTES} B GETs ({first['tool']}, keep-alive)\n")
        L.append("| server | round | requests/s | p50 | p99 | server CPU µs/request | problems |")
        L.append("|---|---:|---:|---:|---:|---:|---|")
        for name, runs in gets.items():
            if runs is None:
                L.append(f"| {name} | — | missing | | | | |")
                continue
            for i, g in enumerate(runs):
                L.append(f"| {name} | {i + 1} | {g['rps']:,.0f} | {g['p50']} | {g['p99']} | {g['cpu_us']:.0f} | "
                         f"{g['problems'] or 'none'} |")
        L.append("\nlarder+log: `--access-log FILE` (Larder's buffered access log to a file); nginx: `access_log off`.\n")
    up = R.get("upload")
    if up:
        mib = up["size"] >> 20
        L.append(f"## Simple upload, {mib} MiB (curl -T, interleaved)\n")
        L.append("| server | round | seconds | MB/s | server CPU s | server CPU ms/MiB |")
        L.append("|---|---:|---:|---:|---:|---:|")
        L += round_rows(up["times"], up["cpu"], 4,
                        lambda t, c: f"{t:.2f} | {fmt_mb(up['size'] / t)} | {c:.2f} | {c / mib * 1000:.2f}")
        L.append("\nLarder hashes SHA-256 of every byte (the address), writes, fsyncs and commits before answering; "
                 "nginx's WebDAV PUT writes a temp file and renames it.\n")
    tus = R.get("tus")
    if tus:
        mib = tus["size"] >> 20
        L.append(f"## tus, {mib} MiB over one keep-alive connection (a fresh server per run, interleaved)\n")
        for peer, why in tus["missing"].items():
            L.append(f"- **{peer}: missing** — {why}")
        L.append("\n| PATCH size | server | round | seconds | MiB/s | server CPU ms/MiB |")
        L.append("|---:|---|---:|---:|---:|---:|")
        for chunk, data in tus["chunks"].items():
            for name, times in data["runs"].items():
                for i, (t, c) in enumerate(zip(times, data["cpu"][name])):
                    L.append(f"| {chunk} MiB | {name} | {i + 1} | {t:.2f} | {mib / t:,.0f} | {c / mib * 1000:.2f} |")
        L.append("\nLarder's 204 means fsynced, committed in the catalog, SHA-256 computed; "
                 f"{NOT_DONE['tusd']}; {NOT_DONE['fastapi-tusd']}. fastapi-tusd's CPU is uvicorn's process.\n")
    down = R.get("download")
    if down:
        L.append(f"## Download, {SIZE_MIB} MiB (curl -o /dev/null, interleaved)\n")
        L.append("| server | round | seconds | MB/s | server CPU s |")
        L.append("|---|---:|---:|---:|---:|")
        L += round_rows(down["times"], down["cpu"], 3, lambda t, c: f"{t:.2f} | {fmt_mb(SIZE / t)} | {c:.2f}")
        L.append(f"\nLarder's peak RSS (VmHWM) over its process's life (start, one {SIZE_MIB} MiB upload, "
                 f"{REPS} downloads): {down['rss']:.0f} MiB.\n")
    pg = R.get("postgres")
    if pg:
        L.append(f"## The PostgreSQL catalog beside SQLite ({SMALL_BYTES} B objects)\n")
        if "missing" in pg:
            L.append(f"- **PostgreSQL: missing** — {pg['missing']}\n")
        else:
            L.append(f"PostgreSQL {pg['version']} from `scripts/pg.sh` on loopback, **fsync on** (a commit is durable, "
                     "as SQLite's synchronous=FULL), one schema per Larder; blobs in the data directory for both. "
                     "PostgreSQL's CPU (postmaster and backends) is reported apart from Larder's.\n")
            L.append(f"GETs: {pg['gets']['SQLite'][0]['tool']}, log off. Uploads: `wrk -t2 -c{SMALL_UPLOAD_CONNECTIONS} "
                     f"-d{WRK_SECONDS}s` POSTs, each a new name and new content; commits/s = objects in the catalog "
                     "afterwards (`larder ls`) / wrk's seconds (it can exceed requests/s by the uploads still in flight "
                     "when wrk stops, which wrk does not count). Two bodies: text (the name, then dots: libmagic's "
                     "costliest case, its text tests run over the content) and the start of a PNG (signature and "
                     "IHDR, the name, then zero bytes: detected as `image/png` from its first bytes, as an app's "
                     "avatars and photos are).\n")
            L.append("| catalog | what | round | requests/s | commits/s | p99 | Larder CPU µs/request | "
                     "PostgreSQL CPU µs/request | problems |")
            L.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
            for what, data in (("GET", pg["gets"]), ("upload", pg["uploads"]), ("upload, PNG", pg["uploads_png"])):
                for name, runs in data.items():
                    for i, r in enumerate(runs):
                        commits = f"{r['cps']:,.0f}" if "cps" in r else ""
                        pg_cpu = f"{r['pg_cpu_us']:.0f}" if r.get("pg_cpu_us") is not None else "—"
                        L.append(f"| {name} | {what} | {i + 1} | {r['rps']:,.0f} | {commits} | {r['p99']} | "
                                 f"{r['cpu_us']:.0f} | {pg_cpu} | {r['problems'] or 'none'} |")
            L.append("")
    L += pg_writes_section(R.get("pg-writes"))
    conc = R.get("concurrent")
    if conc:
        L.append(f"## {conc['clients']} concurrent clients\n")
        L.append(f"Each client opens its connection, waits for all others, uploads {conc['upload_mib']} MiB "
                 f"(all bodies in flight at once), waits for all uploads, then GETs {SMALL_BYTES} B in a loop for "
                 f"{WRK_SECONDS} s. Larder's peak RSS: **{conc['rss']:.0f} MiB**; {conc['gets']:,} GETs; "
                 f"{conc['error_count']} errors{': ' + '; '.join(conc['errors']) if conc['errors'] else ''}; "
                 f"{conc['seconds']:.1f} s.\n")
    ver = R.get("verify")
    if ver:
        L.append("## `larder verify`\n")
        L.append(f"The download scenario's store ({ver['blobs']} blobs, {ver['bytes'] / MB:,.0f} MB hashed), its "
                 f"blob files evicted from the page cache first: {ver['seconds']:.2f} s, "
                 f"{fmt_mb(ver['rate'])} MB/s, exit {ver['exit']}, {ver['findings']} findings.\n")
    cml = R.get("cml")
    if cml:
        L.append("## Connection memory limit trade-off (`--connection-memory-limit`)\n")
        L.append("| limit | upload s (median) | server CPU s | bytes per write(2) | small GETs/s | p99 | CPU µs/GET | upload runs |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---|")
        for row in cml:
            L.append(f"| {row['limit']} | {row['upload']:.2f} | {row['cpu']:.2f} | {row['write_size'] / 1024:,.1f} KiB | "
                     f"{row['rps']:,.0f} | {row['p99']} | {row['cpu_us']:.0f} | {runs_text(row['uploads'])} |")
        L.append("")
    gc = R.get("gc")
    if gc:
        L.append(f"## gc-scale ({gc['n']:,} blobs, 10 % orphans)\n")
        L.append(f"generation: {gc['generate_s']:.0f} s; load average before {gc['load_before']}, after {gc['load_after']}\n")
        L.append("| step | exit | seconds | peak RSS (MiB) |")
        L.append("|---|---:|---:|---:|")
        for label in ("dry run", "gc"):
            g = gc[label]
            L.append(f"| `larder gc {'--dry-run ' if label == 'dry run' else ''}--grace 1h --json` | {g['exit']} | "
                     f"{g['seconds']:.1f} | {g['maxrss_kib'] / 1024:.0f} |")
        L.append(f"\n```\n{gc['gc']['report']}\n```\n")
    L += s3_section(R.get("s3"))
    L.append("## Reproduce\n")
    L.append("```sh")
    L.append("make bench                     # = swift build -c release --product larder && Benchmarks/run.sh")
    L.append("BENCH_QUICK=1 Benchmarks/run.sh   # small sizes, short runs: a check in a few minutes")
    L.append("BENCH_ONLY=gets Benchmarks/run.sh # one scenario (limits gets upload tus download concurrent verify postgres pg-writes images cml gc s3 s3-tus)")
    L.append("```\n")
    L.append("Servers as the script starts them ($TMP is the run's temp dir):\n")
    L.append("```sh")
    for c in dict.fromkeys(commands):
        L.append(c)
    L.append(f"{TUSD_BIN} -host 127.0.0.1 -port 0 -upload-dir $TMP/store")
    L.append("python -m uvicorn tusapp:app --port P   # FASTAPI_APP in Benchmarks/lib/larder_bench/peers/fastapi_tusd.py")
    L.append(f"wrk -t{WRK_THREADS} -c{WRK_CONNECTIONS} -d{WRK_SECONDS}s --latency URL")
    L.append("curl -sS -o /dev/null -H 'Expect:' -X POST|PUT -T upload.bin URL")
    L.append("```")
    return "\n".join(L) + "\n"


def pg_writes_summary_rows(w):
    """The write-scaling ratios on PostgreSQL: 16 clients / 1 on one node (goal ≥ 4), two nodes / one."""
    if not w:
        return []
    if "missing" in w:
        return [(f"{SMALL_BYTES // 1024} KiB uploads, 16 / 1 clients, PostgreSQL", "missing", "—", "—", "≥ 4", "—", "",
                 w["missing"])]
    runs = w["runs"]
    one, sixteen = med([r["rps"] for r in runs[("one node", 1, 1)]]), med([r["rps"] for r in runs[("one node", 1, 16)]])
    two16 = med([r["rps"] for r in runs[("two nodes", 2, 16)]])
    base1, base16 = (med([r["rps"] for r in runs[("one node, 1 writer", 1, c)]]) for c in (1, 16))
    return [
        (f"{SMALL_BYTES // 1024} KiB uploads/s, PostgreSQL fsync on, one node: 16 clients vs 1", f"{sixteen:,.0f}",
         f"1 client {one:,.0f}", f"{sixteen / one:.2f}", "≥ 4", verdict(sixteen / one, 4), "",
         f"16: {runs_text([r['rps'] for r in runs[('one node', 1, 16)]], '{:,.0f}')}; 1: "
         f"{runs_text([r['rps'] for r in runs[('one node', 1, 1)]], '{:,.0f}')}"),
        (f"the same with one writer connection (--catalog-writers 1, writes in turn): 16 clients vs 1",
         f"{base16:,.0f}", f"1 client {base1:,.0f}", f"{base16 / base1:.2f}", "baseline", "—", "",
         f"16 clients, 8 writers vs 1: {sixteen / base16:.2f}×"),
        (f"{SMALL_BYTES // 1024} KiB uploads/s, 16 clients: two nodes vs one", f"{two16:,.0f}", f"one node {sixteen:,.0f}",
         f"{two16 / sixteen:.2f}", "reported", "—", "two processes on one machine share its two cores",
         ""),
    ] + [
        (f"catalog lock held per {SMALL_BYTES // 1024} KiB upload, ms, one node, {clients} client(s)",
         f"p50 {hold('held_p50'):.2f}, p99 {hold('held_p99'):.2f}", "—", "—", "no network round trip inside", "—",
         "grant of the keyed locks to COMMIT's return (includes the blob's link and directory fsync, and the commit)",
         f"p50 {runs_text([r['held_p50'] * 1e3 for r in runs[('one node', 1, clients)] if r['held_p50'] is not None], '{:.2f}')}")
        for clients in (1, 16)
        for hold in [lambda key, c=clients: med([r[key] * 1e3 for r in runs[("one node", 1, c)] if r[key] is not None]
                                                 or [float("nan")])]
    ]


def pg_writes_section(w):
    if not w or "missing" in w:
        return []
    L = [f"## Write scaling on the PostgreSQL catalog ({SMALL_BYTES} B uploads, fsync on)\n"]
    L.append(f"PostgreSQL {w['version']}, fsync on; `larder serve --threads {w['threads']}` (default "
             "`--catalog-writers 8`), blobs in the data directory; two nodes are two processes on one catalog and "
             "one data directory. wrk POSTs, each a new name and new content (PNG-headed bodies), connections split "
             f"evenly over the nodes, {WRK_SECONDS} s per run. Lock held: from the grant of a keyed write's locks to "
             "its COMMIT's return, from `/metrics` (`larder_catalog_lock_held_seconds`, interpolated in its buckets). "
             f"This disk: **{w['fsync']:,.0f} fdatasync/s** (8 KiB rewrites, one at a time).\n")
    L.append("| nodes | clients | round | uploads/s | lock held p50 ms | p99 ms | lock wait p50 ms | p99 ms | problems |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    ms = lambda v: f"{v * 1e3:.2f}" if v is not None else "—"
    for (label, _, clients), rs in w["runs"].items():
        for i, r in enumerate(rs):
            L.append(f"| {label} | {clients} | {i + 1} | {r['rps']:,.0f} | {ms(r['held_p50'])} | {ms(r['held_p99'])} | "
                     f"{ms(r['wait_p50'])} | {ms(r['wait_p99'])} | {r['problems'] or 'none'} |")
    L.append("")
    return L
