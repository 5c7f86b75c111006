"""GCS JSON API interop: the real `larder` binary driven by google-cloud-storage from PyPI, unmodified,
pointed at it with STORAGE_EMULATOR_HOST and anonymous credentials, as the Admin SDKs' backends are.

Every object written here is read back byte for byte through the Firebase REST API too: one store,
two protocols."""
import base64
import hashlib
import json
import os
import random
import time
import urllib.parse

import google_crc32c
import pytest
import requests
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials

from larder_server import LarderServer

MiB = 1 << 20
BUCKET = "demo"
ODD_NAMES = ["with space/file one.txt", "ünïcödé/日本語.txt", "chars #?&=+%.bin", "a%2Fb literal.txt"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("gcs")
    s = LarderServer(root / "data", access_log=root / "access.log")
    s.access_log = root / "access.log"
    yield s
    s.stop()


def access_log(server):
    """The access log's entries so far (the server flushes it every 50 ms)."""
    time.sleep(0.2)
    return [json.loads(line) for line in server.access_log.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def client(server):
    os.environ["STORAGE_EMULATOR_HOST"] = server.url
    from google.cloud import storage
    return storage.Client(project="test", credentials=AnonymousCredentials())


@pytest.fixture(scope="module")
def bucket(client):
    return client.bucket(BUCKET)


def firebase_bytes(server, name, bucket=BUCKET):
    """The object's bytes through the Firebase REST API."""
    r = requests.get(f"{server.url}/v0/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media", timeout=120)
    assert r.status_code == 200, r.text
    return r.content


def firebase_metadata(server, name, bucket=BUCKET):
    return server.object_metadata(bucket, name)


def b64_md5(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def b64_crc32c(data):
    return base64.b64encode(google_crc32c.Checksum(data).digest()).decode()


def random_bytes(size, seed):
    return random.Random(seed).randbytes(size)


def test_upload_from_string_and_read_back_everywhere(server, bucket):
    data = b"hello, larder\n" * 100
    blob = bucket.blob("docs/hello.txt")
    blob.upload_from_string(data, content_type="text/plain")
    assert blob.size == len(data)
    assert blob.md5_hash == b64_md5(data)
    assert blob.crc32c == b64_crc32c(data)
    assert blob.content_type == "text/plain"
    assert blob.download_as_bytes() == data
    fb = firebase_metadata(server, "docs/hello.txt")
    assert fb["generation"] == str(blob.generation)
    assert fb["metageneration"] == str(blob.metageneration)
    assert fb["sha256"] == hashlib.sha256(data).hexdigest()
    assert firebase_bytes(server, "docs/hello.txt") == data


def test_upload_from_filename_and_reload_fields(server, bucket, tmp_path):
    path = tmp_path / "photo.bin"
    data = random_bytes(300_000, 1)
    path.write_bytes(data)
    blob = bucket.blob("photos/photo.bin")
    blob.metadata = {"owner": "u1", "Camera": "X100"}
    blob.cache_control = "public, max-age=60"
    blob.content_disposition = "attachment; filename=photo.bin"
    blob.content_language = "en"
    blob.upload_from_filename(str(path), content_type="application/octet-stream")
    same = bucket.get_blob("photos/photo.bin")
    assert same.name == "photos/photo.bin"
    assert same.bucket.name == BUCKET
    assert same.size == len(data)
    assert same.generation == blob.generation
    assert same.metageneration == 1
    assert same.md5_hash == b64_md5(data)
    assert same.crc32c == b64_crc32c(data)
    assert same.content_type == "application/octet-stream"
    assert same.metadata == {"owner": "u1", "Camera": "X100"}
    assert same.cache_control == "public, max-age=60"
    assert same.content_disposition == "attachment; filename=photo.bin"
    assert same.content_language == "en"
    assert same.storage_class == "STANDARD"
    assert same.id == f"{BUCKET}/photos/photo.bin/{blob.generation}"
    assert same.etag
    assert same.time_created is not None and same.updated is not None
    assert same.self_link == f"{server.url}/storage/v1/b/{BUCKET}/o/photos%2Fphoto.bin"
    assert same.media_link == (
        f"{server.url}/download/storage/v1/b/{BUCKET}/o/photos%2Fphoto.bin?generation={blob.generation}&alt=media")
    assert firebase_bytes(server, "photos/photo.bin") == data


def test_resumable_20mib_upload_in_8mib_chunks(server, bucket, tmp_path):
    path = tmp_path / "big.bin"
    data = random_bytes(20 * MiB, 2)
    path.write_bytes(data)
    blob = bucket.blob("videos/big.bin", chunk_size=8 * MiB)
    before = len(access_log(server))
    blob.upload_from_filename(str(path))
    # One session: its start, then three chunks (8 + 8 + 4 MiB), 308 Resume Incomplete until the last.
    # (The client reads the bucket's resource first, GET /storage/v1/b/demo.)
    calls = [(e["method"], e["route"], e["status"]) for e in access_log(server)[before:]
             if e["route"].startswith("gcs.upload")]
    assert calls == [("POST", "gcs.upload", 200), ("PUT", "gcs.upload.chunk", 308),
                     ("PUT", "gcs.upload.chunk", 308), ("PUT", "gcs.upload.chunk", 200)]
    assert blob.size == 20 * MiB
    assert blob.crc32c == b64_crc32c(data)
    assert blob.md5_hash == b64_md5(data)
    # Downloads are checked by the client against x-goog-hash (crc32c).
    assert bucket.blob("videos/big.bin").download_as_bytes() == data
    assert hashlib.sha256(firebase_bytes(server, "videos/big.bin")).hexdigest() == hashlib.sha256(data).hexdigest()


def test_ranged_downloads(bucket):
    data = bytes(range(256)) * 40
    blob = bucket.blob("ranges/r.bin")
    blob.upload_from_string(data)
    assert blob.download_as_bytes(start=0, end=9) == data[0:10]
    assert blob.download_as_bytes(start=100, end=4000) == data[100:4001]
    assert blob.download_as_bytes(start=len(data) - 5) == data[-5:]
    assert blob.download_as_bytes() == data


def test_patch_metadata(bucket):
    blob = bucket.blob("meta/patched.txt")
    blob.metadata = {"a": "1", "b": "2"}
    blob.upload_from_string(b"x", content_type="text/plain")
    blob.metadata = {"b": None, "c": "3"}
    blob.cache_control = "no-store"
    blob.patch()
    assert blob.metageneration == 2
    assert blob.metadata == {"a": "1", "c": "3"}
    assert blob.cache_control == "no-store"
    again = bucket.get_blob("meta/patched.txt")
    assert again.metadata == {"a": "1", "c": "3"}
    assert again.cache_control == "no-store"
    assert again.metageneration == 2
    assert again.content_type == "text/plain"


def test_list_blobs_prefix_delimiter_and_pages(bucket):
    names = [f"list/dir{d}/f{i}.txt" for d in range(2) for i in range(3)] + [f"list/top{i}.txt" for i in range(5)]
    for n in names:
        bucket.blob(n).upload_from_string(n.encode())
    everything = [b.name for b in bucket.list_blobs(prefix="list/")]
    assert everything == sorted(names)
    it = bucket.list_blobs(prefix="list/", delimiter="/")
    top = [b.name for b in it]
    assert top == [f"list/top{i}.txt" for i in range(5)]
    assert it.prefixes == {"list/dir0/", "list/dir1/"}
    pages = bucket.list_blobs(prefix="list/", max_results=11, page_size=4).pages
    sizes = []
    seen = []
    for page in pages:
        items = [b.name for b in page]
        sizes.append(len(items))
        seen += items
    assert sizes == [4, 4, 3]
    assert seen == sorted(names)
    limited = [b.name for b in bucket.list_blobs(prefix="list/", max_results=3)]
    assert limited == sorted(names)[:3]
    ranged = [b.name for b in bucket.list_blobs(prefix="list/", start_offset="list/dir1/", end_offset="list/top2.txt")]
    assert ranged == [n for n in sorted(names) if "list/dir1/" <= n < "list/top2.txt"]
    globbed = [b.name for b in bucket.list_blobs(match_glob="list/*/f1.txt")]
    assert globbed == ["list/dir0/f1.txt", "list/dir1/f1.txt"]


def test_copy_rewrite_and_compose(server, bucket, client):
    a = bucket.blob("parts/a.txt")
    a.metadata = {"k": "v"}
    a.upload_from_string(b"alpha-", content_type="text/plain")
    b = bucket.blob("parts/b.txt")
    b.upload_from_string(b"beta")
    copied = bucket.copy_blob(a, bucket, "copies/a-copy.txt")
    assert copied.name == "copies/a-copy.txt"
    assert copied.size == 6
    assert copied.md5_hash == a.md5_hash
    assert copied.crc32c == a.crc32c
    assert copied.metadata == {"k": "v"}
    assert copied.content_type == "text/plain"
    assert copied.generation != a.generation
    assert copied.download_as_bytes() == b"alpha-"
    other = client.bucket("other-bucket")
    moved = bucket.copy_blob(a, other, "into/other.txt")
    assert moved.bucket.name == "other-bucket"
    assert firebase_bytes(server, "into/other.txt", bucket="other-bucket") == b"alpha-"

    dest = bucket.blob("copies/rewritten.txt")
    token, rewritten, total = dest.rewrite(b)
    assert token is None
    assert (rewritten, total) == (4, 4)
    assert dest.download_as_bytes() == b"beta"
    assert dest.crc32c == b64_crc32c(b"beta")

    composed = bucket.blob("copies/composed.txt")
    composed.content_type = "text/plain"
    composed.compose([a, b, a])
    assert composed.size == 16
    assert composed.download_as_bytes() == b"alpha-betaalpha-"
    assert composed.crc32c == b64_crc32c(b"alpha-betaalpha-")
    assert composed.content_type == "text/plain"
    assert firebase_bytes(server, "copies/composed.txt") == b"alpha-betaalpha-"

    with pytest.raises(exceptions.NotFound):
        bucket.blob("copies/broken.txt").compose([a, bucket.blob("parts/missing.txt")])
    assert not bucket.blob("copies/broken.txt").exists()


def test_exists_and_delete(server, bucket):
    blob = bucket.blob("gone/soon.txt")
    blob.upload_from_string(b"bye")
    assert blob.exists()
    blob.delete()
    assert not blob.exists()
    with pytest.raises(exceptions.NotFound):
        blob.download_as_bytes()
    with pytest.raises(exceptions.NotFound):
        blob.delete()
    r = requests.get(f"{server.url}/v0/b/{BUCKET}/o/gone%2Fsoon.txt", timeout=30)
    assert r.status_code == 404


def test_preconditions(bucket):
    blob = bucket.blob("pre/cond.txt")
    blob.upload_from_string(b"v1", if_generation_match=0)
    first = blob.generation
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("pre/cond.txt").upload_from_string(b"v2", if_generation_match=0)
    assert bucket.blob("pre/cond.txt").download_as_bytes() == b"v1"
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("pre/cond.txt").upload_from_string(b"v2", if_generation_match=first + 1)
    blob.upload_from_string(b"v2", if_generation_match=first)
    assert blob.generation > first
    with pytest.raises(exceptions.PreconditionFailed):
        blob.reload(if_metageneration_match=7)
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("pre/cond.txt").delete(if_generation_match=first)
    with pytest.raises(exceptions.PreconditionFailed):
        blob.metadata = {"x": "y"}
        blob.patch(if_metageneration_match=5)
    assert bucket.blob("pre/cond.txt").download_as_bytes() == b"v2"
    bucket.blob("pre/cond.txt").delete(if_generation_match=blob.generation)
    assert not bucket.blob("pre/cond.txt").exists()


@pytest.mark.parametrize("name", ODD_NAMES)
def test_names_with_spaces_unicode_and_reserved_characters(server, bucket, name):
    data = ("content of " + name).encode()
    blob = bucket.blob(name)
    blob.upload_from_string(data)
    assert blob.name == name
    got = bucket.get_blob(name)
    assert got is not None and got.name == name and got.size == len(data)
    assert got.download_as_bytes() == data
    assert firebase_bytes(server, name) == data
    assert name in [b.name for b in bucket.list_blobs(prefix=name)]
    got.delete()
    assert bucket.get_blob(name) is None


def test_buckets(client, bucket):
    bucket.blob("b/one.txt").upload_from_string(b"1")
    got = client.get_bucket(BUCKET)
    assert got.name == BUCKET
    assert got.storage_class == "STANDARD"
    assert BUCKET in [b.name for b in client.list_buckets()]


def test_objects_written_through_firebase_are_the_same_objects(server, bucket):
    data = random_bytes(70_000, 3)
    r = requests.post(f"{server.url}/v0/b/{BUCKET}/o?name=fb%2Fwritten.bin", data=data,
                      headers={"Content-Type": "application/octet-stream"}, timeout=60)
    assert r.status_code == 200, r.text
    generation = int(r.json()["generation"])
    blob = bucket.get_blob("fb/written.bin")
    assert blob.generation == generation
    assert blob.size == len(data)
    assert blob.crc32c == b64_crc32c(data)
    assert blob.md5_hash == b64_md5(data)
    assert blob.download_as_bytes() == data


def test_resumable_session_survives_a_sigkill_of_the_server(tmp_path):
    """A session the client started, 1 MiB acknowledged, the server SIGKILLed and restarted on
    the same data: the status query answers what was acknowledged, and the rest finishes it."""
    data_dir = tmp_path / "data"
    first = LarderServer(data_dir)
    port = first.port
    restarted = None
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    try:
        os.environ["STORAGE_EMULATOR_HOST"] = first.url
        from google.cloud import storage
        client = storage.Client(project="test", credentials=AnonymousCredentials())
        data = random_bytes(3 * MiB, 4)
        blob = client.bucket(BUCKET).blob("kill/resumed.bin")
        session = blob.create_resumable_upload_session(size=len(data), content_type="application/octet-stream")
        assert session.startswith(f"{first.url}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&")
        r = requests.put(session, data=data[:MiB], headers={"Content-Range": f"bytes 0-{MiB - 1}/{len(data)}"}, timeout=60)
        assert r.status_code == 308 and r.headers["Range"] == f"bytes=0-{MiB - 1}"
        first.kill()
        restarted = LarderServer(data_dir, port=port)
        r = requests.put(session, headers={"Content-Range": f"bytes */{len(data)}"}, timeout=60)
        assert r.status_code == 308 and r.headers["Range"] == f"bytes=0-{MiB - 1}"
        r = requests.put(session, data=data[MiB:], headers={"Content-Range": f"bytes {MiB}-{len(data) - 1}/{len(data)}"},
                         timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["crc32c"] == b64_crc32c(data)
        assert client.bucket(BUCKET).blob("kill/resumed.bin").download_as_bytes() == data
        assert firebase_bytes(restarted, "kill/resumed.bin") == data
    finally:
        first.stop()
        if restarted:
            restarted.stop()
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
