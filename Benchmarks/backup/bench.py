#!/usr/bin/env python3
"""larder backup vs rsync -a, same data directory, same disk (see run.sh for the knobs).

1. a store: BACKUP_BENCH_SMALL small blobs written in Larder's layout by
   Benchmarks/gc-scale/generate.py, plus BACKUP_BENCH_LARGE_MIB MiB in 64 MiB objects (larder put);
2. full: `rsync -a DATA R` and `larder backup B`, each also with the flush that makes it durable
   (rsync's copy followed by `sync -f`, since rsync itself fsyncs nothing; larder's own flush is
   inside its time), caches warm for both (each reads the same data directory just read);
3. incremental: 1 % new content (as many small objects and 1 % of the large bytes, larder put),
   then `larder backup B` again, against the full backup's time;
4. restore: `larder restore B --data NEW`, and `larder verify` of the result.
Each step also reports its CPU seconds (user + system of the processes it ran, getrusage), which
a loaded machine disturbs less than the wall clock. With LARDER_BIN_B set, the full and the
incremental backups run with that binary too, into a DEST of its own, interleaved with
LARDER_BIN's on the same store (an A/B in one run).
Prints a Markdown table and appends it to Benchmarks/results/backup.md.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LARDER = os.environ["LARDER_BIN"]
LARDER_B = os.environ.get("LARDER_BIN_B") or None
SMALL = int(os.environ.get("BACKUP_BENCH_SMALL", "100000"))
LARGE_MIB = int(os.environ.get("BACKUP_BENCH_LARGE_MIB", "2048"))
CHUNK_MIB = 64


CPU = {"last": 0.0}


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(*args, **kwargs):
    """Runs a command; returns its wall seconds and stdout, and leaves its CPU seconds in CPU["last"]."""
    started = time.monotonic()
    cpu = children_cpu()
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    elapsed = time.monotonic() - started
    CPU["last"] = children_cpu() - cpu
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return elapsed, result.stdout


def larder(*args, binary=None):
    return run(binary or LARDER, *args)


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout.split()[0])


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def write_random(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n


def main():
    base = os.environ.get("BACKUP_BENCH_DIR") or tempfile.mkdtemp(prefix="larder-backup-bench-", dir="/var/tmp")
    os.makedirs(base, exist_ok=True)
    data, dest, mirror, restored = (os.path.join(base, n) for n in ("data", "dest", "rsync", "restored"))
    scratch = os.path.join(base, "scratch")
    try:
        print(f"backup bench in {base}: {SMALL} small blobs + {LARGE_MIB} MiB large; load {loadavg()}", flush=True)
        run(sys.executable, os.path.join(ROOT, "Benchmarks/gc-scale/generate.py"), data, str(SMALL))
        os.makedirs(scratch)
        large = os.path.join(scratch, "large")
        os.makedirs(large)
        for i in range(max(1, LARGE_MIB // CHUNK_MIB) if LARGE_MIB else 0):
            write_random(os.path.join(large, f"l{i}"), min(CHUNK_MIB, LARGE_MIB) << 20)
        if LARGE_MIB:
            larder("put", large, "bench/large/", "--data", data)
        shutil.rmtree(large)
        run("sync")
        size = du(data)
        print(f"store: {size / 2**20:.0f} MiB in {data}", flush=True)

        rows = []
        # Warm: both read a data directory that was just written (and read once by du).
        t_rsync, _ = run("rsync", "-a", data + "/", mirror + "/")
        c_rsync = CPU["last"]
        t_sync, _ = run("sync", "-f", mirror)
        binaries = [(LARDER, dest, "")] + ([(LARDER_B, dest + "-b", " [B]")] if LARDER_B else [])
        rows.append(("rsync -a (page cache only)", t_rsync, c_rsync, ""))
        rows.append(("rsync -a + sync -f (durable)", t_rsync + t_sync, c_rsync + CPU["last"], ""))
        full = {}
        for binary, target, tag in binaries:
            t_full, out = larder("backup", target, "--data", data, binary=binary)
            full[binary] = (t_full, CPU["last"])
            print(out.strip(), flush=True)
            rows.append((f"larder backup, full (durable){tag}", t_full, CPU["last"],
                         f"{(t_rsync + t_sync) / t_full:.2f}x rsync+sync, {t_rsync / t_full:.2f}x rsync"))

        inc = os.path.join(scratch, "inc")
        os.makedirs(inc)
        for i in range(max(1, SMALL // 100)):
            with open(os.path.join(inc, f"s{i}"), "wb") as f:
                f.write(b"larder backup bench new blob %d\n" % i)
        if LARGE_MIB:
            write_random(os.path.join(inc, "large"), max(1, LARGE_MIB // 100) << 20)
        larder("put", inc, "bench/inc/", "--data", data)
        for binary, target, tag in binaries:
            t_inc, out = larder("backup", target, "--data", data, binary=binary)
            print(out.strip(), flush=True)
            t_full, c_full = full[binary]
            rows.append((f"larder backup, incremental after 1 %{tag}", t_inc, CPU["last"],
                         f"{100 * t_inc / t_full:.1f} % of the full's time, {100 * CPU['last'] / c_full:.1f} % of its CPU"))
        t_rsync2, _ = run("rsync", "-a", data + "/", mirror + "/")
        rows.append(("rsync -a, incremental after 1 %", t_rsync2, CPU["last"], ""))

        t_restore, out = larder("restore", dest, "--data", restored)
        print(out.strip(), flush=True)
        rows.append(("larder restore (durable)", t_restore, CPU["last"], ""))
        t_verify, _ = larder("backup", "verify", dest)
        rows.append(("larder backup verify", t_verify, CPU["last"], ""))

        load = loadavg()
        table = [f"\n## backup bench {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
                 f"{SMALL} small blobs + {LARGE_MIB} MiB in {CHUNK_MIB} MiB blobs ({size / 2**20:.0f} MiB); "
                 f"binary {LARDER}{f'; [B] {LARDER_B}' if LARDER_B else ''}; load average at the end "
                 f"{' '.join(load)} on {os.cpu_count()} cores\n",
                 "| step | seconds | CPU seconds | |", "|---|---|---|---|"]
        table += [f"| {name} | {t:.2f} | {cpu:.2f} | {note} |" for name, t, cpu, note in rows]
        text = "\n".join(table) + "\n"
        print(text)
        results = os.path.join(ROOT, "Benchmarks/results")
        os.makedirs(results, exist_ok=True)
        with open(os.path.join(results, "backup.md"), "a") as f:
            f.write(text)
    finally:
        if not os.environ.get("BACKUP_BENCH_KEEP"):
            subprocess.run(["chmod", "-R", "u+w", base], capture_output=True)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
