#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/**/*.md points at an existing file and,
with a #fragment, at a heading of that Markdown file (GitHub's slugs). Exit 1 naming each broken one.

    scripts/check-doc-links.py [ROOT]   (default: the current directory)"""
import os, re, sys, urllib.parse

root = sys.argv[1] if len(sys.argv) > 1 else "."
files = [os.path.join(root, "README.md")]
for d, _, names in os.walk(os.path.join(root, "docs")):
    files += [os.path.join(d, n) for n in names if n.endswith(".md")]

def slugs(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = m.group(1).lower()
        s = re.sub(r"[^\w\- ]", "", s)
        s = s.replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out

bad = 0
count = 0
for f in files:
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # no links inside code blocks
    text = re.sub(r"`[^`\n]*`", "", text)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        count += 1
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(f), urllib.parse.unquote(path))) if path else f
        if not os.path.exists(dest):
            print(f"{os.path.relpath(f, root)}: {target}: no such file"); bad += 1; continue
        if frag and dest.endswith(".md") and frag not in slugs(dest):
            print(f"{os.path.relpath(f, root)}: {target}: no heading #{frag}"); bad += 1
print(f"{count} relative links checked, {bad} broken")
sys.exit(1 if bad else 0)
