#!/usr/bin/env python3
"""Image variants: a 12 MP JPEG -> 256 px WebP.

Larder's cold variants/s (each request a new source, so each renders) against libvips' own CLI
(`vipsthumbnail`, the limit) and ImageMagick's `convert -thumbnail` (what people script), both
one process per image as they are used; then cached-variant GETs against small GETs (1 KiB
objects) on one keep-alive connection, in five alternating rounds of 1 000 (the medians); and the server's peak RSS (VmHWM) after the renders.

    Benchmarks/images/bench.py [LARDER_BIN] [N]
"""
import http.client, json, os, shutil, subprocess, sys, tempfile, time

larder = sys.argv[1] if len(sys.argv) > 1 else ".build/release/larder"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
work = tempfile.mkdtemp(prefix="larder-img-bench-")
convert = "/usr/bin/convert-im6.q16" if os.path.exists("/usr/bin/convert-im6.q16") else "/usr/bin/convert"

# n distinct 12 MP JPEGs (4000x3000, a noise texture so the JPEG is photo-sized).
sources = []
base = os.path.join(work, "base.jpg")
subprocess.run(["vips", "gaussnoise", os.path.join(work, "n.v"), "4000", "3000"], check=True)
subprocess.run(["vips", "colourspace", os.path.join(work, "n.v"), base + "[Q=90]", "srgb"], check=True)
for i in range(n):
    p = os.path.join(work, f"s{i}.jpg")
    subprocess.run(["vips", "linear", base, p + "[Q=90]", "1", str(i % 50)], check=True)
    sources.append(p)
size = os.path.getsize(sources[0])

def rate(cmd):
    t = time.perf_counter()
    for i, s in enumerate(sources):
        subprocess.run(cmd(s, os.path.join(work, f"o{i}.webp")), check=True, stderr=subprocess.DEVNULL)
    return n / (time.perf_counter() - t)

vips_rate = rate(lambda s, o: ["vipsthumbnail", s, "-s", "256", "-o", o + "[Q=80]"])
im_rate = rate(lambda s, o: [convert, s, "-thumbnail", "256x256", "-quality", "80", o])

data = os.path.join(work, "data")
srv = subprocess.Popen([larder, "serve", "--data", data, "--allow-all", "--port", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
line = srv.stdout.readline()
port = int(line.strip().rsplit(":", 1)[1])
c = http.client.HTTPConnection("127.0.0.1", port)
def req(method, path, body=None, headers={}):
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    return r.status, r.read()
for i, s in enumerate(sources):
    st, _ = req("POST", f"/v0/b/b/o?name=s{i}.jpg", open(s, "rb").read(), {"Content-Type": "image/jpeg"})
    assert st == 200, st
req("POST", "/v0/b/b/o?name=small", os.urandom(1024))
t = time.perf_counter()
for i in range(n):
    st, body = req("GET", f"/v0/b/b/o/s{i}.jpg?alt=media&width=256&format=webp")
    assert st == 200, (st, body[:200])
cold = n / (time.perf_counter() - t)
rss = next(int(l.split()[1]) for l in open(f"/proc/{srv.pid}/status") if l.startswith("VmHWM"))

def gets(path, count=3000):
    t = time.perf_counter()
    for _ in range(count):
        st, _ = req("GET", path)
        assert st == 200
    return count / (time.perf_counter() - t)
# Alternating rounds, the median of each: one round after the other favoured whichever ran
# second (a warmer process), by as much as the difference being measured.
rounds = {"cached": [], "small": []}
for _ in range(5):
    rounds["cached"].append(gets("/v0/b/b/o/s0.jpg?alt=media&width=256&format=webp", 1000))
    rounds["small"].append(gets("/v0/b/b/o/small?alt=media", 1000))
cached, small = (sorted(rounds[k])[2] for k in ("cached", "small"))
srv.terminate(); srv.wait()
shutil.rmtree(work)
print(json.dumps({
    "source": f"4000x3000 JPEG, {size} bytes", "n": n,
    "larder_cold_variants_per_s": round(cold, 2), "vipsthumbnail_per_s": round(vips_rate, 2),
    "imagemagick_convert_thumbnail_per_s": round(im_rate, 2),
    "larder_vs_vipsthumbnail": round(cold / vips_rate, 2),
    "cached_variant_gets_per_s": round(cached), "small_gets_per_s": round(small),
    "cached_vs_small": round(cached / small, 2),
    "server_peak_rss_mib": round(rss / 1024, 1)}, indent=1))
