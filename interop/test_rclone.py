"""rclone's `google cloud storage` backend (Debian's rclone: Go's Google API client) against the
GCS JSON API (issue 31): a tree with a 20 MiB file (a resumable upload whose chunks Go sends with
POST) and small files, `lsf -R`, `check`, a copy back with identical bytes, `deletefile`, and
`sync` with a deletion. Run twice: anonymous on an `--allow-all` server, and with a service-account
key file (`larder service-account create`, token_uri at Larder's /token) on a server enforcing
storage.rules.example, where the same commands without credentials are refused."""
import hashlib
import os
import shutil
import subprocess

import pytest
import requests

from larder_server import LarderServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "storage.rules.example")
BIG = 20 * 1024 * 1024 + 12345

pytestmark = pytest.mark.skipif(shutil.which("rclone") is None, reason="rclone is not installed (scripts/deps.sh)")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_tree(root):
    """The 20 MiB file (random, so no layer can shortcut it), small files, a nested folder, an
    empty file, names with spaces and non-ASCII characters."""
    files = {
        "big.bin": os.urandom(BIG),
        "small/a.txt": b"alpha\n",
        "small/b.txt": b"bravo\r\n" * 1000,
        "small/empty.txt": b"",
        "dir with space/\u00fcber.json": b'{"k": "v"}\n',
        "dir with space/deep/c.bin": os.urandom(300_000),
    }
    for name, body in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)
    return {name: hashlib.sha256(body).hexdigest() for name, body in files.items()}


class Rclone:
    """rclone with its configuration in the environment only (`RCLONE_CONFIG` is an empty file of
    the test's own, so no user configuration is read)."""

    def __init__(self, tmp_path, remote, options):
        config = tmp_path / "rclone.conf"
        config.write_text("")
        self.remote = remote
        self.env = dict(os.environ, RCLONE_CONFIG=str(config))
        prefix = f"RCLONE_CONFIG_{remote.upper()}_"
        self.env[prefix + "TYPE"] = "google cloud storage"
        for key, value in options.items():
            self.env[prefix + key.upper()] = value
        self.log = tmp_path / f"rclone-{remote}.log"

    def run(self, *args, check=True):
        result = subprocess.run(["rclone", *args, "--retries", "1", "--low-level-retries", "1",
                                 "--log-file", str(self.log), "-v"],
                                capture_output=True, text=True, timeout=600, env=self.env)
        if check:
            assert result.returncode == 0, (
                f"rclone {' '.join(args)}: {result.returncode}\n{result.stderr}\n{self.log.read_text()[-4000:]}")
        return result

    def path(self, rest):
        return f"{self.remote}:{rest}"


def stored(server, bucket, name, token=None):
    """(SHA-256 of the bytes Larder serves, its resource's size) through the JSON API."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    item = f"{server.url}/storage/v1/b/{bucket}/o/{requests.utils.quote(name, safe='')}"
    resource = requests.get(item, headers=headers, timeout=60)
    assert resource.status_code == 200, resource.text
    h = hashlib.sha256()
    with requests.get(item + "?alt=media", headers=headers, stream=True, timeout=120) as r:
        assert r.status_code == 200, r.text
        for block in r.iter_content(1 << 20):
            h.update(block)
    return h.hexdigest(), int(resource.json()["size"])


def exercise(rc, server, tmp_path, bucket, folder, token=None):
    src = tmp_path / "src"
    expected = make_tree(src)
    remote = rc.path(f"{bucket}/{folder}")

    rc.run("copy", str(src), remote)
    listed = rc.run("lsf", "-R", "--files-only", remote).stdout.split("\n")
    assert sorted(filter(None, listed)) == sorted(expected)
    # Larder holds the same bytes as the source.
    assert stored(server, bucket, f"{folder}/big.bin", token) == (expected["big.bin"], BIG)

    rc.run("check", str(src), remote)
    assert "Using md5 for hash comparisons" in rc.log.read_text()  # the listing's md5Hash, not sizes alone
    rc.run("check", "--download", str(src), remote)

    back = tmp_path / "back"
    rc.run("copy", remote, str(back))
    assert {name: sha256(back / name) for name in expected} == expected

    rc.run("deletefile", rc.path(f"{bucket}/{folder}/small/a.txt"))
    listed = rc.run("lsf", "-R", "--files-only", remote).stdout.split("\n")
    assert sorted(filter(None, listed)) == sorted(set(expected) - {"small/a.txt"})

    # sync makes the remote the source: what the source lost is deleted, what it gained is uploaded.
    os.remove(src / "small" / "b.txt")
    (src / "small" / "new.txt").write_bytes(b"new\n")
    rc.run("sync", str(src), remote)
    listed = rc.run("lsf", "-R", "--files-only", remote).stdout.split("\n")
    assert sorted(filter(None, listed)) == sorted(set(expected) - {"small/b.txt"} | {"small/new.txt"})
    rc.run("check", str(src), remote)
    assert stored(server, bucket, f"{folder}/small/new.txt", token) == (hashlib.sha256(b"new\n").hexdigest(), 4)


def credentials(key_file):
    from google.auth.transport.requests import Request
    from google.oauth2 import service_account
    creds = service_account.Credentials.from_service_account_file(
        key_file, scopes=["https://www.googleapis.com/auth/devstorage.full_control"])
    creds.refresh(Request())
    return creds.token


@pytest.mark.parametrize("root", ["", "/storage/v1/"], ids=["endpoint at the root", "endpoint /storage/v1/"])
def test_rclone_anonymous(tmp_path, root):
    """Go's client puts its calls under the endpoint it is given: at the root (`/b/…`, as with
    `endpoint = http://HOST:PORT`) or under `/storage/v1/`; uploads go to `/upload/storage/v1/…`."""
    server = LarderServer(tmp_path / "data", stderr_path=str(tmp_path / "stderr.log"))
    try:
        rc = Rclone(tmp_path, "anon", {"anonymous": "true", "endpoint": server.url + root,
                                        "bucket_policy_only": "true"})
        exercise(rc, server, tmp_path, "photos", "tree")
    finally:
        server.stop()


def test_rclone_with_a_service_account_key(tmp_path):
    data = tmp_path / "data"
    server = LarderServer(data, allow_all=False, extra=["--rules", RULES], stderr_path=str(tmp_path / "stderr.log"))
    try:
        key_file = tmp_path / "backend.json"
        result = subprocess.run([os.environ["LARDER_BIN"], "service-account", "create", "backend", "--data", str(data),
                                 "--public-url", server.url, "--output", str(key_file)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        # Without credentials the rules refuse the same upload.
        (tmp_path / "one").mkdir()
        (tmp_path / "one" / "x.txt").write_bytes(b"x")
        anonymous = Rclone(tmp_path, "anon", {"anonymous": "true", "endpoint": server.url, "bucket_policy_only": "true"})
        refused = anonymous.run("copy", str(tmp_path / "one"), anonymous.path("app/secret"), check=False)
        assert refused.returncode != 0
        assert "403" in anonymous.log.read_text()

        rc = Rclone(tmp_path, "admin", {"service_account_file": str(key_file), "endpoint": server.url,
                                         "bucket_policy_only": "true"})
        exercise(rc, server, tmp_path, "app", "secret/tree", token=credentials(key_file))
        # The requests were the service account's.
        server.stop()
        assert "client_email=backend@larder.iam.larder" in open(tmp_path / "stderr.log").read()
    finally:
        server.stop()
