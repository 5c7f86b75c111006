"""Image variants in a real browser: an `<img>` whose `src` is a Firebase download URL (with its
download token) plus `&width=64` renders the thumbnail in headless Chromium, which asks with its
own `Accept` (AVIF first), so the variant it decodes is the negotiated one."""

import pathlib
import shutil
import subprocess
import urllib.parse

import pytest
import requests

from larder_server import LarderServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VIPS = shutil.which("vips")


def test_img_with_a_download_url_and_width_renders_the_thumbnail(tmp_path):
    if not CHROMIUM:
        pytest.skip("SKIPPED: `chromium` is not installed (scripts/deps.sh installs it)")
    if not VIPS:
        pytest.skip("SKIPPED: the `vips` CLI is not installed (scripts/deps.sh installs libvips-tools)")
    source = tmp_path / "photo.jpg"
    subprocess.run([VIPS, "black", str(tmp_path / "b.v"), "640", "480", "--bands", "3"], check=True)
    subprocess.run([VIPS, "linear", str(tmp_path / "b.v"), str(source), "1", "200"], check=True)
    server = LarderServer(tmp_path / "data")
    try:
        r = requests.post(f"{server.url}/v0/b/app/o?name=photos%2Fp.jpg", data=source.read_bytes(),
                          headers={"Content-Type": "image/jpeg"})
        assert r.status_code == 200, r.text
        token = r.json()["downloadTokens"]
        src = f"{server.url}/v0/b/app/o/{urllib.parse.quote('photos/p.jpg', safe='')}?alt=media&token={token}&width=64"
        # What the browser will be answered, asked the way it asks.
        probe = requests.get(src, headers={"Accept": "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"})
        assert probe.status_code == 200 and probe.headers["Content-Type"] == "image/avif"
        assert probe.headers["Vary"] == "Accept"
        page = tmp_path / "page.html"
        page.write_text(
            f'<html><body><img id="t" src="{src}" '
            "onload=\"document.body.setAttribute('data-size', this.naturalWidth + 'x' + this.naturalHeight)\" "
            "onerror=\"document.body.setAttribute('data-size', 'error')\"></body></html>")
        dom = subprocess.run(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120).stdout
        assert 'data-size="64x48"' in dom, dom[:2000]
    finally:
        server.stop()
