"""The real Firebase JS SDK (12.18, bundled in $LARDER_CLIENTS) against the real `larder` binary:
in node (interop/firebase/sdk_checks.cjs) and in headless Chromium (interop/firebase/browser.html).

The bundles are found through LARDER_CLIENTS, else ../shared/clients beside the repository (or
beside the main checkout of a git worktree). Without them, or without `node`/`chromium`
(`scripts/deps.sh` installs both), these tests are skipped with the reason printed (-rs).
"""
import functools
import html
import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time

import pytest
import requests

from larder_server import LarderServer

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = pathlib.Path(__file__).resolve().parent / "firebase"
MiB = 1 << 20


def _clients_dir():
    candidates = []
    if os.environ.get("LARDER_CLIENTS"):
        candidates.append(pathlib.Path(os.environ["LARDER_CLIENTS"]))
    candidates.append(ROOT.parent / "shared" / "clients")
    try:
        common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        if common:
            candidates.append((ROOT / common).resolve().parent.parent / "shared" / "clients")
    except (OSError, subprocess.SubprocessError):
        pass
    for c in candidates:
        if (c / "firebase-js-sdk" / "firebase-storage.node.cjs").exists():
            return c
    return None


CLIENTS = _clients_dir()
NODE = shutil.which("node")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _require_node_sdk():
    if CLIENTS is None:
        pytest.skip("SKIPPED: Firebase SDK bundle not found: set LARDER_CLIENTS to the clients directory "
                    "(with firebase-js-sdk/firebase-storage.node.cjs); looked in ../shared/clients")
    if NODE is None:
        pytest.skip("SKIPPED: `node` is not installed (scripts/deps.sh installs nodejs)")


def _require_browser():
    _require_node_sdk()
    if CHROMIUM is None:
        pytest.skip("SKIPPED: `chromium` is not installed (scripts/deps.sh installs it)")


def run_scenario(server, scenario, env_extra=None, timeout=600):
    env = dict(os.environ, LARDER_PORT=str(server.port),
               LARDER_SDK=str(CLIENTS / "firebase-js-sdk" / "firebase-storage.node.cjs"), **(env_extra or {}))
    proc = subprocess.run([NODE, str(HERE / "sdk_checks.cjs"), scenario], capture_output=True, text=True,
                          env=env, timeout=timeout)
    return _report(proc.stdout, proc.stderr)


def _report(stdout, stderr=""):
    lines = [l for l in stdout.strip().splitlines() if l.startswith("{")]
    assert lines, f"no report from node: {stdout[-2000:]} {stderr[-2000:]}"
    report = json.loads(lines[-1])
    assert report["checks"] > 0, report
    return report


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if CLIENTS is None or NODE is None:
        yield None
        return
    s = LarderServer(tmp_path_factory.mktemp("fbdata"))
    yield s
    s.stop()


@functools.lru_cache(maxsize=None)
def _cached(port, scenario):
    return run_scenario(type("S", (), {"port": port}), scenario)


def scenario(server, name):
    _require_node_sdk()
    return _cached(server.port, name)


def test_upload_bytes_and_strings_with_declared_content_types(server):
    report = scenario(server, "uploads")
    assert report["failures"] == [], report


def test_update_metadata_each_field_set_and_null(server):
    report = scenario(server, "updateMetadata")
    assert report["failures"] == [], report


def test_upload_bytes_resumable_3_and_20_mib_with_progress(server):
    report = scenario(server, "resumable")
    assert report["failures"] == [], report


def test_pause_and_resume(server):
    report = scenario(server, "pauseResume")
    assert report["failures"] == [], report


def test_cancel_stores_nothing(server):
    report = scenario(server, "cancel")
    assert report["failures"] == [], report


def test_metadata_download_url_bytes_and_streams(server):
    report = scenario(server, "reads")
    assert report["failures"] == [], report


def test_list_pages_list_all_and_delete(server):
    report = scenario(server, "listing")
    assert report["failures"] == [], report


def test_names_with_spaces_unicode_reserved_characters_and_slashes(server):
    report = scenario(server, "names")
    assert report["failures"] == [], report


def run_restart_check(port, at_bytes, interrupt, timeout=600):
    """Runs sdk_checks.cjs `restart` (20 MiB with uploadBytesResumable, a PROGRESS line per
    event) against PORT and calls `interrupt()` once, when progress first passes `at_bytes`.
    Returns (the progress it was called at or None, stdout lines, stderr)."""
    env = dict(os.environ, LARDER_PORT=str(port),
               LARDER_SDK=str(CLIENTS / "firebase-js-sdk" / "firebase-storage.node.cjs"))
    proc = subprocess.Popen([NODE, str(HERE / "sdk_checks.cjs"), "restart"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    # A hung client never hangs the suite: the watchdog ends it and the loop below with it.
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    interrupted_at = None
    out = []
    try:
        for line in proc.stdout:
            out.append(line)
            m = re.match(r"PROGRESS (\d+)", line)
            if m and interrupted_at is None and int(m.group(1)) >= at_bytes:
                interrupted_at = int(m.group(1))
                interrupt()
        proc.wait(timeout=timeout)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return interrupted_at, out, proc.stderr.read()


def test_resumable_upload_survives_a_server_restart(tmp_path):
    """SIGKILL the server while the SDK streams 20 MiB, start it again on the same port: the
    task completes (the SDK resends the broken chunk) and the bytes are exact."""
    _require_node_sdk()
    data = tmp_path / "data"
    servers = [LarderServer(data)]
    port = servers[0].port

    def restart():
        servers[-1].kill()
        time.sleep(1.0)
        servers.append(LarderServer(data, port=port))

    try:
        restarted, out, err = run_restart_check(port, 2 * MiB, restart)
    finally:
        servers[-1].stop()
    assert restarted is not None, "the upload finished before the server could be restarted"
    report = _report("".join(out), err)
    assert report["failures"] == [], report
    assert os.listdir(data / "uploads") == []


RULES = """rules_version = '2';
service firebase.storage {
  match /b/{bucket}/o {
    match /users/{uid}/{rest=**} {
      allow read, write: if request.auth != null && request.auth.uid == uid;
    }
  }
}
"""


def _token(data_dir, uid, ttl="1h"):
    binary = os.environ["LARDER_BIN"]
    return subprocess.run([binary, "token", "--uid", uid, "--ttl", ttl, "--data", str(data_dir)], check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()


def test_rules_and_tokens_map_to_sdk_errors(tmp_path):
    """mockUserToken carries development tokens: the owner may, others get storage/unauthorized
    (403), a token the server cannot verify gets storage/unauthenticated (401)."""
    _require_node_sdk()
    rules = tmp_path / "storage.rules"
    rules.write_text(RULES)
    data = tmp_path / "data"
    server = LarderServer(data, allow_all=False, extra=("--rules", str(rules)))
    try:
        other = tmp_path / "other"
        LarderServer(other).stop()  # another data directory: another secret
        report = run_scenario(server, "auth", {
            "LARDER_TOKEN_ALICE": _token(data, "alice"), "LARDER_TOKEN_ALICE2": _token(data, "alice", "2h"),
            "LARDER_TOKEN_BOB": _token(data, "bob"), "LARDER_TOKEN_FORGED": _token(other, "alice")})
    finally:
        server.stop()
    assert report["failures"] == [], report
    # Refused uploads left no session behind.
    assert os.listdir(data / "uploads") == []


def test_unknown_upload_protocols_never_touch_the_object(tmp_path):
    """Never again: what Larder does not understand is a 400 and the object keeps its bytes."""
    server = LarderServer(tmp_path / "data")
    try:
        base = f"{server.url}/v0/b/app/o"
        assert requests.post(base, params={"name": "keep.txt"}, data=b"original", timeout=30).status_code == 200
        before = server.object_metadata("app", "keep.txt")
        cases = [
            {"X-Goog-Upload-Protocol": "raw"},
            {"X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "bogus"},
            {"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "0"},
            {"X-Goog-Upload-Protocol": "multipart", "Content-Type": "multipart/related"},
            {"X-Goog-Upload-Protocol": "multipart", "Content-Type": "multipart/related; boundary=b"},
        ]
        for headers in cases:
            r = requests.post(base, params={"name": "keep.txt"}, data=b"--b\r\nwould-be bytes", headers=headers,
                              timeout=30)
            assert r.status_code == 400, (headers, r.status_code, r.text)
            assert r.json()["error"]["code"] == 400
            after = server.object_metadata("app", "keep.txt")
            assert (after["generation"], after["sha256"]) == (before["generation"], before["sha256"]), headers
        assert requests.get(f"{base}/keep.txt", params={"alt": "media"}, timeout=30).content == b"original"
    finally:
        server.stop()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _browser_run(tmp_path, mode):
    _require_browser()
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(HERE / "browser.html", site / "test.html")
    shutil.copy(CLIENTS / "firebase-js-sdk" / "firebase-storage.browser.mjs", site / "firebase-storage.browser.mjs")
    handler = functools.partial(_QuietHandler, directory=str(site))
    page = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{page.server_address[1]}"
    server = LarderServer(tmp_path / "data", extra=("--cors-origin", origin))
    try:
        url = f"{origin}/test.html?port={server.port}&bucket=app&mode={mode}"
        proc = subprocess.run(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=60000", "--dump-dom", url],
            capture_output=True, text=True, timeout=180)
        m = re.search(r"<pre id=\"result\">RESULT (\{.*\})</pre>", proc.stdout, re.S)
        assert m, f"no result in the page: {proc.stdout[-1500:]} {proc.stderr[-1500:]}"
        report = json.loads(html.unescape(m.group(1)))
        if not report["failures"]:
            name = "browser/bytes file.bin" if mode == "bytes" else "browser/resumable.bin"
            assert server.object_sha256("app", name) == report["sha256"]
        return report
    finally:
        server.stop()
        page.shutdown()


def test_browser_upload_bytes_across_origins(tmp_path):
    report = _browser_run(tmp_path, "bytes")
    assert report["checks"] > 0 and report["failures"] == [], report


def test_browser_upload_bytes_resumable_across_origins(tmp_path):
    report = _browser_run(tmp_path, "resumable")
    assert report["checks"] > 0 and report["failures"] == [], report
