"""tus interop: the real `larder` binary driven by tuspy (an unmodified tus client) and raw requests."""
import hashlib
import os
import random
import socket
import threading
import time

import pytest
import requests
from tusclient import client as tus_client
from tusclient.storage import filestorage

from larder_server import LarderServer

MiB = 1 << 20
TUS = {"Tus-Resumable": "1.0.0"}


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.stop()


def start(servers, data_dir, port=0):
    s = LarderServer(data_dir, port=port)
    servers.append(s)
    return s


def random_file(path, size):
    h = hashlib.sha256()
    rng = random.Random(size)
    with open(path, "wb") as f:
        left = size
        while left:
            block = rng.randbytes(min(left, MiB))
            f.write(block)
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def endpoint(server):
    return f"{server.url}/v0/b/app/uploads"


def test_tuspy_50mib_in_1mib_chunks_with_checksums(tmp_path, servers):
    server = start(servers, tmp_path / "data")
    path = tmp_path / "big.bin"
    digest = random_file(path, 50 * MiB)
    uploader = tus_client.TusClient(endpoint(server)).uploader(
        str(path), chunk_size=MiB, upload_checksum=True, metadata={"name": "videos/big.bin", "filename": "big.bin"})
    uploader.upload()
    assert uploader.offset == 50 * MiB
    meta = server.object_metadata("app", "videos/big.bin")
    assert meta["sha256"] == digest
    assert meta["size"] == str(50 * MiB)
    assert server.object_sha256("app", "videos/big.bin") == digest
    # The partial file is gone; the completed upload reports its full offset.
    assert os.listdir(tmp_path / "data" / "uploads") == []
    head = requests.head(uploader.url, headers=TUS, timeout=30)
    assert head.status_code == 200
    assert head.headers["Upload-Offset"] == str(50 * MiB)


def test_resume_from_stored_url_after_sigkill(tmp_path, servers):
    data = tmp_path / "data"
    server = start(servers, data)
    path = tmp_path / "resume.bin"
    digest = random_file(path, 32 * MiB)
    storage = filestorage.FileStorage(str(tmp_path / "urls.json"))

    def make_uploader(srv):
        return tus_client.TusClient(endpoint(srv)).uploader(
            str(path), chunk_size=MiB, upload_checksum=True, store_url=True, url_storage=storage,
            metadata={"name": "resume.bin"})

    first = make_uploader(server)
    first.upload(stop_at=20 * MiB)
    assert first.offset == 20 * MiB
    stored_url = first.url
    port = server.port
    server.kill()

    server = start(servers, data, port=port)
    second = make_uploader(server)
    assert second.url == stored_url
    assert second.offset == 20 * MiB
    second.upload()
    assert second.offset == 32 * MiB
    assert server.object_metadata("app", "resume.bin")["sha256"] == digest
    assert server.object_sha256("app", "resume.bin") == digest


def test_deferred_length_with_raw_requests(tmp_path, servers):
    server = start(servers, tmp_path / "data")
    body = random.Random(3).randbytes(3 * MiB + 17)
    r = requests.post(endpoint(server), headers={**TUS, "Upload-Defer-Length": "1",
                                                 "Upload-Metadata": "name ZGVmZXJyZWQuYmlu"}, timeout=30)
    assert r.status_code == 201
    url = server.url + r.headers["Location"]
    head = requests.head(url, headers=TUS, timeout=30)
    assert head.headers["Upload-Defer-Length"] == "1"
    assert "Upload-Length" not in head.headers
    offset = 0
    stream = {**TUS, "Content-Type": "application/offset+octet-stream"}
    while offset < len(body) - MiB:
        r = requests.patch(url, data=body[offset:offset + MiB], headers={**stream, "Upload-Offset": str(offset)},
                           timeout=60)
        assert r.status_code == 204
        offset += MiB
        assert r.headers["Upload-Offset"] == str(offset)
    r = requests.patch(url, data=body[offset:], timeout=60,
                       headers={**stream, "Upload-Offset": str(offset), "Upload-Length": str(len(body))})
    assert r.status_code == 204
    assert r.headers["Upload-Offset"] == str(len(body))
    assert server.object_sha256("app", "deferred.bin") == hashlib.sha256(body).hexdigest()


def test_termination(tmp_path, servers):
    server = start(servers, tmp_path / "data")
    path = tmp_path / "t.bin"
    random_file(path, 3 * MiB)
    uploader = tus_client.TusClient(endpoint(server)).uploader(str(path), chunk_size=MiB, metadata={"name": "t.bin"})
    uploader.upload(stop_at=MiB)
    assert requests.head(uploader.url, headers=TUS, timeout=30).headers["Upload-Offset"] == str(MiB)
    assert requests.delete(uploader.url, headers=TUS, timeout=30).status_code == 204
    assert requests.head(uploader.url, headers=TUS, timeout=30).status_code == 404
    assert requests.delete(uploader.url, headers=TUS, timeout=30).status_code == 404
    assert os.listdir(tmp_path / "data" / "uploads") == []
    assert requests.get(f"{server.url}/v0/b/app/o/t.bin", timeout=30).status_code == 404


def test_sigkill_during_patches_never_loses_or_invents_bytes(tmp_path, servers):
    """Kill the server while PATCHes stream; after each restart HEAD's offset is at least the last
    acknowledged one and at most what is on disk, and the bytes on disk are the bytes sent."""
    data = tmp_path / "data"
    server = start(servers, data)
    size = 24 * MiB
    body = random.Random(11).randbytes(size)
    r = requests.post(endpoint(server), headers={**TUS, "Upload-Length": str(size),
                                                 "Upload-Metadata": "name ZmF1bHQuYmlu"}, timeout=30)
    assert r.status_code == 201
    location = r.headers["Location"]
    upload_id = location.rsplit("/", 1)[1]
    stream = {**TUS, "Content-Type": "application/offset+octet-stream"}
    chunk = 256 * 1024
    acked = 0
    rng = random.Random(5)
    for round_ in range(4):
        # A kill at a random moment of the stream...
        killer = threading.Timer(rng.uniform(0.05, 0.5), server.kill)
        killer.start()
        offset = acked
        limit = (round_ + 1) * size // 5
        try:
            while offset < limit:
                r = requests.patch(server.url + location, data=body[offset:offset + chunk],
                                   headers={**stream, "Upload-Offset": str(offset)}, timeout=60)
                assert r.status_code == 204, r.text
                offset = int(r.headers["Upload-Offset"])
                acked = offset
            # ...or, if the stream got through, while a PATCH is surely half-sent.
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall((f"PATCH {location} HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\n"
                          f"Content-Type: application/offset+octet-stream\r\nUpload-Offset: {offset}\r\n"
                          f"Content-Length: {chunk}\r\n\r\n").encode() + body[offset:offset + chunk // 2])
            time.sleep(0.2)
            server.kill()
            sock.close()
        except requests.exceptions.ConnectionError:
            pass
        killer.cancel()
        killer.join()
        server.kill()
        port = server.port
        server = start(servers, data, port=port)
        head = requests.head(server.url + location, headers=TUS, timeout=30)
        assert head.status_code == 200
        reported = int(head.headers["Upload-Offset"])
        on_disk = os.path.getsize(data / "uploads" / upload_id)
        assert acked <= reported <= on_disk
        with open(data / "uploads" / upload_id, "rb") as f:
            assert f.read(reported) == body[:reported]
        acked = reported
    # Finish and check the object.
    offset = acked
    while offset < size:
        r = requests.patch(server.url + location, data=body[offset:offset + 4 * MiB],
                           headers={**stream, "Upload-Offset": str(offset)}, timeout=60)
        assert r.status_code == 204
        offset = int(r.headers["Upload-Offset"])
    assert server.object_sha256("app", "fault.bin") == hashlib.sha256(body).hexdigest()
