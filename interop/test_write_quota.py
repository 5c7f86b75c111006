"""Write quotas (issue 37, items 3 and 8) against the real `larder serve` options, with tuspy (an
unmodified tus client): uploads in progress stop at `--uploads-in-progress`, and bytes stop at
`--write-quota` with 429 and Retry-After, keeping what was acknowledged."""
import io
import random
import time

import pytest
import requests
from tusclient import client as tus_client
from tusclient.exceptions import TusCommunicationError

from larder_server import LarderServer

KiB = 1 << 10
MiB = 1 << 20
TUS = {"Tus-Resumable": "1.0.0"}


@pytest.fixture
def quota_server(tmp_path, request):
    """`larder serve --allow-all` with the options the test is marked with, stopped afterwards."""
    server = LarderServer(tmp_path / "data", extra=request.param)
    yield server
    server.stop()


def metric(server, name):
    for line in requests.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split(" ")[1])
    return None


@pytest.mark.parametrize("quota_server", [["--uploads-in-progress", "3"]], indirect=True)
def test_tuspy_creations_stop_at_the_uploads_in_progress_limit(tmp_path, quota_server):
    server = quota_server
    client = tus_client.TusClient(server.url + "/v0/b/app/uploads")
    urls = []
    for i in range(3):
        uploader = client.uploader(file_stream=io.BytesIO(b"x" * 10), chunk_size=4, metadata={"name": f"f{i}"})
        urls.append(uploader.create_url())
    with pytest.raises(TusCommunicationError) as refused:
        client.uploader(file_stream=io.BytesIO(b"x" * 10), metadata={"name": "f3"}).create_url()
    assert refused.value.status_code == 429
    assert b"too many uploads in progress" in refused.value.response_content
    assert len(list((tmp_path / "data" / "uploads").iterdir())) == 3
    assert metric(server, 'larder_quota_refusals_total{kind="uploads"}') == 1

    # Finishing one frees its slot (the next look-up is at most a second later).
    finisher = client.uploader(file_stream=io.BytesIO(b"x" * 10), chunk_size=10, url=urls[0])
    finisher.upload()
    time.sleep(1.1)
    client.uploader(file_stream=io.BytesIO(b"x" * 10), metadata={"name": "f4"}).create_url()


@pytest.mark.parametrize("quota_server", [["--write-quota", "1MiB", "--write-quota-period", "1h"]], indirect=True)
def test_tuspy_upload_stops_at_the_write_quota_and_keeps_what_it_sent(quota_server):
    server = quota_server
    content = random.Random(3).randbytes(2 * MiB)
    client = tus_client.TusClient(server.url + "/v0/b/app/uploads")
    uploader = client.uploader(file_stream=io.BytesIO(content), chunk_size=512 * KiB, metadata={"name": "big.bin"})
    with pytest.raises(TusCommunicationError) as refused:
        uploader.upload()
    assert refused.value.status_code == 429
    head = requests.head(uploader.url, headers=TUS, timeout=10)
    assert head.headers["Upload-Offset"] == str(MiB)
    # Retried at once, the same PATCH is refused again, with when to come back: half the quota
    # (512 KiB) refills in half the period.
    r = requests.patch(uploader.url, data=content[MiB:MiB + 512 * KiB], timeout=10, headers={
        **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(MiB)})
    assert r.status_code == 429
    assert 1790 <= int(r.headers["Retry-After"]) <= 1800
    assert r.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert requests.get(server.url + "/v0/b/app/o/big.bin", timeout=10).status_code == 404
    assert metric(server, "larder_quota_admitted_bytes_total") == MiB
