"""`images`: image variants (issue 26), Benchmarks/images/bench.py run as it is and its JSON kept:
a 12 MP JPEG -> 256 px WebP, cold variants/s against vipsthumbnail (the limit) and ImageMagick's
convert -thumbnail, cached-variant GETs against small GETs, and the server's peak RSS."""
import json
import os
import subprocess
import sys

from ..config import LARDER_BIN, QUICK, env_int
from ..processes import BenchError, log

IMAGES_N = env_int("BENCH_IMAGES_N", 6 if QUICK else 12)
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "images", "bench.py")


def scenario_images():
    missing = [t for t in ("vips", "vipsthumbnail") if subprocess.run(["which", t], capture_output=True).returncode]
    if missing:
        log(f"images: {missing} missing (scripts/deps.sh installs libvips-tools); skipped")
        return None
    log(f"images: {IMAGES_N} sources, 4000x3000 JPEG -> 256 px WebP")
    done = subprocess.run([sys.executable, os.path.abspath(SCRIPT), LARDER_BIN, str(IMAGES_N)],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise BenchError(f"images/bench.py failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout)
