#!/usr/bin/env python3
"""Reads magic_bench's TSV (stdin or a file) and prints, for each configuration, the CPU per call
against the first configuration (the baseline) and every file whose MIME type differs from it.

    summarize.py results.tsv [--table FILE...]   # --table: also a per-file table of those files
"""
import statistics
import sys

args = sys.argv[1:]
table_files = []
if "--table" in args:
    i = args.index("--table")
    table_files = args[i + 1:]
    args = args[:i]
rows = [line.rstrip("\n").split("\t") for line in (open(args[0]) if args else sys.stdin)]
rows = [r for r in rows if r[0] != "config"]
configs = list(dict.fromkeys(r[0] for r in rows))
data = {c: {} for c in configs}
for config, name, n, us, mime, *_ in rows:
    data[config][name] = (int(n), float(us), mime)
base = configs[0]
files = sorted(data[base])
known = [f for f in files if data[base][f][2] != "application/octet-stream"]
unknown = [f for f in files if data[base][f][2] == "application/octet-stream"]


def total(config, names):
    return sum(data[config][f][1] for f in names if f in data[config])


print(f"baseline: {base}; {len(files)} files ({len(known)} recognised, {len(unknown)} octet-stream)")
print(f"{'configuration':55} {'sum µs':>8} {'ratio':>6} {'recog.':>7} {'octet':>7} {'median':>7}  MIME differences")
for c in configs:
    diffs = [f"{f}: {data[base][f][2]} -> {data[c][f][2]}" for f in files
             if f in data[c] and data[c][f][2] != data[base][f][2]]
    ratio = total(c, files) / total(base, files)
    med = statistics.median(data[c][f][1] for f in files if f in data[c])
    print(f"{c:55} {total(c, files):8.0f} {ratio:6.2f} {total(c, known):7.0f} {total(c, unknown):7.0f} {med:7.1f}  "
          + ("identical" if not diffs else f"{len(diffs)} differ: " + "; ".join(diffs)))

if table_files:
    cols = [c for c in configs if c in table_files or c == base] if table_files != ["all"] else configs
    print()
    print("| file | bytes | MIME | " + " | ".join(f"µs {c}" for c in cols) + " |")
    print("|---|---:|---|" + "---:|" * len(cols))
    for f in files:
        n, _, mime = data[base][f]
        cells = []
        for c in cols:
            _, us, m = data[c][f]
            cells.append(f"{us:.0f}" + ("" if m == mime else f" ({m})"))
        print(f"| {f} | {n} | {mime} | " + " | ".join(cells) + " |")
