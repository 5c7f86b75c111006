#!/usr/bin/env python3
"""Generates the libmagic corpus: one real file of each kind app users upload, made here with
real encoders (Pillow, pillow-heif, openpyxl, python-docx from PyPI; ffmpeg and gcc from Debian),
never downloaded. Deterministic where the encoders allow (seeded noise, fixed timestamps).

    make_corpus.py OUTDIR          # Benchmarks/magic/run.sh sets up the tools and calls this

A tool that is missing skips its files with a note on stderr (the benchmark then compares what
exists). Total size: about 3 MB.
"""
import gzip
import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import zipfile

OUT = sys.argv[1] if len(sys.argv) > 1 else "corpus"
os.makedirs(OUT, exist_ok=True)
rng = random.Random(13)


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def skip(name, why):
    print(f"make_corpus: skipped {name}: {why}", file=sys.stderr)


# --- images (Pillow) --------------------------------------------------------------------------
try:
    from PIL import Image, ImageDraw

    def photo(w, h):
        """A photo-like picture: gradients, shapes and noise (so encoders do real work)."""
        img = Image.new("RGB", (w, h))
        px = img.load()
        for y in range(h):
            for x in range(w):
                n = rng.randint(-12, 12)
                px[x, y] = ((x * 255 // w + n) % 256, (y * 255 // h + n) % 256, ((x + y) * 128 // (w + h) + n) % 256)
        d = ImageDraw.Draw(img)
        d.ellipse((w // 4, h // 4, 3 * w // 4, 3 * h // 4), outline=(250, 240, 10), width=4)
        d.text((10, 10), "Larder", fill=(255, 255, 255))
        return img

    big = photo(640, 480)
    small = photo(64, 64)

    def save(name, img, fmt, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        write(name, buf.getvalue())

    save("photo.png", big, "PNG")
    save("avatar.png", small, "PNG")
    save("photo.jpg", big, "JPEG", quality=85)
    exif = Image.Exif()
    exif[0x010F] = "LarderCam"  # Make
    exif[0x0110] = "Model 1"  # Model
    save("photo-exif.jpg", big, "JPEG", quality=80, exif=exif.tobytes())
    save("avatar.jpg", small, "JPEG", quality=90)
    frames = [photo(96, 96).convert("P", palette=Image.ADAPTIVE) for _ in range(4)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    write("anim.gif", buf.getvalue())
    save("photo.webp", big, "WEBP", quality=80)
    save("photo-lossless.webp", small, "WEBP", lossless=True)
    save("photo.tiff", small, "TIFF")
    save("photo.bmp", small, "BMP")
    save("favicon.ico", small, "ICO")
    save("scan.pdf", big, "PDF", resolution=72.0)
    try:
        import pillow_heif

        heif = pillow_heif.from_pillow(big)
        buf = io.BytesIO()
        heif.save(buf, quality=60)
        write("photo.heic", buf.getvalue())
    except Exception as e:  # noqa: BLE001 - a missing optional encoder only skips the file
        skip("photo.heic", e)
    try:
        save("photo.avif", big, "AVIF", quality=60)  # Pillow >= 11.2 writes AVIF itself
    except Exception as e:  # noqa: BLE001
        skip("photo.avif", e)
except ImportError as e:
    skip("images", e)

# --- documents --------------------------------------------------------------------------------
# A text PDF written by hand (what many generators emit), with a correct xref table.
objs = [
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
    None,
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
]
stream = b"BT /F1 24 Tf 72 720 Td (Invoice 2026-11) Tj ET"
objs[3] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
pdf = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
offsets = []
for i, body in enumerate(objs, 1):
    offsets.append(len(pdf))
    pdf += b"%d 0 obj\n%s\nendobj\n" % (i, body)
xref = len(pdf)
pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
for off in offsets:
    pdf += b"%010d 00000 n \n" % off
pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
write("invoice.pdf", bytes(pdf))

try:
    import docx

    d = docx.Document()
    d.add_heading("Meeting notes", 1)
    for i in range(20):
        d.add_paragraph(f"Point {i}: the quick brown fox jumps over the lazy dog. Zoë’s café.")
    buf = io.BytesIO()
    d.save(buf)
    write("notes.docx", buf.getvalue())
except ImportError as e:
    skip("notes.docx", e)
try:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["date", "item", "amount"])
    for i in range(200):
        ws.append([f"2026-11-{i % 28 + 1:02d}", f"item {i}", rng.randint(1, 10000) / 100])
    buf = io.BytesIO()
    wb.save(buf)
    write("budget.xlsx", buf.getvalue())
except ImportError as e:
    skip("budget.xlsx", e)

# --- text -------------------------------------------------------------------------------------
words = "the quick brown fox jumps over a lazy dog while larder stores every blob safely".split()
sentences = [" ".join(rng.choice(words) for _ in range(12)).capitalize() + "." for _ in range(200)]
write("notes.txt", "\n".join(sentences).encode() + b"\n")
write("notes-utf8.txt", ("Zoë’s café — naïve résumé, 東京, Привет, emoji 🙂.\n" * 40).encode())
write("short.txt", b"hi\n")
name = "s1-23-1790000000"  # Benchmarks/lib/bench.py's 4 KiB upload body: its name, then dots
write("wrk-upload-4k.txt", (name + "." * (4096 - len(name))).encode())
write("one-word.txt", b"hello")
write("readme.md", ("# Larder\n\nA *blob* store.\n\n- one\n- two\n\n```swift\nlet x = 1\n```\n" * 10).encode())
records = [{"id": i, "name": f"user{i}", "tags": ["a", "b"], "score": rng.random(), "ok": i % 2 == 0}
           for i in range(100)]
write("data.json", json.dumps(records, indent=2).encode())
write("small.json", b'{"name":"avatar","size":4096}')
write("data.csv", ("id,name,score,date\n" + "".join(
    f"{i},user{i},{rng.randint(0, 999)},2026-11-{i % 28 + 1:02d}\n" for i in range(300))).encode())
write("page.html", ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Larder</title></head>\n<body>\n"
                    + "".join(f"<p class=\"row\">{s}</p>\n" for s in sentences[:60]) + "</body></html>\n").encode())
write("fragment.html", b"<div><p>Hello <b>world</b></p></div>\n")
write("image.svg", ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100\" height=\"100\">\n"
                    + "".join(f"<circle cx=\"{rng.randint(0, 100)}\" cy=\"{rng.randint(0, 100)}\" r=\"5\" fill=\"#f80\"/>\n" for _ in range(50))
                    + "</svg>\n").encode())
write("icon-noxml.svg", b"<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 10 10\"><rect width=\"10\" height=\"10\"/></svg>\n")
write("feed.xml", ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rss version=\"2.0\"><channel><title>Larder</title>\n"
                   + "".join(f"<item><title>{s}</title></item>\n" for s in sentences[:40]) + "</channel></rss>\n").encode())
write("app.js", ("'use strict';\nconst larder = require('larder');\nfunction upload(file) {\n  return larder.put(file);\n}\n" * 20).encode())
write("script.py", ("#!/usr/bin/env python3\nimport sys\n\ndef main():\n    print(sys.argv)\n\n" * 10).encode())
write("script.sh", b"#!/bin/sh\nset -e\necho hello\n" * 10)
write("notes-utf16.txt", ("Zoë’s notes\r\n" * 50).encode("utf-16"))
# Larger text, where libmagic's limits (head length, encoding_max, regex_max) come into play.
write("server.log", "".join(
    f"2026-11-30T22:{i // 60 % 60:02d}:{i % 60:02d}Z INFO larder: PUT /v0/b/app/o?name=u{i}.jpg 200 {rng.randint(100, 99999)} bytes\n"
    for i in range(500)).encode())
write("big.json", json.dumps([dict(r, note=rng.choice(sentences)) for r in records * 2], indent=1).encode())  # ~45 KB
write("huge.json", json.dumps([dict(r, note=rng.choice(sentences)) for r in records * 5]).encode())  # > 64 KiB
write("big.csv", ("id,name,score,date,comment\n" + "".join(
    f"{i},user{i},{rng.randint(0, 999)},2026-11-{i % 28 + 1:02d},\"{rng.choice(sentences)}\"\n" for i in range(600))).encode())
license_header = "/*\n" + "".join(f" * {s}\n" for s in sentences[:40]) + " */\n"  # ~3.5 KB before the code
write("main.c", (license_header + "#include <stdio.h>\n#include <stdlib.h>\n\n"
                 + "".join(f"static int f{i}(int x) {{ return x * {i} + 1; }}\n" for i in range(400))
                 + "int main(void) { printf(\"%d\\n\", f1(2)); return 0; }\n").encode())
write("big.html", ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Report</title></head><body>\n"
                   + "".join(f"<tr><td>{i}</td><td>{s}</td></tr>\n" for i, s in enumerate(sentences * 2))
                   + "</body></html>\n").encode())
write("notes-80k.txt", ("\n".join(sentences) * 7)[:80000].encode())
# Text for 20 KiB, then binary: where a smaller encoding_max would change the verdict.
write("text-then-binary.bin", ("\n".join(sentences) * 2).encode()[:20480] + rng.randbytes(20480))

# --- audio and video (ffmpeg) -----------------------------------------------------------------
if shutil.which("ffmpeg"):
    def ff(name, *args):
        cmd = ["ffmpeg", "-v", "error", "-y", *args, "-map_metadata", "-1", "-fflags", "+bitexact",
               os.path.join(OUT, name)]
        if subprocess.run(cmd).returncode != 0:
            skip(name, "ffmpeg failed")

    tone = ["-f", "lavfi", "-i", "sine=frequency=440:duration=2:sample_rate=44100"]
    clip = ["-f", "lavfi", "-i", "testsrc=duration=1:size=320x240:rate=15"]
    ff("voice.mp3", *tone, "-c:a", "libmp3lame", "-b:a", "64k")
    ff("voice.wav", *tone, "-t", "0.5", "-c:a", "pcm_s16le")
    ff("voice.ogg", *tone, "-c:a", "libvorbis", "-q:a", "2")
    ff("voice.opus", *tone, "-c:a", "libopus", "-b:a", "32k")
    ff("voice.m4a", *tone, "-c:a", "aac", "-b:a", "64k")
    ff("voice.flac", *tone, "-t", "0.5", "-c:a", "flac")
    ff("clip.mp4", *clip, "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p")
    ff("clip.mov", *clip, "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p")
    ff("clip.webm", *clip, "-c:v", "libvpx", "-b:v", "200k")
else:
    skip("audio/video", "no ffmpeg")

# --- archives and binaries --------------------------------------------------------------------
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    for i in range(5):
        z.writestr(zipfile.ZipInfo(f"photos/{i}.txt", (2026, 11, 30, 0, 0, 0)), sentences[i] * 20)
write("archive.zip", buf.getvalue())


def tar_bytes():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(5):
            data = (sentences[i] * 30).encode()
            info = tarfile.TarInfo(f"notes/{i}.txt")
            info.size, info.mtime = len(data), 1_790_000_000
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


write("backup.tar", tar_bytes())
write("backup.tar.gz", gzip.compress(tar_bytes(), mtime=0))
write("log.gz", gzip.compress("\n".join(sentences).encode(), mtime=0))
with tempfile.TemporaryDirectory() as tmp:
    db = os.path.join(tmp, "app.sqlite")
    c = sqlite3.connect(db)
    c.execute("create table notes (id integer primary key, body text)")
    c.executemany("insert into notes (body) values (?)", [(s,) for s in sentences])
    c.commit()
    c.close()
    with open(db, "rb") as f:
        write("app.sqlite", f.read())
    if shutil.which("cc"):
        src = os.path.join(tmp, "hello.c")
        with open(src, "w") as f:
            f.write("#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n")
        exe = os.path.join(tmp, "hello")
        if subprocess.run(["cc", "-O2", "-s", "-o", exe, src]).returncode == 0:
            with open(exe, "rb") as f:
                write("hello.elf", f.read())
    else:
        skip("hello.elf", "no cc")

# --- what apps upload that is no famous format ------------------------------------------------
write("random-4k.bin", rng.randbytes(4096))
write("random-64k.bin", rng.randbytes(65536))
write("random-1m.bin", rng.randbytes(1 << 20))
write("zeros-4k.bin", bytes(4096))
write("one-byte.bin", b"\x00")
# An app's own binary record format: a small header, then packed integers and floats.
import struct  # noqa: E402

rec = b"LRDR" + struct.pack("<HH", 1, 0) + b"".join(
    struct.pack("<Iqd", i, rng.randint(-2**40, 2**40), rng.random()) for i in range(200))
write("app-record.bin", rec)
write("encrypted-64k.bin", rng.randbytes(65536))  # what an end-to-end encrypted upload looks like

total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
print(f"make_corpus: {len(os.listdir(OUT))} files, {total} bytes in {OUT}", file=sys.stderr)
